//! Serving handshake-era clients: `initialize` answered by eragate on a
//! dedicated upstream session, then every message relayed on that session.

use std::sync::Arc;

use serde_json::{Value, json};

use super::pump::{self, ClientSide};
use super::reply::{self, Reply};
use super::sessions::{ClientSession, DedicatedQuota, SessionClaims, stateless_envelope};
use crate::auth::Principal;
use crate::config::LegacySessions;
use crate::gateway::Gateway;
use crate::protocol::envelope::LogLevel;
use crate::protocol::errors::Rejection;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{Era, capabilities};
use crate::protocol::{ErrorCode, ErrorObject, Id, LazyJson, Message, Notification, Request, Response, Revision};
use crate::router::{
    Backend, OnDrop, PartitionKey, Pool, SessionNeed, UpstreamError, UpstreamSession, gateway_client_info,
};
use crate::seal::fingerprint;
use crate::translate::{down, up};

/// The client's session as its transport found it.
#[derive(Clone)]
pub(crate) enum SessionLookup {
    /// The client named no session.
    Absent,
    /// The client named a session eragate does not know (or that ended).
    Unknown,
    /// A live session.
    Found(Arc<ClientSession>),
}

/// Serves one legacy message.
pub(crate) async fn serve(
    gateway: &Gateway,
    pool: &Pool,
    message: Message,
    session: SessionLookup,
    principal: &Principal,
) -> Reply {
    if let Message::Request(request) = &message
        && request.method == "initialize"
    {
        return Box::pin(initialize(gateway, pool, request.clone(), principal)).await;
    }
    let session = match session {
        SessionLookup::Found(session) if session.backend.same_route(pool.config()) => session,
        SessionLookup::Found(_) | SessionLookup::Unknown => return session_not_found(&message),
        SessionLookup::Absent => return Box::pin(sessionless(gateway, pool, message, principal)).await,
    };
    match message {
        Message::Request(request) => request_on_session(gateway, session, request).await,
        Message::Notification(notification) => notification_on_session(&session, notification).await,
        Message::Response(response) => response_on_session(&session, response).await,
    }
}

async fn initialize(gateway: &Gateway, pool: &Pool, request: Request, principal: &Principal) -> Reply {
    if let Some(refusal) = oversized_claims(gateway, &request) {
        return refusal;
    }
    let requested = request
        .params
        .as_ref()
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    let negotiated = Revision::negotiate_legacy(requested);
    match pool.era(principal).await {
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
        Ok(Era::Modern) => {
            return initialize_over_modern(gateway, pool, request, negotiated, principal).await;
        }
        Ok(Era::Legacy) => {}
    }
    let params = down::legacy_initialize_for_upstream(request.params.as_deref(), negotiated);
    let shared = pool.legacy_sessions() == LegacySessions::Shared;
    // Room inside this principal first, so its oldest session's child is freed
    // before a new one is started (never another principal's).
    let dedicated = (!shared).then(|| DedicatedQuota {
        upstream: pool.name(),
        per_principal: pool.config().pool.max_children_per_principal,
    });
    let freed = gateway.sessions().make_room(principal.as_str(), dedicated);
    let opening = Opening {
        gateway,
        pool,
        principal,
        shared,
    };
    let upstream_session = match opening.open(params, negotiated, freed).await {
        Ok(session) => session,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let upstream_result = upstream_session
        .initialize_result()
        .map(|r| (**r).clone())
        .unwrap_or_default();
    let (result, revision) = up::initialize_result_for_client(upstream_result, negotiated);
    let params = request.params.as_ref();
    let claims = SessionClaims {
        rev: revision.as_str().to_owned(),
        caps: params.and_then(|p| p.get("capabilities")).cloned().unwrap_or_default(),
        info: params.and_then(|p| p.get("clientInfo")).cloned().unwrap_or_default(),
        prn: principal.as_str().to_owned(),
        ups: pool.name().to_owned(),
        usid: upstream_session.transport_session_id(),
        mem: upstream_session.transport_endpoint(),
        own: None,
        exp: 0,
    };
    let process_bound = claims.usid.is_none();
    let id = gateway.sessions().mint(claims, process_bound);
    let session = if shared {
        ClientSession::open_shared(id, revision, Backend::Pool(pool.clone()), upstream_session)
    } else {
        ClientSession::open(id, revision, Backend::Pool(pool.clone()), upstream_session)
    };
    tracing::info!(session = %fingerprint(&session.id), %revision, requested, shared, "legacy client session opened");
    Reply::Initialized(Response::result(request.id, result).into_message(), session)
}

/// -32602 (400) for an `initialize` whose `capabilities` and `clientInfo`, sealed
/// into the session id that every later request carries, exceed `limits.max_client_claims_bytes`.
pub(super) fn oversized_claims(gateway: &Gateway, request: &Request) -> Option<Reply> {
    let limit = gateway.limits().limits.max_client_claims_bytes;
    let params = request.params.as_ref()?;
    let size: usize = ["capabilities", "clientInfo"]
        .into_iter()
        .filter_map(|key| params.get(key))
        .map(json_len)
        .sum();
    (size > limit).then(|| {
        let message = format!("Invalid params: capabilities and clientInfo exceed {limit} bytes");
        let error = ErrorObject::new(ErrorCode::INVALID_PARAMS, message);
        Reply::rejected(Some(request.id.clone()), Rejection::Classified(error))
    })
}

/// The length of `value` as compact JSON, counted without building it.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that cannot fail does not fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Opening the upstream session of a new legacy client session.
struct Opening<'a> {
    gateway: &'a Gateway,
    pool: &'a Pool,
    principal: &'a Principal,
    shared: bool,
}

impl Opening<'_> {
    /// [`upstream_session_for_client`], fair between principals: when a
    /// dedicated session is refused at `max_children`, the principal holding
    /// the most dedicated sessions there gives up its least recently used one.
    /// Children of ended sessions take a moment to exit, so the refusal is
    /// tried again for a while after a session was ended (`freed`).
    async fn open(
        &self,
        params: Value,
        negotiated: Revision,
        mut freed: bool,
    ) -> Result<Arc<UpstreamSession>, UpstreamError> {
        let mut tries = FREED_CHILD_TRIES;
        let mut gave_way_within = false;
        loop {
            let opened =
                upstream_session_for_client(self.pool, params.clone(), negotiated, self.principal, self.shared).await;
            match opened {
                // The principal's share is taken (by its pooled and per-call sessions too):
                // its own least recently used legacy session there gives way, once.
                Err(UpstreamError::ShareExhausted { .. }) if !gave_way_within && !self.shared => {
                    gave_way_within = true;
                    let sessions = self.gateway.sessions();
                    if !sessions.give_way_within(self.principal.as_str(), self.pool.name()) {
                        return opened;
                    }
                }
                Err(error) if error.is_overload() && !self.shared && tries > 0 => {
                    if !freed {
                        freed = self
                            .gateway
                            .sessions()
                            .give_way(self.principal.as_str(), self.pool.name());
                    }
                    if !freed {
                        return Err(error);
                    }
                    tries -= 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                outcome => return outcome,
            }
        }
    }
}

/// How often (every 50 ms) a new session tries for a child freed by ending another.
const FREED_CHILD_TRIES: u32 = 60;

/// The upstream session a new legacy client's session relays to: one of its
/// own, or (`shared`) a pooled one per principal, revision and capability set,
/// shared by every such client.
async fn upstream_session_for_client(
    pool: &Pool,
    params: Value,
    negotiated: Revision,
    principal: &Principal,
    shared: bool,
) -> Result<Arc<UpstreamSession>, UpstreamError> {
    if !shared {
        let principal = principal.clone();
        return pool
            .session(SessionNeed::Dedicated::<fn() -> Value> { params, principal })
            .await;
    }
    let capabilities = params.get("capabilities").cloned().unwrap_or_default();
    let key = PartitionKey::of(
        principal,
        &json!({
            "revision": negotiated.as_str(),
            "capabilities": capabilities::partition_profile(&capabilities, negotiated),
        }),
    );
    pool.session(SessionNeed::Shared {
        key,
        initialize: move || params,
    })
    .await
}

/// `initialize` in front of a modern upstream: answered from its
/// `server/discover`; the session's state is the envelope its requests will carry.
async fn initialize_over_modern(
    gateway: &Gateway,
    pool: &Pool,
    request: Request,
    negotiated: Revision,
    principal: &Principal,
) -> Reply {
    let params = request.params.as_ref();
    let capabilities = params.and_then(|p| p.get("capabilities")).cloned().unwrap_or_default();
    let client_info = params.and_then(|p| p.get("clientInfo")).cloned().unwrap_or_default();
    let envelope = stateless_envelope(&capabilities, &client_info);
    let shared = match pool.session(SessionNeed::stateless(principal)).await {
        Ok(session) => session,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let discover = match discover_for_client(pool, &shared, &envelope, &request.id).await {
        Ok(Response {
            outcome: Outcome::Result(discover),
            ..
        }) => discover,
        Ok(Response {
            outcome: Outcome::Error(error),
            ..
        }) => {
            return Reply::Message(
                reply::Status::Ok,
                Response::error(Some(request.id), error).into_message(),
            );
        }
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let result = up::initialize_from_discover(&discover, negotiated, &gateway_client_info());
    let claims = SessionClaims {
        rev: negotiated.as_str().to_owned(),
        caps: capabilities,
        info: client_info,
        prn: principal.as_str().to_owned(),
        ups: pool.name().to_owned(),
        usid: None,
        mem: None,
        own: None,
        exp: 0,
    };
    // Nothing of this session lives in this process: any replica can serve it.
    let id = gateway.sessions().mint(claims, false);
    let session = ClientSession::open_stateless(id, negotiated, Backend::Pool(pool.clone()), shared, envelope);
    tracing::info!(session = %fingerprint(&session.id), revision = %negotiated, "legacy client session opened on a modern upstream");
    Reply::Initialized(Response::result(request.id, result).into_message(), session)
}

/// The modern upstream's `server/discover` answer for a client's envelope,
/// within the handshake timeout.
async fn discover_for_client(
    pool: &Pool,
    shared: &Arc<UpstreamSession>,
    envelope: &crate::protocol::envelope::Envelope,
    id: &Id,
) -> Result<Response, UpstreamError> {
    let discover_params = down::legacy_params_for_modern(None, envelope);
    let timeout = pool.config().handshake_timeout.0;
    let call = shared
        .call(
            "server/discover",
            Some(discover_params.into()),
            id.clone(),
            OnDrop::Detach,
        )
        .await?;
    tokio::time::timeout(timeout, call.response())
        .await
        .unwrap_or_else(|_| {
            Err(UpstreamError::Timeout {
                upstream: pool.name().to_owned(),
                after_ms: timeout.as_millis() as u64,
            })
        })
}

/// Requests without a session: a legacy-shaped `server/discover` probe and
/// `ping` are answered; anything else needs `initialize` first.
async fn sessionless(gateway: &Gateway, pool: &Pool, message: Message, principal: &Principal) -> Reply {
    match message {
        Message::Request(request) if request.method == "server/discover" => {
            super::modern::discover(gateway, pool, request.id, principal).await
        }
        Message::Request(request) if request.method == "ping" => Reply::result(request.id, json!({})),
        Message::Request(request) => Reply::rejected(Some(request.id), Rejection::SessionRequired),
        Message::Notification(_) | Message::Response(_) => Reply::rejected(None, Rejection::SessionRequired),
    }
}

fn session_not_found(message: &Message) -> Reply {
    let id = match message {
        Message::Request(r) => Some(r.id.clone()),
        _ => None,
    };
    Reply::rejected(id, Rejection::SessionNotFound)
}

async fn request_on_session(gateway: &Gateway, session: Arc<ClientSession>, request: Request) -> Reply {
    if request.method == "ping" {
        return Reply::result(request.id, json!({}));
    }
    if session.backend_era() == Era::Modern {
        match request.method.as_str() {
            "logging/setLevel" => return set_level(&session, request),
            // Kept as one subscriptions/listen per session toward the modern upstream.
            "resources/subscribe" | "resources/unsubscribe" => {
                return match Box::pin(super::listen::legacy_subscription_change(&session, &request)).await {
                    Ok(result) => Reply::result(request.id, result),
                    Err(error) => Reply::Message(
                        reply::Status::Ok,
                        Response::error(Some(request.id), error).into_message(),
                    ),
                };
            }
            _ => {}
        }
    }
    let Request { id, method, params } = request;
    let (params, param_headers) = outgoing(gateway, &session, &method, params).await;
    relay(gateway, session, id, method, params, param_headers).await
}

/// A request's params toward the session's backend, and the `Mcp-Param-*`
/// headers a modern upstream requires of a `tools/call`.
async fn outgoing(
    gateway: &Gateway,
    session: &Arc<ClientSession>,
    method: &str,
    params: Option<LazyJson>,
) -> (Option<LazyJson>, Vec<(String, String)>) {
    let Some(envelope) = session.envelope() else {
        return (params, Vec::new());
    };
    let param_headers = match method {
        "tools/call" => {
            Box::pin(
                gateway
                    .tool_facts()
                    .headers_for_call(session, &envelope, params.as_deref()),
            )
            .await
        }
        _ => Vec::new(),
    };
    let params = down::legacy_params_for_modern(params.map(LazyJson::into_value), &envelope);
    (Some(params.into()), param_headers)
}

/// Sends a client's request on its upstream session and streams the answer.
async fn relay(
    gateway: &Gateway,
    session: Arc<ClientSession>,
    id: Id,
    method: String,
    params: Option<LazyJson>,
    param_headers: Vec<(String, String)>,
) -> Reply {
    // A session opened on a federation has no upstream session: a reload that
    // made its path a single upstream's finds nothing of it here.
    let (Some(pool), Some(upstream)) = (session.backend.pool(), session.upstream().cloned()) else {
        return Reply::rejected(Some(id), Rejection::SessionNotFound);
    };
    let permit = match pool.admit().await {
        Ok(permit) => permit,
        Err(error) => return Reply::upstream_failure(Some(id), &error),
    };
    let timeout = pool.timeout_for(&method);
    // Toward a modern upstream an `input_required` answer is re-issued with the same params.
    let reissue = match session.backend_era() {
        Era::Modern => params.clone().map(LazyJson::into_value),
        Era::Legacy => None,
    };
    let sent = upstream
        .call_with_headers(&method, params, id.clone(), OnDrop::Detach, &param_headers)
        .await;
    let call = match sent {
        Ok(call) => call,
        Err(error) => {
            if session.backend_era() == Era::Legacy {
                gateway.sessions().remove(&session.id);
            }
            return Reply::upstream_failure(Some(id), &error);
        }
    };
    let tracked = call.upstream_id();
    session.track(id.clone(), tracked);
    let side = ClientSide::Legacy {
        session,
        tracked,
        method,
        reissue,
        param_headers,
        member: None,
    };
    pump::stream_call(call, side, id, Some(timeout), permit)
}

/// `logging/setLevel` toward a modern upstream: the level joins the session's envelope.
fn set_level(session: &ClientSession, request: Request) -> Reply {
    let level = request.param_str("level").and_then(LogLevel::parse);
    match level {
        Some(level) => {
            session.set_log_level(level);
            Reply::result(request.id, json!({}))
        }
        None => {
            let error = ErrorObject::invalid_params("level must be a logging level");
            Reply::Message(
                reply::Status::Ok,
                Response::error(Some(request.id), error).into_message(),
            )
        }
    }
}

async fn notification_on_session(session: &ClientSession, notification: Notification) -> Reply {
    if notification.method == "notifications/cancelled" {
        cancel_on_session(session, notification.params.as_deref());
        return Reply::Accepted;
    }
    if session.envelope().is_some() {
        return Reply::Accepted; // a modern backend takes no notifications from clients
    }
    if notification.method == "notifications/initialized" {
        return Reply::Accepted; // eragate completed the backend handshake when it opened the session
    }
    let Some(upstream) = session.upstream() else {
        return Reply::Accepted;
    };
    if let Err(error) = upstream.notify(&notification.method, notification.params).await {
        tracing::debug!(session = %fingerprint(&session.id), error = %error, "could not forward a notification");
    }
    Reply::Accepted
}

/// The client gave up on a request: eragate stops waiting for it at once
/// (freeing its admission slot), tells the upstream (`notifications/cancelled`
/// with the upstream's id and the client's reason; a 2026-07-28 HTTP upstream
/// learns it from its stream closing), and answers the client nothing for it.
fn cancel_on_session(session: &ClientSession, params: Option<&Value>) {
    let Some(client_id) = params.and_then(|p| p.get("requestId")).and_then(Id::from_value) else {
        return;
    };
    // Untracked first: the requests' pumps see they are no longer in flight and stay silent.
    // Nothing untracked: finished already, or never ours.
    let reason = params
        .and_then(|p| p.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or("client cancelled");
    for upstream_id in session.untrack_all(&client_id) {
        if let Some(upstream) = session.upstream() {
            upstream.cancel_request(upstream_id, reason);
        }
    }
}

async fn response_on_session(session: &ClientSession, response: Response) -> Reply {
    let Err(mut response) = session.answer(response) else {
        return Reply::Accepted; // an answer eragate itself was waiting for
    };
    let Some((upstream_id, _)) = response.id.as_ref().and_then(|id| session.take_relayed(id)) else {
        return Reply::rejected(None, Rejection::ResponseToUnknownRequest);
    };
    response.id = Some(upstream_id);
    let Some(upstream) = session.upstream() else {
        return Reply::Accepted;
    };
    if let Err(error) = upstream.respond(response).await {
        tracing::debug!(session = %fingerprint(&session.id), error = %error, "could not forward a response upstream");
    }
    Reply::Accepted
}
