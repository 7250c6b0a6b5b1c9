//! The admission stage: the one ordered pipeline every classified client
//! message passes, from every transport, before it is routed. Each step is a
//! small rule with a typed [`Verdict`]; the order is written once, in
//! [`Admission::admit`]:
//!
//! ```text
//! authenticated principal (the edge) → scopes → per-principal policy
//!   → definition pins → rate limits → quotas → backend admission (the route's own bound)
//! ```
//!
//! What a step narrows (the tools a token may see, the names a policy
//! renames, a listen that follows reloads) rides in the [`Pass`] and shapes
//! the answer; a refusal is the answer. The backend's own admission (its
//! in-flight bound and queue, `Backend::admit`) is the last step, taken by the
//! route only where the upstream is reached: its permit lives exactly as long
//! as the upstream call, and an answer from eragate's cache takes none.

use crate::auth::{Admitted, Denied, ToolView};
use crate::protocol::errors::Rejection;
use crate::protocol::{Era, Message};
use crate::router::Backend;

use super::live_narrowing::LiveNarrowing;
use super::pins::PinnedAnswer;
use super::reply::Reply;
use super::restrict::{NarrowedAnswer, Narrowing};
use crate::gateway::Gateway;
use crate::policy::held::Hold;

/// What one step says of a message.
#[must_use]
pub(crate) enum Verdict<N> {
    /// The message passes this step unchanged.
    Admit,
    /// The message passes; its answer is shaped by `N`.
    Narrow(N),
    /// The message is answered with this refusal and goes no further.
    Refuse(Refusal),
}

/// Why a message was not admitted, as the client will be told.
pub(crate) enum Refusal {
    /// Refused as a whole, with the refusal's HTTP status (and challenge).
    Rejected(Rejection),
    /// Answered in band: the JSON-RPC error a policy gives a name the caller may not use.
    Answered(Box<Reply>),
}

/// One message's admission: who sends it, to which backend.
pub(crate) struct Admission<'a> {
    /// The gateway whose rules apply.
    pub(crate) gateway: &'a Gateway,
    /// The backend the path routes to.
    pub(crate) backend: &'a Backend,
    /// The principal the edge authenticated, with its token's scopes.
    pub(crate) caller: &'a Admitted,
}

/// An admitted message: what its answer carries and how it is shaped.
#[must_use]
pub(crate) struct Pass {
    /// `tools/list` without the tools the token's scopes may not call.
    tool_view: Option<ToolView>,
    /// The caller's `[[policies]]`: the answer narrowed, the names renamed back.
    narrowed: Option<NarrowedAnswer>,
    /// A list of a pinned upstream: compared with its pins, shaped by its mode.
    pinned: Option<PinnedAnswer>,
    /// An unnarrowed listen, checked against the policies a reload leaves.
    follows_reloads: Option<LiveNarrowing>,
    /// The request's place in its principal's in-flight quota, held until it is answered.
    in_flight: Option<Hold>,
}

impl Admission<'_> {
    /// Runs every step in order over `message` (a policy may rename what it
    /// names): the [`Pass`] its answer goes through, or why it is refused.
    pub(crate) async fn admit(&self, message: &mut Message) -> Result<Pass, Refusal> {
        let tool_view = self.scopes(message).into_result()?;
        let narrowed = self.policy(message).into_result()?;
        let follows_reloads = self.follows_reloads(narrowed.is_some(), message);
        let pinned = self.pins(message).into_result()?;
        self.rate_limits(message).await.into_result()?;
        let in_flight = self.quotas(message).into_result()?;
        Ok(Pass {
            tool_view,
            narrowed,
            pinned,
            follows_reloads,
            in_flight,
        })
    }

    /// Scopes: a token without a scope `[auth.oauth.scopes_for]` asks for this
    /// method (or the tool it names) is refused with 403 `insufficient_scope`
    /// and a step-up challenge; a `tools/list` is narrowed to the tools the
    /// token may call.
    pub(crate) fn scopes(&self, message: &Message) -> Verdict<ToolView> {
        // Without granted scopes nothing is missing: params stay unbuilt.
        if self.caller.scopes.is_none() {
            return Verdict::Admit;
        }
        let (method, params) = match message {
            Message::Request(r) => (r.method.as_str(), r.params.as_ref()),
            Message::Notification(n) => (n.method.as_str(), n.params.as_ref()),
            Message::Response(_) => return Verdict::Admit,
        };
        let auth = &self.gateway.auth();
        let missing = auth.missing_scopes(self.caller, method, params);
        if !missing.is_empty() {
            let path = self.backend.config().path.as_str();
            return Verdict::Refuse(Refusal::Rejected(Rejection::InsufficientScope {
                reason: Denied::InsufficientScope.message(),
                challenge: Some(auth.step_up_challenge(path, &missing).into()),
            }));
        }
        match message {
            Message::Request(r) if r.method == "tools/list" => auth.tool_view(self.caller).into(),
            _ => Verdict::Admit,
        }
    }

    /// Per-principal policy: `[[policies]]` refuse the names the caller may not
    /// use, rename the path's names to the upstream's, and narrow the lists.
    fn policy(&self, message: &mut Message) -> Verdict<NarrowedAnswer> {
        if !matches!(message, Message::Request(_)) {
            return Verdict::Admit;
        }
        let Some(narrowing) = Narrowing::of(self.gateway, self.backend, self.caller) else {
            return Verdict::Admit;
        };
        match narrowing.admit(message) {
            Ok(answer) => answer.into(),
            Err(answer) => Verdict::Refuse(Refusal::Answered(answer)),
        }
    }

    /// Definition pins: a list of a pinned upstream is compared with its pins as it
    /// passes back; a request its pins hide or block is answered in band.
    fn pins(&self, message: &Message) -> Verdict<PinnedAnswer> {
        match super::pins::admit(self.gateway, self.backend, message) {
            Ok(answer) => answer.into(),
            Err(answer) => Verdict::Refuse(Refusal::Answered(answer)),
        }
    }

    /// A listen opened while no policy narrows its caller still outlives the
    /// policies it opened under: a reload may narrow it.
    fn follows_reloads(&self, narrowed: bool, message: &Message) -> Option<LiveNarrowing> {
        match message {
            Message::Request(r) if !narrowed && r.method == "subscriptions/listen" => {
                Some(LiveNarrowing::of(self.gateway.applied(), self.backend, self.caller))
            }
            _ => None,
        }
    }

    /// Rate limits: the request spends its share of every `[rate_limits]` limit.
    async fn rate_limits(&self, message: &Message) -> Verdict<()> {
        let rate = self.gateway.rate().load();
        if rate.unlimited() {
            return Verdict::Admit;
        }
        // Boxed: counting in Redis would otherwise size the state of every request,
        // limited or not.
        let rate = arc_swap::Guard::into_inner(rate);
        let principal = self.caller.principal.as_str();
        match Box::pin(rate.admit(principal, self.backend.name(), message)).await {
            Ok(()) => Verdict::Admit,
            Err(refusal) => Verdict::Refuse(Refusal::Rejected(refusal)),
        }
    }

    /// Quotas: a request holds its place in the principal's in-flight quota
    /// until it is answered (a listen is counted as a listen, where it opens).
    ///
    /// Without authentication every client is the anonymous principal, with no
    /// other principal to be protected from: unless configured, the gateway's
    /// own bounds (admission, sessions, connections per IP) apply instead.
    fn quotas(&self, message: &Message) -> Verdict<Hold> {
        let in_flight = &self.gateway.in_flight();
        match message {
            Message::Request(r) if r.method != "subscriptions/listen" && in_flight.binds(&self.caller.principal) => {
                match in_flight.hold(self.caller.principal.as_str()) {
                    Ok(hold) => Verdict::Narrow(hold),
                    Err(refusal) => Verdict::Refuse(Refusal::Rejected(refusal)),
                }
            }
            _ => Verdict::Admit,
        }
    }
}

impl Pass {
    /// `reply`, answered to a client of `era`, as the steps that admitted its
    /// request shape it.
    pub(crate) fn answer(self, reply: Reply, era: Era, admission: &Admission<'_>) -> Reply {
        if let Reply::Initialized(_, session) = &reply {
            session.narrow(LiveNarrowing::of(
                admission.gateway.applied(),
                admission.backend,
                admission.caller,
            ));
        }
        // First: the pins compare what the upstream listed, before a policy renames it.
        let reply = match self.pinned {
            Some(pinned) => pinned.reply(reply, era),
            None => reply,
        };
        let reply = match (self.narrowed, self.follows_reloads) {
            (Some(answer), _) => answer.reply(reply, era),
            (None, Some(live)) => super::restrict::follows_reloads(reply, live),
            (None, None) => reply,
        };
        let reply = match self.tool_view {
            Some(view) => super::restrict::tools_list(reply, era, view),
            None => reply,
        };
        match (reply, self.in_flight) {
            (Reply::Stream(responses, era), Some(hold)) => Reply::Stream(responses.holding(hold), era),
            (reply, _) => reply,
        }
    }
}

impl Refusal {
    /// The answer to `message`.
    pub(crate) fn into_reply(self, message: &Message) -> Reply {
        match self {
            Refusal::Rejected(rejection) => {
                let id = match message {
                    Message::Request(r) => Some(r.id.clone()),
                    _ => None,
                };
                Reply::rejected(id, rejection)
            }
            Refusal::Answered(answer) => *answer,
        }
    }
}

impl<N> Verdict<N> {
    /// The verdict as `?` reads it: what the step narrows, or its refusal.
    pub(crate) fn into_result(self) -> Result<Option<N>, Refusal> {
        match self {
            Verdict::Admit => Ok(None),
            Verdict::Narrow(narrowing) => Ok(Some(narrowing)),
            Verdict::Refuse(refusal) => Err(refusal),
        }
    }
}

impl<N> From<Option<N>> for Verdict<N> {
    fn from(narrowing: Option<N>) -> Verdict<N> {
        match narrowing {
            Some(narrowing) => Verdict::Narrow(narrowing),
            None => Verdict::Admit,
        }
    }
}
