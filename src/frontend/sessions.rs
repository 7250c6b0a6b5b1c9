//! Legacy client sessions minted by eragate: what each client negotiated, its
//! dedicated upstream session, and the server→client requests relayed to it.
//!
//! A session id is sealed ([`crate::seal`]): it carries what the client
//! negotiated, the upstream it is bound to and, for an HTTP upstream, that
//! upstream's own session id. Any replica holding the key can therefore serve
//! the next request of a session it has never seen; only a session whose
//! upstream session is bound to one process (a stdio child) names its owner
//! and is refused elsewhere with 404.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

use dashmap::DashMap;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::auth::Principal;
use crate::config::SessionsConfig;
use crate::protocol::envelope::{Envelope, LogLevel};
use crate::protocol::{Era, Id, Message, Request, Response, Revision};
use crate::seal::{Purpose, SealKey, Sealer, unix_now};
use crate::translate::multiplex::refuse_server_request;
use crate::upstream::{Upstream, UpstreamSession};

/// One legacy client's session.
pub struct ClientSession {
    /// The `Mcp-Session-Id` given to the client (shared with the store's key: a
    /// sealed id is a few hundred bytes).
    pub id: Arc<str>,
    /// The revision negotiated with the client.
    pub revision: Revision,
    /// The upstream this session is bound to.
    pub upstream: Arc<Upstream>,
    /// A legacy upstream: the session serving only this client. A modern
    /// upstream: the stateless session every client shares.
    pub upstream_session: Arc<UpstreamSession>,
    /// For a modern upstream only: the envelope every request of this client
    /// carries (its capabilities, clientInfo and the level `logging/setLevel` chose).
    envelope: Option<Mutex<Envelope>>,
    /// Whether ending this client session ends its upstream session (a
    /// dedicated one) or leaves it to the pool (shared and stateless ones).
    owns_upstream: bool,
    last_seen: Mutex<Instant>,
    /// The sealed expiry (seconds since the Unix epoch), read once when stored.
    expires: AtomicU64,
    /// The sealed principal, read once when stored: only they may use the session.
    principal: OnceLock<String>,
    next_outbound: AtomicU64,
    /// Server→client requests relayed to the client: the id eragate gave it → the
    /// upstream's own id. A std mutex, never held across `.await`.
    outbound: Mutex<HashMap<Id, Id>>,
    /// Requests eragate itself sent the client (for a modern upstream's
    /// `input_required`), awaiting the client's response.
    asked: Mutex<HashMap<Id, oneshot::Sender<Response>>>,
    /// Client request ids in flight → upstream ids, for `notifications/cancelled`.
    in_flight: Mutex<HashMap<Id, u64>>,
    /// The client's open GET stream, if any.
    stream: Mutex<Option<mpsc::Sender<Message>>>,
    /// Toward a modern upstream: the resources the client subscribed to, and the
    /// listen that carries their notifications.
    listen: Mutex<(BTreeSet<String>, Option<AbortHandle>)>,
    forwarder: Mutex<Option<AbortHandle>>,
}

/// Bound of the messages queued toward one GET stream.
pub const STREAM_QUEUE: usize = 64;

/// Every live legacy client session on this replica.
pub struct SessionStore {
    sessions: DashMap<Arc<str>, Arc<ClientSession>>,
    /// Ids this replica ended (DELETE, expiry): a sealed id stays valid until
    /// its expiry, so it must not be resumed again. Pruned at that expiry.
    ended: DashMap<String, u64>,
    config: SessionsConfig,
    sealer: Sealer,
    /// Names this process in the ids of sessions bound to it (stdio children).
    instance: String,
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

/// Why a GET stream could not be attached.
#[derive(Debug, PartialEq, Eq)]
pub enum AttachError {
    /// The session already has one; the spec allows no duplicate delivery.
    AlreadyOpen,
}

impl SessionStore {
    /// An empty store sealing ids with the configured key (a random one when none is set).
    pub fn new(config: SessionsConfig) -> SessionStore {
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
            ended: DashMap::new(),
            sessions: DashMap::new(),
            config,
            sealer,
            instance,
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
    pub fn insert(&self, session: Arc<ClientSession>) {
        self.make_room();
        // Opened once here, so that every later request compares a number instead.
        let (expires, principal) = self
            .open(&session.id)
            .map_or((0, None), |claims| (claims.exp, Some(claims.prn)));
        session.expires.store(expires, Ordering::Relaxed);
        if let Some(principal) = principal {
            let _ = session.principal.set(principal);
        }
        self.sessions.insert(session.id.clone(), session);
    }

    /// A live session of `principal` by id: this replica's own, or one minted
    /// elsewhere whose upstream session can be resumed here. A dead upstream
    /// session ends it (the client re-initializes). Another principal's session
    /// is not found, exactly like an unknown one.
    pub async fn find(&self, id: &str, upstream: &Arc<Upstream>, principal: &Principal) -> Option<Arc<ClientSession>> {
        let Some(session) = self.sessions.get(id).map(|s| s.clone()) else {
            return self.resume(id, upstream, principal).await;
        };
        if session.principal.get().map(String::as_str) != Some(principal.as_str()) {
            tracing::warn!(?principal, "a session id used by a principal it does not belong to");
            return None;
        }
        let idle = lock(&session.last_seen).elapsed();
        // The sealed lifetime holds here too (opening the id checks its expiry).
        let expired = session.expires.load(Ordering::Relaxed) <= unix_now();
        if session.upstream_session.is_closed() || idle > self.config.idle_timeout.0 || expired {
            self.remove(id);
            return None;
        }
        *lock(&session.last_seen) = Instant::now();
        Some(session)
    }

    async fn resume(&self, id: &str, upstream: &Arc<Upstream>, principal: &Principal) -> Option<Arc<ClientSession>> {
        if self.ended.contains_key(id) {
            return None;
        }
        let claims = self.open(id)?;
        if claims.ups != upstream.name() || claims.prn != principal.as_str() {
            return None;
        }
        let revision = Revision::parse(&claims.rev)?;
        // A replica that has not met this upstream yet learns its era first.
        let era = upstream.era().await.ok();
        let session = match (&claims.usid, era) {
            (Some(usid), _) => {
                let upstream_session = upstream.resume_dedicated(claims.mem.as_deref(), usid, revision)?;
                ClientSession::open(id.to_owned(), revision, upstream.clone(), upstream_session)
            }
            (None, Some(Era::Modern)) => {
                let envelope = stateless_envelope(&claims.caps, &claims.info);
                ClientSession::open_stateless(
                    id.to_owned(),
                    revision,
                    upstream.clone(),
                    upstream.modern_session().await.ok()?,
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
    pub fn remove(&self, id: &str) -> bool {
        match self.sessions.remove(id) {
            Some((_, session)) => {
                let expiry = self
                    .open(id)
                    .map_or(unix_now() + self.config.lifetime.0.as_secs(), |c| c.exp);
                self.ended.insert(id.to_owned(), expiry);
                session.end();
                true
            }
            None => false,
        }
    }

    /// Ends every session idle past the timeout.
    pub fn expire_idle(&self) {
        let now = unix_now();
        self.ended.retain(|_, expiry| *expiry > now);
        let timeout = self.config.idle_timeout.0;
        let expired: Vec<Arc<str>> = self
            .sessions
            .iter()
            .filter(|s| lock(&s.last_seen).elapsed() > timeout || s.upstream_session.is_closed())
            .map(|s| s.id.clone())
            .collect();
        for id in expired {
            self.remove(&id);
        }
    }

    /// Ends every session (shutdown).
    pub fn close_all(&self) {
        let ids: Vec<Arc<str>> = self.sessions.iter().map(|s| s.id.clone()).collect();
        for id in ids {
            self.remove(&id);
        }
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    fn make_room(&self) {
        while self.sessions.len() >= self.config.max_sessions {
            let oldest = self
                .sessions
                .iter()
                .min_by_key(|s| *lock(&s.last_seen))
                .map(|s| s.id.clone());
            match oldest {
                Some(id) => {
                    tracing::info!(session = %id, "session limit reached; ending the least recently used session");
                    self.remove(&id);
                }
                None => return,
            }
        }
    }
}

impl ClientSession {
    /// A session for a freshly initialized upstream session; its unsolicited
    /// traffic flows to the client once it opens its stream ([`ClientSession::attach_stream`]).
    pub fn open(
        id: String,
        revision: Revision,
        upstream: Arc<Upstream>,
        upstream_session: Arc<UpstreamSession>,
    ) -> Arc<ClientSession> {
        ClientSession::open_bound(id, revision, upstream, upstream_session, true)
    }

    /// A session on a pooled upstream session it shares with other legacy
    /// clients (`pool.legacy_sessions = "shared"`); ending it leaves that session open.
    pub fn open_shared(
        id: String,
        revision: Revision,
        upstream: Arc<Upstream>,
        pooled: Arc<UpstreamSession>,
    ) -> Arc<ClientSession> {
        ClientSession::open_bound(id, revision, upstream, pooled, false)
    }

    fn open_bound(
        id: String,
        revision: Revision,
        upstream: Arc<Upstream>,
        upstream_session: Arc<UpstreamSession>,
        owns_upstream: bool,
    ) -> Arc<ClientSession> {
        // The forwarder of unsolicited traffic starts with the client's GET stream
        // (`attach_stream`): until then there is nowhere to deliver it, and an idle
        // session pays for no task and no broadcast buffer.
        ClientSession::build(id, revision, upstream, upstream_session, None, owns_upstream)
    }

    /// A session in front of a modern upstream: no upstream session of its own,
    /// its state is the envelope its requests carry.
    pub fn open_stateless(
        id: String,
        revision: Revision,
        upstream: Arc<Upstream>,
        shared: Arc<UpstreamSession>,
        envelope: Envelope,
    ) -> Arc<ClientSession> {
        ClientSession::build(id, revision, upstream, shared, Some(Mutex::new(envelope)), false)
    }

    fn build(
        id: String,
        revision: Revision,
        upstream: Arc<Upstream>,
        upstream_session: Arc<UpstreamSession>,
        envelope: Option<Mutex<Envelope>>,
        owns_upstream: bool,
    ) -> Arc<ClientSession> {
        Arc::new(ClientSession {
            id: id.into(),
            revision,
            upstream,
            upstream_session,
            envelope,
            owns_upstream,
            last_seen: Mutex::new(Instant::now()),
            expires: AtomicU64::new(0),
            principal: OnceLock::new(),
            next_outbound: AtomicU64::new(1),
            outbound: Mutex::new(HashMap::new()),
            asked: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
            stream: Mutex::new(None),
            listen: Mutex::new((BTreeSet::new(), None)),
            forwarder: Mutex::new(None),
        })
    }

    /// The envelope for this client's next request, when its upstream is modern.
    pub fn envelope(&self) -> Option<Envelope> {
        self.envelope.as_ref().map(|e| lock(e).clone())
    }

    /// Records `logging/setLevel` for a modern upstream; `false` when the
    /// upstream is legacy (the level then belongs to the upstream session).
    pub fn set_log_level(&self, level: LogLevel) -> bool {
        match &self.envelope {
            Some(envelope) => {
                lock(envelope).log_level = Some(level);
                true
            }
            None => false,
        }
    }

    /// Adds or removes a subscribed URI; returns the new set.
    pub fn change_subscriptions(&self, uri: &str, subscribe: bool) -> BTreeSet<String> {
        let mut listen = lock(&self.listen);
        if subscribe {
            listen.0.insert(uri.to_owned());
        } else {
            listen.0.remove(uri);
        }
        listen.0.clone()
    }

    /// Installs the task running this session's listen, stopping the previous one.
    pub fn replace_listen(&self, task: Option<AbortHandle>) {
        if let Some(previous) = std::mem::replace(&mut lock(&self.listen).1, task) {
            previous.abort();
        }
    }

    /// Delivers a message on the client's GET stream (dropped when none is open).
    pub fn push(&self, message: Message) {
        if let Some(stream) = self.stream() {
            let _ = stream.try_send(message);
        }
    }

    /// Ends the session and its upstream session.
    pub fn end(&self) {
        self.replace_listen(None);
        if let Some(handle) = lock(&self.forwarder).take() {
            handle.abort();
        }
        *lock(&self.stream) = None;
        // Shared and stateless sessions outlive any one client.
        if self.owns_upstream {
            self.upstream_session.close("client session ended");
        }
    }

    /// Relays a server→client request to this client under a fresh id.
    pub fn relay_request(&self, mut request: Request) -> Message {
        let relayed = Id::from_value(&serde_json::Value::from(format!(
            "eragate-{}",
            self.next_outbound.fetch_add(1, Ordering::Relaxed)
        )))
        .unwrap_or_else(|| Id::number(0));
        lock(&self.outbound).insert(relayed.clone(), request.id.clone());
        request.id = relayed;
        Message::Request(request)
    }

    /// Asks the client `method` with `params` under a fresh id; the receiver
    /// gets the client's response.
    pub fn ask(&self, method: &str, params: Value) -> (Message, oneshot::Receiver<Response>) {
        let id = Id::from_value(&Value::from(format!(
            "eragate-{}",
            self.next_outbound.fetch_add(1, Ordering::Relaxed)
        )))
        .unwrap_or_else(|| Id::number(0));
        let (tx, rx) = oneshot::channel();
        lock(&self.asked).insert(id.clone(), tx);
        let request = Request {
            id,
            method: method.to_owned(),
            params: Some(params),
        };
        (Message::Request(request), rx)
    }

    /// Delivers a client's response to a request eragate asked; gives it back when none waits.
    pub fn answer(&self, response: Response) -> Result<(), Response> {
        let waiting = response.id.as_ref().and_then(|id| lock(&self.asked).remove(id));
        match waiting {
            Some(tx) => {
                let _ = tx.send(response);
                Ok(())
            }
            None => Err(response),
        }
    }

    /// The client's declared capabilities in 2026-07-28 form (a modern upstream's session only).
    pub fn modern_capabilities(&self) -> Option<Value> {
        self.envelope().map(|e| e.client_capabilities)
    }

    /// Takes the upstream's id for a client's response to a relayed request.
    pub fn take_relayed(&self, relayed: &Id) -> Option<Id> {
        lock(&self.outbound).remove(relayed)
    }

    /// Remembers a client request in flight.
    pub fn track(&self, client_id: Id, upstream_id: u64) {
        lock(&self.in_flight).insert(client_id, upstream_id);
    }

    /// Forgets a client request (finished, or cancelled by the client); its upstream id.
    pub fn untrack(&self, client_id: &Id) -> Option<u64> {
        lock(&self.in_flight).remove(client_id)
    }

    /// Whether a request this client sent is still in flight (not finished, not cancelled).
    pub fn is_in_flight(&self, client_id: &Id) -> bool {
        lock(&self.in_flight).contains_key(client_id)
    }

    /// Attaches the client's GET stream. The first one also starts relaying what
    /// the upstream session sends outside any request (a session bound to an
    /// upstream session of its own or a shared one; a stateless session has none).
    ///
    /// Nothing is lost by starting late: without a stream, notifications had
    /// nowhere to go and server→client requests are refused, which is what the
    /// upstream session does itself while nobody subscribes.
    pub fn attach_stream(self: &Arc<Self>) -> Result<mpsc::Receiver<Message>, AttachError> {
        let rx = {
            let mut slot = lock(&self.stream);
            if slot.as_ref().is_some_and(|s| !s.is_closed()) {
                return Err(AttachError::AlreadyOpen);
            }
            let (tx, rx) = mpsc::channel(STREAM_QUEUE);
            *slot = Some(tx);
            rx
        };
        if self.envelope.is_none() {
            let mut forwarder = lock(&self.forwarder);
            if forwarder.is_none() {
                let task = tokio::spawn(forward_unsolicited(
                    Arc::downgrade(self),
                    self.upstream_session.subscribe(),
                ));
                *forwarder = Some(task.abort_handle());
                // Subscribed first, so nothing the upstream stream brings is missed.
                self.upstream_session.open_event_stream();
            }
        }
        Ok(rx)
    }

    fn stream(&self) -> Option<mpsc::Sender<Message>> {
        lock(&self.stream).as_ref().filter(|s| !s.is_closed()).cloned()
    }
}

/// Relays what the dedicated upstream session sends outside any request to the
/// client's GET stream; without one, requests are refused and notifications dropped.
async fn forward_unsolicited(session: Weak<ClientSession>, mut unsolicited: broadcast::Receiver<Message>) {
    loop {
        let message = match unsolicited.recv().await {
            Ok(message) => message,
            Err(broadcast::error::RecvError::Lagged(skipped)) => {
                tracing::debug!(skipped, "client too slow for upstream notifications");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(session) = session.upgrade() else { return };
        let stream = session.stream();
        match (message, stream) {
            (Message::Request(request), Some(stream)) => {
                let relayed = session.relay_request(request.clone());
                if stream.try_send(relayed).is_err() {
                    refuse(&session, &request).await;
                }
            }
            (Message::Request(request), None) => refuse(&session, &request).await,
            (other, Some(stream)) => {
                let _ = stream.try_send(other);
            }
            (_, None) => {}
        }
    }
}

async fn refuse(session: &ClientSession, request: &Request) {
    let response: Response = refuse_server_request(request);
    let _ = session.upstream_session.respond(response).await;
}

/// The envelope a legacy client's requests carry toward a modern upstream.
pub fn stateless_envelope(capabilities: &Value, client_info: &Value) -> Envelope {
    Envelope {
        protocol_version: Revision::LATEST.as_str().to_owned(),
        client_capabilities: crate::protocol::capabilities::client_legacy_to_modern(capabilities),
        client_info: Some(client_info.clone()).filter(|v| !v.is_null()),
        log_level: None,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Poisoning only means a panic elsewhere mid-update; the data is still consistent for our uses.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
