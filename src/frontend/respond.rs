//! Shaping answers for clients: a JSON body, or an SSE stream scoped to one
//! request that carries its notifications, keep-alives and final response.
//!
//! The choice is made lazily: a request whose upstream answers quickly and
//! silently gets `application/json`; one that streams progress (or stays silent
//! past `stream_after`) gets `text/event-stream`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::sessions::ClientSession;
use crate::protocol::envelope::LogLevel;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::sse::{self, KEEP_ALIVE};
use crate::protocol::{ErrorObject, Id, Message, ModernMethod, Response};
use crate::translate::{CachePolicy, up};
use crate::upstream::session::{CallStep, refuse_server_request};
use crate::upstream::{Call, CallEvent, UpstreamError, UpstreamSession};

/// The body type of every response eragate sends.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Bound of frames queued toward one SSE response; a slow reader slows the pump.
const SSE_QUEUE: usize = 32;

/// A body from bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// An empty response.
pub fn empty(status: StatusCode) -> http::Response<Body> {
    with_status(status, full(Bytes::new()))
}

/// A plain-text response (for failures before any JSON-RPC is read).
pub fn plain(status: StatusCode, text: &str) -> http::Response<Body> {
    let mut response = with_status(status, full(text.to_owned()));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// One JSON-RPC message as `application/json`.
pub fn json(status: StatusCode, message: &Message) -> http::Response<Body> {
    let mut response = with_status(status, full(message.to_bytes()));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// Several messages as one JSON array (a batch answer).
pub fn json_batch(messages: &[Message]) -> http::Response<Body> {
    let array = Value::Array(messages.iter().map(Message::to_value).collect());
    let mut response = with_status(StatusCode::OK, full(serde_json::to_vec(&array).unwrap_or_default()));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A JSON-RPC error answer.
pub fn rpc_error(status: StatusCode, id: Option<Id>, error: ErrorObject) -> http::Response<Body> {
    json(status, &Response::error(id, error).into_message())
}

/// An upstream failure as a JSON-RPC error; overload becomes 503 with `Retry-After`.
pub fn upstream_failure(id: Option<Id>, error: &UpstreamError) -> http::Response<Body> {
    let status = if error.is_overload() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let mut response = rpc_error(status, id, error.to_error_object());
    if error.is_overload() {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// An SSE response whose frames are fed through the returned sender.
pub fn sse() -> (mpsc::Sender<Bytes>, http::Response<Body>) {
    let (tx, rx) = mpsc::channel::<Bytes>(SSE_QUEUE);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    let mut response = with_status(StatusCode::OK, StreamBody::new(stream).boxed_unsync());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    (tx, response)
}

/// Frames a message for an SSE stream.
pub fn sse_frame(message: &Message) -> Bytes {
    Bytes::from(sse::message_frame(&message.to_bytes()))
}

fn with_status(status: StatusCode, body: Body) -> http::Response<Body> {
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    response
}

/// Who the answer is for: it decides what of the upstream's traffic the client sees.
pub enum ClientSide {
    /// A 2026-07-28 client.
    Modern(ModernSide),
    /// A legacy client on its own session.
    Legacy(Arc<ClientSession>),
}

/// What a modern answer needs to know.
pub struct ModernSide {
    /// The method asked.
    pub method: ModernMethod,
    /// The level this request opted into for `notifications/message`.
    pub log_level: Option<LogLevel>,
    /// The upstream's identity for `_meta`.
    pub server_info: Value,
    /// Cache hints.
    pub cache: CachePolicy,
}

/// Timing of one answer.
#[derive(Clone, Copy, Debug)]
pub struct AnswerTiming {
    /// Silence allowed before switching to SSE.
    pub stream_after: Duration,
    /// Keep-alive interval on SSE.
    pub keep_alive: Duration,
    /// The request's overall bound.
    pub timeout: Duration,
}

/// Turns a call in flight into the client's HTTP answer.
pub async fn answer(mut call: Call, side: ClientSide, client_id: Id, timing: AnswerTiming) -> http::Response<Body> {
    let deadline = Instant::now() + timing.timeout;
    let switch_at = (Instant::now() + timing.stream_after).min(deadline);
    let first = loop {
        match tokio::time::timeout_at(switch_at, call.next()).await {
            Ok(CallStep::Done(result)) => return final_json(&side, client_id, result),
            Ok(CallStep::Event(event)) => {
                if let Some(message) = side.translate_event(event, call.session()) {
                    break Some(message);
                }
            }
            Err(_) if Instant::now() >= deadline => {
                let error = timeout_error(&call, timing.timeout);
                call.cancel("request timed out");
                side.finish(&client_id);
                return upstream_failure(Some(client_id), &error);
            }
            Err(_) => break None,
        }
    };
    let (tx, response) = sse();
    if let Some(message) = first {
        let _ = tx.try_send(sse_frame(&message));
    }
    tokio::spawn(pump(call, side, client_id, tx, deadline, timing));
    response
}

/// Feeds an SSE answer until the final response, the deadline, or the client leaving.
async fn pump(
    mut call: Call,
    side: ClientSide,
    client_id: Id,
    tx: mpsc::Sender<Bytes>,
    deadline: Instant,
    timing: AnswerTiming,
) {
    let mut keep_alive = tokio::time::interval_at(Instant::now() + timing.keep_alive, timing.keep_alive);
    loop {
        tokio::select! {
            step = call.next() => match step {
                CallStep::Event(event) => {
                    if let Some(message) = side.translate_event(event, call.session())
                        && tx.send(sse_frame(&message)).await.is_err()
                    {
                        break; // the client left: dropping the call cancels it (modern) or detaches it (legacy)
                    }
                }
                CallStep::Done(result) => {
                    let message = side.translate_done(&client_id, result).into_message();
                    let _ = tx.send(sse_frame(&message)).await;
                    side.finish(&client_id);
                    return;
                }
            },
            _ = keep_alive.tick() => {
                if tx.send(Bytes::from_static(KEEP_ALIVE)).await.is_err() {
                    break;
                }
            }
            () = tx.closed() => break,
            () = tokio::time::sleep_until(deadline) => {
                let error = timeout_error(&call, timing.timeout);
                call.cancel("request timed out");
                let message = Response::error(Some(client_id.clone()), error.to_error_object()).into_message();
                let _ = tx.send(sse_frame(&message)).await;
                side.finish(&client_id);
                return;
            }
        }
    }
    side.finish(&client_id);
}

fn final_json(side: &ClientSide, client_id: Id, result: Result<Response, UpstreamError>) -> http::Response<Body> {
    side.finish(&client_id);
    match result {
        Err(error) => upstream_failure(Some(client_id), &error),
        Ok(response) => json(
            StatusCode::OK,
            &side.translate_done(&client_id, Ok(response)).into_message(),
        ),
    }
}

fn timeout_error(call: &Call, timeout: Duration) -> UpstreamError {
    UpstreamError::Timeout {
        upstream: call.session().upstream_name().to_owned(),
        after_ms: timeout.as_millis() as u64,
    }
}

impl ClientSide {
    /// What (if anything) the client sees of an event.
    fn translate_event(&self, event: CallEvent, upstream: &Arc<UpstreamSession>) -> Option<Message> {
        match (self, event) {
            (ClientSide::Legacy(_), CallEvent::Notification(n)) => Some(Message::Notification(n)),
            (ClientSide::Legacy(session), CallEvent::ServerRequest(request)) => Some(session.relay_request(request)),
            (ClientSide::Modern(side), CallEvent::Notification(n)) => match n.method.as_str() {
                "notifications/progress" => Some(Message::Notification(n)),
                "notifications/message" => {
                    let level = n
                        .params
                        .as_ref()
                        .and_then(|p| p.get("level"))
                        .and_then(Value::as_str)
                        .and_then(LogLevel::parse);
                    match (side.log_level, level) {
                        (Some(wanted), Some(level)) if level >= wanted => Some(Message::Notification(n)),
                        _ => None,
                    }
                }
                _ => None,
            },
            (ClientSide::Modern(_), CallEvent::ServerRequest(request)) => {
                // Relaying these as input_required is the multi round-trip bridge; until then refuse cleanly.
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let _ = upstream.respond(refuse_server_request(&request)).await;
                });
                None
            }
        }
    }

    /// The final response in the client's era.
    fn translate_done(&self, client_id: &Id, result: Result<Response, UpstreamError>) -> Response {
        let response = match result {
            Ok(response) => response,
            Err(error) => return Response::error(Some(client_id.clone()), error.to_error_object()),
        };
        match self {
            ClientSide::Legacy(_) => response,
            ClientSide::Modern(side) => {
                let outcome = match response.outcome {
                    Outcome::Result(result) => Outcome::Result(up::result_for_modern(
                        result,
                        side.method,
                        &side.server_info,
                        side.cache,
                    )),
                    Outcome::Error(error) => Outcome::Error(up::error_for_modern(error)),
                };
                Response {
                    id: response.id,
                    outcome,
                }
            }
        }
    }

    fn finish(&self, client_id: &Id) {
        if let ClientSide::Legacy(session) = self {
            session.untrack(client_id);
        }
    }
}
