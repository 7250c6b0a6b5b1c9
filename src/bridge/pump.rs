//! The pump: one upstream call in flight turned into what its client sees, in
//! the client's era. Events are shown, dropped or (for a 2026-07-28 client in
//! front of a legacy server) gathered into `input_required`; the final response
//! is translated; timeouts and the client leaving end the call.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::handoff;
use super::modern_client::{ModernSide, answer_upstream, fail_call, refuse_later};
use super::mrtr::{self, SuspendedCalls};
use super::reply::{Reply, Responses};
use super::sessions::ClientSession;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{Era, ErrorObject, Id, Message, ModernMethod, Request, Response, Revision};
use crate::router::{Call, CallEvent, CallStep, OnDrop, UpstreamError, UpstreamSession};
use crate::translate::mrtr::conversation::{Fate, InputPolicy, OnInputRequest};
use crate::translate::mrtr::{legacy_question, reissue_params};
use crate::translate::{CachePolicy, up};

/// Bound of messages queued toward one streamed answer; a slow reader slows the pump.
const STREAM_QUEUE: usize = 32;

/// Why a call whose client went away is cancelled upstream. A legacy client's
/// answer can only travel on the request's own stream, so once that closes
/// nothing could deliver it: the upstream gets `notifications/cancelled` and
/// the call's pending entries go, whatever the era (a call that nobody
/// reads cannot live on until the upstream answers, if ever).
const CLIENT_LEFT: &str = "the client disconnected";

/// Who the answer is for: it decides what of the upstream's traffic the client sees.
pub(crate) enum ClientSide {
    /// A 2026-07-28 client.
    Modern {
        /// How its answer is translated.
        side: ModernSide,
        /// What it may be asked (multi round-trip).
        input: InputPolicy,
        /// Where a call waits for its answers.
        store: Arc<SuspendedCalls>,
    },
    /// A legacy client on its session.
    Legacy {
        /// The client's session.
        session: Arc<ClientSession>,
        /// The upstream id the request was tracked under (a re-issue keeps it).
        tracked: u64,
        /// The method asked (its answer may need translating).
        method: String,
        /// Toward a modern upstream: the params sent, for re-issuing the request
        /// with the client's answers after `input_required`.
        reissue: Option<Value>,
        /// The `Mcp-Param-*` headers eragate mirrored from the arguments (sent again on a re-issue).
        param_headers: Vec<(String, String)>,
        /// On a federated path, the legacy member's session the call was relayed on
        /// as it came (the client session has none): its answer passes as it is, and
        /// the client's responses to its requests go back to it.
        member: Option<Arc<UpstreamSession>>,
    },
    /// A 2026-07-28 client in front of a 2026-07-28 upstream: everything passes.
    Passthrough {
        /// The method asked.
        method: ModernMethod,
        /// Cache hints (the upstream's own unless configured).
        cache: CachePolicy,
    },
}

/// What a pump does with one event of a call.
enum EventAction {
    /// Show the client this message.
    Send(Message),
    /// Nothing for the client.
    Drop,
    /// The upstream asks for input the client may give: the conversation takes it.
    Input(Request),
    /// The upstream needs input this 2026-07-28 client did not declare it can
    /// give: fail the client's request with this `-32021` and cancel the call.
    Fail(ErrorObject),
}

/// Streams a call in flight: every event the client should see, then the
/// translated response. Ends early, cancelling the call upstream, when the
/// receiver is dropped, and with a timeout error at `timeout`.
///
/// `held` (the upstream's in-flight slot, or a listen's place in its
/// principal's quota) is held until the call ends.
/// `timeout` of `None` streams until either side closes (a `subscriptions/listen`).
pub(crate) fn stream_call(
    call: Call,
    side: ClientSide,
    client_id: Id,
    timeout: Option<Duration>,
    held: impl Send + 'static,
) -> Reply {
    let (tx, rx) = handoff::queue(STREAM_QUEUE);
    let era = side.era();
    // A year stands in for "never": far enough, and `Instant` arithmetic cannot overflow.
    let timeout = timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600));
    // Pumped by whoever receives the answer (the edge, as it waits for it): no task per call.
    let pumping = async move {
        pump(call, side, client_id, tx, Instant::now() + timeout, timeout).await;
        drop(held);
    };
    Reply::Stream(Responses::produced_by(rx, Box::pin(pumping)), era)
}

// One select over the call, the client and the deadline (67 lines): each arm delegates or ends the loop.
async fn pump(
    mut call: Call,
    mut side: ClientSide,
    client_id: Id,
    tx: handoff::Sender,
    deadline: Instant,
    timeout: Duration,
) {
    // The call's one timer: first when its receiver wants to hear that the answer
    // is late (it then streams; see `handoff`), then at the call's deadline.
    let first_due = tx.first_due().filter(|due| *due < deadline);
    let timer = tokio::time::sleep_until(first_due.unwrap_or(deadline));
    tokio::pin!(timer);
    loop {
        tokio::select! {
            // In this order, without the macro's random start (a thread-local RNG on
            // every poll): a deadline passed is honoured even while the call keeps
            // sending, and a client that left is seen before the next event.
            biased;
            () = &mut timer => {
                // Set before the deadline only for the first message's time.
                if timer.deadline() < deadline {
                    tx.first_is_late();
                    timer.as_mut().reset(deadline);
                    continue;
                }
                time_out(call, &client_id, &tx, timeout).await;
                break;
            }
            () = tx.closed() => {
                call.cancel(CLIENT_LEFT);
                break;
            }
            step = call.next() => match step {
                CallStep::Event(event) => match side.on_event(event, call.session()) {
                    EventAction::Send(message) => {
                        if tx.send(message).await.is_err() {
                            call.cancel(CLIENT_LEFT);
                            break;
                        }
                    }
                    EventAction::Drop => {}
                    EventAction::Fail(error) => {
                        fail_call(call, &client_id, error, &tx).await;
                        return;
                    }
                    EventAction::Input(request) => match Box::pin(on_input(call, side, request, &client_id, &tx, deadline)).await {
                        Streaming::On(next, next_side) => (call, side) = (next, next_side),
                        Streaming::HandedOver => return,
                    },
                },
                CallStep::Done(Ok(Response { outcome: Outcome::Result(result), .. }))
                    if side.can_reissue() && is_input_required(&result) =>
                {
                    match Box::pin(side.answer_input(&result, &tx, deadline)).await {
                        Ok(Some(next)) => call = next,
                        Ok(None) => {
                            call.cancel(CLIENT_LEFT);
                            break;
                        }
                        Err(error) => {
                            let _ = tx.send(Response::error(Some(client_id.clone()), error).into_message()).await;
                            break;
                        }
                    }
                }
                CallStep::Done(Ok(Response { outcome: Outcome::Error(error), .. }))
                    if side.takes_url_elicitation(&error) =>
                {
                    let ClientSide::Modern { side: modern, input: InputPolicy::Asks(expect), store } = side else {
                        break;
                    };
                    let response = match mrtr::park_url_elicitation(&store, modern, expect, &error, deadline) {
                        Ok(result) => Response::result(client_id, result),
                        Err(error) => Response::error(Some(client_id), error),
                    };
                    let _ = tx.send(response.into_message()).await;
                    return;
                }
                CallStep::Done(result) => {
                    // Forgotten before the answer goes, in the same lookup that tells
                    // whether the client cancelled it meanwhile (it then gets no answer).
                    if side.finish(&client_id) {
                        let mut response = side.translate_done(&client_id, result);
                        // A resumed call answers the retry, whose id differs from the first request's.
                        response.id = Some(client_id.clone());
                        let _ = tx.send(response.into_message()).await;
                    }
                    return;
                }
            },
        }
    }
    side.finish(&client_id);
}

/// Whether a pump still streams its call after the conversation took a question.
// A return value moved straight back into the pump's locals: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Streaming {
    /// It does, with this call and side.
    On(Call, ClientSide),
    /// The call was handed to the multi round-trip shell (gathering, then suspended or failed).
    HandedOver,
}

/// The conversation takes a question: answered at once with what the client
/// sent before it was asked, or gathered with what the upstream asks next.
async fn on_input(
    call: Call,
    side: ClientSide,
    request: Request,
    client_id: &Id,
    tx: &handoff::Sender,
    deadline: Instant,
) -> Streaming {
    let ClientSide::Modern {
        side,
        input: InputPolicy::Asks(expect),
        store,
    } = side
    else {
        // Only a client that may be asked gets questions (Fate::Input); else end the call as before.
        return Streaming::HandedOver;
    };
    match expect.handle_input_request(request, Instant::now().into_std()) {
        OnInputRequest::Answered(expect, answer) => {
            // Sent before it was asked (named inputs): no round trip needed.
            answer_upstream(call.session(), vec![answer]).await;
            let input = InputPolicy::Asks(expect);
            Streaming::On(call, ClientSide::Modern { side, input, store })
        }
        OnInputRequest::Gathering(gathering) => {
            mrtr::gather(call, side, &store, gathering, client_id.clone(), tx.clone(), deadline).await;
            Streaming::HandedOver
        }
    }
}

/// Gives up on a call past its deadline and tells the client.
async fn time_out(call: Call, client_id: &Id, tx: &handoff::Sender, timeout: Duration) {
    let error = UpstreamError::Timeout {
        upstream: call.session().upstream_name().to_owned(),
        after_ms: timeout.as_millis() as u64,
    };
    call.time_out();
    let _ = tx
        .send(Response::error(Some(client_id.clone()), error.to_error_object()).into_message())
        .await;
}

impl ClientSide {
    /// Whether a `-32042` can become `input_required` for this client.
    fn takes_url_elicitation(&self, error: &ErrorObject) -> bool {
        matches!(self, ClientSide::Modern { input, .. } if input.takes_url_elicitation(error))
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
        tx: &handoff::Sender,
        deadline: Instant,
    ) -> Result<Option<Call>, ErrorObject> {
        let ClientSide::Legacy {
            session,
            method,
            reissue: Some(params),
            param_headers,
            ..
        } = self
        else {
            return Err(ErrorObject::internal("cannot re-issue this request"));
        };
        let capabilities = session.modern_capabilities().unwrap_or_default();
        let empty = serde_json::Map::new();
        let requests = input.get("inputRequests").and_then(Value::as_object).unwrap_or(&empty);
        let mut answers = serde_json::Map::new();
        for (key, asked) in requests {
            let elicitation_id = || format!("{:032x}", rand::random::<u128>());
            let (ask_method, ask_params) = legacy_question(asked, &capabilities, session.revision, elicitation_id)?;
            let (message, answer) = session.ask(&ask_method, ask_params);
            if tx.send(message).await.is_err() {
                return Ok(None);
            }
            let response = tokio::time::timeout_at(deadline, answer)
                .await
                .map_err(|_| ErrorObject::internal("the client did not answer in time"))?
                .map_err(|_| ErrorObject::internal("the client session ended"))?;
            match response.outcome {
                Outcome::Result(value) => {
                    answers.insert(key.clone(), value.into_value());
                }
                Outcome::Error(error) => return Err(error),
            }
        }
        let params = reissue_params(params.clone(), answers, input);
        let call = session
            .upstream()
            .ok_or_else(|| ErrorObject::internal("the client session has no upstream session"))?
            .call_with_headers(
                method,
                Some(params.into()),
                Id::number(0),
                OnDrop::Detach,
                param_headers,
            )
            .await
            .map_err(|e| e.to_error_object())?;
        Ok(Some(call))
    }
}

impl ClientSide {
    /// What a pump does with an event.
    fn on_event(&self, event: CallEvent, backend: &Arc<UpstreamSession>) -> EventAction {
        let shown = match (self, event) {
            (ClientSide::Modern { input, .. }, CallEvent::ServerRequest(request)) => match input.fate(&request) {
                Fate::Input => return EventAction::Input(request),
                Fate::Fail(error) => return EventAction::Fail(error),
                Fate::Refuse => {
                    refuse_later(backend, request);
                    None
                }
            },
            (ClientSide::Modern { side, .. }, CallEvent::Notification(n)) => side.show_notification(n),
            (ClientSide::Legacy { .. } | ClientSide::Passthrough { .. }, CallEvent::Notification(n)) => {
                Some(Message::Notification(n))
            }
            (ClientSide::Legacy { session, member, .. }, CallEvent::ServerRequest(request)) => {
                Some(session.relay_request_for(request, member.clone()))
            }
            (ClientSide::Passthrough { .. }, CallEvent::ServerRequest(request)) => {
                refuse_later(backend, request);
                None
            }
        };
        match shown {
            Some(message) => EventAction::Send(message),
            None => EventAction::Drop,
        }
    }

    /// The final response in the client's era.
    fn translate_done(&self, client_id: &Id, result: Result<Response, UpstreamError>) -> Response {
        let response = match result {
            Ok(response) => response,
            Err(error) => return Response::error(Some(client_id.clone()), error.to_error_object()),
        };
        match self {
            // Relayed on a federated member's session of the newest handshake revision.
            ClientSide::Legacy {
                member: Some(_),
                session,
                ..
            } => match response.outcome {
                Outcome::Result(result) if session.revision != Revision::LATEST_LEGACY => Response::result_for(
                    response.id,
                    up::result_for_legacy(result.into_value(), session.revision),
                ),
                _ => response,
            },
            ClientSide::Legacy { session, method, .. } => match (session.envelope(), response.outcome) {
                (None, outcome) => Response {
                    id: response.id,
                    outcome,
                },
                (Some(_), Outcome::Result(result)) if is_input_required(&result) => Response::error(
                    response.id,
                    ErrorObject::internal("the upstream needs input that eragate cannot relay to this client yet"),
                ),
                (Some(_), Outcome::Result(result)) => Response::result_for(
                    response.id,
                    up::result_for_legacy(result.into_value(), session.revision),
                ),
                (Some(_), Outcome::Error(error)) => Response::error(response.id, up::error_for_legacy(error, method)),
            },
            ClientSide::Passthrough { method, cache } => match response.outcome {
                Outcome::Result(result) => Response::result_for(
                    response.id,
                    up::result_passthrough(result.into_value(), *method, *cache),
                ),
                Outcome::Error(_) => response,
            },
            ClientSide::Modern { side, .. } => side.translate_response(response),
        }
    }

    /// The client's era.
    fn era(&self) -> Era {
        match self {
            ClientSide::Legacy { .. } => Era::Legacy,
            ClientSide::Modern { .. } | ClientSide::Passthrough { .. } => Era::Modern,
        }
    }

    /// Forgets the client's request; false when a legacy client had cancelled it
    /// (it then gets no answer).
    fn finish(&self, client_id: &Id) -> bool {
        match self {
            ClientSide::Legacy { session, tracked, .. } => session.untrack(client_id, *tracked),
            ClientSide::Modern { .. } | ClientSide::Passthrough { .. } => true,
        }
    }
}

fn is_input_required(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("input_required")
}
