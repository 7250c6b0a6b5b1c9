//! Active health checks of an upstream's members: a cheap request on a live
//! pooled session of each member, or a new session for a member out of rotation.
//! It only records verdicts on members; taking them out of rotation is theirs.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{PartitionKey, Pooled, Upstream, gateway_client_info};
use crate::protocol::{Era, Id, Revision};
use crate::translate::down;
use crate::upstream::call::OnDrop;
use crate::upstream::probe;
use crate::upstream::session::{UnsolicitedRequests, UpstreamSession};

impl Upstream {
    /// Probes every member every `health.interval` until the upstream is dropped.
    pub(crate) fn spawn_health_checks(self: &Arc<Self>) {
        let interval = self.config.health.interval.0;
        if interval.is_zero() {
            return;
        }
        let upstream = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            loop {
                ticker.tick().await;
                let Some(upstream) = upstream.upgrade() else { return };
                upstream.check_members().await;
            }
        });
    }

    /// One round of active health checks: a cheap request on a live pooled
    /// session of each member (`ping`, or `server/discover` for a modern
    /// upstream); a member with no session gets one opened, which is the probe.
    async fn check_members(self: &Arc<Self>) {
        let Some(era) = self.era_if_known() else { return };
        let timeout = self.config.health.timeout.0;
        for (index, member) in self.members.iter().enumerate() {
            let session = self.partitions.live_on(index);
            let healthy = match (session, era) {
                (Some(session), Era::Legacy) => self.probe_call(&session, "ping", Some(json!({})), timeout).await,
                (Some(session), Era::Modern) => {
                    let params = probe::discover_params(&gateway_client_info());
                    self.probe_call(&session, "server/discover", Some(params), timeout)
                        .await
                }
                // Only a member out of rotation is worth a new connection just to look.
                (None, _) if member.health.is_healthy() => continue,
                // Without a principal's token nothing can be opened: requests tell.
                (None, _) if self.per_principal => continue,
                (None, Era::Legacy) => {
                    let params = down::initialize_params(Revision::LATEST_LEGACY, json!({}), gateway_client_info());
                    match tokio::time::timeout(
                        timeout,
                        self.open(index, params, UnsolicitedRequests::AnswerLocally, None),
                    )
                    .await
                    {
                        Ok(Ok(session)) => self
                            .partition(PartitionKey::new("", &json!({})))
                            .map(|p| p.add(Pooled { session, member: index }))
                            .is_ok(),
                        _ => false,
                    }
                }
                (None, Era::Modern) => match self.connect(index, UnsolicitedRequests::AnswerLocally, None).await {
                    Ok(session) => {
                        session.start_modern();
                        let params = probe::discover_params(&gateway_client_info());
                        let ok = self
                            .probe_call(&session, "server/discover", Some(params), timeout)
                            .await;
                        if ok {
                            let _ = self
                                .partition(PartitionKey::stateless())
                                .map(|p| p.add(Pooled { session, member: index }));
                        } else {
                            session.close("health probe failed");
                        }
                        ok
                    }
                    Err(_) => false,
                },
            };
            if healthy {
                member.health.record_success();
            } else {
                member.health.record_failure("health probe failed");
            }
        }
    }

    /// Any answer (a result or a JSON-RPC error) within `timeout` means alive.
    async fn probe_call(
        &self,
        session: &Arc<UpstreamSession>,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> bool {
        let Ok(call) = session
            .call(method, params.map(Into::into), Id::number(0), OnDrop::CancelUpstream)
            .await
        else {
            return false;
        };
        matches!(tokio::time::timeout(timeout, call.response()).await, Ok(Ok(_)))
    }
}
