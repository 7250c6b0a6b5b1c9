//! One live upstream session: its transport, its table of requests in flight,
//! and routing of everything the upstream sends back to the call it belongs to.
//!
//! Every request sent upstream gets a fresh numeric id from the session's call
//! table (`session/table.rs`; its `progressToken`, if any, becomes that same
//! number), so concurrent requests from many clients never collide. Which caller a message
//! is for is decided by the rules in [`crate::translate::multiplex`]; the
//! transport reports what arrives through [`Inbound`]. The session never reads
//! bytes and never knows which era a client speaks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use self::slot::{CallEvent, CallSlot};
use self::table::{CallTable, Delivery};
use super::error::UpstreamError;
use super::member::MemberHealth;
use super::transport::{Inbound, Link, PostInFlight};
use crate::policy::held::Hold;
use crate::protocol::{Id, LazyJson, Message, Notification, Request, Response, Revision};
use crate::translate::multiplex::{self, Addressee, Scope, refuse_server_request};
use crate::translate::up::ServerInfo;

pub(crate) mod slot;
pub(crate) mod table;

/// Who answers server→client requests that are tied to no request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnsolicitedRequests {
    /// A pooled session has no single client to ask: eragate answers itself.
    AnswerLocally,
    /// A dedicated session forwards them to its client via [`UpstreamSession::subscribe`].
    Forward,
}

/// Bound of the unsolicited broadcast; slow listeners lose the oldest messages.
/// tokio allocates every slot up front, and a legacy client session keeps one
/// such channel for its whole life, so the bound is kept small (idle memory per session).
const UNSOLICITED_QUEUE: usize = 32;

/// How long a claim for a request that must be alone holds without its call
/// ([`UpstreamSession::claim_alone`]).
const ALONE_CLAIM_MS: u64 = 10_000;

/// One initialized session with an upstream.
pub(crate) struct UpstreamSession {
    upstream: Arc<str>,
    link: Link,
    calls: CallTable,
    closed: AtomicBool,
    initialize_result: OnceLock<Arc<Value>>,
    revision: OnceLock<Revision>,
    /// Created on the first `subscribe`: most pooled sessions never have a listener.
    /// Dropped when the session closes, so every listener sees its end (even one
    /// that keeps the session alive to unsubscribe later).
    unsolicited: Mutex<Option<broadcast::Sender<Message>>>,
    unsolicited_requests: UnsolicitedRequests,
    /// The pool member's health, fed by how this session's requests end.
    health: Option<Arc<MemberHealth>>,
    /// Requests sent, for replacement after `restart.max_requests`.
    served: AtomicU64,
    born: Instant,
    /// Chosen for a request that must be alone on it, whose call is not in the
    /// table yet: when (ms since `born`, plus one; 0 for none). It counts as a
    /// call in flight until a call is entered or [`ALONE_CLAIM_MS`] pass (a
    /// chooser that never sent), so two such requests never share the session.
    alone_claim: AtomicU64,
    /// Takes no new requests; closed once idle (graceful replacement).
    draining: AtomicBool,
    /// eragate itself is closing the session: its end is no fault of the member.
    closing: AtomicBool,
    /// The transport's stream for messages tied to no request was asked for.
    event_stream: AtomicBool,
    /// `resources/subscribe` held on this session, by URI, with how many listens need each.
    resource_subscriptions: Mutex<HashMap<String, usize>>,
    /// The member as traces name it, made on the first traced call and kept, so that
    /// later traced calls format no URL.
    member_label: OnceLock<Arc<str>>,
    /// `serverInfo` as 2026-07-28 results carry it, made on the first such result
    /// after the handshake and kept, rather than built again for every result.
    server_info_for_modern: OnceLock<Arc<ServerInfo>>,
    /// Its place in the share of the principal it was opened for, given back when it closes.
    share: Mutex<Option<Hold>>,
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
            calls: CallTable::new(first_id),
            closed: AtomicBool::new(false),
            initialize_result: OnceLock::new(),
            revision: OnceLock::new(),
            unsolicited: Mutex::new(None),
            unsolicited_requests,
            health,
            served: AtomicU64::new(0),
            born: Instant::now(),
            alone_claim: AtomicU64::new(0),
            draining: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            event_stream: AtomicBool::new(false),
            resource_subscriptions: Mutex::new(HashMap::new()),
            member_label: OnceLock::new(),
            server_info_for_modern: OnceLock::new(),
            share: Mutex::new(None),
        })
    }

    /// Adopts a session another replica initialized (an HTTP upstream session id
    /// carried in a sealed client session): no handshake, the revision as agreed then.
    pub(crate) fn resume(self: &Arc<Self>, revision: Revision) {
        let _ = self.revision.set(revision);
        self.link.on_initialized(revision);
    }

    /// Starts a session with a 2026-07-28 upstream: there is no handshake; every
    /// request carries its own envelope.
    pub(crate) fn start_modern(self: &Arc<Self>) {
        self.resume(Revision::V2026_07_28);
    }

    /// Opens the transport's stream for messages tied to no request (an HTTP
    /// upstream's GET stream), once. Pooled sessions open it when initialized;
    /// a dedicated session when its client opens its own, so that an idle
    /// legacy client holds no upstream connection.
    pub(crate) fn open_event_stream(self: &Arc<Self>) {
        if !self.event_stream.swap(true, Ordering::AcqRel) {
            self.link.open_event_stream(self);
        }
    }

    /// The transport's own session id (an HTTP upstream's `Mcp-Session-Id`), if any.
    pub(crate) fn transport_session_id(&self) -> Option<String> {
        match &self.link {
            Link::Http(link) => link.session_id(),
            Link::Stdio(_) | Link::Sse(_) => None,
        }
    }

    /// The member endpoint (an HTTP upstream's URL) this session lives on.
    pub(crate) fn transport_endpoint(&self) -> Option<String> {
        match &self.link {
            Link::Http(link) => Some(link.url().to_string()),
            Link::Stdio(_) | Link::Sse(_) => None,
        }
    }

    /// Sends a notification.
    pub(crate) async fn notify(self: &Arc<Self>, method: &str, params: Option<LazyJson>) -> Result<(), UpstreamError> {
        let message = Message::Notification(Notification {
            method: method.to_owned(),
            params,
        });
        self.link.send_other(&**self, message).await
    }

    /// Cancels a request in flight by its upstream id: it is failed locally, the
    /// transport stops waiting, and the upstream gets `notifications/cancelled`
    /// (except a 2026-07-28 HTTP upstream, for which the closed stream says it).
    pub(crate) fn cancel_request(self: &Arc<Self>, upstream_id: u64, reason: &str) {
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
            let _ = session.notify("notifications/cancelled", Some(params.into())).await;
        });
    }

    /// Answers a server→client request.
    pub(crate) async fn respond(self: &Arc<Self>, response: Response) -> Result<(), UpstreamError> {
        self.link.send_other(&**self, Message::Response(response)).await
    }

    /// Receives messages tied to no request (list changes, log messages, and,
    /// for dedicated sessions, server→client requests), until the session
    /// closes: then `recv` says `Closed` (at once, when it closed before).
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Message> {
        let mut unsolicited = self.unsolicited.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_closed() {
            return broadcast::channel(1).1;
        }
        unsolicited
            .get_or_insert_with(|| broadcast::channel(UNSOLICITED_QUEUE).0)
            .subscribe()
    }

    /// The upstream's `InitializeResult`, once the handshake is done.
    pub(crate) fn initialize_result(&self) -> Option<&Arc<Value>> {
        self.initialize_result.get()
    }

    /// The revision the upstream agreed to.
    pub(crate) fn revision(&self) -> Option<Revision> {
        self.revision.get().copied()
    }

    /// `serverInfo` from the handshake, for decorating modern results.
    pub(crate) fn server_info(&self) -> Value {
        self.initialize_result
            .get()
            .and_then(|r| r.get("serverInfo").cloned())
            .unwrap_or_else(|| json!({"name": &*self.upstream, "version": "unknown"}))
    }

    /// [`UpstreamSession::server_info`] as 2026-07-28 results carry it; kept once
    /// the handshake has answered.
    pub(crate) fn server_info_for_modern(&self) -> Arc<ServerInfo> {
        if let Some(info) = self.server_info_for_modern.get() {
            return info.clone();
        }
        let info = Arc::new(ServerInfo::new(self.server_info()));
        if self.initialize_result.get().is_some() {
            let _ = self.server_info_for_modern.set(info.clone());
        }
        info
    }

    /// Requests awaiting their response (and one a request that must be alone
    /// on the session is about to send).
    pub(crate) fn in_flight(&self) -> usize {
        self.calls.len() + usize::from(self.claimed_alone())
    }

    fn claimed_alone(&self) -> bool {
        let at = self.alone_claim.load(Ordering::Acquire);
        at != 0 && self.age_ms() < at.saturating_add(ALONE_CLAIM_MS)
    }

    /// Claims the idle session for one request that must be alone on it;
    /// `false` when it is not idle or another request claimed it first.
    pub(crate) fn claim_alone(&self) -> bool {
        if self.calls.len() > 0 {
            return false;
        }
        let current = self.alone_claim.load(Ordering::Acquire);
        let now = self.age_ms().saturating_add(1);
        if current != 0 && now < current.saturating_add(ALONE_CLAIM_MS) {
            return false;
        }
        self.alone_claim
            .compare_exchange(current, now, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn age_ms(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether the session can no longer carry requests.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The upstream's configured name.
    pub(crate) fn upstream_name(&self) -> &str {
        &self.upstream
    }

    /// The member this session lives on, as traces name it: its URL, or its transport.
    pub(crate) fn member_label(&self) -> Arc<str> {
        self.member_label
            .get_or_init(|| match &self.link {
                Link::Http(link) => link.url().to_string().into(),
                Link::Stdio(_) => "stdio".into(),
                Link::Sse(_) => "sse".into(),
            })
            .clone()
    }

    /// `pooled` (answers server→client requests itself) or `dedicated` (one legacy client's).
    pub(crate) fn session_kind(&self) -> &'static str {
        match self.unsolicited_requests {
            UnsolicitedRequests::AnswerLocally => "pooled",
            UnsolicitedRequests::Forward => "dedicated",
        }
    }

    /// Whether the session runs over HTTP (Streamable HTTP or HTTP+SSE), where headers travel.
    pub(crate) fn is_http(&self) -> bool {
        !matches!(self.link, Link::Stdio(_))
    }

    /// Ends the session: fails what is pending and releases the transport
    /// (a stdio child is stopped; an HTTP session is deleted).
    pub(crate) fn close(self: &Arc<Self>, reason: &str) {
        self.closing.store(true, Ordering::Release);
        self.mark_closed(reason);
        self.link.shutdown();
    }

    /// Holds `share` (the place in its principal's share this session was opened in)
    /// until the session closes.
    pub(crate) fn hold_share(&self, share: Option<Hold>) {
        *self.share.lock().unwrap_or_else(|e| e.into_inner()) = share;
    }

    /// Counts one more listen needing `uri`; `true` when it is the first (subscribe now).
    pub(crate) fn hold_subscription(&self, uri: &str) -> bool {
        let mut held = self.resource_subscriptions.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(uri.to_owned()).or_insert(0);
        *count += 1;
        *count == 1
    }

    /// Counts one listen less needing `uri`; `true` when it was the last (unsubscribe now).
    pub(crate) fn release_subscription(&self, uri: &str) -> bool {
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
    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// Whether the session is being replaced.
    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Requests sent on this session so far.
    pub(crate) fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// How long ago the session was opened.
    pub(crate) fn age(&self) -> std::time::Duration {
        self.born.elapsed()
    }

    // === for calls and the handshake ===

    /// Enters a request in the call table: its upstream id, its slot, and the
    /// message to send.
    pub(crate) fn open_call(
        &self,
        method: &str,
        mut params: Option<LazyJson>,
        original_id: Id,
    ) -> Result<(u64, Arc<CallSlot>, Message), UpstreamError> {
        if self.is_closed() {
            return Err(self.closed_error("session already closed"));
        }
        self.served.fetch_add(1, Ordering::Relaxed);
        let (upstream_id, slot) = self.calls.open(&mut params, original_id);
        // The claimer's call is in the table now, and counts as in flight itself.
        if self.alone_claim.load(Ordering::Relaxed) != 0 {
            self.alone_claim.store(0, Ordering::Release);
        }
        let message = Message::Request(Request {
            id: Id::number(upstream_id),
            method: method.to_owned(),
            params,
        });
        Ok((upstream_id, slot, message))
    }

    /// Sends a request entered with [`UpstreamSession::open_call`].
    pub(crate) async fn send_call(
        self: &Arc<Self>,
        upstream_id: u64,
        message: Message,
        extra_headers: &[(String, String)],
    ) -> Result<Option<PostInFlight>, UpstreamError> {
        self.link.send_request(self, upstream_id, message, extra_headers).await
    }

    /// See [`Link::adopt`].
    pub(crate) fn adopt_post(&self, upstream_id: u64, post: PostInFlight) {
        self.link.adopt(upstream_id, post);
    }

    /// See [`Link::cancel_request`].
    pub(crate) fn cancel_on_link(&self, upstream_id: u64) -> bool {
        self.link.cancel_request(upstream_id)
    }

    pub(crate) fn set_initialize_result(&self, result: Arc<Value>) {
        let _ = self.initialize_result.set(result);
    }

    /// Counts a failure against the member this session lives on.
    pub(crate) fn record_member_failure(&self, reason: &str) {
        if let Some(health) = &self.health {
            health.record_failure(reason);
        }
    }

    /// Marks the session dead and fails every pending request with `reason`.
    pub(crate) fn mark_closed(&self, reason: &str) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::debug!(upstream = %self.upstream, reason, "upstream session closed");
        if !self.closing.load(Ordering::Acquire) {
            self.record_member_failure(reason);
        }
        self.calls.fail_all(|| self.closed_error(reason));
        drop(self.share.lock().unwrap_or_else(|e| e.into_inner()).take());
        // After `closed` is set: a later `subscribe` sees it, an earlier one's sender ends here.
        drop(self.unsolicited.lock().unwrap_or_else(|e| e.into_inner()).take());
    }

    /// Fails one pending request (a transport-level failure of that request only).
    pub(crate) fn fail(&self, upstream_id: u64, error: UpstreamError) {
        if error.is_member_fault() {
            self.record_member_failure(&error.to_string());
        }
        self.calls.fail(upstream_id, error);
    }

    /// Whether a request is still awaiting its response.
    pub(crate) fn is_pending(&self, upstream_id: u64) -> bool {
        self.calls.contains(upstream_id)
    }

    pub(crate) fn closed_error(&self, reason: &str) -> UpstreamError {
        UpstreamError::closed(&self.upstream, reason)
    }

    pub(crate) fn protocol_error(&self, reason: String) -> UpstreamError {
        UpstreamError::protocol(&self.upstream, reason)
    }

    pub(crate) fn link(&self) -> &Link {
        &self.link
    }

    // === routing what the upstream sends ===

    fn handle_response(&self, response: Response) {
        let Some(upstream_id) = response.id.as_ref().and_then(Id::as_u64) else {
            tracing::warn!(upstream = %self.upstream, "response with an id eragate never sent; dropped");
            return;
        };
        if !self.calls.answer(upstream_id, response) {
            tracing::debug!(upstream = %self.upstream, upstream_id, "response for a finished or cancelled request; dropped");
            return;
        }
        if let Some(health) = &self.health {
            health.record_success();
        }
    }

    fn handle_notification(&self, notification: Notification, related: Option<u64>) {
        let (notification, scope) = match multiplex::addressee(&notification) {
            Addressee::Progress(token) => {
                if let Some(token) = token {
                    self.calls.deliver_progress(token, notification);
                }
                return; // progress for nothing in flight: nobody asked
            }
            // A 2026-07-28 upstream's listen stream: its list changes and resource updates belong
            // to that listen (stdio gives no other hint), tagged with the id its caller gave.
            Addressee::Listen(listen, scope) => match self.calls.deliver_to_listen(listen, notification) {
                Ok(()) => return,
                Err(notification) => (notification, scope),
            },
            Addressee::Untagged(scope) => (notification, scope),
        };
        match scope {
            // About a server→client request the upstream gave up on, or about the
            // server's lists: never about the request that happens to be in flight.
            Scope::Session => self.broadcast(Message::Notification(notification)),
            Scope::Request => {
                let target = self.related_or_sole(related);
                if let Delivery::NotInFlight(CallEvent::Notification(notification)) =
                    self.calls.deliver(target, CallEvent::Notification(notification))
                {
                    self.broadcast(Message::Notification(notification));
                }
            }
        }
    }

    fn handle_server_request(self: &Arc<Self>, request: Request, related: Option<u64>) {
        if request.method == "ping" {
            self.answer_locally(Response::result(request.id, json!({})));
            return;
        }
        let target = self.related_or_sole(related);
        let request = match self.calls.deliver(target, CallEvent::ServerRequest(request)) {
            Delivery::Delivered => return,
            Delivery::Refused(CallEvent::ServerRequest(request))
            | Delivery::NotInFlight(CallEvent::ServerRequest(request)) => request,
            Delivery::Refused(CallEvent::Notification(_)) | Delivery::NotInFlight(CallEvent::Notification(_)) => return,
        };
        let listened = self
            .unsolicited
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|tx| tx.receiver_count() > 0);
        if self.unsolicited_requests == UnsolicitedRequests::Forward && listened {
            self.broadcast(Message::Request(request));
            return;
        }
        self.answer_locally(refuse_server_request(&request));
    }

    /// Sends to whoever subscribed; nothing when nobody ever did.
    fn broadcast(&self, message: Message) {
        if let Some(tx) = &*self.unsolicited.lock().unwrap_or_else(|e| e.into_inner()) {
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
        related.or_else(|| self.calls.sole())
    }
}

// === impl Inbound ===

impl Inbound for UpstreamSession {
    fn handle_message(self: &Arc<Self>, message: Message, related: Option<u64>) {
        match message {
            Message::Response(response) => self.handle_response(response),
            Message::Notification(notification) => self.handle_notification(notification, related),
            Message::Request(request) => self.handle_server_request(request, related),
        }
    }

    fn handle_closed(&self, reason: &str) {
        self.mark_closed(reason);
    }

    fn handle_failure(&self, upstream_id: u64, error: UpstreamError) {
        self.fail(upstream_id, error);
    }

    fn is_pending(&self, upstream_id: u64) -> bool {
        UpstreamSession::is_pending(self, upstream_id)
    }
}
