//! Serving handshake-era clients: `initialize` answered by eragate on a
//! dedicated upstream session, then every message relayed on that session.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Gateway;
use super::reply::{self, ClientSide, Reply};
use super::sessions::{ClientSession, SessionClaims, stateless_envelope};
use crate::auth::Principal;
use crate::config::LegacySessions;
use crate::protocol::envelope::LogLevel;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{Era, ErrorCode, ErrorObject, Id, Message, Notification, Request, Response, Revision};
use crate::translate::{down, up};
use crate::upstream::pool::gateway_client_info;
use crate::upstream::{OnDrop, PartitionKey, Upstream, UpstreamError};

/// The client's session as its transport found it.
pub enum SessionLookup {
    /// The client named no session.
    Absent,
    /// The client named a session eragate does not know (or that ended).
    Unknown,
    /// A live session.
    Found(Arc<ClientSession>),
}

/// Serves one legacy message.
pub async fn serve(
    gateway: &Gateway,
    upstream: &Arc<Upstream>,
    message: Message,
    session: SessionLookup,
    principal: &Principal,
) -> Reply {
    if let Message::Request(request) = &message
        && request.method == "initialize"
    {
        return initialize(gateway, upstream, request.clone(), principal).await;
    }
    let session = match session {
        SessionLookup::Found(session) if Arc::ptr_eq(&session.upstream, upstream) => session,
        SessionLookup::Found(_) | SessionLookup::Unknown => return session_not_found(&message),
        SessionLookup::Absent => return sessionless(upstream, message).await,
    };
    match message {
        Message::Request(request) => request_on_session(gateway, session, request).await,
        Message::Notification(notification) => notification_on_session(&session, notification).await,
        Message::Response(response) => response_on_session(&session, response).await,
    }
}

async fn initialize(gateway: &Gateway, upstream: &Arc<Upstream>, request: Request, principal: &Principal) -> Reply {
    let requested = request
        .params
        .as_ref()
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    let negotiated = Revision::negotiate_legacy(requested);
    match upstream.era().await {
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
        Ok(Era::Modern) => {
            return initialize_over_modern(gateway, upstream, request, negotiated, principal).await;
        }
        Ok(Era::Legacy) => {}
    }
    let params = down::legacy_initialize_for_upstream(request.params.as_ref(), negotiated);
    let shared = upstream.config().pool.legacy_sessions == LegacySessions::Shared;
    let opened = if shared {
        // One pooled session per principal, revision and capability set, shared by every such client.
        let capabilities = params.get("capabilities").cloned().unwrap_or_default();
        let key = PartitionKey::new(
            principal.as_str(),
            &json!({"revision": negotiated.as_str(), "capabilities": capabilities}),
        );
        upstream.pooled(key, move || params).await
    } else {
        upstream.open_dedicated(params).await
    };
    let upstream_session = match opened {
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
        ups: upstream.name().to_owned(),
        usid: upstream_session.transport_session_id(),
        mem: upstream_session.transport_endpoint(),
        own: None,
        exp: 0,
    };
    let process_bound = claims.usid.is_none();
    let id = gateway.sessions.mint(claims, process_bound);
    let session = if shared {
        ClientSession::open_shared(id, revision, upstream.clone(), upstream_session)
    } else {
        ClientSession::open(id, revision, upstream.clone(), upstream_session)
    };
    tracing::info!(session = %session.id, %revision, requested, shared, "legacy client session opened");
    Reply::Initialized(Response::result(request.id, result).into_message(), session)
}

/// `initialize` in front of a modern upstream: answered from its
/// `server/discover`; the session's state is the envelope its requests will carry.
async fn initialize_over_modern(
    gateway: &Gateway,
    upstream: &Arc<Upstream>,
    request: Request,
    negotiated: Revision,
    principal: &Principal,
) -> Reply {
    let params = request.params.as_ref();
    let capabilities = params.and_then(|p| p.get("capabilities")).cloned().unwrap_or_default();
    let client_info = params.and_then(|p| p.get("clientInfo")).cloned().unwrap_or_default();
    let envelope = stateless_envelope(&capabilities, &client_info);
    let shared = match upstream.modern_session().await {
        Ok(session) => session,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let discover_params = down::legacy_params_for_modern(None, &envelope);
    let timeout = upstream.config().handshake_timeout.0;
    let answer = match shared
        .call(
            "server/discover",
            Some(discover_params),
            request.id.clone(),
            OnDrop::Detach,
        )
        .await
    {
        Ok(call) => tokio::time::timeout(timeout, call.response())
            .await
            .unwrap_or_else(|_| {
                Err(UpstreamError::Timeout {
                    upstream: upstream.name().to_owned(),
                    after_ms: timeout.as_millis() as u64,
                })
            }),
        Err(error) => Err(error),
    };
    let discover = match answer {
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
        ups: upstream.name().to_owned(),
        usid: None,
        mem: None,
        own: None,
        exp: 0,
    };
    // Nothing of this session lives in this process: any replica can serve it.
    let id = gateway.sessions.mint(claims, false);
    let session = ClientSession::open_stateless(id, negotiated, upstream.clone(), shared, envelope);
    tracing::info!(session = %session.id, revision = %negotiated, "legacy client session opened on a modern upstream");
    Reply::Initialized(Response::result(request.id, result).into_message(), session)
}

/// Requests without a session: a legacy-shaped `server/discover` probe and
/// `ping` are answered; anything else needs `initialize` first.
async fn sessionless(upstream: &Arc<Upstream>, message: Message) -> Reply {
    match message {
        Message::Request(request) if request.method == "server/discover" => {
            super::modern::discover(upstream, request.id).await
        }
        Message::Request(request) if request.method == "ping" => Reply::result(request.id, json!({})),
        Message::Request(request) => Reply::rejected(
            400,
            Some(request.id),
            ErrorObject::new(
                ErrorCode::INVALID_REQUEST,
                "Bad Request: Mcp-Session-Id header is required (send initialize first)",
            ),
        ),
        Message::Notification(_) | Message::Response(_) => Reply::rejected(
            400,
            None,
            ErrorObject::new(
                ErrorCode::INVALID_REQUEST,
                "Bad Request: Mcp-Session-Id header is required",
            ),
        ),
    }
}

fn session_not_found(message: &Message) -> Reply {
    let id = match message {
        Message::Request(r) => Some(r.id.clone()),
        _ => None,
    };
    Reply::rejected(
        404,
        id,
        ErrorObject::new(
            ErrorCode::INVALID_REQUEST,
            "Session not found: initialize a new session",
        ),
    )
}

async fn request_on_session(gateway: &Gateway, session: Arc<ClientSession>, request: Request) -> Reply {
    if request.method == "ping" {
        return Reply::result(request.id, json!({}));
    }
    let upstream = session.upstream.clone();
    let mut param_headers = Vec::new();
    let params = match session.envelope() {
        None => request.params,
        Some(envelope) => match request.method.as_str() {
            "logging/setLevel" => return set_level(&session, request),
            // Kept as one subscriptions/listen per session toward the modern upstream.
            "resources/subscribe" | "resources/unsubscribe" => {
                let result = super::listen::legacy_subscription_change(&session, &request).await;
                return Reply::result(request.id, result);
            }
            "tools/call" => {
                param_headers = gateway
                    .tool_headers
                    .headers_for_call(&session, &envelope, request.params.as_ref())
                    .await;
                Some(down::legacy_params_for_modern(request.params, &envelope))
            }
            _ => Some(down::legacy_params_for_modern(request.params, &envelope)),
        },
    };
    let permit = match upstream.admit().await {
        Ok(permit) => permit,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    // Toward a modern upstream an `input_required` answer is re-issued with the same params.
    let params_for_reissue = params.clone().filter(|_| session.envelope().is_some());
    let call = match session
        .upstream_session
        .call_with_headers(
            &request.method,
            params,
            request.id.clone(),
            OnDrop::Detach,
            &param_headers,
        )
        .await
    {
        Ok(call) => call,
        Err(error) => {
            if session.envelope().is_none() {
                gateway.sessions.remove(&session.id);
            }
            return Reply::upstream_failure(Some(request.id), &error);
        }
    };
    session.track(request.id.clone(), call.upstream_id());
    let timeout = upstream.config().timeout_for(&request.method);
    let side = ClientSide::Legacy {
        session,
        method: request.method,
        reissue: params_for_reissue,
        param_headers,
    };
    reply::stream_call(call, side, request.id, Some(timeout), permit)
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
            let error = ErrorObject::new(ErrorCode::INVALID_PARAMS, "level must be a logging level");
            Reply::Message(
                reply::Status::Ok,
                Response::error(Some(request.id), error).into_message(),
            )
        }
    }
}

async fn notification_on_session(session: &ClientSession, notification: Notification) -> Reply {
    if notification.method == "notifications/cancelled" {
        cancel_on_session(session, notification.params.as_ref());
        return Reply::Accepted;
    }
    if session.envelope().is_some() {
        return Reply::Accepted; // a modern upstream takes no notifications from clients
    }
    if notification.method == "notifications/initialized" {
        return Reply::Accepted; // eragate completed the upstream handshake when it opened the session
    }
    if let Err(error) = session
        .upstream_session
        .notify(&notification.method, notification.params)
        .await
    {
        tracing::debug!(session = %session.id, error = %error, "could not forward a notification");
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
    // Untracked first: the request's pump sees it is no longer in flight and stays silent.
    let Some(upstream_id) = session.untrack(&client_id) else {
        return; // finished already, or never ours
    };
    let reason = params
        .and_then(|p| p.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or("client cancelled");
    session.upstream_session.cancel_request(upstream_id, reason);
}

async fn response_on_session(session: &ClientSession, response: Response) -> Reply {
    let Err(mut response) = session.answer(response) else {
        return Reply::Accepted; // an answer eragate itself was waiting for
    };
    let Some(upstream_id) = response.id.as_ref().and_then(|id| session.take_relayed(id)) else {
        return Reply::rejected(
            400,
            None,
            ErrorObject::new(ErrorCode::INVALID_REQUEST, "response to an unknown request"),
        );
    };
    response.id = Some(upstream_id);
    if let Err(error) = session.upstream_session.respond(response).await {
        tracing::debug!(session = %session.id, error = %error, "could not forward a response upstream");
    }
    Reply::Accepted
}
