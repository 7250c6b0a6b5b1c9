//! HTTP rendering of a [`Reply`]: a JSON body, or an SSE stream scoped to one
//! request with keep-alive comments.
//!
//! The choice is made lazily: a request whose first message is its response
//! gets `application/json`; one that streams notifications first (or stays
//! silent past `stream_after`) gets `text/event-stream`.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::bridge::reply::{First, Responses};
use crate::bridge::{Reply, Status};
use crate::protocol::errors::{Rejection, handler_error_status};
use crate::protocol::headers::MCP_SESSION_ID;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::sse::{self, KEEP_ALIVE};
use crate::protocol::{Id, Message, Response};

/// The body type of every response eragate sends.
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Bound of frames queued toward one SSE body.
const SSE_QUEUE: usize = 32;
/// Most messages joined into one frame (one write).
const SSE_BATCH: usize = 32;

/// Timing of streamed answers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamTiming {
    /// Silence allowed before a JSON answer becomes an SSE stream.
    pub(crate) stream_after: Duration,
    /// Interval of keep-alive comments.
    pub(crate) keep_alive: Duration,
}

/// Renders a reply.
pub(crate) async fn render(reply: Reply, timing: StreamTiming) -> http::Response<Body> {
    match reply {
        Reply::Accepted | Reply::Cancelled(_) => empty(StatusCode::ACCEPTED),
        Reply::Message(status, message) => message_response(status, &message),
        Reply::Rejected(id, rejection) => rejected(&rejection, id),
        Reply::Initialized(message, session) => {
            let mut response = json(StatusCode::OK, &message);
            if let Ok(value) = HeaderValue::from_str(&session.id) {
                response.headers_mut().insert(MCP_SESSION_ID, value);
            }
            response
        }
        Reply::Stream(mut messages, era) => match messages.recv_first(timing.stream_after).await {
            First::Message(Some(Message::Response(response))) => {
                let status = match &response.outcome {
                    Outcome::Error(error) => handler_error_status(error.code, era),
                    Outcome::Result(_) => StatusCode::OK,
                };
                json(status, &Message::Response(response))
            }
            First::Message(Some(first)) => stream(Some(first), messages, timing.keep_alive, None),
            First::Message(None) => empty(StatusCode::ACCEPTED),
            First::Late => stream(None, messages, timing.keep_alive, None),
        },
    }
}

/// Renders several replies as one batch answer (JSON array of their final messages).
pub(crate) async fn render_batch(replies: Vec<Reply>) -> http::Response<Body> {
    let messages = crate::bridge::reply::batch_responses(replies).await;
    if messages.is_empty() {
        return empty(StatusCode::ACCEPTED);
    }
    let mut response = with_status(StatusCode::OK, full(Message::array_to_bytes(&messages)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn message_response(status: Status, message: &Message) -> http::Response<Body> {
    match status {
        Status::Ok => json(StatusCode::OK, message),
        Status::Overloaded => {
            let mut response = json(StatusCode::SERVICE_UNAVAILABLE, message);
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
    }
}

/// An SSE response carrying `first` and then everything from `messages`.
/// A standing stream (a GET stream) also ends when `until` is cancelled (shutdown).
///
/// Messages that are ready together go out as one frame (one write): a call
/// answered with a progress notification and its result, both already here,
/// is a complete body with no task and no channel at all.
pub(crate) fn stream(
    first: Option<Message>,
    mut messages: Responses,
    keep_alive: Duration,
    until: Option<CancellationToken>,
) -> http::Response<Body> {
    let mut ready = Vec::new();
    if let Some(first) = &first {
        sse::append_message_frame(&mut ready, &first.to_bytes());
    }
    if drain_ready(&mut messages, &mut ready) {
        return sse_response(full(ready));
    }
    let until = until.unwrap_or_default();
    let (tx, response) = sse();
    if !ready.is_empty() {
        // A fresh channel has room: the frame is there when the body is first polled.
        let _ = tx.try_send(Bytes::from(ready));
    }
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive);
        loop {
            tokio::select! {
                message = messages.recv() => match message {
                    Some(message) => {
                        let mut frames = Vec::new();
                        sse::append_message_frame(&mut frames, &message.to_bytes());
                        let ended = drain_ready(&mut messages, &mut frames);
                        if tx.send(Bytes::from(frames)).await.is_err() || ended { return }
                    }
                    None => return,
                },
                _ = ticker.tick() => if tx.send(Bytes::from_static(KEEP_ALIVE)).await.is_err() { return },
                // The client left: dropping `messages` tells the producer.
                () = tx.closed() => return,
                () = until.cancelled() => return,
            }
        }
    });
    response
}

/// Appends the frames of every message already queued; `true` when the sender
/// is gone (nothing more will come). Bounded by the channel's own bound.
fn drain_ready(messages: &mut Responses, out: &mut Vec<u8>) -> bool {
    for _ in 0..SSE_BATCH {
        match messages.try_recv() {
            Ok(message) => sse::append_message_frame(out, &message.to_bytes()),
            Err(mpsc::error::TryRecvError::Empty) => return false,
            Err(mpsc::error::TryRecvError::Disconnected) => return true,
        }
    }
    false
}

/// A body from bytes.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// An empty response.
pub(crate) fn empty(status: StatusCode) -> http::Response<Body> {
    with_status(status, full(Bytes::new()))
}

/// A plain-text response (for failures before any JSON-RPC is read).
pub(crate) fn plain(status: StatusCode, text: &str) -> http::Response<Body> {
    let mut response = with_status(status, full(text.to_owned()));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

/// One JSON-RPC message as `application/json`.
pub(crate) fn json(status: StatusCode, message: &Message) -> http::Response<Body> {
    let mut response = with_status(status, full(message.to_bytes()));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A refusal before dispatch: its status, and its JSON-RPC error (answering
/// the request `id`) or its plain text.
pub(crate) fn rejected(rejection: &Rejection, id: Option<Id>) -> http::Response<Body> {
    let status = rejection.status();
    let mut response = match rejection.error() {
        Some(error) => json(status, &Response::error(id, error).into_message()),
        None => plain(status, &rejection.text()),
    };
    if *rejection == Rejection::MethodNotAllowed {
        response.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
    }
    if let Some(secs) = rejection.retry_after_secs() {
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    // Built from configured URLs and fixed texts; a value that is not a valid
    // header still must not lose the status.
    if let Some(Ok(challenge)) = rejection.challenge().map(HeaderValue::from_str) {
        response.headers_mut().insert(http::header::WWW_AUTHENTICATE, challenge);
    }
    response
}

/// An SSE response whose frames are fed through the returned sender.
pub(crate) fn sse() -> (mpsc::Sender<Bytes>, http::Response<Body>) {
    let (tx, rx) = mpsc::channel::<Bytes>(SSE_QUEUE);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    (tx, sse_response(StreamBody::new(stream).boxed_unsync()))
}

fn sse_response(body: Body) -> http::Response<Body> {
    let mut response = with_status(StatusCode::OK, body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Frames a message for an SSE stream.
pub(crate) fn sse_frame(message: &Message) -> Bytes {
    Bytes::from(sse::message_frame(&message.to_bytes()))
}

fn with_status(status: StatusCode, body: Body) -> http::Response<Body> {
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    response
}
