//! One legacy client's session: what it negotiated, the upstream session it
//! relays to, the requests in flight and the server→client requests relayed to it,
//! and its GET stream.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::AbortHandle;

use super::live_narrowing::LiveNarrowing;
use crate::protocol::Era;
use crate::protocol::envelope::{Envelope, LogLevel};
use crate::protocol::{Id, Message, Request, Response, Revision};
use crate::router::{Backend, PartitionKey, UpstreamSession};
use crate::translate::multiplex::refuse_server_request;

/// Why a GET stream could not be attached.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AttachError {
    /// The session already has one; the spec allows no duplicate delivery.
    AlreadyOpen,
}

/// One legacy client's session.
pub(crate) struct ClientSession {
    /// The `Mcp-Session-Id` given to the client (shared with the store's key: a
    /// sealed id is a few hundred bytes).
    pub(crate) id: Arc<str>,
    /// The revision negotiated with the client.
    pub(crate) revision: Revision,
    /// The upstream this session is bound to.
    pub(crate) backend: Backend,
    /// A legacy upstream: the session serving only this client. A modern
    /// upstream: the stateless session every client shares. A federation:
    /// none (its members serve each request on sessions of their own).
    upstream_session: Option<Arc<UpstreamSession>>,
    /// For a modern upstream only: the envelope every request of this client
    /// carries (its capabilities, clientInfo and the level `logging/setLevel` chose).
    envelope: Option<Mutex<Envelope>>,
    /// Whether ending this client session ends its upstream session (a
    /// dedicated one) or leaves it to the pool (shared and stateless ones).
    pub(super) owns_upstream: bool,
    pub(super) last_seen: Mutex<Instant>,
    /// The sealed expiry (seconds since the Unix epoch), read once when stored.
    pub(super) expires: AtomicU64,
    /// The sealed principal, read once when stored: only they may use the session.
    pub(super) principal: OnceLock<String>,
    next_outbound: AtomicU64,
    /// Server→client requests relayed to the client: the id eragate gave it → the
    /// upstream's own id, and the member session that asked when it is not the
    /// session's own (a federated path). A std mutex, never held across `.await`.
    outbound: Mutex<HashMap<Id, Relayed>>,
    /// Requests eragate itself sent the client (for a modern upstream's
    /// `input_required`), awaiting the client's response.
    asked: Mutex<HashMap<Id, oneshot::Sender<Response>>>,
    /// Client request ids in flight → the upstream ids carrying them, for
    /// `notifications/cancelled`. An id may be in flight more than once (the spec
    /// forbids reusing one; load tools, retries and buggy clients do it): each such
    /// request is answered on its own, and a cancellation naming the id stops them all.
    /// Keyed by what the client chooses: std's SipHash (src/fast_hash.rs).
    in_flight: Mutex<HashMap<Id, Carriers>>,
    /// The client's open GET stream, if any.
    stream: Mutex<Option<mpsc::Sender<Message>>>,
    /// Toward a modern upstream: the resources the client subscribed to, and the
    /// listen that carries their notifications.
    listen: Mutex<(BTreeSet<String>, Option<AbortHandle>)>,
    forwarder: Mutex<Option<AbortHandle>>,
    /// The `[[policies]]` its caller is served under (as a reload leaves them):
    /// what the server sends on its own reaches the GET stream only if they show it.
    narrowing: OnceLock<LiveNarrowing>,
    /// On a federated path: the partition of the member sessions its calls are
    /// relayed on, and whether members may ask it for input (worked out once).
    member_partition: OnceLock<(PartitionKey, bool)>,
    /// On a federated path: the pooled member session (by member) its last call
    /// shared with other calls was relayed on, tried first for the next.
    member_sessions: Mutex<Vec<(usize, Weak<UpstreamSession>)>>,
    /// On a path with tool disclosure: the tools `load_tools` added to its listing
    /// (kept with the session, on this replica; at most `meta::MAX_LOADED`).
    loaded_tools: Mutex<BTreeSet<String>>,
}

/// A server→client request relayed to the client: the asking session's own id
/// for it, and that session when it is not the client session's own (a federated member's).
type Relayed = (Id, Option<Arc<UpstreamSession>>);

/// Bound of the messages queued toward one GET stream.
pub(crate) const STREAM_QUEUE: usize = 64;

/// Most resources one legacy session may be subscribed to at once
/// (`resources/subscribe` past it is refused).
pub(crate) const MAX_SUBSCRIPTIONS: usize = 256;

/// A `resources/subscribe` past [`MAX_SUBSCRIPTIONS`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TooManySubscriptions;

impl TooManySubscriptions {
    /// The JSON-RPC error the client gets.
    pub(crate) fn error(&self) -> crate::protocol::ErrorObject {
        let message = format!(
            "Too many subscriptions: a session may be subscribed to at most {MAX_SUBSCRIPTIONS} resources; \
             unsubscribe from one first"
        );
        crate::protocol::ErrorObject::new(crate::protocol::ErrorCode::INVALID_PARAMS, message)
    }
}

/// The upstream ids carrying one client request id: nearly always one, so kept
/// without an allocation.
#[derive(Debug)]
enum Carriers {
    One(u64),
    Many(Vec<u64>),
}

impl Carriers {
    fn push(&mut self, upstream_id: u64) {
        match self {
            Carriers::One(first) => *self = Carriers::Many(vec![*first, upstream_id]),
            Carriers::Many(ids) => ids.push(upstream_id),
        }
    }

    fn contains(&self, upstream_id: u64) -> bool {
        match self {
            Carriers::One(id) => *id == upstream_id,
            Carriers::Many(ids) => ids.contains(&upstream_id),
        }
    }

    /// The carriers but `upstream_id`; `None` when none is left.
    fn without(self, upstream_id: u64) -> Option<Carriers> {
        match self {
            Carriers::One(id) if id == upstream_id => None,
            Carriers::One(id) => Some(Carriers::One(id)),
            Carriers::Many(mut ids) => {
                ids.retain(|id| *id != upstream_id);
                (!ids.is_empty()).then_some(Carriers::Many(ids))
            }
        }
    }

    fn into_vec(self) -> Vec<u64> {
        match self {
            Carriers::One(id) => vec![id],
            Carriers::Many(ids) => ids,
        }
    }
}

impl ClientSession {
    /// A session for a freshly initialized upstream session; its unsolicited
    /// traffic flows to the client once it opens its stream ([`ClientSession::attach_stream`]).
    pub(crate) fn open(
        id: String,
        revision: Revision,
        backend: Backend,
        upstream_session: Arc<UpstreamSession>,
    ) -> Arc<ClientSession> {
        ClientSession::open_bound(id, revision, backend, upstream_session, true)
    }

    /// A session on a pooled upstream session it shares with other legacy
    /// clients (`pool.legacy_sessions = "shared"`); ending it leaves that session open.
    pub(crate) fn open_shared(
        id: String,
        revision: Revision,
        backend: Backend,
        pooled: Arc<UpstreamSession>,
    ) -> Arc<ClientSession> {
        ClientSession::open_bound(id, revision, backend, pooled, false)
    }

    fn open_bound(
        id: String,
        revision: Revision,
        backend: Backend,
        upstream_session: Arc<UpstreamSession>,
        owns_upstream: bool,
    ) -> Arc<ClientSession> {
        // The forwarder of unsolicited traffic starts with the client's GET stream
        // (`attach_stream`): until then there is nowhere to deliver it, and an idle
        // session pays for no task and no broadcast buffer.
        ClientSession::build(id, revision, backend, Some(upstream_session), None, owns_upstream)
    }

    /// A session in front of a modern upstream: no upstream session of its own,
    /// its state is the envelope its requests carry.
    pub(crate) fn open_stateless(
        id: String,
        revision: Revision,
        backend: Backend,
        shared: Arc<UpstreamSession>,
        envelope: Envelope,
    ) -> Arc<ClientSession> {
        ClientSession::build(id, revision, backend, Some(shared), Some(Mutex::new(envelope)), false)
    }

    /// A session on a federated path: no upstream session; its GET stream
    /// carries the federation's list changes.
    pub(crate) fn open_federated(
        id: String,
        revision: Revision,
        backend: Backend,
        envelope: Envelope,
    ) -> Arc<ClientSession> {
        ClientSession::build(id, revision, backend, None, Some(Mutex::new(envelope)), false)
    }

    /// The upstream session it relays to (none on a federated path).
    pub(crate) fn upstream(&self) -> Option<&Arc<UpstreamSession>> {
        self.upstream_session.as_ref()
    }

    /// Whether its upstream session ended (a federated session has none to end).
    pub(crate) fn upstream_closed(&self) -> bool {
        self.upstream_session.as_ref().is_some_and(|u| u.is_closed())
    }

    fn build(
        id: String,
        revision: Revision,
        backend: Backend,
        upstream_session: Option<Arc<UpstreamSession>>,
        envelope: Option<Mutex<Envelope>>,
        owns_upstream: bool,
    ) -> Arc<ClientSession> {
        Arc::new(ClientSession {
            id: id.into(),
            revision,
            backend,
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
            narrowing: OnceLock::new(),
            member_partition: OnceLock::new(),
            member_sessions: Mutex::new(Vec::new()),
            loaded_tools: Mutex::new(BTreeSet::new()),
        })
    }

    /// The era of the backend this session relays to: modern when eragate
    /// keeps the envelope its requests carry.
    pub(crate) fn backend_era(&self) -> Era {
        match self.envelope {
            Some(_) => Era::Modern,
            None => Era::Legacy,
        }
    }

    /// The envelope for this client's next request, when its upstream is modern.
    pub(crate) fn envelope(&self) -> Option<Envelope> {
        self.envelope.as_ref().map(|e| lock(e).clone())
    }

    /// Records `logging/setLevel` for a modern upstream; `false` when the
    /// upstream is legacy (the level then belongs to the upstream session).
    pub(crate) fn set_log_level(&self, level: LogLevel) -> bool {
        match &self.envelope {
            Some(envelope) => {
                lock(envelope).log_level = Some(level);
                true
            }
            None => false,
        }
    }

    /// Adds or removes a subscribed URI; returns the new set, or
    /// `TooManySubscriptions` (the set unchanged) past `MAX_SUBSCRIPTIONS`.
    pub(crate) fn change_subscriptions(
        &self,
        uri: &str,
        subscribe: bool,
    ) -> Result<BTreeSet<String>, TooManySubscriptions> {
        let mut listen = lock(&self.listen);
        if subscribe {
            if listen.0.len() >= MAX_SUBSCRIPTIONS && !listen.0.contains(uri) {
                return Err(TooManySubscriptions);
            }
            listen.0.insert(uri.to_owned());
        } else {
            listen.0.remove(uri);
        }
        Ok(listen.0.clone())
    }

    /// Installs the task running this session's listen, stopping the previous one.
    pub(crate) fn replace_listen(&self, task: Option<AbortHandle>) {
        if let Some(previous) = std::mem::replace(&mut lock(&self.listen).1, task) {
            previous.abort();
        }
    }

    /// Installs the task running this session's listen for `uris`, stopping
    /// the previous one, if `uris` is still the session's set; else (a later
    /// change opens its own) stops `task` and returns `false`.
    pub(crate) fn replace_listen_for(&self, uris: &BTreeSet<String>, task: Option<AbortHandle>) -> bool {
        let mut listen = lock(&self.listen);
        if listen.0 != *uris {
            drop(listen);
            if let Some(task) = task {
                task.abort();
            }
            return false;
        }
        if let Some(previous) = std::mem::replace(&mut listen.1, task) {
            previous.abort();
        }
        true
    }

    /// Narrows what reaches its GET stream to what `narrowing` shows (set once,
    /// when the session is initialized).
    pub(crate) fn narrow(&self, narrowing: LiveNarrowing) {
        let _ = self.narrowing.set(narrowing);
    }

    /// The partition of the member sessions a federated session's calls are
    /// relayed on, and whether members may ask it for input: `build` the first time.
    pub(crate) fn member_partition(&self, build: impl FnOnce() -> (PartitionKey, bool)) -> &(PartitionKey, bool) {
        self.member_partition.get_or_init(build)
    }

    /// The shared member session of `member` its last relayed call ran on, while it is open.
    pub(crate) fn member_session(&self, member: usize) -> Option<Arc<UpstreamSession>> {
        let sessions = lock(&self.member_sessions);
        let (_, session) = sessions.iter().find(|(m, _)| *m == member)?;
        session.upgrade().filter(|s| !s.is_closed())
    }

    /// Remembers the shared member session of `member` a call was relayed on.
    pub(crate) fn remember_member_session(&self, member: usize, session: &Arc<UpstreamSession>) {
        let mut sessions = lock(&self.member_sessions);
        sessions.retain(|(m, _)| *m != member);
        sessions.push((member, Arc::downgrade(session)));
    }

    /// Whether its `[[policies]]` let `message` reach the client.
    fn shows(&self, message: &Message) -> bool {
        self.narrowing.get().is_none_or(|narrowing| narrowing.shows(message))
    }

    /// The tools `load_tools` added to this session's listing.
    pub(crate) fn loaded_tools(&self) -> BTreeSet<String> {
        lock(&self.loaded_tools).clone()
    }

    /// Adds `names` to the session's loaded tools; `false` (and nothing added)
    /// when they would be more than `bound`.
    pub(crate) fn load_tools(&self, names: &[String], bound: usize) -> bool {
        let mut loaded = lock(&self.loaded_tools);
        let new = names.iter().filter(|n| !loaded.contains(*n)).count();
        if loaded.len() + new > bound {
            return false;
        }
        loaded.extend(names.iter().cloned());
        true
    }

    /// Delivers a message on the client's GET stream (dropped when none is open,
    /// or when the client's policies hide what it names).
    pub(crate) fn push(&self, message: Message) {
        if let Some(stream) = self.stream().filter(|_| self.shows(&message)) {
            let _ = stream.try_send(message);
        }
    }

    /// Ends the session and its upstream session.
    pub(crate) fn end(&self) {
        self.replace_listen(None);
        if let Some(handle) = lock(&self.forwarder).take() {
            handle.abort();
        }
        *lock(&self.stream) = None;
        // Shared and stateless sessions outlive any one client.
        if self.owns_upstream
            && let Some(upstream) = &self.upstream_session
        {
            upstream.close("client session ended");
        }
    }

    /// Relays a server→client request to this client under a fresh id.
    pub(crate) fn relay_request(&self, request: Request) -> Message {
        self.relay_request_for(request, None)
    }

    /// Relays a server→client request of `member` (the session's own upstream
    /// session when `None`) to this client under a fresh id: ids of different
    /// members never collide, and the client's response finds its way back.
    pub(crate) fn relay_request_for(&self, mut request: Request, member: Option<Arc<UpstreamSession>>) -> Message {
        let relayed = Id::from_value(&serde_json::Value::from(format!(
            "eragate-{}",
            self.next_outbound.fetch_add(1, Ordering::Relaxed)
        )))
        .unwrap_or_else(|| Id::number(0));
        lock(&self.outbound).insert(relayed.clone(), (request.id.clone(), member));
        request.id = relayed;
        Message::Request(request)
    }

    /// Asks the client `method` with `params` under a fresh id; the receiver
    /// gets the client's response.
    pub(crate) fn ask(&self, method: &str, params: Value) -> (Message, oneshot::Receiver<Response>) {
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
            params: Some(params.into()),
        };
        (Message::Request(request), rx)
    }

    /// Delivers a client's response to a request eragate asked; gives it back when none waits.
    pub(crate) fn answer(&self, response: Response) -> Result<(), Response> {
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
    pub(crate) fn modern_capabilities(&self) -> Option<Value> {
        self.envelope().map(|e| e.client_capabilities)
    }

    /// Takes the upstream's id for a client's response to a relayed request, and
    /// the member session that asked (`None`: the session's own).
    pub(crate) fn take_relayed(&self, relayed: &Id) -> Option<Relayed> {
        lock(&self.outbound).remove(relayed)
    }

    /// Remembers a client request in flight, carried upstream as `upstream_id`.
    pub(crate) fn track(&self, client_id: Id, upstream_id: u64) {
        match lock(&self.in_flight).entry(client_id) {
            Entry::Occupied(mut carriers) => carriers.get_mut().push(upstream_id),
            Entry::Vacant(vacant) => {
                vacant.insert(Carriers::One(upstream_id));
            }
        }
    }

    /// Forgets one finished request (one lookup when it was the id's only carrier);
    /// false when it was no longer in flight (the client cancelled it).
    pub(crate) fn untrack(&self, client_id: &Id, upstream_id: u64) -> bool {
        let mut in_flight = lock(&self.in_flight);
        let Some((client_id, carriers)) = in_flight.remove_entry(client_id) else {
            return false;
        };
        let was_in_flight = carriers.contains(upstream_id);
        if let Some(left) = carriers.without(upstream_id) {
            in_flight.insert(client_id, left);
        }
        was_in_flight
    }

    /// Forgets every request in flight under `client_id` (the client cancelled
    /// that id); the upstream ids that carried them.
    pub(crate) fn untrack_all(&self, client_id: &Id) -> Vec<u64> {
        lock(&self.in_flight)
            .remove(client_id)
            .map_or_else(Vec::new, Carriers::into_vec)
    }

    /// Attaches the client's GET stream. The first one also starts relaying what
    /// the upstream session sends outside any request (a session bound to an
    /// upstream session of its own or a shared one; a stateless session has none).
    ///
    /// Nothing is lost by starting late: without a stream, notifications had
    /// nowhere to go and server→client requests are refused, which is what the
    /// upstream session does itself while nobody subscribes.
    pub(crate) fn attach_stream(self: &Arc<Self>) -> Result<mpsc::Receiver<Message>, AttachError> {
        let rx = {
            let mut slot = lock(&self.stream);
            if slot.as_ref().is_some_and(|s| !s.is_closed()) {
                return Err(AttachError::AlreadyOpen);
            }
            let (tx, rx) = mpsc::channel(STREAM_QUEUE);
            *slot = Some(tx);
            rx
        };
        let mut forwarder = lock(&self.forwarder);
        match (&self.upstream_session, self.backend.federation()) {
            (_, Some(federation)) if forwarder.is_none() => {
                let task = tokio::spawn(forward_list_changes(Arc::downgrade(self), federation.list_changes()));
                *forwarder = Some(task.abort_handle());
            }
            (Some(upstream), None) if self.envelope.is_none() && forwarder.is_none() => {
                let task = tokio::spawn(forward_unsolicited(Arc::downgrade(self), upstream.subscribe()));
                *forwarder = Some(task.abort_handle());
                // Subscribed first, so nothing the upstream stream brings is missed.
                upstream.open_event_stream();
            }
            _ => {}
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
            (other, Some(stream)) if session.shows(&other) => {
                let _ = stream.try_send(other);
            }
            (_, _) => {}
        }
    }
}

async fn refuse(session: &ClientSession, request: &Request) {
    let response: Response = refuse_server_request(request);
    if let Some(upstream) = &session.upstream_session {
        let _ = upstream.respond(response).await;
    }
}

/// Tells a federated session's GET stream of the federation's list changes
/// (`notifications/tools/list_changed`…), for as long as the session lives.
async fn forward_list_changes(session: Weak<ClientSession>, mut changes: broadcast::Receiver<&'static str>) {
    const EVERY_LIST: [&str; 3] = [
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
    ];
    loop {
        let methods: Vec<&str> = match changes.recv().await {
            Ok(method) => vec![method],
            // Missed some: a list_changed of each kind says as much.
            Err(broadcast::error::RecvError::Lagged(_)) => EVERY_LIST.to_vec(),
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(session) = session.upgrade() else { return };
        for method in methods {
            session.push(Message::Notification(crate::protocol::Notification {
                method: (*method).into(),
                params: None,
            }));
        }
    }
}

/// The envelope a legacy client's requests carry toward a modern upstream.
pub(crate) fn stateless_envelope(capabilities: &Value, client_info: &Value) -> Envelope {
    Envelope {
        protocol_version: Revision::LATEST.as_str().to_owned(),
        client_capabilities: crate::protocol::capabilities::client_legacy_to_modern(capabilities),
        client_info: Some(client_info)
            .filter(|v| !v.is_null())
            .map(crate::protocol::envelope::ClientInfo::of),
        log_level: None,
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Poisoning only means a panic elsewhere mid-update; the data is still consistent for our uses.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{StdioConfig, UpstreamConfig};
    use crate::router::Router;

    #[tokio::test]
    async fn a_sessions_subscriptions_are_bounded() {
        let stdio = StdioConfig::from_command(vec!["never-started".to_owned()]);
        let router = Router::new(
            &[UpstreamConfig::with_transport("a", Some(stdio), None, None)],
            Vec::new(),
        );
        let Some((_, backend)) = router.routes().next() else {
            panic!("one route");
        };
        let envelope = stateless_envelope(&Value::Null, &Value::Null);
        let session = ClientSession::open_federated("s".into(), Revision::LATEST_LEGACY, backend, envelope);
        for n in 0..MAX_SUBSCRIPTIONS {
            let set = session.change_subscriptions(&format!("a+test://{n}"), true);
            assert_eq!(set.map(|s| s.len()), Ok(n + 1));
        }
        let past = session.change_subscriptions("a+test://one-more", true);
        assert_eq!(past, Err(TooManySubscriptions));
        assert_eq!(
            session.change_subscriptions("a+test://0", true).map(|s| s.len()),
            Ok(MAX_SUBSCRIPTIONS),
            "one already held is no more"
        );
        let fewer = session.change_subscriptions("a+test://0", false);
        assert_eq!(fewer.map(|s| s.len()), Ok(MAX_SUBSCRIPTIONS - 1));
        let again = session.change_subscriptions("a+test://one-more", true);
        assert_eq!(
            again.map(|s| s.len()),
            Ok(MAX_SUBSCRIPTIONS),
            "room again after an unsubscribe"
        );
    }
}
