//! An upstream's members and connections to them: the members its
//! configuration names, which member a new session goes to, and opening a
//! session on one (connected, and initialized when the era has a handshake).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::Upstream;
use super::partition::Partition;
use crate::config::{StdioConfig, UpstreamConfig};
use crate::upstream::credentials::{Subject, UpstreamCredentials};
use crate::upstream::error::UpstreamError;
use crate::upstream::member::{Member, Target};
use crate::upstream::session::{UnsolicitedRequests, UpstreamSession};

/// Idle connections kept to an HTTP+SSE endpoint: its messages are POSTs of a
/// few hundred bytes answered 202 while the answers come on the one SSE stream.
const SSE_MAX_IDLE_CONNECTIONS: usize = 16;
use crate::upstream::transport::Link;
use crate::upstream::transport::sse::SseLink;
use crate::upstream::transport::stdio::{ChildSupervisor, StdioLink, StdioSpawner};
use crate::upstream::transport::streamable_http::{self, Endpoint, HttpLink};

impl Upstream {
    pub(super) fn member_healthy(&self, member: usize) -> bool {
        self.members.get(member).is_some_and(|m| m.health.is_healthy())
    }

    /// For a new pooled session: the healthy member with the fewest sessions in the partition.
    pub(super) fn choose_member_for(&self, partition: &Partition) -> usize {
        let sessions = partition.snapshot();
        let load = |index: usize| {
            sessions
                .iter()
                .filter(|p| p.member == index && !p.session.is_closed())
                .count()
        };
        let healthy: Vec<usize> = (0..self.members.len()).filter(|i| self.member_healthy(*i)).collect();
        let pool = if healthy.is_empty() {
            (0..self.members.len()).collect()
        } else {
            healthy
        };
        pool.into_iter().min_by_key(|i| load(*i)).unwrap_or(0)
    }

    /// For a dedicated session: round robin over healthy members.
    pub(super) fn choose_member(&self) -> usize {
        let count = self.members.len().max(1);
        for _ in 0..count {
            let index = self.next_member.fetch_add(1, Ordering::Relaxed) % count;
            if self.member_healthy(index) {
                return index;
            }
        }
        self.next_member.load(Ordering::Relaxed) % count
    }

    /// A connection on `member`, not yet initialized; its credential is exchanged
    /// for `subject`'s token under token exchange.
    pub(super) async fn connect(
        &self,
        member: usize,
        unsolicited: UnsolicitedRequests,
        subject: Option<Arc<Subject>>,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let Some(member) = self.members.get(member) else {
            return Err(UpstreamError::unavailable(&self.name, "no member"));
        };
        member.health.sessions_opened.fetch_add(1, Ordering::Relaxed);
        let health = Some(member.health.clone());
        Ok(match &member.target {
            Target::Stdio(spawner) => {
                let child = spawner.take().await?;
                let (link, reader) = StdioLink::attach(child);
                let session = UpstreamSession::new(self.name.clone(), Link::Stdio(link), unsolicited, health);
                reader.start(Arc::downgrade(&session));
                session
            }
            Target::Http(endpoint) => {
                let link = HttpLink::new(endpoint.clone(), self.name.clone()).for_subject(subject);
                UpstreamSession::new(self.name.clone(), Link::Http(Box::new(link)), unsolicited, health)
            }
            Target::Sse(endpoint) => {
                let timeout = self.config.handshake_timeout.0;
                let pending = match SseLink::connect(endpoint, subject, self.name.clone(), timeout).await {
                    Ok(pending) => pending,
                    Err(error) => {
                        member.health.record_failure(&error.to_string());
                        return Err(error);
                    }
                };
                let (link, reader) = pending.split();
                let session = UpstreamSession::new(self.name.clone(), Link::Sse(Box::new(link)), unsolicited, health);
                let handle = reader.start(Arc::downgrade(&session));
                if let Link::Sse(link) = session.link() {
                    link.set_reader(handle);
                }
                session
            }
        })
    }

    /// A connection on `member`, initialized with `initialize_params`.
    pub(super) async fn open(
        self: &Arc<Self>,
        member: usize,
        initialize_params: Value,
        unsolicited: UnsolicitedRequests,
        subject: Option<Arc<Subject>>,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let session = self.connect(member, unsolicited, subject).await?;
        let timeout = self.config.handshake_timeout.0;
        let known = self.latest_initialize.read().unwrap_or_else(|e| e.into_inner()).clone();
        let result = match tokio::time::timeout(timeout, session.initialize(initialize_params, known)).await {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => {
                session.close("handshake failed");
                return Err(error);
            }
            Err(_) => {
                session.close("handshake timed out");
                if let Some(member) = self.members.get(member) {
                    member.health.record_failure("handshake timed out");
                }
                return Err(self.timeout_error(timeout));
            }
        };
        *self.latest_initialize.write().unwrap_or_else(|e| e.into_inner()) = Some(result);
        if unsolicited == UnsolicitedRequests::AnswerLocally {
            // Pooled: its list changes feed listens. A dedicated session opens
            // its stream when its client opens one (`ClientSession::attach_stream`).
            session.open_event_stream();
        }
        tracing::debug!(upstream = %self.name, revision = ?session.revision(), "upstream session initialized");
        Ok(session)
    }
}

/// The members an upstream's configuration names.
pub(super) fn members(
    name: &Arc<str>,
    config: &UpstreamConfig,
    supervisor: ChildSupervisor,
    credentials: &Arc<UpstreamCredentials>,
) -> Vec<Arc<Member>> {
    let health = &config.health;
    if let Some(stdio) = &config.stdio {
        let spawner = StdioSpawner::new(name.clone(), stdio.clone(), config.restart.clone(), supervisor);
        return vec![Member::new(Target::Stdio(spawner), "stdio".into(), health)];
    }
    if let Some(http) = &config.http {
        let max_idle = http.max_idle_connections.unwrap_or(config.max_in_flight);
        let client = streamable_http::client(name, &config.tls, max_idle);
        return http
            .members()
            .into_iter()
            .map(|url| {
                let endpoint = Arc::new(Endpoint::new(client.clone(), url.clone(), credentials.clone()));
                Member::new(Target::Http(endpoint), url.to_string(), health)
            })
            .collect();
    }
    if let Some(sse) = &config.sse {
        let target = Target::Sse(Arc::new(Endpoint::new(
            streamable_http::client(name, &config.tls, SSE_MAX_IDLE_CONNECTIONS),
            sse.url.clone(),
            credentials.clone(),
        )));
        return vec![Member::new(target, sse.url.to_string(), health)];
    }
    // Validation guarantees a transport; an empty command fails at spawn with a clear error.
    let spawner = StdioSpawner::new(
        name.clone(),
        StdioConfig::from_command(Vec::new()),
        config.restart.clone(),
        supervisor,
    );
    vec![Member::new(Target::Stdio(spawner), "stdio".into(), health)]
}
