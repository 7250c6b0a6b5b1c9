//! One live, initialized upstream session: request id rewriting, the pending
//! table, and routing of everything the upstream sends back.
//!
//! Every request sent upstream gets a fresh numeric id from this session's
//! counter (and its `progressToken`, if any, becomes that same number), so
//! concurrent requests from many clients never collide. The response goes to
//! its caller through a slot that cannot lose it; notifications and
//! server→client requests tied to a request queue beside it, bounded (the queue
//! is allocated only when the first of them arrives: most calls have none).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde_json::{Map, Value, json};
use tokio::sync::{Notify, broadcast};

use super::UpstreamError;
use super::member::MemberHealth;
use super::transport::Link;
use crate::protocol::envelope::SUBSCRIPTION_ID;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{ErrorCode, ErrorObject, Id, Message, Notification, Request, Response, Revision};

/// What a caller receives while its request is in flight, besides the response.
#[derive(Debug)]
pub enum CallEvent {
    /// A notification tied to the request (progress with the caller's own token, log messages).
    Notification(Notification),
    /// A server→client request made while serving this request.
    ServerRequest(Request),
}

/// Who answers server→client requests that are tied to no request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnsolicitedRequests {
    /// A pooled session has no single client to ask: eragate answers itself.
    AnswerLocally,
    /// A dedicated session forwards them to its client via [`UpstreamSession::subscribe`].
    Forward,
}

/// Bound of the per-request event queue; progress beyond it is dropped, never the response.
/// The queue grows on demand up to this bound (a call without events allocates none).
const CALL_EVENT_QUEUE: usize = 64;
/// Bound of the unsolicited broadcast; slow listeners lose the oldest messages.
/// tokio allocates every slot up front, and a legacy client session keeps one
/// such channel for its whole life, so the bound is kept small (idle memory per session).
const UNSOLICITED_QUEUE: usize = 32;

/// One initialized session with an upstream.
pub struct UpstreamSession {
    upstream: Arc<str>,
    link: Link,
    next_id: AtomicU64,
    /// A std mutex: held only to insert or remove an entry, never across `.await`.
    pending: Mutex<HashMap<u64, Pending>>,
    closed: AtomicBool,
    initialize_result: OnceLock<Arc<Value>>,
    revision: OnceLock<Revision>,
    /// Created on the first `subscribe`: most pooled sessions never have a listener.
    unsolicited: OnceLock<broadcast::Sender<Message>>,
    unsolicited_requests: UnsolicitedRequests,
    /// The pool member's health, fed by how this session's requests end.
    health: Option<Arc<MemberHealth>>,
    /// Requests sent, for replacement after `restart.max_requests`.
    served: AtomicU64,
    born: Instant,
    /// Takes no new requests; closed once idle (graceful replacement).
    draining: AtomicBool,
    /// eragate itself is closing the session: its end is no fault of the member.
    closing: AtomicBool,
    /// The transport's stream for messages tied to no request was asked for.
    event_stream: AtomicBool,
    /// `resources/subscribe` held on this session, by URI, with how many listens need each.
    resource_subscriptions: Mutex<HashMap<String, usize>>,
}

struct Pending {
    slot: Arc<CallSlot>,
    original_id: Id,
    original_progress_token: Option<Value>,
}

impl Pending {
    /// Settles the call (a response or the reason there is none).
    fn respond(self, result: Result<Response, UpstreamError>) {
        self.slot.settle(result);
    }

    /// Queues an event for the caller; gives it back when the caller is gone or
    /// the queue is full.
    fn send_event(&self, event: CallEvent) -> Result<(), CallEvent> {
        self.slot.push_event(event)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Dropped without an answer (the session itself went away): its caller must not wait forever.
        self.slot.abandon();
    }
}

/// What a call in flight shares with the session that routes its answer: one
/// allocation per call, in place of a oneshot and an event channel.
struct CallSlot {
    state: Mutex<SlotState>,
    /// Wakes the caller; a notification without a waiter is kept as a permit, so none is lost.
    wake: Notify,
}

#[derive(Default)]
struct SlotState {
    /// Events before the response, oldest first, at most [`CALL_EVENT_QUEUE`].
    events: VecDeque<CallEvent>,
    response: Option<Result<Response, UpstreamError>>,
    /// Nothing more will be settled: the response came, or the session let go of the call.
    settled: bool,
    /// The caller dropped its [`Call`]: events have nobody to go to.
    detached: bool,
}

/// What the caller finds in its slot.
enum Taken {
    Event(CallEvent),
    Done(Result<Response, UpstreamError>),
    Abandoned,
}

impl CallSlot {
    fn new() -> Arc<CallSlot> {
        Arc::new(CallSlot {
            state: Mutex::new(SlotState::default()),
            wake: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn settle(&self, result: Result<Response, UpstreamError>) {
        {
            let mut state = self.lock();
            if state.settled {
                return;
            }
            state.settled = true;
            state.response = Some(result);
        }
        self.wake.notify_one();
    }

    fn abandon(&self) {
        {
            let mut state = self.lock();
            if state.settled {
                return;
            }
            state.settled = true;
        }
        self.wake.notify_one();
    }

    fn push_event(&self, event: CallEvent) -> Result<(), CallEvent> {
        {
            let mut state = self.lock();
            if state.detached || state.events.len() >= CALL_EVENT_QUEUE {
                return Err(event);
            }
            state.events.push_back(event);
        }
        self.wake.notify_one();
        Ok(())
    }

    /// Events first (in order), then the response.
    fn take(&self, skip_events: bool) -> Option<Taken> {
        let mut state = self.lock();
        if skip_events {
            state.events = VecDeque::new();
        } else if let Some(event) = state.events.pop_front() {
            return Some(Taken::Event(event));
        }
        if let Some(result) = state.response.take() {
            return Some(Taken::Done(result));
        }
        state.settled.then_some(Taken::Abandoned)
    }

    fn detach(&self) {
        let mut state = self.lock();
        state.detached = true;
        state.events = VecDeque::new();
    }
}

/// A request in flight. Await [`Call::response`]; drain [`Call::next_event`]
/// meanwhile. Dropping an unfinished call cancels it upstream when the call
/// was made with [`OnDrop::CancelUpstream`].
#[must_use = "a call is cancelled or orphaned when dropped"]
pub struct Call {
    session: Arc<UpstreamSession>,
    upstream_id: u64,
    slot: Arc<CallSlot>,
    /// The response (or its failure) was handed out.
    finished: bool,
    on_drop: OnDrop,
    /// Why the call is being given up, for the upstream's `notifications/cancelled`.
    cancel_reason: Option<String>,
}

/// What dropping an unfinished call means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDrop {
    /// 2026-07-28 semantics: a closed stream is cancellation.
    CancelUpstream,
    /// Legacy semantics: a disconnect is not cancellation; let the request finish.
    Detach,
}

impl UpstreamSession {
    /// A session over `link`, not yet initialized.
    pub(crate) fn new(
        upstream: Arc<str>,
        link: Link,
        unsolicited_requests: UnsolicitedRequests,
        health: Option<Arc<MemberHealth>>,
    ) -> Arc<UpstreamSession> {
        // An HTTP upstream session may be shared by replicas (sealed client
        // sessions); a random start keeps their ids apart. Ids stay below 2^53.
        let first_id = match &link {
            Link::Http(_) => 1 + (rand::random::<u64>() >> 12),
            Link::Stdio(_) | Link::Sse(_) => 1,
        };
        Arc::new(UpstreamSession {
            upstream,
            link,
            next_id: AtomicU64::new(first_id),
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            initialize_result: OnceLock::new(),
            revision: OnceLock::new(),
            unsolicited: OnceLock::new(),
            unsolicited_requests,
            health,
            served: AtomicU64::new(0),
            born: Instant::now(),
            draining: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            event_stream: AtomicBool::new(false),
            resource_subscriptions: Mutex::new(HashMap::new()),
        })
    }

    /// Runs the handshake: `initialize`, then `notifications/initialized`.
    ///
    /// `known` is an `InitializeResult` already held (the upstream's previous
    /// one): when the answer equals it, the session shares it instead of keeping
    /// a copy of its own (a parsed result is a few KiB, a session lives long).
    pub async fn initialize(
        self: &Arc<Self>,
        params: Value,
        known: Option<Arc<Value>>,
    ) -> Result<Arc<Value>, UpstreamError> {
        let call = self
            .call("initialize", Some(params), Id::number(0), OnDrop::Detach)
            .await?;
        let response = call.response().await?;
        let result = match response.outcome {
            Outcome::Result(result) => result,
            Outcome::Error(error) => {
                return Err(self.protocol_error(format!("initialize failed: {} ({})", error.message, error.code.0)));
            }
        };
        let revision = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .and_then(Revision::parse)
            .ok_or_else(|| {
                self.protocol_error(format!(
                    "initialize answered an unknown protocolVersion: {}",
                    result.get("protocolVersion").unwrap_or(&Value::Null)
                ))
            })?;
        let _ = self.revision.set(revision);
        self.link.on_initialized(revision);
        let result = match known {
            Some(known) if *known == result => known,
            _ => Arc::new(result),
        };
        let _ = self.initialize_result.set(result.clone());
        self.notify("notifications/initialized", None).await?;
        Ok(result)
    }

    /// Adopts a session another replica initialized (an HTTP upstream session id
    /// carried in a sealed client session): no handshake, the revision as agreed then.
    pub fn resume(self: &Arc<Self>, revision: Revision) {
        let _ = self.revision.set(revision);
        self.link.on_initialized(revision);
    }

    /// Opens the transport's stream for messages tied to no request (an HTTP
    /// upstream's GET stream), once. Pooled sessions open it when initialized;
    /// a dedicated session when its client opens its own, so that an idle
    /// legacy client holds no upstream connection.
    pub fn open_event_stream(self: &Arc<Self>) {
        if !self.event_stream.swap(true, Ordering::AcqRel) {
            self.link.open_event_stream(self);
        }
    }

    /// The transport's own session id (an HTTP upstream's `Mcp-Session-Id`), if any.
    pub fn transport_session_id(&self) -> Option<String> {
        match &self.link {
            Link::Http(link) => link.session_id(),
            Link::Stdio(_) | Link::Sse(_) => None,
        }
    }

    /// Starts a session with a 2026-07-28 upstream: there is no handshake; every
    /// request carries its own envelope.
    pub fn start_modern(self: &Arc<Self>) {
        let _ = self.revision.set(Revision::V2026_07_28);
        self.link.on_initialized(Revision::V2026_07_28);
    }

    /// The member endpoint (an HTTP upstream's URL) this session lives on.
    pub fn transport_endpoint(&self) -> Option<String> {
        match &self.link {
            Link::Http(link) => Some(link.url().to_string()),
            Link::Stdio(_) | Link::Sse(_) => None,
        }
    }

    /// Sends a request with a fresh upstream id.
    pub async fn call(
        self: &Arc<Self>,
        method: &str,
        params: Option<Value>,
        original_id: Id,
        on_drop: OnDrop,
    ) -> Result<Call, UpstreamError> {
        self.call_with_headers(method, params, original_id, on_drop, &[]).await
    }

    /// Sends a request with a fresh upstream id and extra transport headers
    /// (`Mcp-Param-*` forwarded from a modern client).
    pub async fn call_with_headers(
        self: &Arc<Self>,
        method: &str,
        mut params: Option<Value>,
        original_id: Id,
        on_drop: OnDrop,
        extra_headers: &[(String, String)],
    ) -> Result<Call, UpstreamError> {
        if self.is_closed() {
            return Err(self.closed_error("session already closed"));
        }
        let upstream_id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.served.fetch_add(1, Ordering::Relaxed);
        let original_progress_token = rewrite_progress_token(&mut params, upstream_id);
        let slot = CallSlot::new();
        let pending = Pending {
            slot: slot.clone(),
            original_id,
            original_progress_token,
        };
        self.lock_pending().insert(upstream_id, pending);
        let message = Message::Request(Request {
            id: Id::number(upstream_id),
            method: method.to_owned(),
            params,
        });
        let call = Call {
            session: self.clone(),
            upstream_id,
            slot,
            finished: false,
            on_drop,
            cancel_reason: None,
        };
        self.link
            .send_request(self, upstream_id, message, extra_headers)
            .await?;
        Ok(call)
    }

    /// Sends a notification.
    pub async fn notify(self: &Arc<Self>, method: &str, params: Option<Value>) -> Result<(), UpstreamError> {
        let message = Message::Notification(Notification {
            method: method.to_owned(),
            params,
        });
        self.link.send_other(self, message).await
    }

    /// Cancels a request in flight by its upstream id: it is failed locally, the
    /// transport stops waiting, and the upstream gets `notifications/cancelled`
    /// (except a 2026-07-28 HTTP upstream, for which the closed stream says it).
    pub fn cancel_request(self: &Arc<Self>, upstream_id: u64, reason: &str) {
        if !self.is_pending(upstream_id) {
            return;
        }
        self.fail(upstream_id, self.closed_error("cancelled"));
        if self.link.cancel_request(upstream_id) {
            return;
        }
        let session = self.clone();
        let params = json!({"requestId": upstream_id, "reason": reason});
        tokio::spawn(async move {
            let _ = session.notify("notifications/cancelled", Some(params)).await;
        });
    }

    /// Answers a server→client request.
    pub async fn respond(self: &Arc<Self>, response: Response) -> Result<(), UpstreamError> {
        self.link.send_other(self, Message::Response(response)).await
    }

    /// Receives messages tied to no request (list changes, log messages, and,
    /// for dedicated sessions, server→client requests).
    pub fn subscribe(&self) -> broadcast::Receiver<Message> {
        self.unsolicited
            .get_or_init(|| broadcast::channel(UNSOLICITED_QUEUE).0)
            .subscribe()
    }

    /// The upstream's `InitializeResult`, once the handshake is done.
    pub fn initialize_result(&self) -> Option<&Arc<Value>> {
        self.initialize_result.get()
    }

    /// The revision the upstream agreed to.
    pub fn revision(&self) -> Option<Revision> {
        self.revision.get().copied()
    }

    /// `serverInfo` from the handshake, for decorating modern results.
    pub fn server_info(&self) -> Value {
        self.initialize_result
            .get()
            .and_then(|r| r.get("serverInfo").cloned())
            .unwrap_or_else(|| json!({"name": &*self.upstream, "version": "unknown"}))
    }

    /// Requests awaiting their response.
    pub fn in_flight(&self) -> usize {
        self.lock_pending().len()
    }

    /// Whether the session can no longer carry requests.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The upstream's configured name.
    pub fn upstream_name(&self) -> &str {
        &self.upstream
    }

    /// Ends the session: fails what is pending and releases the transport
    /// (a stdio child is stopped; an HTTP session is deleted).
    pub fn close(self: &Arc<Self>, reason: &str) {
        self.closing.store(true, Ordering::Release);
        self.mark_closed(reason);
        self.link.shutdown(self);
    }

    /// Counts one more listen needing `uri`; `true` when it is the first (subscribe now).
    pub fn hold_subscription(&self, uri: &str) -> bool {
        let mut held = self.resource_subscriptions.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(uri.to_owned()).or_insert(0);
        *count += 1;
        *count == 1
    }

    /// Counts one listen less needing `uri`; `true` when it was the last (unsubscribe now).
    pub fn release_subscription(&self, uri: &str) -> bool {
        let mut held = self.resource_subscriptions.lock().unwrap_or_else(|e| e.into_inner());
        match held.get_mut(uri) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => {
                held.remove(uri);
                true
            }
            None => false,
        }
    }

    /// Stops taking requests; the pool closes the session once it is idle.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// Whether the session is being replaced.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Requests sent on this session so far.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// How long ago the session was opened.
    pub fn age(&self) -> std::time::Duration {
        self.born.elapsed()
    }

    /// Marks the session dead and fails every pending request with `reason`.
    pub(crate) fn mark_closed(&self, reason: &str) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::debug!(upstream = %self.upstream, reason, "upstream session closed");
        if !self.closing.load(Ordering::Acquire)
            && let Some(health) = &self.health
        {
            health.record_failure(reason);
        }
        let drained: Vec<Pending> = self.lock_pending().drain().map(|(_, p)| p).collect();
        for pending in drained {
            pending.respond(Err(self.closed_error(reason)));
        }
    }

    /// Fails one pending request (a transport-level failure of that request only).
    pub(crate) fn fail(&self, upstream_id: u64, error: UpstreamError) {
        if let Some(health) = &self.health
            && error.is_member_fault()
        {
            health.record_failure(&error.to_string());
        }
        if let Some(pending) = self.lock_pending().remove(&upstream_id) {
            pending.respond(Err(error));
        }
    }

    /// Whether a request is still awaiting its response.
    pub(crate) fn is_pending(&self, upstream_id: u64) -> bool {
        self.lock_pending().contains_key(&upstream_id)
    }

    /// Routes one message from the upstream. `related` names the request whose
    /// response stream carried it (HTTP); stdio has no such hint.
    pub(crate) fn handle_inbound(self: &Arc<Self>, message: Message, related: Option<u64>) {
        match message {
            Message::Response(response) => self.handle_response(response),
            Message::Notification(notification) => self.handle_notification(notification, related),
            Message::Request(request) => self.handle_server_request(request, related),
        }
    }

    fn handle_response(&self, mut response: Response) {
        let Some(upstream_id) = response.id.as_ref().and_then(Id::as_u64) else {
            tracing::warn!(upstream = %self.upstream, "response with an id eragate never sent; dropped");
            return;
        };
        let Some(mut pending) = self.lock_pending().remove(&upstream_id) else {
            tracing::debug!(upstream = %self.upstream, upstream_id, "response for a finished or cancelled request; dropped");
            return;
        };
        response.id = Some(std::mem::replace(&mut pending.original_id, Id::number(0)));
        if let Some(health) = &self.health {
            health.record_success();
        }
        pending.respond(Ok(response));
    }

    fn handle_notification(&self, mut notification: Notification, related: Option<u64>) {
        if notification.method == "notifications/progress" {
            let token = notification
                .params
                .as_ref()
                .and_then(|p| p.get("progressToken"))
                .and_then(Value::as_u64);
            let pending = self.lock_pending();
            let Some(entry) = token.and_then(|t| pending.get(&t)) else {
                return; // progress for nothing in flight: nobody asked
            };
            if let (Some(original), Some(params)) = (
                &entry.original_progress_token,
                notification.params.as_mut().and_then(Value::as_object_mut),
            ) {
                params.insert("progressToken".into(), original.clone());
            }
            let _ = entry.send_event(CallEvent::Notification(notification));
            return;
        }
        if let Some(listen) = subscription_of(&notification) {
            // A 2026-07-28 upstream's listen stream: its list changes and resource updates belong
            // to that listen (stdio gives no other hint), tagged with the id its caller gave.
            let pending = self.lock_pending();
            if let Some(entry) = pending.get(&listen) {
                retag_subscription(&mut notification, entry.original_id.to_value());
                let _ = entry.send_event(CallEvent::Notification(notification));
                return;
            }
        }
        if is_session_wide(&notification.method) {
            // About a server→client request the upstream gave up on, or about the
            // server's lists: never about the request that happens to be in flight.
            self.broadcast(Message::Notification(notification));
            return;
        }
        let target = self.related_or_sole(related);
        let pending = self.lock_pending();
        match target.and_then(|id| pending.get(&id)) {
            Some(entry) => {
                let _ = entry.send_event(CallEvent::Notification(notification));
            }
            None => {
                drop(pending);
                self.broadcast(Message::Notification(notification));
            }
        }
    }

    fn handle_server_request(self: &Arc<Self>, request: Request, related: Option<u64>) {
        if request.method == "ping" {
            self.answer_locally(Response::result(request.id, json!({})));
            return;
        }
        let target = self.related_or_sole(related);
        let undelivered = {
            let pending = self.lock_pending();
            match target.and_then(|id| pending.get(&id)) {
                Some(entry) => match entry.send_event(CallEvent::ServerRequest(request)) {
                    Ok(()) => None,
                    Err(CallEvent::ServerRequest(r)) => Some(r),
                    Err(CallEvent::Notification(_)) => None,
                },
                None => Some(request),
            }
        };
        let Some(request) = undelivered else { return };
        let listened = self.unsolicited.get().is_some_and(|tx| tx.receiver_count() > 0);
        if self.unsolicited_requests == UnsolicitedRequests::Forward && listened {
            self.broadcast(Message::Request(request));
            return;
        }
        self.answer_locally(refuse_server_request(&request));
    }

    /// Sends to whoever subscribed; nothing when nobody ever did.
    fn broadcast(&self, message: Message) {
        if let Some(tx) = self.unsolicited.get() {
            let _ = tx.send(message);
        }
    }

    fn answer_locally(self: &Arc<Self>, response: Response) {
        let session = self.clone();
        tokio::spawn(async move {
            if let Err(error) = session.respond(response).await {
                tracing::debug!(error = %error, "could not answer a server→client request");
            }
        });
    }

    /// On stdio nothing says which request a notification belongs to; when only
    /// one request is in flight it can only be that one.
    fn related_or_sole(&self, related: Option<u64>) -> Option<u64> {
        related.or_else(|| {
            let pending = self.lock_pending();
            if pending.len() == 1 {
                pending.keys().next().copied()
            } else {
                None
            }
        })
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Pending>> {
        // A poisoned lock only means another thread panicked mid-insert; the map is still usable.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn closed_error(&self, reason: &str) -> UpstreamError {
        UpstreamError::Closed {
            upstream: self.upstream.to_string(),
            reason: reason.to_owned(),
        }
    }

    pub(crate) fn protocol_error(&self, reason: String) -> UpstreamError {
        UpstreamError::Protocol {
            upstream: self.upstream.to_string(),
            reason,
        }
    }
}

fn is_session_wide(method: &str) -> bool {
    method == "notifications/cancelled"
        || method == "notifications/resources/updated"
        || method.ends_with("/list_changed")
}

/// The answer eragate gives for a server→client request no client can take:
/// `decline` for elicitation (a valid user choice), an error for the rest.
pub fn refuse_server_request(request: &Request) -> Response {
    if request.method == "elicitation/create" {
        return Response::result(request.id.clone(), json!({"action": "decline"}));
    }
    Response::error(
        Some(request.id.clone()),
        ErrorObject::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("{} cannot be relayed to this client", request.method),
        ),
    )
}

/// The upstream id of the listen a notification is tagged with (`_meta` subscription id).
fn subscription_of(notification: &Notification) -> Option<u64> {
    notification
        .params
        .as_ref()?
        .get("_meta")?
        .get(SUBSCRIPTION_ID)?
        .as_u64()
}

/// Replaces a notification's subscription id (the upstream id) with the caller's listen id.
fn retag_subscription(notification: &mut Notification, listen_id: Value) {
    let meta = notification
        .params
        .as_mut()
        .and_then(|p| p.get_mut("_meta"))
        .and_then(Value::as_object_mut);
    if let Some(meta) = meta {
        meta.insert(SUBSCRIPTION_ID.into(), listen_id);
    }
}

/// Replaces `params._meta.progressToken` with the upstream id, returning the original.
fn rewrite_progress_token(params: &mut Option<Value>, upstream_id: u64) -> Option<Value> {
    let meta = params.as_mut()?.as_object_mut()?.get_mut("_meta")?.as_object_mut()?;
    let original = meta.get("progressToken")?.clone();
    meta.insert("progressToken".into(), Value::from(upstream_id));
    Some(original)
}

impl Call {
    /// The upstream's answer, with the caller's id restored.
    /// Events meanwhile are dropped.
    pub async fn response(mut self) -> Result<Response, UpstreamError> {
        match self.step(true).await {
            CallStep::Done(result) => result,
            CallStep::Event(_) => Err(self.session.closed_error("response already taken")),
        }
    }

    /// The next event, or the response once it is here. The session always
    /// settles a pending call, so this never waits past the call's end.
    /// Cancel-safe: nothing is taken from the call until this returns.
    pub async fn next(&mut self) -> CallStep {
        self.step(false).await
    }

    async fn step(&mut self, skip_events: bool) -> CallStep {
        if self.finished {
            return CallStep::Done(Err(self.session.closed_error("response already taken")));
        }
        loop {
            match self.slot.take(skip_events) {
                Some(Taken::Event(event)) => return CallStep::Event(event),
                Some(Taken::Done(result)) => {
                    self.finished = true;
                    return CallStep::Done(result);
                }
                Some(Taken::Abandoned) => {
                    self.finished = true;
                    return CallStep::Done(Err(self.session.closed_error("session dropped")));
                }
                None => self.slot.wake.notified().await,
            }
        }
    }

    /// Gives up on the request: it is failed locally and the upstream gets
    /// `notifications/cancelled`, whatever the call's drop policy.
    pub fn cancel(mut self, reason: &str) {
        self.on_drop = OnDrop::CancelUpstream;
        self.cancel_reason = Some(reason.to_owned());
        tracing::debug!(upstream = %self.session.upstream_name(), upstream_id = self.upstream_id, reason, "cancelling upstream request");
    }

    /// Gives up on a request the upstream did not answer in time: cancelled as
    /// above, and counted against the member's health (a slow member is unwell;
    /// a client that never answers `input_required` is not the member's fault).
    pub fn time_out(self) {
        if let Some(health) = &self.session.health {
            health.record_failure("request timed out");
        }
        self.cancel("request timed out");
    }

    /// The session this call runs on (to answer server→client requests).
    pub fn session(&self) -> &Arc<UpstreamSession> {
        &self.session
    }

    /// The id the upstream knows this request by.
    pub fn upstream_id(&self) -> u64 {
        self.upstream_id
    }
}

/// One step of a call in flight.
#[derive(Debug)]
pub enum CallStep {
    /// Something arrived for the request.
    Event(CallEvent),
    /// The request ended.
    Done(Result<Response, UpstreamError>),
}

impl Drop for Call {
    fn drop(&mut self) {
        self.slot.detach();
        if self.finished || !self.session.is_pending(self.upstream_id) {
            return;
        }
        if self.on_drop == OnDrop::Detach {
            return;
        }
        self.session
            .fail(self.upstream_id, self.session.closed_error("cancelled"));
        let session = self.session.clone();
        let upstream_id = self.upstream_id;
        let mut params = Map::new();
        params.insert("requestId".into(), Value::from(upstream_id));
        let reason = self
            .cancel_reason
            .take()
            .unwrap_or_else(|| "client closed the request".to_owned());
        params.insert("reason".into(), Value::from(reason));
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if session.link_cancel(upstream_id) {
                    return; // the closed stream is the cancellation
                }
                let _ = session
                    .notify("notifications/cancelled", Some(Value::Object(params)))
                    .await;
            });
        }
    }
}

impl UpstreamSession {
    /// See [`Link::cancel_request`].
    fn link_cancel(&self, upstream_id: u64) -> bool {
        self.link.cancel_request(upstream_id)
    }

    pub(crate) fn link(&self) -> &Link {
        &self.link
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_tokens_become_the_upstream_id() {
        let mut params = Some(json!({"_meta": {"progressToken": "client-7"}, "name": "x"}));
        assert_eq!(rewrite_progress_token(&mut params, 42), Some(json!("client-7")));
        assert_eq!(params, Some(json!({"_meta": {"progressToken": 42}, "name": "x"})));
        let mut none = Some(json!({"name": "x"}));
        assert_eq!(rewrite_progress_token(&mut none, 1), None);
    }

    fn progress(n: u64) -> CallEvent {
        CallEvent::Notification(Notification {
            method: "notifications/progress".into(),
            params: Some(json!({"progress": n})),
        })
    }

    fn server_request() -> CallEvent {
        CallEvent::ServerRequest(Request {
            id: Id::number(9),
            method: "sampling/createMessage".into(),
            params: None,
        })
    }

    #[test]
    fn a_call_slot_gives_events_in_order_then_the_response() {
        let slot = CallSlot::new();
        assert!(slot.take(false).is_none());
        assert!(slot.push_event(progress(1)).is_ok());
        slot.settle(Ok(Response::result(Id::number(1), json!({}))));
        assert!(slot.push_event(progress(2)).is_ok());
        assert!(
            matches!(slot.take(false), Some(Taken::Event(CallEvent::Notification(n))) if n.params == Some(json!({"progress": 1})))
        );
        assert!(
            matches!(slot.take(false), Some(Taken::Event(CallEvent::Notification(n))) if n.params == Some(json!({"progress": 2})))
        );
        assert!(matches!(slot.take(false), Some(Taken::Done(Ok(_)))));
        // A second settlement (a pending entry dropped after answering) changes nothing.
        slot.abandon();
        assert!(slot.lock().response.is_none());
    }

    #[test]
    fn a_call_slot_is_bounded_and_refuses_events_once_detached() {
        let slot = CallSlot::new();
        assert_eq!(slot.lock().events.capacity(), 0, "no queue before the first event");
        for n in 0..CALL_EVENT_QUEUE as u64 {
            assert!(slot.push_event(progress(n)).is_ok());
        }
        assert!(matches!(
            slot.push_event(server_request()),
            Err(CallEvent::ServerRequest(_))
        ));
        slot.settle(Ok(Response::result(Id::number(1), json!({}))));
        // Waiting for the response only skips the events.
        assert!(matches!(slot.take(true), Some(Taken::Done(Ok(_)))));
        let slot = CallSlot::new();
        slot.detach();
        assert!(matches!(
            slot.push_event(server_request()),
            Err(CallEvent::ServerRequest(_))
        ));
    }

    #[test]
    fn an_abandoned_call_slot_ends_the_wait() {
        let slot = CallSlot::new();
        slot.abandon();
        assert!(matches!(slot.take(false), Some(Taken::Abandoned)));
        slot.settle(Ok(Response::result(Id::number(1), json!({}))));
        assert!(
            matches!(slot.take(false), Some(Taken::Abandoned)),
            "nothing settles an abandoned call"
        );
    }

    #[tokio::test]
    async fn a_waiting_caller_is_woken_by_an_event_and_by_the_response() {
        let slot = CallSlot::new();
        let producer = slot.clone();
        let task = tokio::spawn(async move {
            tokio::task::yield_now().await;
            let _ = producer.push_event(progress(1));
            tokio::task::yield_now().await;
            producer.settle(Ok(Response::result(Id::number(1), json!({}))));
        });
        let mut seen = Vec::new();
        loop {
            match slot.take(false) {
                Some(Taken::Event(_)) => seen.push("event"),
                Some(Taken::Done(_)) => {
                    seen.push("done");
                    break;
                }
                Some(Taken::Abandoned) => panic!("abandoned"),
                None => slot.wake.notified().await,
            }
        }
        assert_eq!(seen, ["event", "done"]);
        task.await.expect("producer");
    }

    #[test]
    fn listen_notifications_name_their_listen_and_get_the_callers_id() {
        let mut updated = Notification {
            method: "notifications/resources/updated".into(),
            params: Some(json!({"uri": "x://a", "_meta": {SUBSCRIPTION_ID: 42}})),
        };
        assert_eq!(subscription_of(&updated), Some(42));
        retag_subscription(&mut updated, json!("listen-1"));
        assert_eq!(
            updated.params,
            Some(json!({"uri": "x://a", "_meta": {SUBSCRIPTION_ID: "listen-1"}}))
        );
        let untagged = Notification {
            method: "notifications/resources/updated".into(),
            params: Some(json!({"uri": "x://a"})),
        };
        assert_eq!(subscription_of(&untagged), None);
    }

    #[test]
    fn refusals_decline_elicitation_and_error_the_rest() {
        let elicit = Request {
            id: Id::number(3),
            method: "elicitation/create".into(),
            params: None,
        };
        assert_eq!(
            refuse_server_request(&elicit).outcome,
            Outcome::Result(json!({"action": "decline"}))
        );
        let sample = Request {
            id: Id::number(4),
            method: "sampling/createMessage".into(),
            params: None,
        };
        assert!(
            matches!(refuse_server_request(&sample).outcome, Outcome::Error(e) if e.code == ErrorCode::METHOD_NOT_FOUND)
        );
    }
}
