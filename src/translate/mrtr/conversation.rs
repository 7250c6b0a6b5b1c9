//! One multi round-trip conversation of a 2026-07-28 client with a legacy
//! upstream, as a pure state machine: which server→client requests are asked,
//! refused or answered, when the client is asked, and what its retry resumes.
//! It never awaits, never reads a clock and never touches a session.
//!
//! # Driving it
//!
//! A request starts with an `InputPolicy`. While the upstream call runs, the
//! shell asks it the `Fate` of each server→client request. The first one the
//! client may be asked goes to `ExpectInputRequest::handle_input_request`:
//! either an answer the client sent before it was asked (`OnInputRequest::Answered`,
//! the call keeps streaming) or a `GatheringInput`, which collects what the
//! upstream asks together until `GatheringInput::poll_timeout` and is then
//! `decide`d: fail with `-32021`, or ask the client
//! (`AwaitingRetry`). A 2025-11-25 `-32042` goes to
//! `ExpectInputRequest::handle_url_elicitation`. The retry is fed to
//! `AwaitingRetry::handle_retry` (`Retry`); expiry to
//! `AwaitingRetry::handle_expiry`. The upstream call travels through the
//! states as an opaque `C` and is handed back when the shell must act on it.
//!
//! Every output is a value the shell must act on: a [`Response`] to send the
//! upstream, a request to refuse, an error for the client.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::{InputKind, RequestStateClaims};
use crate::protocol::{ErrorObject, Request, Response};

/// How long the upstream may stay quiet after an input request before the
/// client is asked, so that requests a server sends together (a busy server's
/// writes may be tens of ms apart) reach the client in one `input_required`.
pub(crate) const GATHER_QUIET: Duration = Duration::from_millis(100);

/// The most time spent gathering, however chatty the upstream (progress keeps coming).
pub(crate) const GATHER_AT_MOST: Duration = Duration::from_secs(1);

/// What a `requestState` is bound to: the original request and who sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The request's method.
    pub(crate) method: String,
    /// `super::params_digest` of its params.
    pub digest: String,
    /// Who asked.
    pub(crate) principal: String,
}

impl Binding {
    /// The binding of a request with these params.
    pub fn of(method: &str, params: Option<&Value>, principal: &str) -> Binding {
        Binding {
            method: method.to_owned(),
            digest: super::params_digest(params),
            principal: principal.to_owned(),
        }
    }
}

/// When a suspension ends, on both clocks: the process's (to cancel the call)
/// and the Unix one (sealed into `requestState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Expiry {
    /// When the suspended call is cancelled.
    pub(crate) at: Instant,
    /// The claims' `exp`, seconds since the Unix epoch.
    pub(crate) unix: u64,
}

impl Expiry {
    /// `after` from now (`now` and `unix_now` being the same moment); the sealed
    /// expiry is at least a second away.
    pub(crate) fn after(now: Instant, unix_now: u64, after: Duration) -> Expiry {
        Expiry {
            at: now + after,
            unix: unix_now + after.as_secs().max(1),
        }
    }

    /// Like [`Expiry::after`], but never past `until` (a call's absolute
    /// deadline): a retry that answers nothing new cannot extend a call's life.
    pub(crate) fn bounded(now: Instant, unix_now: u64, after: Duration, until: Instant) -> Expiry {
        Expiry::after(now, unix_now, after.min(until.saturating_duration_since(now)))
    }
}

/// Why a retry's `requestState` names no call to resume. The text is shown to
/// clients after "requestState " and is not a contract.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// Tampered, or sealed by another replica's key.
    #[error("is not one eragate issued (tampered, or from another replica)")]
    NotIssued,
    /// Opened, but not claims.
    #[error("is malformed")]
    Malformed,
    /// Past its `exp`.
    #[error("has expired; send the request again without it")]
    Expired,
    /// Bound to another method, params or principal.
    #[error("belongs to another request")]
    OtherRequest,
    /// Expired here already, or resumed once.
    #[error("names a request that is no longer waiting (expired or already resumed)")]
    NotWaiting,
}

impl StateError {
    /// The `-32602` a client gets for this.
    pub(crate) fn to_error_object(&self) -> ErrorObject {
        ErrorObject::invalid_params(format!("requestState {self}"))
    }
}

impl RequestStateClaims {
    /// Whether these claims may resume a retry bound to `binding` at `unix_now`.
    pub fn check(&self, binding: &Binding, unix_now: u64) -> Result<(), StateError> {
        if self.exp <= unix_now {
            return Err(StateError::Expired);
        }
        let same =
            self.method == binding.method && self.principal == binding.principal && self.digest == binding.digest;
        same.then_some(()).ok_or(StateError::OtherRequest)
    }
}

/// The request's `inputResponses` (empty when it has none).
pub(crate) fn input_responses(params: Option<&Value>) -> Map<String, Value> {
    match params.and_then(|p| p.get("inputResponses")) {
        Some(Value::Object(responses)) => responses.clone(),
        _ => Map::new(),
    }
}

// === InputPolicy ===

/// What may be asked of a request's client, decided once per request.
#[derive(Debug)]
pub(crate) enum InputPolicy {
    /// The method cannot answer `input_required` (e.g. `completion/complete`):
    /// the upstream's questions are refused.
    NotAllowed,
    /// It could, but the client declared no input at all: a question fails the
    /// request with `-32021`.
    Undeclared,
    /// The client may be asked.
    Asks(ExpectInputRequest),
}

/// What becomes of one server→client request of a running call.
#[derive(Debug, PartialEq)]
#[must_use]
pub(crate) enum Fate {
    /// Answer the upstream what a client without that capability answers.
    Refuse,
    /// Fail the client's request with this `-32021` and cancel the call.
    Fail(ErrorObject),
    /// Input for the client: hand it to [`ExpectInputRequest::handle_input_request`].
    Input,
}

impl InputPolicy {
    /// The policy of a request: whether its method `allows_input_required`,
    /// what its client declared, and (when it may be asked) what binds it.
    pub(crate) fn for_request(
        allows_input_required: bool,
        capabilities: &Value,
        binding: impl FnOnce() -> Binding,
    ) -> Self {
        match (allows_input_required, super::declares_input(capabilities)) {
            (false, _) => InputPolicy::NotAllowed,
            (true, false) => InputPolicy::Undeclared,
            (true, true) => InputPolicy::Asks(ExpectInputRequest {
                capabilities: capabilities.clone(),
                binding: binding(),
                presented: Map::new(),
            }),
        }
    }

    /// The same, remembering answers the client sent before they were asked.
    pub(crate) fn with_presented(self, presented: Map<String, Value>) -> Self {
        match self {
            InputPolicy::Asks(expect) => InputPolicy::Asks(ExpectInputRequest { presented, ..expect }),
            other => other,
        }
    }

    /// What becomes of `request`.
    pub(crate) fn fate(&self, request: &Request) -> Fate {
        let Some(kind) = InputKind::of(request) else {
            return Fate::Refuse;
        };
        match self {
            InputPolicy::NotAllowed => Fate::Refuse,
            InputPolicy::Undeclared => Fate::Fail(ErrorObject::missing_client_capability(
                kind.required_capability(),
                needs(&[request.method.as_str()]),
            )),
            InputPolicy::Asks(_) => Fate::Input,
        }
    }

    /// Whether a `-32042` ending the call becomes `input_required` (see
    /// [`ExpectInputRequest::handle_url_elicitation`]).
    pub(crate) fn takes_url_elicitation(&self, error: &ErrorObject) -> bool {
        matches!(self, InputPolicy::Asks(expect) if expect.takes_url_elicitation(error))
    }
}

fn needs(methods: &[&str]) -> String {
    format!(
        "the server needs {}, which this request's clientCapabilities do not declare",
        methods.join(" and ")
    )
}

// === ExpectInputRequest ===

/// A running upstream call whose client may be asked for input, awaiting the
/// upstream's first question.
#[derive(Debug)]
pub(crate) struct ExpectInputRequest {
    capabilities: Value,
    binding: Binding,
    /// `inputResponses` the client sent that no question has used yet: a server
    /// that names its inputs may ask for one of them later.
    presented: Map<String, Value>,
}

/// What the first question of a call leads to.
#[derive(Debug)]
#[must_use]
pub(crate) enum OnInputRequest {
    /// The client had sent the answer before it was asked (named inputs): send
    /// the upstream this response and keep streaming.
    Answered(ExpectInputRequest, Response),
    /// Gather what the upstream asks together with it.
    Gathering(GatheringInput),
}

impl ExpectInputRequest {
    /// The upstream asks `request` (whose [`Fate`] was [`Fate::Input`]) at `now`.
    pub(crate) fn handle_input_request(mut self, request: Request, now: Instant) -> OnInputRequest {
        if let Some(answer) = self.take_presented(&request) {
            return OnInputRequest::Answered(self, answer);
        }
        OnInputRequest::Gathering(GatheringInput {
            expect: self,
            gathered: vec![request],
            started: now,
            last: now,
        })
    }

    /// Whether a `-32042` can become `input_required`: it carries URL
    /// elicitations and the client takes URL mode.
    pub(crate) fn takes_url_elicitation(&self, error: &ErrorObject) -> bool {
        !crate::translate::up::url_elicitations(error).is_empty()
            && InputKind::UrlElicitation.declared_by(&self.capabilities)
    }

    /// The upstream ended the call with a `-32042` that
    /// [`takes_url_elicitation`](Self::takes_url_elicitation): ask the client
    /// its URL elicitations; its retry sends the request again.
    pub(crate) fn handle_url_elicitation<C>(self, error: &ErrorObject, expiry: Expiry) -> AwaitingRetry<C> {
        let asked = crate::translate::up::url_elicitations(error)
            .into_iter()
            .enumerate()
            .map(|(i, params)| {
                let request = Request {
                    id: crate::protocol::Id::number(i as u64 + 1),
                    method: "elicitation/create".into(),
                    params: Some(params.into()),
                };
                (format!("elicitation-url-{}", i + 1), request)
            })
            .collect();
        AwaitingRetry {
            upstream: Upstream::Ended,
            asked,
            expect: self,
            expiry,
        }
    }

    /// The client's answer to `request` sent before it was asked: the
    /// `inputResponses` member named by the server's input key (used once).
    fn take_presented(&mut self, request: &Request) -> Option<Response> {
        let key = super::named_key(request)?;
        let answer = self.presented.remove(key)?;
        // Not the shape of an answer to this request: no answer; the client is asked.
        is_answer_to(request, &answer).then(|| Response::result(request.id.clone(), answer))
    }

    fn may_ask(&self, request: &Request) -> bool {
        InputKind::of(request).is_some_and(|kind| kind.declared_by(&self.capabilities))
    }
}

// === GatheringInput ===

/// The upstream has asked; gathering what else it asks together, until
/// [`poll_timeout`](Self::poll_timeout).
#[derive(Debug)]
pub(crate) struct GatheringInput {
    expect: ExpectInputRequest,
    gathered: Vec<Request>,
    started: Instant,
    /// The last event from the upstream: the quiet period runs from it.
    last: Instant,
}

/// What gathering does with a server→client request.
#[derive(Debug, PartialEq)]
#[must_use]
pub(crate) enum Gathered {
    /// Kept, to be decided with the rest.
    Kept,
    /// Answered with what the client sent before it was asked: send it.
    Answered(Response),
    /// Not input at all: refuse it toward the upstream.
    Refuse(Request),
}

/// What a gathered set of questions leads to.
#[derive(Debug)]
#[must_use]
pub(crate) enum Decision<C> {
    /// The client can answer none of them: fail its request with this `-32021`
    /// and cancel `call`.
    Fail {
        /// The `-32021` naming every capability missing.
        error: ErrorObject,
        /// The upstream call to cancel.
        call: C,
    },
    /// Refuse toward the upstream what the client did not declare, answer the
    /// client `input_required` ([`AwaitingRetry::input_required`]) and wait.
    Ask {
        /// Questions the client cannot be asked.
        refuse: Vec<Request>,
        /// The suspension.
        awaiting: AwaitingRetry<C>,
    },
}

impl GatheringInput {
    /// When to [`decide`](Self::decide) unless the upstream speaks again.
    pub(crate) fn poll_timeout(&self) -> Instant {
        (self.last + GATHER_QUIET).min(self.started + GATHER_AT_MOST)
    }

    /// The upstream asks `request` at `now`.
    pub(crate) fn handle_server_request(&mut self, request: Request, now: Instant) -> Gathered {
        self.last = now;
        if InputKind::of(&request).is_none() {
            return Gathered::Refuse(request);
        }
        match self.expect.take_presented(&request) {
            Some(answer) => Gathered::Answered(answer),
            None => {
                self.gathered.push(request);
                Gathered::Kept
            }
        }
    }

    /// Anything else arrived from the upstream at `now` (it is not quiet yet).
    pub(crate) fn handle_event(&mut self, now: Instant) {
        self.last = now;
    }

    /// The upstream went quiet: what the client can answer is asked, the rest
    /// refused; nothing it can answer means the request needs what it lacks.
    pub(crate) fn decide<C>(self, call: C, expiry: Expiry) -> Decision<C> {
        let GatheringInput { expect, gathered, .. } = self;
        let (asked, refuse): (Vec<_>, Vec<_>) = gathered.into_iter().partition(|r| expect.may_ask(r));
        if asked.is_empty() {
            let kinds = refuse.iter().filter_map(InputKind::of);
            let methods: Vec<&str> = refuse.iter().map(|r| r.method.as_str()).collect();
            let error = ErrorObject::missing_client_capability(super::required_capabilities(kinds), needs(&methods));
            return Decision::Fail { error, call };
        }
        let awaiting = AwaitingRetry {
            upstream: Upstream::Live(call),
            asked: super::input_keys(asked),
            expect,
            expiry,
        };
        Decision::Ask { refuse, awaiting }
    }
}

// === AwaitingRetry ===

/// The client was answered `input_required`; awaiting its retry (or expiry).
#[derive(Debug)]
pub(crate) struct AwaitingRetry<C> {
    upstream: Upstream<C>,
    /// The questions the client was asked, by input key.
    asked: Vec<(String, Request)>,
    expect: ExpectInputRequest,
    expiry: Expiry,
}

/// Where the upstream's side of a suspension is.
#[derive(Debug)]
enum Upstream<C> {
    /// The call is still in flight, waiting for its answers.
    Live(C),
    /// The upstream ended it (a 2025-11-25 `-32042`): the retry sends the request again.
    Ended,
}

/// What a retry carrying the client's `inputResponses` leads to.
#[derive(Debug)]
#[must_use]
pub(crate) enum Retry<C> {
    /// Everything asked is answered: send the upstream `answers` and stream
    /// `call` on, under `input` (which keeps answers not used yet).
    Resume {
        /// The call to resume.
        call: C,
        /// Responses to the upstream's questions.
        answers: Vec<Response>,
        /// What may still be asked.
        input: ExpectInputRequest,
    },
    /// Some answers are missing: send the upstream `answers` and ask the client
    /// again for the rest.
    AskAgain {
        /// Responses to the questions that were answered.
        answers: Vec<Response>,
        /// The new suspension, for the rest.
        awaiting: AwaitingRetry<C>,
    },
    /// The upstream had ended the call: send the request again, its answers
    /// presented for the questions the server asks anew.
    Reissue,
}

impl<C> AwaitingRetry<C> {
    /// The `InputRequiredResult` for the client, under the sealed `request_state`.
    pub(crate) fn input_required(&self, request_state: &str) -> Value {
        let requests: Vec<(String, Value)> = self
            .asked
            .iter()
            .map(|(key, request)| (key.clone(), super::input_request(request)))
            .collect();
        super::input_required(&requests, request_state)
    }

    /// The claims to seal into the `requestState` naming this suspension as `handle`.
    pub(crate) fn claims(&self, handle: String) -> RequestStateClaims {
        RequestStateClaims {
            handle,
            method: self.expect.binding.method.clone(),
            digest: self.expect.binding.digest.clone(),
            principal: self.expect.binding.principal.clone(),
            exp: self.expiry.unix,
        }
    }

    /// What the suspension is bound to.
    pub(crate) fn binding(&self) -> &Binding {
        &self.expect.binding
    }

    /// The upstream call, while it still runs.
    pub(crate) fn call(&self) -> Option<&C> {
        match &self.upstream {
            Upstream::Live(call) => Some(call),
            Upstream::Ended => None,
        }
    }

    /// Whether it has expired at `now`.
    pub(crate) fn is_expired(&self, now: Instant) -> bool {
        self.expiry.at <= now
    }

    /// The client never retried: the call to cancel, if the upstream still runs it.
    pub(crate) fn handle_expiry(self) -> Option<C> {
        match self.upstream {
            Upstream::Live(call) => Some(call),
            Upstream::Ended => None,
        }
    }

    /// The client retried with `responses` (its `inputResponses`); `expiry` is
    /// that of a new suspension, should some answers be missing.
    pub(crate) fn handle_retry(self, mut responses: Map<String, Value>, expiry: Expiry) -> Retry<C> {
        let AwaitingRetry {
            upstream,
            asked,
            mut expect,
            ..
        } = self;
        let Upstream::Live(call) = upstream else {
            return Retry::Reissue;
        };
        let mut answers = Vec::new();
        let mut missing = Vec::new();
        for (key, request) in asked {
            // An answer without the shape of the asked kind's result is no answer: asked again.
            match responses.remove(&key).filter(|answer| is_answer_to(&request, answer)) {
                Some(answer) => answers.push(Response::result(request.id, answer)),
                None => missing.push((key, request)),
            }
        }
        // Answers to what was not asked yet: a later named question may use them.
        expect.presented = responses;
        if missing.is_empty() {
            return Retry::Resume {
                call,
                answers,
                input: expect,
            };
        }
        let awaiting = AwaitingRetry {
            upstream: Upstream::Live(call),
            asked: missing,
            expect,
            expiry,
        };
        Retry::AskAgain { answers, awaiting }
    }
}

/// Whether `answer` has the shape of a result to `request` (any shape for a
/// request of no input kind).
fn is_answer_to(request: &Request, answer: &Value) -> bool {
    InputKind::of(request).is_none_or(|kind| kind.accepts_answer(answer))
}

#[cfg(test)]
#[path = "conversation_tests.rs"]
mod tests;
