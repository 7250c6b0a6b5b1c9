//! Multi round-trip requests for 2026-07-28 clients in front of legacy
//! upstreams, the I/O shell around [`crate::translate::mrtr::conversation`]:
//! it gathers an upstream call's questions off the wire, keeps suspended calls
//! and seals their `requestState`, answers the upstream, and cancels calls
//! never resumed. Every decision is the conversation's; none is taken here.
//!
//! A suspended call lives in this process: the `requestState` is sealed and
//! bound to the principal, the method, the params and an expiry, but only the
//! replica holding the call can resume it (a load balancer must route a retry
//! to the replica that answered `input_required`, e.g. by hashing
//! `requestState`). Calls never resumed are cancelled upstream at expiry.
//!
//! Bounded: at most `sessions.max_suspended_calls` calls, and
//! `sessions.max_suspended_calls_per_principal` of one principal (past them
//! the call fails and is cancelled upstream); a call lives at most
//! `sessions.input_lifetime` from its first suspension, however often it is
//! asked again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use rand::Rng;
use serde_json::Value;
use tokio::time::Instant as Deadline;

use super::handoff;
use super::modern_client::{self, ModernSide, answer_upstream};
use crate::config::SessionsConfig;
use crate::protocol::{ErrorObject, Id, Request, Response};
use crate::router::{Call, CallEvent, CallStep};
use crate::seal::{Purpose, SealKey, Sealer, unix_now};
use crate::translate::mrtr::RequestStateClaims;
use crate::translate::mrtr::conversation::{
    AwaitingRetry, Binding, Decision, ExpectInputRequest, Expiry, Gathered, GatheringInput, Retry, StateError,
    input_responses,
};
use crate::translate::multiplex::refuse_server_request;

/// Suspended upstream calls awaiting their client's input.
pub(crate) struct SuspendedCalls {
    calls: DashMap<String, Suspended>,
    sealer: Sealer,
    expiry: Duration,
    lifetime: Duration,
    max: usize,
    per_principal: usize,
}

/// One suspended call.
pub(crate) struct Suspended {
    /// Where the conversation is (and the upstream call, when it still runs).
    awaiting: AwaitingRetry<Call>,
    /// How to answer the client when it completes.
    side: ModernSide,
    /// When the whole request times out (a client asked again inherits what is left).
    deadline: Deadline,
    /// When it was first suspended: its life ends `lifetime` after.
    born: Instant,
}

/// What a retry carrying `requestState` comes to.
pub(crate) enum Retried {
    /// The `requestState` names no call this retry may resume.
    Invalid(ErrorObject),
    /// Some input is still missing: answer the client this `input_required`.
    AskedAgain(Value),
    /// Everything is answered: stream the call on.
    Resumed {
        /// The upstream call, answered.
        call: Call,
        /// How to answer the client.
        side: ModernSide,
        /// What may still be asked.
        input: ExpectInputRequest,
    },
    /// The upstream had ended the call (URL elicitation): send the request again.
    Reissue,
}

impl SuspendedCalls {
    /// A store whose calls expire `input_expiry` after each suspension and
    /// `input_lifetime` after the first, within the configured counts.
    pub(crate) fn new(config: &SessionsConfig) -> SuspendedCalls {
        SuspendedCalls {
            calls: DashMap::new(),
            sealer: Sealer::new(&SealKey::random(), None),
            expiry: config.input_expiry.0,
            lifetime: config.input_lifetime.0,
            max: config.max_suspended_calls,
            per_principal: config.max_suspended_calls_per_principal,
        }
    }

    /// When a suspension made now of a call first suspended at `born` expires.
    fn expiry_within(&self, born: Instant) -> Expiry {
        let now = Instant::now();
        Expiry::bounded(now, unix_now(), self.expiry, born + self.lifetime)
    }

    /// Whether `principal` may suspend one more call.
    fn has_room(&self, principal: &str) -> bool {
        if self.calls.len() >= self.max {
            return false;
        }
        let own = self
            .calls
            .iter()
            .filter(|c| c.awaiting.binding().principal == principal)
            .count();
        own < self.per_principal
    }

    /// Suspends a call for the first time, within the quotas: `Err` gives
    /// the call back when there is no room.
    fn suspend_new(
        &self,
        awaiting: AwaitingRetry<Call>,
        side: ModernSide,
        deadline: Deadline,
    ) -> Result<Value, Box<AwaitingRetry<Call>>> {
        if !self.has_room(&awaiting.binding().principal) {
            tracing::warn!(principal = %awaiting.binding().principal, "suspended-call quota reached; failing the call");
            return Err(Box::new(awaiting));
        }
        Ok(self.suspend(awaiting, side, deadline, Instant::now()))
    }

    /// Keeps `awaiting` under a fresh handle and returns the client's
    /// `InputRequiredResult`, decorated for its method.
    fn suspend(&self, awaiting: AwaitingRetry<Call>, side: ModernSide, deadline: Deadline, born: Instant) -> Value {
        let handle = format!("{:032x}", rand::rng().random::<u128>());
        let claims = serde_json::to_vec(&awaiting.claims(handle.clone())).unwrap_or_default();
        let state = self.sealer.seal(Purpose::RequestState, &claims);
        let result = side.decorate(awaiting.input_required(&state));
        let suspended = Suspended {
            awaiting,
            side,
            deadline,
            born,
        };
        self.calls.insert(handle, suspended);
        result
    }

    /// Takes the call a retry's `requestState` names, checking what it is bound to.
    fn take(&self, state: &str, binding: &Binding) -> Result<Suspended, StateError> {
        let plaintext = self
            .sealer
            .open(Purpose::RequestState, state, Instant::now())
            .ok_or(StateError::NotIssued)?;
        let claims: RequestStateClaims = serde_json::from_slice(&plaintext).map_err(|_| StateError::Malformed)?;
        claims.check(binding, unix_now())?;
        let (_, suspended) = self.calls.remove(&claims.handle).ok_or(StateError::NotWaiting)?;
        if suspended.awaiting.binding() != binding {
            return Err(StateError::OtherRequest);
        }
        Ok(suspended)
    }

    /// Cancels every suspended call past its expiry.
    pub(crate) fn expire(&self) {
        let now = Instant::now();
        let expired: Vec<String> = self
            .calls
            .iter()
            .filter(|c| c.awaiting.is_expired(now))
            .map(|c| c.key().clone())
            .collect();
        for handle in expired {
            if let Some((_, suspended)) = self.calls.remove(&handle) {
                let method = suspended.awaiting.binding().method.clone();
                tracing::debug!(%method, "input never came; cancelling the suspended upstream call");
                if let Some(call) = suspended.awaiting.handle_expiry() {
                    call.cancel("the client never answered input_required");
                }
            }
        }
    }

    /// Suspended calls (for the admin view and tests of leaks).
    pub(crate) fn len(&self) -> usize {
        self.calls.len()
    }

    /// Runs [`SuspendedCalls::expire`] every second while the store lives.
    pub(crate) fn spawn_expiry(self: &Arc<Self>) {
        crate::periodic::spawn_every(self, Duration::from_secs(1), SuspendedCalls::expire);
    }
}

/// A retry carrying `requestState`: answer the upstream's questions with the
/// client's `inputResponses`, then resume the suspended call or ask again for
/// what is still missing.
pub(crate) async fn retry(store: &SuspendedCalls, request: &Request, state: &str, principal: &str) -> Retried {
    let binding = Binding::of(&request.method, request.params.as_deref(), principal);
    let suspended = match store.take(state, &binding) {
        Ok(suspended) => suspended,
        Err(error) => return Retried::Invalid(error.to_error_object()),
    };
    let responses = input_responses(request.params.as_deref());
    let born = suspended.born;
    match suspended.awaiting.handle_retry(responses, store.expiry_within(born)) {
        Retry::Reissue => Retried::Reissue,
        Retry::Resume { call, answers, input } => {
            answer_upstream(call.session(), answers).await;
            Retried::Resumed {
                call,
                side: suspended.side,
                input,
            }
        }
        Retry::AskAgain { answers, awaiting } => {
            if let Some(call) = awaiting.call() {
                answer_upstream(call.session(), answers).await;
            }
            Retried::AskedAgain(store.suspend(awaiting, suspended.side, suspended.deadline, born))
        }
    }
}

/// Gathers the upstream's other input requests arriving together, then lets
/// the conversation decide: fail the request, or park the call and answer the
/// client `input_required`.
pub(crate) async fn gather(
    mut call: Call,
    side: ModernSide,
    store: &SuspendedCalls,
    mut gathering: GatheringInput,
    client_id: Id,
    tx: handoff::Sender,
    deadline: Deadline,
) {
    let session = call.session().clone();
    loop {
        let quiet_until = Deadline::from_std(gathering.poll_timeout());
        let Ok(step) = tokio::time::timeout_at(quiet_until, call.next()).await else {
            break;
        };
        match step {
            CallStep::Event(CallEvent::ServerRequest(request)) => {
                match gathering.handle_server_request(request, Deadline::now().into_std()) {
                    Gathered::Kept => {}
                    Gathered::Answered(answer) => answer_upstream(&session, vec![answer]).await,
                    Gathered::Refuse(request) => modern_client::refuse_later(&session, request),
                }
            }
            CallStep::Event(CallEvent::Notification(notification)) => {
                if let Some(message) = side.show_notification(notification) {
                    let _ = tx.send(message).await;
                }
                gathering.handle_event(Deadline::now().into_std());
            }
            CallStep::Done(result) => {
                // The upstream finished without waiting for its question: answer that.
                let mut response = side.translate_done(&client_id, result);
                response.id = Some(client_id);
                let _ = tx.send(response.into_message()).await;
                return;
            }
        }
    }
    match gathering.decide(call, store.expiry_within(Instant::now())) {
        Decision::Fail { error, call } => modern_client::fail_call(call, &client_id, error, &tx).await,
        Decision::Ask { refuse, awaiting } => {
            for request in refuse {
                let _ = session.respond(refuse_server_request(&request)).await;
            }
            match store.suspend_new(awaiting, side, deadline) {
                Ok(result) => {
                    let _ = tx.send(Response::result(client_id, result).into_message()).await;
                }
                Err(awaiting) => match (*awaiting).handle_expiry() {
                    Some(call) => modern_client::fail_call(call, &client_id, quota_error(), &tx).await,
                    None => {
                        let _ = tx
                            .send(Response::error(Some(client_id), quota_error()).into_message())
                            .await;
                    }
                },
            }
        }
    }
}

/// A 2025-11-25 `-32042` for a client that takes URL elicitation: park a
/// re-issue and return the `input_required` with the URL requests (or the
/// error when the suspended-call quota is reached).
pub(crate) fn park_url_elicitation(
    store: &SuspendedCalls,
    side: ModernSide,
    expect: ExpectInputRequest,
    error: &ErrorObject,
    deadline: Deadline,
) -> Result<Value, ErrorObject> {
    let awaiting = expect.handle_url_elicitation(error, store.expiry_within(Instant::now()));
    store.suspend_new(awaiting, side, deadline).map_err(|_| quota_error())
}

/// The error of a call that would pass a suspended-call quota.
fn quota_error() -> ErrorObject {
    ErrorObject::internal(
        "too many calls are waiting for client input (sessions.max_suspended_calls, \
         sessions.max_suspended_calls_per_principal); answer or abandon one first",
    )
}
