//! What eragate answers to one client message, independent of the client's
//! transport: one message now, or a stream of them ending with the response.
//!
//! The edge renders a [`Reply`]: HTTP as a status and a JSON body or an SSE
//! stream, stdio and HTTP+SSE as messages on the client's channel.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use super::sessions::ClientSession;
use crate::protocol::errors::Rejection;
use crate::protocol::{Era, Id, Message, Response};
use crate::router::UpstreamError;

/// The answer to one client message.
pub enum Reply {
    /// A notification or response was taken: HTTP 202, nothing on stdio.
    Accepted,
    /// One message, now.
    Message(Status, Message),
    /// Refused before dispatch: the refusal decides the HTTP status and the error.
    Rejected(Option<Id>, Rejection),
    /// Messages as they come (notifications, relayed requests), ending with the
    /// response when there is one; the channel closes after it. The era is the
    /// client's: it decides the HTTP status of an error answered at once.
    Stream(mpsc::Receiver<Message>, Era),
    /// A legacy `initialize` answered: the client now has this session.
    Initialized(Message, Arc<ClientSession>),
}

/// How a one-message reply maps onto HTTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// 200: a result, or an error produced by a handler.
    Ok,
    /// 503 with `Retry-After`: the upstream is at capacity.
    Overloaded,
}

impl Reply {
    /// A result.
    pub fn result(id: Id, result: Value) -> Reply {
        Reply::Message(Status::Ok, Response::result(id, result).into_message())
    }

    /// A refusal before dispatch, answering the request `id` (if it was one).
    pub fn rejected(id: Option<Id>, rejection: Rejection) -> Reply {
        Reply::Rejected(id, rejection)
    }

    /// An upstream failure as the client's JSON-RPC error.
    pub fn upstream_failure(id: Option<Id>, error: &UpstreamError) -> Reply {
        let status = if error.is_overload() {
            Status::Overloaded
        } else {
            Status::Ok
        };
        Reply::Message(status, Response::error(id, error.to_error_object()).into_message())
    }
}

/// Writes a reply onto a message channel (stdio, or an HTTP+SSE stream), in the
/// background. Returns the task streaming a call, so that the caller can stop it
/// (which cancels a modern call).
pub fn forward_to(reply: Reply, out: mpsc::Sender<Message>) -> Option<tokio::task::JoinHandle<()>> {
    match reply {
        Reply::Accepted => None,
        Reply::Message(_, message) | Reply::Initialized(message, _) => {
            tokio::spawn(async move {
                let _ = out.send(message).await;
            });
            None
        }
        Reply::Rejected(id, rejection) => {
            let message = rejection_message(id, &rejection);
            tokio::spawn(async move {
                let _ = out.send(message).await;
            });
            None
        }
        Reply::Stream(mut messages, _) => Some(tokio::spawn(async move {
            while let Some(message) = messages.recv().await {
                if out.send(message).await.is_err() {
                    return;
                }
            }
        })),
    }
}

/// The responses of a batch's replies, in order, for one JSON array answer.
/// Notifications streamed along the way have no place in a batch answer and are dropped.
pub async fn batch_responses(replies: Vec<Reply>) -> Vec<Message> {
    let mut messages = Vec::new();
    for reply in replies {
        match reply {
            Reply::Accepted => {}
            Reply::Message(_, message) | Reply::Initialized(message, _) => messages.push(message),
            Reply::Rejected(id, rejection) => messages.push(rejection_message(id, &rejection)),
            Reply::Stream(mut rx, _) => {
                while let Some(message) = rx.recv().await {
                    if matches!(message, Message::Response(_)) {
                        messages.push(message);
                    }
                }
            }
        }
    }
    messages
}

/// Relays what a session's upstream sends outside any request onto `out`.
pub fn forward_unsolicited(session: &Arc<ClientSession>, out: mpsc::Sender<Message>) {
    if let Ok(mut unsolicited) = session.attach_stream() {
        tokio::spawn(async move {
            while let Some(message) = unsolicited.recv().await {
                if out.send(message).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// A refusal as the JSON-RPC error a message channel carries.
pub fn rejection_message(id: Option<Id>, rejection: &Rejection) -> Message {
    Response::error(id, rejection.in_band()).into_message()
}
