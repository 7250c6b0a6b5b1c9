//! The store of legacy client sessions eragate mints: sealed session ids,
//! what they carry, and finding, resuming and expiring them.
//!
//! A session id is sealed ([`crate::seal`]): it carries what the client
//! negotiated, the upstream it is bound to and, for an HTTP upstream, that
//! upstream's own session id. Any replica holding the key can therefore serve
//! the next request of a session it has never seen; only a session whose
//! upstream session is bound to one process (a stdio child) names its owner
//! and is refused elsewhere with 404.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use dashmap::DashMap;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::auth::Principal;
use crate::config::SessionsConfig;
use crate::fast_hash::FastState;
use crate::policy::quota::{self, Held, Room};
use crate::protocol::Era;
use crate::protocol::Revision;
use crate::router::{Backend, SessionNeed};
use crate::seal::{Purpose, SealKey, Sealer, digest, fingerprint, unix_now};

use super::client_session::lock;
pub(crate) use super::client_session::{AttachError, ClientSession, stateless_envelope};
use super::revocations::{Ended, Revocations, Verdict};

/// Every live legacy client session on this replica.
pub struct SessionStore {
    /// Keyed by the ids eragate minted: [`FastState`].
    sessions: DashMap<Arc<str>, Arc<ClientSession>, FastState>,
    /// The quotas' counts, kept as sessions come and go, so that opening a
    /// session asks two numbers instead of walking every session (bench/NOTES.md,
    /// "Scale").
    counts: HeldCounts,
    /// Ids this replica ended (DELETE, expiry), by digest: a sealed id stays
    /// valid until its expiry, so it must not be resumed again. Pruned at that
    /// expiry; at most `max_ended` (the soonest to expire is forgotten first).
    /// A std mutex: held for one lookup, or one insertion and the evictions it needs.
    ended: Mutex<EndedIds>,
    config: SessionsConfig,
    sealer: Sealer,
    /// Names this process in the ids of sessions bound to it (stdio children).
    instance: String,
    /// With `[redis]`: the ids every replica ended, shared (set once at start).
    shared_endings: OnceLock<Arc<Revocations>>,
}

/// What a session id carries, sealed. Short keys: it travels in every request header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionClaims {
    /// The negotiated revision.
    pub rev: String,
    /// The client's `initialize` capabilities.
    pub caps: Value,
    /// The client's `clientInfo`.
    pub info: Value,
    /// Who the session belongs to (empty without authentication).
    pub prn: String,
    /// The upstream's configured name.
    pub ups: String,
    /// The upstream's own `Mcp-Session-Id`, when it has one.
    pub usid: Option<String>,
    /// The member endpoint that session lives on.
    #[serde(default)]
    pub mem: Option<String>,
    /// The process owning the upstream session, when it cannot move (stdio).
    pub own: Option<String>,
    /// Expiry, seconds since the Unix epoch.
    pub exp: u64,
}

impl SessionStore {
    /// The sealer of this gateway's keys (also for federated list cursors).
    pub(crate) fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// An empty store sealing ids with the configured key (a random one when
    /// none is set), remembering at most `max_ended` ended ids.
    pub fn new(config: SessionsConfig, max_ended: usize) -> SessionStore {
        let key = config.key.clone().unwrap_or_else(|| {
            tracing::warn!(
                "no session key configured (sessions.key or ERAGATE_SESSION_KEY): using a random key; \
                 legacy sessions will not survive a restart or move between replicas"
            );
            SealKey::random()
        });
        let until = Instant::now() + config.previous_key_valid_for.0;
        let sealer = Sealer::new(&key, config.previous_key.as_ref().map(|k| (k, until)));
        let instance = format!("{:016x}", rand::rng().random::<u64>());
        SessionStore {
            ended: Mutex::new(EndedIds::new(max_ended)),
            sessions: DashMap::with_hasher(FastState::default()),
            counts: HeldCounts::default(),
            config,
            sealer,
            instance,
            shared_endings: OnceLock::new(),
        }
    }

    /// Shares the ids this replica ends by DELETE or eviction with every
    /// replica, and checks theirs before resuming an id ([`Revocations`]).
    pub(crate) fn share_endings(&self, revocations: Arc<Revocations>) {
        let _ = self.shared_endings.set(revocations);
    }

    /// Ends, on this replica, the sessions other replicas ended, and remembers
    /// their ids so that they are never resumed here.
    pub(crate) fn apply_ended(&self, ended: &[Ended]) {
        let now = unix_now();
        {
            let mut remembered = self.ended();
            for e in ended {
                remembered.insert(e.digest, e.expiry, now);
            }
        }
        let digests: std::collections::HashSet<[u8; 32]> = ended.iter().map(|e| e.digest).collect();
        let held: Vec<Arc<str>> = self
            .sessions
            .iter()
            .filter(|s| digests.contains(&digest(&s.id)))
            .map(|s| s.id.clone())
            .collect();
        for id in held {
            tracing::info!(session = %fingerprint(&id), "a session ended on another replica");
            self.remove(&id);
        }
    }

    /// Seals the claims of a new session into its id. `process_bound` sessions
    /// name this replica as their owner.
    pub fn mint(&self, mut claims: SessionClaims, process_bound: bool) -> String {
        claims.exp = unix_now() + self.config.lifetime.0.as_secs();
        claims.own = process_bound.then(|| self.instance.clone());
        let plaintext = serde_json::to_vec(&claims).unwrap_or_default();
        self.sealer.seal(Purpose::Session, &plaintext)
    }

    /// Opens a session id minted by any replica sharing the key; `None` when it is
    /// tampered, foreign, expired, or owned by another process.
    pub fn open(&self, id: &str) -> Option<SessionClaims> {
        let plaintext = self.sealer.open(Purpose::Session, id, Instant::now())?;
        let claims: SessionClaims = serde_json::from_slice(&plaintext).ok()?;
        if claims.exp <= unix_now() {
            return None;
        }
        if claims.own.as_ref().is_some_and(|owner| *owner != self.instance) {
            return None;
        }
        Some(claims)
    }

    /// Makes `session` reachable by its id (HTTP clients), ending the least
    /// recently used session when the store is full.
    pub(crate) fn insert(&self, session: Arc<ClientSession>) {
        // Opened once here, so that every later request compares a number instead.
        let (expires, principal) = self
            .open(&session.id)
            .map_or((0, None), |claims| (claims.exp, Some(claims.prn)));
        self.make_room(principal.as_deref().unwrap_or_default(), None);
        session.expires.store(expires, Ordering::Relaxed);
        if let Some(principal) = principal {
            let _ = session.principal.set(principal);
        }
        self.counts.add(&session);
        if let Some(replaced) = self.sessions.insert(session.id.clone(), session) {
            self.counts.sub(&replaced);
        }
    }

    /// A live session of `principal` by id: this replica's own, or one minted
    /// elsewhere whose upstream session can be resumed here. A dead upstream
    /// session ends it (the client re-initializes). Another principal's session
    /// is not found, exactly like an unknown one.
    pub(crate) async fn find(&self, id: &str, backend: &Backend, principal: &Principal) -> Option<Arc<ClientSession>> {
        let Some(session) = self.sessions.get(id).map(|s| s.clone()) else {
            // Boxed: resuming opens upstream sessions, a future far larger than a lookup's.
            return Box::pin(self.resume(id, backend, principal)).await;
        };
        if session.principal.get().map(String::as_str) != Some(principal.as_str()) {
            tracing::warn!(?principal, "a session id used by a principal it does not belong to");
            return None;
        }
        let idle = lock(&session.last_seen).elapsed();
        // The sealed lifetime holds here too (opening the id checks its expiry).
        let expired = session.expires.load(Ordering::Relaxed) <= unix_now();
        if session.upstream_closed() || idle > self.config.idle_timeout.0 || expired {
            self.remove(id);
            return None;
        }
        *lock(&session.last_seen) = Instant::now();
        Some(session)
    }

    async fn resume(&self, id: &str, backend: &Backend, principal: &Principal) -> Option<Arc<ClientSession>> {
        let id_digest = digest(id);
        if self.ended().contains(&id_digest) {
            return None;
        }
        let claims = self.open(id)?;
        if let Some(shared) = self.shared_endings.get()
            && shared.check(&id_digest).await != Verdict::Live
        {
            return None;
        }
        if claims.ups != backend.name() || claims.prn != principal.as_str() {
            return None;
        }
        let revision = Revision::parse(&claims.rev)?;
        let pool = match backend {
            Backend::Pool(pool) => pool,
            Backend::Federated(_) => {
                // Nothing of a federated session lives in a process: any replica opens it as it was.
                let envelope = stateless_envelope(&claims.caps, &claims.info);
                let session = ClientSession::open_federated(id.to_owned(), revision, backend.clone(), envelope);
                self.insert(session.clone());
                return Some(session);
            }
        };
        // A replica that has not met this upstream yet learns its era first.
        let era = pool.era(principal).await.ok();
        let session = match (&claims.usid, era) {
            (Some(usid), _) => {
                let upstream_session = pool.resume_dedicated(claims.mem.as_deref(), usid, revision)?;
                ClientSession::open(id.to_owned(), revision, backend.clone(), upstream_session)
            }
            (None, Some(Era::Modern)) => {
                let envelope = stateless_envelope(&claims.caps, &claims.info);
                ClientSession::open_stateless(
                    id.to_owned(),
                    revision,
                    backend.clone(),
                    pool.session(SessionNeed::stateless(principal)).await.ok()?,
                    envelope,
                )
            }
            (None, _) => return None,
        };
        tracing::info!(%revision, "resumed a legacy session minted by another replica");
        self.insert(session.clone());
        Some(session)
    }

    /// Ends a session; `false` when it did not exist.
    pub(crate) fn remove(&self, id: &str) -> bool {
        match self.sessions.remove(id) {
            Some((_, session)) => {
                self.counts.sub(&session);
                let expiry = self
                    .open(id)
                    .map_or(unix_now() + self.config.lifetime.0.as_secs(), |c| c.exp);
                self.remember_ended(id, expiry);
                session.end();
                true
            }
            None => false,
        }
    }

    /// Ends a session for every replica (DELETE, eviction): [`SessionStore::remove`],
    /// and with `[redis]` its id shared as ended. `false` when it did not exist.
    pub(crate) fn revoke(&self, id: &str) -> bool {
        let expiry = self.open(id).map(|claims| claims.exp);
        if !self.remove(id) {
            return false;
        }
        if let (Some(shared), Some(expiry)) = (self.shared_endings.get(), expiry) {
            shared.publish(Ended {
                digest: digest(id),
                expiry,
            });
        }
        true
    }

    /// Keeps an ended id's digest until `expiry`, within the bound.
    fn remember_ended(&self, id: &str, expiry: u64) {
        self.ended().insert(digest(id), expiry, unix_now());
    }

    fn ended(&self) -> std::sync::MutexGuard<'_, EndedIds> {
        self.ended.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Ids remembered as ended.
    #[cfg(test)]
    pub(crate) fn ended_len(&self) -> usize {
        self.ended().len()
    }

    /// What the set of ended ids holds and what keeping it within its bound cost
    /// (for the admin view).
    pub(crate) fn ended_stats(&self) -> EndedStats {
        self.ended().stats()
    }

    /// Ends every session idle past the timeout.
    pub(crate) fn expire_idle(&self) {
        self.ended().forget_expired(unix_now());
        let timeout = self.config.idle_timeout.0;
        let expired: Vec<Arc<str>> = self
            .sessions
            .iter()
            .filter(|s| lock(&s.last_seen).elapsed() > timeout || s.upstream_closed())
            .map(|s| s.id.clone())
            .collect();
        for id in expired {
            self.remove(&id);
        }
    }

    /// Ends every session (shutdown).
    pub(crate) fn close_all(&self) {
        let ids: Vec<Arc<str>> = self.sessions.iter().map(|s| s.id.clone()).collect();
        for id in ids {
            self.remove(&id);
        }
    }

    /// Live sessions.
    pub(crate) fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Ends sessions until `principal` may open one more: its own least
    /// recently used past `max_sessions_per_principal`, and past `max_sessions`
    /// the least recently used of whoever holds the most ([`quota::make_room`]);
    /// for a session with an upstream session of its own, its own least
    /// recently used past `dedicated.per_principal` on that upstream. Called before an `initialize` opens its upstream session
    /// (a stdio child), and again when the session is stored. Returns whether
    /// any session was ended.
    pub(crate) fn make_room(&self, principal: &str, dedicated: Option<DedicatedQuota<'_>>) -> bool {
        let (per_principal, max) = (self.config.max_sessions_per_principal, self.config.max_sessions);
        let mut ended = false;
        // Only a bound reached needs the walk that picks whom to end.
        if self.counts.of(principal) >= per_principal || self.sessions.len() >= max {
            ended |= self.make_room_among(principal, per_principal, max, |_| true);
        }
        if let Some(quota) = dedicated
            && self.counts.dedicated_of(principal, quota.upstream) >= quota.per_principal
        {
            let on_upstream = |s: &ClientSession| s.owns_upstream && s.backend.name() == quota.upstream;
            ended |= self.make_room_among(principal, quota.per_principal, usize::MAX, on_upstream);
        }
        ended
    }

    /// `principal` holds its whole share of `upstream`'s sessions: its own least
    /// recently used session there with an upstream session of its own ends.
    /// Returns whether one was ended.
    pub(crate) fn give_way_within(&self, principal: &str, upstream: &str) -> bool {
        let held = self.counts.dedicated_of(principal, upstream);
        let on_upstream = |s: &ClientSession| s.owns_upstream && s.backend.name() == upstream;
        held > 0 && self.make_room_among(principal, held, usize::MAX, on_upstream)
    }

    /// `upstream` has no room for another session of its own (its children are
    /// all taken): the principal holding the most such sessions there ends its
    /// least recently used one. Returns whether one was ended.
    pub(crate) fn give_way(&self, principal: &str, upstream: &str) -> bool {
        let sessions: Vec<Arc<ClientSession>> = self
            .sessions
            .iter()
            .filter(|s| s.owns_upstream && s.backend.name() == upstream)
            .map(|s| s.clone())
            .collect();
        let held = held_by(&sessions);
        let Room::Evict(i) = quota::make_room(&held, principal, usize::MAX, held.len()) else {
            return false;
        };
        let id = sessions[i].id.clone();
        tracing::info!(session = %fingerprint(&id), upstream, "no child left; the principal holding the most ends its least recently used session");
        self.revoke(&id)
    }

    fn make_room_among(
        &self,
        principal: &str,
        per_principal: usize,
        total: usize,
        counted: impl Fn(&ClientSession) -> bool,
    ) -> bool {
        let mut ended = false;
        loop {
            let sessions: Vec<Arc<ClientSession>> =
                self.sessions.iter().filter(|s| counted(s)).map(|s| s.clone()).collect();
            let held = held_by(&sessions);
            let Room::Evict(i) = quota::make_room(&held, principal, per_principal, total) else {
                return ended;
            };
            let id = sessions[i].id.clone();
            tracing::info!(session = %fingerprint(&id), "session quota reached; ending the least recently used session");
            ended |= self.revoke(&id);
        }
    }
}

/// The digests of ended ids and their expiries, with the soonest to expire
/// found without a walk: a min-heap beside the map. Forgetting one (its expiry
/// passed, or the set is full) pops the heap's top; an entry of the heap whose
/// digest was remembered again with another expiry is stale and skipped when it
/// comes up, and the heap is rebuilt from the map once stale entries outnumber
/// live ones, so it holds at most twice the bound. Each insertion thus visits
/// O(1) entries amortised (O(log n) comparisons in the heap), where a walk of
/// the set for the soonest visits every entry.
struct EndedIds {
    expiries: HashMap<[u8; 32], u64>,
    soonest: BinaryHeap<Reverse<(u64, [u8; 32])>>,
    bound: usize,
    /// Entries of the heap popped or rebuilt, since start: the work of keeping the bound.
    visited: u64,
    /// Unexpired ids forgotten because the set was full.
    evicted: u64,
}

/// What [`SessionStore::ended_stats`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct EndedStats {
    /// Ended ids remembered now.
    pub(crate) remembered: usize,
    /// The most remembered (`limits.max_ended_sessions`).
    pub(crate) bound: usize,
    /// Unexpired ids forgotten because the set was full, since start.
    pub(crate) evicted: u64,
    /// Entries visited to keep the set within its bound and free of expired ids, since start.
    pub(crate) visited: u64,
}

impl EndedIds {
    fn new(bound: usize) -> EndedIds {
        EndedIds {
            expiries: HashMap::new(),
            soonest: BinaryHeap::new(),
            bound: bound.max(1),
            visited: 0,
            evicted: 0,
        }
    }

    fn contains(&self, digest: &[u8; 32]) -> bool {
        self.expiries.contains_key(digest)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.expiries.len()
    }

    fn stats(&self) -> EndedStats {
        EndedStats {
            remembered: self.expiries.len(),
            bound: self.bound,
            evicted: self.evicted,
            visited: self.visited,
        }
    }

    /// Remembers `digest` until `expiry`: first forgets what expired by `now`,
    /// then, while full, the soonest to expire.
    fn insert(&mut self, digest: [u8; 32], expiry: u64, now: u64) {
        self.forget_expired(now);
        if !self.expiries.contains_key(&digest) {
            while self.expiries.len() >= self.bound {
                if self.pop_soonest().is_none() {
                    break;
                }
                self.evicted += 1;
            }
        }
        if self.expiries.insert(digest, expiry) != Some(expiry) {
            self.soonest.push(Reverse((expiry, digest)));
        }
        if self.soonest.len() > 2 * self.expiries.len() + 16 {
            self.rebuild();
        }
    }

    /// Forgets every id whose expiry is `now` or earlier.
    fn forget_expired(&mut self, now: u64) {
        while self.soonest.peek().is_some_and(|Reverse((expiry, _))| *expiry <= now) {
            self.pop_soonest();
        }
    }

    /// Forgets the live id expiring soonest, skipping stale heap entries; `None` when empty.
    fn pop_soonest(&mut self) -> Option<[u8; 32]> {
        while let Some(Reverse((expiry, digest))) = self.soonest.pop() {
            self.visited += 1;
            if self.expiries.get(&digest) == Some(&expiry) {
                self.expiries.remove(&digest);
                return Some(digest);
            }
        }
        None
    }

    /// The heap again from the map, without its stale entries.
    fn rebuild(&mut self) {
        self.visited += self.soonest.len() as u64;
        self.soonest = self
            .expiries
            .iter()
            .map(|(digest, expiry)| Reverse((*expiry, *digest)))
            .collect();
    }
}

/// Live sessions by principal, and by principal and upstream for those holding
/// an upstream session of their own. An entry goes when its count reaches zero.
#[derive(Default)]
struct HeldCounts {
    by_principal: DashMap<String, usize>,
    dedicated: DashMap<(String, String), usize>,
}

impl HeldCounts {
    fn add(&self, session: &ClientSession) {
        let principal = session_principal(session);
        *self.by_principal.entry(principal.to_owned()).or_insert(0) += 1;
        if session.owns_upstream {
            let key = (principal.to_owned(), session.backend.name().to_owned());
            *self.dedicated.entry(key).or_insert(0) += 1;
        }
    }

    fn sub(&self, session: &ClientSession) {
        let principal = session_principal(session);
        self.by_principal.remove_if_mut(principal, one_less);
        if session.owns_upstream {
            let key = (principal.to_owned(), session.backend.name().to_owned());
            self.dedicated.remove_if_mut(&key, one_less);
        }
    }

    fn of(&self, principal: &str) -> usize {
        self.by_principal.get(principal).map_or(0, |n| *n)
    }

    fn dedicated_of(&self, principal: &str, upstream: &str) -> usize {
        let key = (principal.to_owned(), upstream.to_owned());
        self.dedicated.get(&key).map_or(0, |n| *n)
    }
}

/// One fewer; `true` (remove the entry) at zero.
fn one_less<K>(_: &K, n: &mut usize) -> bool {
    *n = n.saturating_sub(1);
    *n == 0
}

fn session_principal(session: &ClientSession) -> &str {
    session.principal.get().map(String::as_str).unwrap_or_default()
}

/// The bound on legacy sessions holding an upstream session of their own on one upstream.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DedicatedQuota<'a> {
    /// The upstream's name.
    pub(crate) upstream: &'a str,
    /// Most of one principal (`pool.max_children_per_principal`).
    pub(crate) per_principal: usize,
}

/// `sessions` as the quota sees them: every one may be ended, the least recently seen first.
fn held_by(sessions: &[Arc<ClientSession>]) -> Vec<Held<'_>> {
    sessions
        .iter()
        .map(|s| Held {
            principal: s.principal.get().map(String::as_str).unwrap_or_default(),
            idle: true,
            last_used: u64::MAX - lock(&s.last_seen).elapsed().as_millis() as u64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_ids_are_bounded_digests() {
        let store = SessionStore::new(SessionsConfig::default(), 3);
        let far = unix_now() + 3600;
        for (i, id) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            store.remember_ended(&"x".repeat(1 << 20).replace('x', id), far + i as u64);
        }
        assert_eq!(store.ended_len(), 3);
        // The soonest to expire went first; what is kept is 32 bytes whatever the id's size.
        assert!(!store.ended().contains(&digest(&"a".repeat(1 << 20))));
        assert!(store.ended().contains(&digest(&"e".repeat(1 << 20))));
        // Expired ones are dropped before anything unexpired is forgotten.
        store.remember_ended("old", 1);
        store.remember_ended("new", far);
        assert!(!store.ended().contains(&digest("old")));
        assert!(store.ended().contains(&digest("new")));
    }

    /// Past the bound, each id ended forgets one: a constant number of entries
    /// visited per insertion, however many are remembered (a scan visited them all).
    #[test]
    fn keeping_the_bound_visits_a_constant_number_of_entries_per_insertion() {
        for bound in [10, 1_000, 20_000] {
            let mut ended = EndedIds::new(bound);
            let now = 1_000;
            // Expiries out of order, as DELETEs of sessions minted at different times come.
            let expiry = |i: u64| now + 1 + (i * 7_919) % 50_000;
            for i in 0..bound as u64 {
                ended.insert(digest(&i.to_string()), expiry(i), now);
            }
            let before = ended.stats();
            let inserted = 3 * bound as u64;
            for i in bound as u64..bound as u64 + inserted {
                ended.insert(digest(&i.to_string()), expiry(i), now);
            }
            let after = ended.stats();
            assert_eq!(after.remembered, bound);
            assert_eq!(after.evicted - before.evicted, inserted);
            let per_insertion = (after.visited - before.visited) as f64 / inserted as f64;
            assert!(
                per_insertion <= 2.0,
                "bound {bound}: {per_insertion} entries visited per insertion"
            );
        }
    }

    #[test]
    fn an_id_remembered_again_leaves_no_stale_entry_behind() {
        let mut ended = EndedIds::new(4);
        for round in 0..1_000u64 {
            // The same four ids, each time with a later expiry.
            for id in 0..4u64 {
                ended.insert(digest(&id.to_string()), 10 + round, 0);
            }
        }
        assert_eq!(ended.len(), 4);
        assert!(ended.soonest.len() <= 2 * 4 + 16, "{}", ended.soonest.len());
        assert_eq!(ended.stats().evicted, 0);
        // Everything expired by then is forgotten at once.
        ended.forget_expired(10_000);
        assert_eq!(ended.len(), 0);
    }
}
