//! An upstream's era: pinned by configuration, or learned once by probing
//! (`server/discover` on a fresh connection, judged by [`probe::verdict`]) and
//! kept for the upstream's life (a reload that changes its configuration builds
//! a new one, which probes again). Probes are single-flight.

use std::sync::{Arc, RwLock};

use super::{Pooled, Upstream, gateway_client_info};
use crate::auth::Principal;
use crate::config::{EraSetting, UpstreamConfig};
use crate::protocol::{Era, Id};
use crate::upstream::call::OnDrop;
use crate::upstream::error::UpstreamError;
use crate::upstream::probe;
use crate::upstream::session::UnsolicitedRequests;

/// What is known of an upstream's era.
pub(super) struct EraCell {
    /// The learned (or pinned) era; `None` until the first probe.
    era: RwLock<Option<Era>>,
    /// Serialises probing so a burst of first requests costs one probe.
    probing: tokio::sync::Mutex<()>,
}

impl EraCell {
    pub(super) fn new(config: &UpstreamConfig) -> EraCell {
        let era = match config.era {
            // HTTP+SSE predates the stateless era: nothing to probe.
            EraSetting::Auto if config.sse.is_some() => Some(Era::Legacy),
            EraSetting::Auto => None,
            EraSetting::Legacy => Some(Era::Legacy),
            EraSetting::Modern => Some(Era::Modern),
        };
        EraCell {
            era: RwLock::new(era),
            probing: tokio::sync::Mutex::new(()),
        }
    }

    pub(super) fn known(&self) -> Option<Era> {
        *self.era.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The era, from `probe` when not known yet; concurrent callers wait for one probe.
    async fn get_or_learn<F>(&self, probe: impl FnOnce() -> F) -> Result<(Era, bool), UpstreamError>
    where
        F: Future<Output = Result<Era, UpstreamError>>,
    {
        if let Some(era) = self.known() {
            return Ok((era, false));
        }
        let _probing = self.probing.lock().await;
        if let Some(era) = self.known() {
            return Ok((era, false));
        }
        let era = probe().await?;
        *self.era.write().unwrap_or_else(|e| e.into_inner()) = Some(era);
        Ok((era, true))
    }
}

impl Upstream {
    /// The upstream's era: pinned by configuration, or learned once by probing
    /// (on behalf of `asking`, whose token an exchanged credential needs).
    pub(crate) async fn era(self: &Arc<Self>, asking: &Principal) -> Result<Era, UpstreamError> {
        let (era, learned) = self.era.get_or_learn(|| self.probe(asking)).await?;
        if learned {
            tracing::info!(upstream = %self.name, ?era, "learned the upstream's era");
        }
        Ok(era)
    }

    /// The era, when already known (no probe).
    pub(crate) fn era_if_known(&self) -> Option<Era> {
        self.era.known()
    }

    /// Sends `server/discover` on a fresh connection and judges the answer.
    async fn probe(self: &Arc<Self>, asking: &Principal) -> Result<Era, UpstreamError> {
        let member = self.choose_member();
        let key = self.stateless_key(asking);
        // The probe's connection presents the asking principal's token when the credential
        // is its own: then it is that principal's stateless partition's, subject and all.
        let subject = match self.per_principal {
            true => self.partition(key.clone())?.subject.clone(),
            false => None,
        };
        let session = self
            .connect(member, UnsolicitedRequests::AnswerLocally, subject)
            .await?;
        session.start_modern();
        let params = probe::discover_params(&gateway_client_info());
        let timeout = self.config.handshake_timeout.0;
        let outcome = match session
            .call("server/discover", Some(params.into()), Id::number(0), OnDrop::Detach)
            .await
        {
            Ok(call) => tokio::time::timeout(timeout, call.response())
                .await
                .unwrap_or_else(|_| Err(self.timeout_error(timeout))),
            Err(error) => Err(error),
        };
        // Not reaching the upstream at all says nothing about its era: report it, learn nothing.
        if let Err(error @ (UpstreamError::Unavailable { .. } | UpstreamError::Overloaded { .. })) = &outcome {
            session.close("probe failed");
            return Err(error.clone());
        }
        let era = probe::verdict(&outcome);
        match era {
            Era::Modern => self.partition(key)?.add(Pooled { session, member }),
            // The connection saw a request before `initialize`; start legacy sessions afresh.
            // A legacy upstream has no stateless partition (not even the probe's, emptied).
            Era::Legacy => {
                session.close("probe done");
                self.partitions.close_stateless("the upstream is legacy");
            }
        }
        Ok(era)
    }
}
