//! What eragate answers to one client message, independent of the client's
//! transport, and the pump that turns a call in flight into that answer.
//!
//! HTTP renders a [`Reply`] as a status and a JSON body or an SSE stream;
//! stdio writes the same messages as lines.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::time::Instant;

use super::mrtr::SuspendedCalls;
use super::sessions::ClientSession;
use crate::protocol::envelope::LogLevel;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{ErrorCode, ErrorObject, Id, Message, ModernMethod, Response};
use crate::translate::mrtr::{self, InputKind};
use crate::translate::multiplex::refuse_server_request;
use crate::translate::{CachePolicy, up};
use crate::upstream::{Call, CallEvent, CallStep, OnDrop, UpstreamError, UpstreamSession};

/// Bound of messages queued toward one streamed answer; a slow reader slows the pump.
const STREAM_QUEUE: usize = 32;

/// The answer to one client message.
pub enum Reply {
    /// A notification or response was taken: HTTP 202, nothing on stdio.
    Accepted,
    /// One message, now.
    Message(Status, Message),
    /// Messages as they come (notifications, relayed requests), ending with the
    /// response when there is one; the channel closes after it.
    Stream(mpsc::Receiver<Message>),
    /// A legacy `initialize` answered: the client now has this session.
    Initialized(Message, Arc<ClientSession>),
}

/// How a one-message reply maps onto HTTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// 200: a result, or an error produced by a handler.
    Ok,
    /// A rejection before dispatch, with the HTTP status the spec gives it.
    Rejected(u16),
    /// 503 with `Retry-After`: the upstream is at capacity.
    Overloaded,
}

impl Reply {
    /// A result.
    pub fn result(id: Id, result: Value) -> Reply {
        Reply::Message(Status::Ok, Response::result(id, result).into_message())
    }

    /// A rejection with its HTTP status.
    pub fn rejected(status: u16, id: Option<Id>, error: ErrorObject) -> Reply {
        Reply::Message(Status::Rejected(status), Response::error(id, error).into_message())
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
        Reply::Stream(mut messages) => Some(tokio::spawn(async move {
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
            Reply::Stream(mut rx) => {
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

/// Who the answer is for: it decides what of the upstream's traffic the client sees.
pub enum ClientSide {
    /// A 2026-07-28 client.
    Modern(ModernSide),
    /// A legacy client on its session.
    Legacy {
        /// The client's session.
        session: Arc<ClientSession>,
        /// The method asked (its answer may need translating).
        method: String,
        /// Toward a modern upstream: the params sent, for re-issuing the request
        /// with the client's answers after `input_required`.
        reissue: Option<Value>,
        /// The `Mcp-Param-*` headers eragate mirrored from the arguments (sent again on a re-issue).
        param_headers: Vec<(String, String)>,
    },
    /// A 2026-07-28 client in front of a 2026-07-28 upstream: everything passes.
    Passthrough {
        /// The method asked.
        method: ModernMethod,
        /// Cache hints (the upstream's own unless configured).
        cache: CachePolicy,
    },
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
    /// Set when the request may answer `input_required` (multi round-trip).
    pub mrtr: Option<MrtrContext>,
}

/// What suspending a call for client input needs.
pub struct MrtrContext {
    /// Where suspended calls wait.
    pub store: Arc<SuspendedCalls>,
    /// What the client declared it can be asked.
    pub capabilities: Value,
    /// The original request's method.
    pub method: String,
    /// Digest of the original request's params.
    pub digest: String,
    /// Who asked.
    pub principal: String,
}

/// What a pump does with one event of a call.
enum EventAction {
    /// Show the client this message.
    Send(Message),
    /// Nothing for the client.
    Drop,
    /// The upstream asks for input the client can give: suspend the call.
    Suspend(crate::protocol::Request),
}

/// Streams a call in flight: every event the client should see, then the
/// translated response. Ends early (cancelling a modern call) when the receiver
/// is dropped, and with a timeout error at `timeout`.
///
/// `permit` (the upstream's in-flight slot) is held until the call ends.
/// `timeout` of `None` streams until either side closes (a `subscriptions/listen`).
pub fn stream_call(
    call: Call,
    side: ClientSide,
    client_id: Id,
    timeout: Option<Duration>,
    permit: OwnedSemaphorePermit,
) -> Reply {
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    // A year stands in for "never": far enough, and `Instant` arithmetic cannot overflow.
    let timeout = timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600));
    tokio::spawn(async move {
        pump(call, side, client_id, tx, Instant::now() + timeout, timeout).await;
        drop(permit);
    });
    Reply::Stream(rx)
}

/// Streams a call resumed after `input_required`, until the deadline the
/// original request had.
pub fn resume_call(
    call: Call,
    side: ModernSide,
    client_id: Id,
    deadline: Instant,
    timeout: Duration,
    permit: OwnedSemaphorePermit,
) -> Reply {
    let (tx, rx) = mpsc::channel(STREAM_QUEUE);
    tokio::spawn(async move {
        pump(call, ClientSide::Modern(side), client_id, tx, deadline, timeout).await;
        drop(permit);
    });
    Reply::Stream(rx)
}

async fn pump(
    mut call: Call,
    side: ClientSide,
    client_id: Id,
    tx: mpsc::Sender<Message>,
    deadline: Instant,
    timeout: Duration,
) {
    loop {
        tokio::select! {
            step = call.next() => match step {
                CallStep::Event(event) => match side.on_event(event, call.session()) {
                    EventAction::Send(message) => {
                        if tx.send(message).await.is_err() {
                            break; // the client left: dropping the call cancels it (modern) or detaches it (legacy)
                        }
                    }
                    EventAction::Drop => {}
                    EventAction::Suspend(request) => {
                        let ClientSide::Modern(modern) = side else { break };
                        suspend(call, modern, request, client_id, tx, deadline).await;
                        return;
                    }
                },
                CallStep::Done(Ok(Response { outcome: Outcome::Result(result), .. }))
                    if is_input_required(&result) && side.can_reissue() =>
                {
                    match side.answer_input(&result, &tx, deadline).await {
                        Ok(call_again) => match call_again {
                            Some(next) => {
                                call = next;
                                continue;
                            }
                            None => break,
                        },
                        Err(error) => {
                            let _ = tx.send(Response::error(Some(client_id.clone()), error).into_message()).await;
                            break;
                        }
                    }
                }
                CallStep::Done(Ok(Response { outcome: Outcome::Error(error), .. }))
                    if side.takes_url_elicitation(&error) =>
                {
                    let ClientSide::Modern(modern) = side else { break };
                    let result = park_url_elicitation(modern, &error, deadline);
                    let _ = tx.send(Response::result(client_id.clone(), result).into_message()).await;
                    return;
                }
                CallStep::Done(_) if side.cancelled_by_client(&client_id) => break,
                CallStep::Done(result) => {
                    let mut response = side.translate_done(&client_id, result);
                    // A resumed call answers the retry, whose id differs from the first request's.
                    response.id = Some(client_id.clone());
                    let _ = tx.send(response.into_message()).await;
                    break;
                }
            },
            () = tx.closed() => break,
            () = tokio::time::sleep_until(deadline) => {
                let error = UpstreamError::Timeout {
                    upstream: call.session().upstream_name().to_owned(),
                    after_ms: timeout.as_millis() as u64,
                };
                call.time_out();
                let _ = tx.send(Response::error(Some(client_id.clone()), error.to_error_object()).into_message()).await;
                side.finish(&client_id);
                return;
            }
        }
    }
    side.finish(&client_id);
}

/// Gathers the upstream's other input requests arriving together, then parks
/// the call and answers the client `input_required`.
async fn suspend(
    mut call: Call,
    side: ModernSide,
    first: crate::protocol::Request,
    client_id: Id,
    tx: mpsc::Sender<Message>,
    deadline: Instant,
) {
    let mut asked = vec![first];
    let session = call.session().clone();
    let gather_until = Instant::now() + GATHER_INPUT_AT_MOST;
    loop {
        let quiet_until = (Instant::now() + GATHER_INPUT).min(gather_until);
        let Ok(step) = tokio::time::timeout_at(quiet_until, call.next()).await else {
            break;
        };
        match step {
            CallStep::Event(CallEvent::ServerRequest(request)) if side.may_ask(&request) => asked.push(request),
            CallStep::Event(event) => {
                if let EventAction::Send(message) = ClientSide::Modern(side_view(&side)).on_event(event, &session) {
                    let _ = tx.send(message).await;
                }
            }
            CallStep::Done(result) => {
                // The upstream finished without waiting for its question: answer that.
                let mut response = ClientSide::Modern(side_view(&side)).translate_done(&client_id, result);
                response.id = Some(client_id);
                let _ = tx.send(response.into_message()).await;
                return;
            }
        }
    }
    let Some(context) = side.mrtr.as_ref() else { return };
    let store = context.store.clone();
    let (method, digest, principal) = (
        context.method.clone(),
        context.digest.clone(),
        context.principal.clone(),
    );
    let awaiting = mrtr::input_keys(asked);
    let server_info = side.server_info.clone();
    let result = store.suspend(Some(call), side, awaiting, &method, digest, &principal, deadline);
    let method = ModernMethod::classify(&method);
    let result = match method {
        crate::protocol::method::MethodClass::Modern(m) => {
            up::result_for_modern(result, m, &server_info, CachePolicy::default())
        }
        _ => result,
    };
    let _ = tx.send(Response::result(client_id, result).into_message()).await;
}

/// A copy of what translating needs from a side, without its MRTR context.
fn side_view(side: &ModernSide) -> ModernSide {
    ModernSide {
        method: side.method,
        log_level: side.log_level,
        server_info: side.server_info.clone(),
        cache: side.cache,
        mrtr: None,
    }
}

/// How long the upstream may stay quiet after an input request before the
/// client is asked, so that requests a server sends together (a busy server's
/// writes may be tens of ms apart) reach the client in one `input_required`.
const GATHER_INPUT: Duration = Duration::from_millis(100);

/// The most time spent gathering, however chatty the upstream (progress keeps coming).
const GATHER_INPUT_AT_MOST: Duration = Duration::from_secs(1);

/// A 2025-11-25 `-32042` for a client that takes URL elicitation: park a
/// re-issue and answer `input_required` with the URL requests.
fn park_url_elicitation(side: ModernSide, error: &ErrorObject, deadline: Instant) -> Value {
    let Some(context) = side.mrtr.as_ref() else {
        return Value::Null;
    };
    let store = context.store.clone();
    let (method, digest, principal) = (
        context.method.clone(),
        context.digest.clone(),
        context.principal.clone(),
    );
    let asked: Vec<(String, crate::protocol::Request)> = up::url_elicitations(error)
        .into_iter()
        .enumerate()
        .map(|(i, params)| {
            let id = Id::number(i as u64 + 1);
            let request = crate::protocol::Request {
                id,
                method: "elicitation/create".into(),
                params: Some(params),
            };
            (format!("elicitation-url-{}", i + 1), request)
        })
        .collect();
    let server_info = side.server_info.clone();
    let modern_method = side.method;
    let result = store.suspend(None, side, asked, &method, digest, &principal, deadline);
    up::result_for_modern(result, modern_method, &server_info, CachePolicy::default())
}

impl ClientSide {
    /// Whether a `-32042` can become `input_required` for this client: a modern
    /// request that may be asked for input, from a client that takes URL mode.
    fn takes_url_elicitation(&self, error: &ErrorObject) -> bool {
        let ClientSide::Modern(side) = self else { return false };
        let Some(context) = &side.mrtr else { return false };
        side.method.allows_input_required()
            && !up::url_elicitations(error).is_empty()
            && context
                .capabilities
                .get("elicitation")
                .and_then(|e| e.get("url"))
                .is_some()
    }

    /// Whether this is a legacy client over a modern upstream, whose
    /// `input_required` answers eragate turns into real requests to the client.
    fn can_reissue(&self) -> bool {
        matches!(self, ClientSide::Legacy { reissue: Some(_), .. })
    }

    /// Asks the legacy client what a modern upstream's `input_required` wants
    /// (only what the client negotiated), then re-issues the request with the
    /// answers and the upstream's `requestState`. `Ok(None)`: the client left.
    async fn answer_input(
        &self,
        input: &Value,
        tx: &mpsc::Sender<Message>,
        deadline: Instant,
    ) -> Result<Option<Call>, ErrorObject> {
        let ClientSide::Legacy {
            session,
            method,
            reissue: Some(params),
            param_headers,
        } = self
        else {
            return Err(ErrorObject::new(
                ErrorCode::INTERNAL_ERROR,
                "cannot re-issue this request",
            ));
        };
        let capabilities = session.modern_capabilities().unwrap_or_default();
        let empty = serde_json::Map::new();
        let requests = input.get("inputRequests").and_then(Value::as_object).unwrap_or(&empty);
        let mut answers = serde_json::Map::new();
        for (key, asked) in requests {
            let ask_method = asked.get("method").and_then(Value::as_str).unwrap_or("");
            let mut ask_params = asked.get("params").cloned().unwrap_or_else(|| serde_json::json!({}));
            let probe = crate::protocol::Request {
                id: Id::number(0),
                method: ask_method.to_owned(),
                params: Some(ask_params.clone()),
            };
            let kind = InputKind::of(&probe);
            let allowed = kind.is_some_and(|k| k.declared_by(&capabilities))
                && (kind != Some(InputKind::UrlElicitation)
                    || session.revision >= crate::protocol::Revision::V2025_11_25);
            if !allowed {
                return Err(ErrorObject::new(
                    ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                    format!("the upstream needs {ask_method}, which this client did not declare"),
                ));
            }
            if kind == Some(InputKind::UrlElicitation)
                && let Some(object) = ask_params.as_object_mut()
            {
                object.insert(
                    "elicitationId".into(),
                    Value::from(format!("{:032x}", rand::random::<u128>())),
                );
            }
            let (message, answer) = session.ask(ask_method, ask_params);
            if tx.send(message).await.is_err() {
                return Ok(None);
            }
            let response = tokio::time::timeout_at(deadline, answer)
                .await
                .map_err(|_| ErrorObject::new(ErrorCode::INTERNAL_ERROR, "the client did not answer in time"))?
                .map_err(|_| ErrorObject::new(ErrorCode::INTERNAL_ERROR, "the client session ended"))?;
            match response.outcome {
                Outcome::Result(value) => {
                    answers.insert(key.clone(), value);
                }
                Outcome::Error(error) => return Err(error),
            }
        }
        let mut params = params.clone();
        if let Some(object) = params.as_object_mut() {
            object.insert("inputResponses".into(), Value::Object(answers));
            match input.get("requestState") {
                Some(state) => object.insert("requestState".into(), state.clone()),
                None => object.remove("requestState"),
            };
        }
        let call = session
            .upstream_session
            .call_with_headers(method, Some(params), Id::number(0), OnDrop::Detach, param_headers)
            .await
            .map_err(|e| e.to_error_object())?;
        Ok(Some(call))
    }
}

impl ModernSide {
    /// Whether this request may be suspended to ask its client `request`.
    fn may_ask(&self, request: &crate::protocol::Request) -> bool {
        let Some(context) = &self.mrtr else { return false };
        self.method.allows_input_required()
            && InputKind::of(request).is_some_and(|kind| kind.declared_by(&context.capabilities))
    }
}

impl ClientSide {
    /// What a pump does with an event.
    fn on_event(&self, event: CallEvent, upstream: &Arc<UpstreamSession>) -> EventAction {
        let suspend =
            matches!((self, &event), (ClientSide::Modern(side), CallEvent::ServerRequest(r)) if side.may_ask(r));
        if suspend && let CallEvent::ServerRequest(request) = event {
            return EventAction::Suspend(request);
        }
        match self.translate_event(event, upstream) {
            Some(message) => EventAction::Send(message),
            None => EventAction::Drop,
        }
    }

    /// What (if anything) the client sees of an event.
    fn translate_event(&self, event: CallEvent, upstream: &Arc<UpstreamSession>) -> Option<Message> {
        match (self, event) {
            (ClientSide::Legacy { .. }, CallEvent::Notification(n)) => Some(Message::Notification(n)),
            (ClientSide::Legacy { session, .. }, CallEvent::ServerRequest(request)) => {
                Some(session.relay_request(request))
            }
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
            (ClientSide::Passthrough { .. }, CallEvent::Notification(n)) => Some(Message::Notification(n)),
            (ClientSide::Modern(_) | ClientSide::Passthrough { .. }, CallEvent::ServerRequest(request)) => {
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
            ClientSide::Legacy { session, method, .. } => match (session.envelope(), response.outcome) {
                (None, outcome) => Response {
                    id: response.id,
                    outcome,
                },
                (Some(_), Outcome::Result(result)) if is_input_required(&result) => Response::error(
                    response.id,
                    ErrorObject::new(
                        ErrorCode::INTERNAL_ERROR,
                        "the upstream needs input that eragate cannot relay to this client yet",
                    ),
                ),
                (Some(_), Outcome::Result(result)) => {
                    Response::result_for(response.id, up::result_for_legacy(result, session.revision))
                }
                (Some(_), Outcome::Error(error)) => Response::error(response.id, up::error_for_legacy(error, method)),
            },
            ClientSide::Passthrough { method, cache } => match response.outcome {
                Outcome::Result(result) => {
                    Response::result_for(response.id, up::result_passthrough(result, *method, *cache))
                }
                Outcome::Error(_) => response,
            },
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
        if let ClientSide::Legacy { session, .. } = self {
            session.untrack(client_id);
        }
    }

    /// Whether a legacy client cancelled this request (it then gets no answer).
    fn cancelled_by_client(&self, client_id: &Id) -> bool {
        matches!(self, ClientSide::Legacy { session, .. } if !session.is_in_flight(client_id))
    }
}

fn is_input_required(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("input_required")
}
