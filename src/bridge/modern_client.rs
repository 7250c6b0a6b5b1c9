//! What a 2026-07-28 client's answer needs to know ([`ModernSide`]), and the
//! ways a call in flight ends or is answered for it: failed with an error, a
//! server→client request refused or answered. Shared by the pump and the
//! multi round-trip shell, which both drive such calls.

use std::sync::Arc;

use serde_json::Value;

use super::handoff;
use crate::protocol::envelope::LogLevel;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{ErrorObject, Id, Message, ModernMethod, Notification, Request, Response};
use crate::router::{Call, UpstreamError, UpstreamSession};
use crate::translate::multiplex::refuse_server_request;
use crate::translate::up::ServerInfo;
use crate::translate::{CachePolicy, up};

/// What a modern answer needs to know.
pub(crate) struct ModernSide {
    /// The method asked.
    pub(crate) method: ModernMethod,
    /// The level this request opted into for `notifications/message`.
    pub(crate) log_level: Option<LogLevel>,
    /// The upstream's identity for `_meta` (the session's).
    pub(crate) server_info: Arc<ServerInfo>,
    /// Cache hints.
    pub(crate) cache: CachePolicy,
}

impl ModernSide {
    /// A result decorated for this request's method, under default cache hints
    /// (an `input_required` is never cached).
    pub(crate) fn decorate(&self, result: Value) -> Value {
        up::result_for_modern(result, self.method, &self.server_info.tree, CachePolicy::default())
    }

    /// What the client sees of a notification: progress, and log messages at
    /// the level the request opted into.
    pub(crate) fn show_notification(&self, n: Notification) -> Option<Message> {
        match n.method.as_str() {
            "notifications/progress" => Some(Message::Notification(n)),
            "notifications/message" => {
                let level = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("level"))
                    .and_then(Value::as_str)
                    .and_then(LogLevel::parse);
                match (self.log_level, level) {
                    (Some(wanted), Some(level)) if level >= wanted => Some(Message::Notification(n)),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The final response (or the call's failure) in 2026-07-28 terms.
    pub(crate) fn translate_done(&self, client_id: &Id, result: Result<Response, UpstreamError>) -> Response {
        match result {
            Ok(response) => self.translate_response(response),
            Err(error) => Response::error(Some(client_id.clone()), error.to_error_object()),
        }
    }

    /// An upstream response in 2026-07-28 terms.
    pub(crate) fn translate_response(&self, response: Response) -> Response {
        let outcome = match response.outcome {
            Outcome::Result(result) => Outcome::Result(up::text_result_for_modern(
                result,
                self.method,
                &self.server_info,
                self.cache,
            )),
            Outcome::Error(error) => Outcome::Error(up::error_for_modern(error)),
        };
        Response {
            id: response.id,
            outcome,
        }
    }
}

/// Answers the client `error` and cancels the upstream call, which cannot complete.
pub(crate) async fn fail_call(call: Call, client_id: &Id, error: ErrorObject, tx: &handoff::Sender) {
    call.cancel(&error.message);
    let _ = tx
        .send(Response::error(Some(client_id.clone()), error).into_message())
        .await;
}

/// Refuses a server→client request this client cannot be asked, without
/// holding up the pump.
pub(crate) fn refuse_later(backend: &Arc<UpstreamSession>, request: Request) {
    let backend = backend.clone();
    tokio::spawn(async move {
        let _ = backend.respond(refuse_server_request(&request)).await;
    });
}

/// Answers an upstream's server→client requests with what the client sent for them.
pub(crate) async fn answer_upstream(session: &Arc<UpstreamSession>, answers: Vec<Response>) {
    for answer in answers {
        if let Err(error) = session.respond(answer).await {
            tracing::debug!(error = %error, "could not answer the upstream's input request");
        }
    }
}
