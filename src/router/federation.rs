//! A federated backend's state: several upstream pools served as one MCP
//! server on one path. It owns its members (each an ordinary [`Pool`]), their
//! prefixes and the prefix mode, the exposed-name tables it last built, the
//! channel on which members' list changes reach listening clients, and the
//! legacy clients' calls in flight a `notifications/cancelled` may name; its
//! lifecycle is its members'. How names, cursors and handshakes combine is
//! [`crate::federate`]'s; asking the members and merging their answers is the
//! bridge's (`bridge/federated/`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::pool::Pool;
use super::relist::RelistGate;
use super::serves::Serves;
use crate::config::UpstreamConfig;
use crate::federate::names::{Names, PrefixMode};
use crate::federate::route::NameKind;
use crate::protocol::Id;
use crate::telemetry::UpstreamStats;
use crate::translate::{CachePolicy, CacheScope};

/// Bound of the list-change broadcast; a listener too slow loses the oldest
/// (one `list_changed` stands for any number of changes).
const CHANGES_QUEUE: usize = 16;

/// Most legacy clients' calls tracked for cancellation at once; past it a call
/// is served all the same, but a `notifications/cancelled` cannot reach it.
const MAX_TRACKED_CALLS: usize = 4096;

/// A legacy client's call: its session (the address of the id the session
/// store holds, which its tracked calls keep alive: cheap to hash, unlike the
/// sealed id's few hundred bytes), and its request id as JSON text.
type CallKey = (usize, Id);

/// One member of a federation: its upstream and the prefix of its names.
#[derive(Clone)]
pub(crate) struct Member {
    /// The member's own upstream.
    pub(crate) pool: Pool,
    /// `tool_prefix`, else the upstream's name.
    pub(crate) prefix: String,
}

/// The servers behind one federated path.
pub(crate) struct Federation {
    /// The path: the federation's name in logs, metrics and sealed sessions.
    name: Arc<str>,
    /// The first member's configuration under the federation's name: its path
    /// and timeouts stand for the federation's own requests.
    config: UpstreamConfig,
    members: Vec<Member>,
    mode: PrefixMode,
    stats: Arc<UpstreamStats>,
    /// The exposed names of tools and of prompts, built from complete listings
    /// of every member (the owner of an exposed name needs them all under
    /// `on_collision` and `never`), or why they could not be. A std mutex:
    /// never held across `.await`.
    names: Mutex<HashMap<NameKind, KnownNames>>,
    /// Learning the names of tools, and of prompts, again: one listing of the
    /// members at a time, and at most one per interval for a name they lack.
    relists: [RelistGate; 2],
    /// Members left out of a list (failed or slow), for operators.
    left_out: AtomicU64,
    /// Members' list changes, by the notification method clients get.
    changes: broadcast::Sender<&'static str>,
    /// Legacy clients' calls being served, by (session id, request id as JSON
    /// text): a serial (which call holds the entry) and the call's token.
    calls: Mutex<HashMap<CallKey, (u64, CancellationToken)>>,
    next_call: AtomicU64,
    /// The bounds of the federation's own hints: the shortest cap of any
    /// member; `private` if any member is configured so, `public` only if all are.
    cache_policy: CachePolicy,
}

impl Federation {
    /// A federation of `configs` (two or more upstreams on one path), each
    /// member built by `member`.
    pub(crate) fn new(configs: &[UpstreamConfig], member: impl Fn(&UpstreamConfig) -> Pool) -> Federation {
        let path = configs.first().map_or_else(|| "/mcp".to_owned(), |c| c.path.clone());
        let mut config = configs.first().cloned().unwrap_or_else(|| {
            // Unreachable: a federation is built for two configurations or more.
            UpstreamConfig::with_transport(&path, None, None, None)
        });
        config.name = path.clone();
        let mode = configs.iter().find_map(|c| c.prefix_mode).unwrap_or(PrefixMode::Always);
        let members = configs
            .iter()
            .map(|c| Member {
                pool: member(c),
                prefix: c.member_prefix().to_owned(),
            })
            .collect();
        let name: Arc<str> = path.into();
        let cache_policy = combined_policy(configs.iter().map(|c| c.cache.policy()));
        Federation {
            cache_policy,
            stats: Arc::new(UpstreamStats::new(name.clone())),
            name,
            config,
            members,
            mode,
            names: Mutex::new(HashMap::new()),
            relists: Default::default(),
            left_out: AtomicU64::new(0),
            calls: Mutex::new(HashMap::new()),
            next_call: AtomicU64::new(0),
            changes: broadcast::channel(CHANGES_QUEUE).0,
        }
    }

    /// The path it is served on, which names it.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The configuration standing for the federation's own requests.
    pub(crate) fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// Its counters.
    pub(crate) fn stats(&self) -> &Arc<UpstreamStats> {
        &self.stats
    }

    /// The members, in configuration order (a member's index is its place here).
    pub(crate) fn members(&self) -> &[Member] {
        &self.members
    }

    /// The members' prefixes, by index.
    pub(crate) fn prefixes(&self) -> Vec<&str> {
        self.members.iter().map(|m| m.prefix.as_str()).collect()
    }

    /// When names get their member's prefix.
    pub(crate) fn mode(&self) -> PrefixMode {
        self.mode
    }

    /// The exposed names of `kind` last built (or why they could not be), if
    /// any were since the members' last change of that list.
    pub(crate) fn names(&self, kind: NameKind) -> Option<Result<Arc<Names>, String>> {
        lock(&self.names).get(&kind).map(|known| known.names.clone())
    }

    /// Keeps `names` as the exposed names of `kind`, built without the members
    /// named in `unlisted` (they could not be listed); or why they could not be
    /// built, unless names built before are kept (they still serve).
    pub(crate) fn keep_names(&self, kind: NameKind, names: Result<Arc<Names>, String>, unlisted: Vec<String>) {
        let mut kept = lock(&self.names);
        if names.is_ok() || kept.get(&kind).is_none_or(|known| known.names.is_err()) {
            kept.insert(kind, KnownNames { names, unlisted });
        }
    }

    /// The relisting of the members' lists of `kind`, by which its names are learned.
    pub(crate) fn relists(&self, kind: NameKind) -> &RelistGate {
        match kind {
            NameKind::Tools => &self.relists[0],
            NameKind::Prompts => &self.relists[1],
        }
    }

    /// The members whose names of `kind` are missing from the names kept.
    pub(crate) fn unlisted(&self, kind: NameKind) -> Vec<String> {
        lock(&self.names)
            .get(&kind)
            .map(|known| known.unlisted.clone())
            .unwrap_or_default()
    }

    /// A member was left out of a list.
    pub(crate) fn count_left_out(&self) {
        self.left_out.fetch_add(1, Ordering::Relaxed);
    }

    /// Tracks the call `id` of the legacy client session `session` until the
    /// returned guard is dropped; `None` when as many are tracked as may be, or
    /// the client already has a call of that id in flight (the spec forbids it).
    pub(crate) fn track_call(self: &Arc<Self>, session: &Arc<str>, id: &Id) -> Option<TrackedCall> {
        let key = (session_address(session), id.clone());
        let mut calls = lock(&self.calls);
        if calls.len() >= MAX_TRACKED_CALLS || calls.contains_key(&key) {
            return None;
        }
        let serial = self.next_call.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        calls.insert(key.clone(), (serial, token.clone()));
        Some(TrackedCall {
            federation: self.clone(),
            _session: session.clone(),
            key,
            serial,
            token,
        })
    }

    /// Cancels the call `request_id` (as the client's `notifications/cancelled`
    /// names it) of session `session`, if it is in flight. Returns whether it was.
    pub(crate) fn cancel_call(&self, session: &Arc<str>, request_id: &Value) -> bool {
        let Some(request_id) = Id::from_value(request_id) else {
            return false;
        };
        let key = (session_address(session), request_id);
        let calls = lock(&self.calls);
        match calls.get(&key) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    fn forget_call(&self, key: &CallKey, serial: u64) {
        let mut calls = lock(&self.calls);
        if calls.get(key).is_some_and(|(held_by, _)| *held_by == serial) {
            calls.remove(key);
        }
    }

    /// Members' list changes from now on (`notifications/tools/list_changed`…).
    pub(crate) fn list_changes(&self) -> broadcast::Receiver<&'static str> {
        self.changes.subscribe()
    }

    /// A member's list of `kind` changed: the names built from it are stale,
    /// and listening clients are told with `notification`.
    pub(crate) fn list_changed(&self, notification: &'static str) {
        if let Some(kind) = NameKind::of_notification(notification) {
            lock(&self.names).remove(&kind);
        }
        let _ = self.changes.send(notification);
    }

    /// The bounds of the hints of what the federation itself answers (merged lists).
    pub(crate) fn cache_policy(&self) -> CachePolicy {
        self.cache_policy
    }

    /// Whether any member is reached with each principal's own credential.
    pub(crate) fn per_principal(&self) -> bool {
        self.members.iter().any(|m| m.pool.per_principal())
    }

    /// The admin view: each member's own, with the federation it serves in
    /// (`{path, prefix, prefix_mode, left_out}`: how often a member was left out of a list).
    pub(crate) fn snapshots(&self) -> Vec<Value> {
        let left_out = self.left_out.load(Ordering::Relaxed);
        let mode = match self.mode {
            PrefixMode::Always => "always",
            PrefixMode::OnCollision => "on_collision",
            PrefixMode::Never => "never",
        };
        self.members
            .iter()
            .map(|member| {
                let mut snapshot = member.pool.snapshot();
                if let Some(object) = snapshot.as_object_mut() {
                    let federation = json!({"path": &*self.name, "prefix": member.prefix, "prefix_mode": mode, "left_out": left_out});
                    object.insert("federation".into(), federation);
                }
                snapshot
            })
            .collect()
    }
}

/// A federation's lifecycle is its members'; it serves while any member does
/// (lists say who is left out).
impl Serves for Arc<Federation> {
    fn name(&self) -> &str {
        Federation::name(self)
    }

    fn stats(&self) -> &Arc<UpstreamStats> {
        Federation::stats(self)
    }

    fn config(&self) -> &UpstreamConfig {
        Federation::config(self)
    }

    fn configs(&self) -> Vec<&UpstreamConfig> {
        self.members.iter().map(|m| m.pool.config()).collect()
    }

    fn is_unused(&self) -> bool {
        Arc::strong_count(self) == 1 && self.members.iter().all(|m| m.pool.is_unused())
    }

    fn warm(&self) {
        self.members.iter().for_each(|m| m.pool.warm());
    }

    fn spawn_health_checks(&self) {
        self.members.iter().for_each(|m| m.pool.spawn_health_checks());
    }

    fn is_ready(&self) -> bool {
        self.members.iter().any(|m| m.pool.is_ready())
    }

    fn snapshots(&self) -> Vec<Value> {
        Federation::snapshots(self)
    }

    fn close_all(&self) {
        self.members.iter().for_each(|m| m.pool.close_all());
    }
}

/// Exposed names (or why they could not be built), and the members missing from them.
struct KnownNames {
    names: Result<Arc<Names>, String>,
    unlisted: Vec<String>,
}

/// Members' cache bounds as one: no hint longer or wider than any member's allows.
fn combined_policy(policies: impl Iterator<Item = CachePolicy>) -> CachePolicy {
    let mut combined: Option<CachePolicy> = None;
    for policy in policies {
        combined = Some(match combined {
            None => policy,
            Some(so_far) => CachePolicy {
                max_ttl_ms: so_far.max_ttl_ms.min(policy.max_ttl_ms),
                scope: match (so_far.scope, policy.scope) {
                    (Some(CacheScope::Private), _) | (_, Some(CacheScope::Private)) => Some(CacheScope::Private),
                    (Some(CacheScope::Public), Some(CacheScope::Public)) => Some(CacheScope::Public),
                    _ => None,
                },
                ..so_far
            },
        });
    }
    combined.unwrap_or_default()
}

/// The address of a session's id, which names the session while it is held.
fn session_address(session: &Arc<str>) -> usize {
    Arc::as_ptr(session).cast::<u8>() as usize
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Poisoning only means a panic elsewhere mid-update; a names table is replaced whole.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A legacy client's call in flight on a federated path: cancelled when the
/// client's `notifications/cancelled` names it; forgotten when dropped.
pub(crate) struct TrackedCall {
    federation: Arc<Federation>,
    /// The session's id, kept so that its address (the key) is not reused meanwhile.
    _session: Arc<str>,
    key: CallKey,
    serial: u64,
    /// Cancelled by the client's `notifications/cancelled`.
    pub(crate) token: CancellationToken,
}

impl Drop for TrackedCall {
    fn drop(&mut self) {
        self.federation.forget_call(&self.key, self.serial);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_cache_bounds_combine_to_the_narrowest() {
        let policy = |max_ttl_ms, scope| CachePolicy {
            max_ttl_ms,
            scope,
            ..CachePolicy::default()
        };
        let public = Some(CacheScope::Public);
        let private = Some(CacheScope::Private);
        let cases = [
            (
                "the shortest cap",
                vec![policy(30_000, None), policy(5_000, None)],
                policy(5_000, None),
            ),
            (
                "public only if every member vouches",
                vec![policy(1, public), policy(1, None)],
                policy(1, None),
            ),
            (
                "every member vouches",
                vec![policy(1, public), policy(1, public)],
                policy(1, public),
            ),
            (
                "any private",
                vec![policy(1, public), policy(1, private)],
                policy(1, private),
            ),
            ("no member", vec![], CachePolicy::default()),
        ];
        for (what, members, expected) in cases {
            assert_eq!(combined_policy(members.into_iter()), expected, "{what}");
        }
    }
}
