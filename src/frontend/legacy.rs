//! Serving handshake-era clients: `initialize` answered by eragate on a
//! dedicated upstream session, then every message relayed on that session.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{Value, json};

use super::Gateway;
use super::respond::{self, Body, ClientSide};
use super::sessions::{AttachError, ClientSession};
use crate::protocol::headers::MCP_SESSION_ID;
use crate::protocol::{ErrorCode, ErrorObject, Id, Message, Notification, Request, Response, Revision};
use crate::translate::{down, up};
use crate::upstream::Upstream;
use crate::upstream::session::OnDrop;

/// A legacy message and the session header it came with.
pub async fn serve(
    gateway: &Gateway,
    upstream: &Arc<Upstream>,
    message: Message,
    session_id: Option<&str>,
) -> http::Response<Body> {
    if let Message::Request(request) = &message
        && request.method == "initialize"
    {
        return initialize(gateway, upstream, request.clone()).await;
    }
    let Some(session_id) = session_id else {
        return sessionless(upstream, message).await;
    };
    let Some(session) = gateway.sessions.find(session_id) else {
        return session_not_found(&message);
    };
    if !Arc::ptr_eq(&session.upstream, upstream) {
        return session_not_found(&message);
    }
    match message {
        Message::Request(request) => request_on_session(gateway, session, request).await,
        Message::Notification(notification) => notification_on_session(&session, notification).await,
        Message::Response(response) => response_on_session(&session, response).await,
    }
}

async fn initialize(gateway: &Gateway, upstream: &Arc<Upstream>, request: Request) -> http::Response<Body> {
    let requested = request
        .params
        .as_ref()
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    let negotiated = Revision::negotiate_legacy(requested);
    let params = down::legacy_initialize_for_upstream(request.params.as_ref(), negotiated);
    let upstream_session = match upstream.open_dedicated(params).await {
        Ok(session) => session,
        Err(error) => return respond::upstream_failure(Some(request.id), &error),
    };
    let upstream_result = upstream_session
        .initialize_result()
        .map(|r| (**r).clone())
        .unwrap_or_default();
    let (result, revision) = up::initialize_result_for_client(upstream_result, negotiated);
    let session = gateway.sessions.create(revision, upstream.clone(), upstream_session);
    tracing::info!(session = %session.id, %revision, requested, "legacy client session opened");
    let mut response = respond::json(StatusCode::OK, &Response::result(request.id, result).into_message());
    if let Ok(value) = http::HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(MCP_SESSION_ID, value);
    }
    response
}

/// Requests without a session: a legacy-shaped `server/discover` probe and
/// `ping` are answered; anything else needs `initialize` first.
async fn sessionless(upstream: &Arc<Upstream>, message: Message) -> http::Response<Body> {
    match message {
        Message::Request(request) if request.method == "server/discover" => {
            super::modern::discover(upstream, request.id).await
        }
        Message::Request(request) if request.method == "ping" => {
            respond::json(StatusCode::OK, &Response::result(request.id, json!({})).into_message())
        }
        Message::Request(request) => respond::rpc_error(
            StatusCode::BAD_REQUEST,
            Some(request.id),
            ErrorObject::new(
                ErrorCode::INVALID_REQUEST,
                "Bad Request: Mcp-Session-Id header is required (send initialize first)",
            ),
        ),
        Message::Notification(_) | Message::Response(_) => respond::rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            ErrorObject::new(
                ErrorCode::INVALID_REQUEST,
                "Bad Request: Mcp-Session-Id header is required",
            ),
        ),
    }
}

fn session_not_found(message: &Message) -> http::Response<Body> {
    let id = match message {
        Message::Request(r) => Some(r.id.clone()),
        _ => None,
    };
    respond::rpc_error(
        StatusCode::NOT_FOUND,
        id,
        ErrorObject::new(
            ErrorCode::INVALID_REQUEST,
            "Session not found: initialize a new session",
        ),
    )
}

async fn request_on_session(gateway: &Gateway, session: Arc<ClientSession>, request: Request) -> http::Response<Body> {
    if request.method == "ping" {
        return respond::json(StatusCode::OK, &Response::result(request.id, json!({})).into_message());
    }
    let upstream = session.upstream.clone();
    let _permit = match upstream.admit() {
        Ok(permit) => permit,
        Err(error) => return respond::upstream_failure(Some(request.id), &error),
    };
    let call = match session
        .upstream_session
        .call(&request.method, request.params, request.id.clone(), OnDrop::Detach)
        .await
    {
        Ok(call) => call,
        Err(error) => {
            gateway.sessions.remove(&session.id);
            return respond::upstream_failure(Some(request.id), &error);
        }
    };
    session.track(request.id.clone(), call.upstream_id());
    let timing = super::modern::timing(gateway, &upstream);
    respond::answer(call, ClientSide::Legacy(session), request.id, timing).await
}

async fn notification_on_session(session: &ClientSession, notification: Notification) -> http::Response<Body> {
    let forwarded = match notification.method.as_str() {
        // eragate completed the upstream handshake when it opened the session.
        "notifications/initialized" => None,
        "notifications/cancelled" => cancelled_for_upstream(session, notification),
        _ => Some(notification),
    };
    if let Some(notification) = forwarded
        && let Err(error) = session
            .upstream_session
            .notify(&notification.method, notification.params)
            .await
    {
        tracing::debug!(session = %session.id, error = %error, "could not forward a notification");
    }
    respond::empty(StatusCode::ACCEPTED)
}

/// Rewrites `requestId` from the client's id to the upstream's.
fn cancelled_for_upstream(session: &ClientSession, mut notification: Notification) -> Option<Notification> {
    let client_id = notification
        .params
        .as_ref()
        .and_then(|p| p.get("requestId"))
        .and_then(Id::from_value)?;
    let upstream_id = session.upstream_id_of(&client_id)?;
    if let Some(params) = notification.params.as_mut().and_then(Value::as_object_mut) {
        params.insert("requestId".into(), Value::from(upstream_id));
    }
    Some(notification)
}

async fn response_on_session(session: &ClientSession, mut response: Response) -> http::Response<Body> {
    let Some(upstream_id) = response.id.as_ref().and_then(|id| session.take_relayed(id)) else {
        return respond::rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            ErrorObject::new(ErrorCode::INVALID_REQUEST, "response to an unknown request"),
        );
    };
    response.id = Some(upstream_id);
    if let Err(error) = session.upstream_session.respond(response).await {
        tracing::debug!(session = %session.id, error = %error, "could not forward a response upstream");
    }
    respond::empty(StatusCode::ACCEPTED)
}

/// The client's GET stream: what its upstream session sends outside any request.
pub fn open_stream(gateway: &Gateway, session_id: &str) -> http::Response<Body> {
    let Some(session) = gateway.sessions.find(session_id) else {
        return respond::plain(StatusCode::NOT_FOUND, "Session not found");
    };
    let mut messages = match session.attach_stream() {
        Ok(rx) => rx,
        Err(AttachError::AlreadyOpen) => {
            return respond::plain(StatusCode::CONFLICT, "a stream is already open for this session");
        }
    };
    let (tx, response) = respond::sse();
    let keep_alive = gateway.config.listen.sse_keep_alive.0;
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive);
        loop {
            tokio::select! {
                message = messages.recv() => match message {
                    Some(message) => if tx.send(respond::sse_frame(&message)).await.is_err() { return },
                    None => return,
                },
                _ = ticker.tick() => if tx.send(bytes::Bytes::from_static(crate::protocol::sse::KEEP_ALIVE)).await.is_err() { return },
                () = tx.closed() => return,
            }
        }
    });
    response
}

/// DELETE: the client ends its session.
pub fn end_session(gateway: &Gateway, session_id: &str) -> http::Response<Body> {
    if gateway.sessions.remove(session_id) {
        respond::empty(StatusCode::OK)
    } else {
        respond::plain(StatusCode::NOT_FOUND, "Session not found")
    }
}
