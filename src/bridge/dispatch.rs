//! The transport-independent entry point: one client message in, one
//! [`Reply`] out. Classification decides the era; the era's module serves it;
//! the policy stage then shapes what this caller may see of the answer.

use super::Gateway;
use super::federated;
use super::legacy::{self, SessionLookup};
use super::modern::{self, ListenCounting};
use super::reply::Reply;
use crate::auth::Admitted;
use crate::protocol::errors::Rejection;
use crate::protocol::{Era, Message, Revision};
use crate::router::Backend;
use crate::telemetry::{Exchange, MethodLabel, trace};
use crate::translate::{Classification, RoutingHeaders, classify};

/// One message from a client, with what its transport says about it.
pub struct Inbound<'a> {
    /// The message.
    pub message: Message,
    /// The 2026-07-28 routing headers (`Mcp-Method`, `Mcp-Name`...); none on stdio.
    pub routing: RoutingHeaders<'a>,
    /// Transport headers a modern upstream must see as they came (`Mcp-Param-*`).
    pub forwarded: &'a [(String, String)],
    /// The legacy client session the message names, if any.
    pub session: SessionLookup,
}

impl Inbound<'_> {
    /// A message from a transport without headers (stdio, an HTTP+SSE post, a batch item).
    pub fn bare(message: Message, session: SessionLookup) -> Inbound<'static> {
        Inbound {
            message,
            routing: RoutingHeaders::None,
            forwarded: &[],
            session,
        }
    }
}

/// Serves one message from a client. The request runs as `caller.principal`,
/// and sees what `caller`'s token may see. Its telemetry record is opened here
/// and closed with its answer.
pub async fn dispatch(gateway: &Gateway, backend: &Backend, inbound: Inbound<'_>, caller: &Admitted) -> Reply {
    let message = &inbound.message;
    let method = match &message {
        Message::Request(r) => MethodLabel::of(&r.method),
        Message::Notification(n) => MethodLabel::of(&n.method),
        Message::Response(_) => MethodLabel::RESPONSE,
    };
    let header = trace::header();
    let from_meta = traceparent(message);
    let parent = from_meta.as_deref().or(header.as_deref());
    let mut exchange = gateway.telemetry.begin(method, backend.stats(), parent);
    if let SessionLookup::Found(s) = &inbound.session {
        exchange.in_session(&s.id, s.revision);
    }
    exchange.names(|| named(message));
    // Pinned where it is built, and awaited there or through the task-local by
    // reference: each move of the request's future is a copy of several KiB.
    let reply = {
        let trace = exchange.trace();
        let serving = std::pin::pin!(serve(gateway, backend, inbound, caller, &mut exchange));
        match trace {
            None => serving.await,
            Some(parent) => trace::in_request(parent, serving).await,
        }
    };
    super::reply::observed(reply, exchange)
}

// The body of `dispatch`, with the record to fill in as the message is classified.
async fn serve(
    gateway: &Gateway,
    backend: &Backend,
    inbound: Inbound<'_>,
    caller: &Admitted,
    exchange: &mut Exchange,
) -> Reply {
    let Inbound {
        message,
        routing,
        forwarded,
        session,
    } = inbound;
    let principal = &caller.principal;
    let rate = gateway.rate.load();
    if !rate.unlimited() {
        // Boxed: counting in Redis (~1,800 bytes of future) would otherwise size the
        // state of every request, limited or not.
        let rate = arc_swap::Guard::into_inner(rate);
        if let Err(refusal) = Box::pin(rate.admit(principal.as_str(), backend.name(), &message)).await {
            let id = match message {
                Message::Request(r) => Some(r.id),
                _ => None,
            };
            return Reply::rejected(id, refusal);
        }
    }
    // A request holds its place in the principal's in-flight quota until it is answered.
    // Without authentication every client is the anonymous principal, with no other
    // principal to be protected from: unless configured, the gateway's own bounds
    // (admission, sessions, connections per IP) apply instead.
    let in_flight = match &message {
        Message::Request(r) if r.method != "subscriptions/listen" && gateway.in_flight.binds(principal) => {
            match gateway.in_flight.hold(principal.as_str()) {
                Ok(hold) => Some(hold),
                Err(refusal) => return Reply::rejected(Some(r.id.clone()), refusal),
            }
        }
        _ => None,
    };
    let tool_view = match &message {
        Message::Request(r) if r.method == "tools/list" => gateway.auth.tool_view(caller),
        _ => None,
    };
    let narrowing = match &message {
        Message::Request(_) => super::restrict::Narrowing::of(gateway, backend, caller),
        _ => None,
    };

    let verdict = match &message {
        Message::Request(r) => classify::classify(&r.method, r.params.as_ref(), true, routing),
        Message::Notification(n) => classify::classify(&n.method, n.params.as_ref(), false, routing),
        Message::Response(_) => Classification::Legacy,
    };
    if let Classification::Modern(request) = &verdict {
        exchange.classified(Era::Modern, Revision::parse(&request.envelope.protocol_version));
        exchange.count_revision();
    } else if !matches!(verdict, Classification::Legacy) {
        exchange.classified(Era::Modern, None);
    }
    // After classification: the routing headers name what the caller sent.
    let mut message = message;
    let narrowed = match narrowing.map(|narrowing| narrowing.admit(&mut message)) {
        Some(Err(refusal)) => return *refusal,
        Some(Ok(answer)) => answer,
        None => None,
    };
    // A listen outlives the policies it opened under: unnarrowed now, a reload may narrow it.
    let follows_reloads = match (&narrowed, &message) {
        (None, Message::Request(r)) if r.method == "subscriptions/listen" => Some(
            super::live_narrowing::LiveNarrowing::of(&gateway.applied, backend, caller),
        ),
        _ => None,
    };
    let (reply, era) = match (verdict, message) {
        (Classification::Legacy, message) => match backend.federation() {
            Some(federation) => (
                federated::serve_legacy(gateway, backend, federation, message, session, principal).await,
                Era::Legacy,
            ),
            None => (
                legacy::serve(gateway, backend, message, session, principal).await,
                Era::Legacy,
            ),
        },
        (Classification::Modern(request), Message::Request(message)) => match backend.federation() {
            Some(federation) => (
                federated::serve_modern(gateway, federation, message, request, principal).await,
                Era::Modern,
            ),
            None => (
                modern::serve(
                    gateway,
                    backend,
                    message,
                    &request,
                    forwarded,
                    principal,
                    ListenCounting::Counted,
                )
                .await,
                Era::Modern,
            ),
        },
        // On HTTP a modern client cancels by closing its stream; notifications need no answer.
        (Classification::ModernNotification, _) | (Classification::Modern(_), _) => return Reply::Accepted,
        (Classification::Rejected(error), message) => {
            let id = match message {
                Message::Request(r) => Some(r.id),
                _ => None,
            };
            return Reply::rejected(id, Rejection::Classified(error));
        }
    };
    if let Reply::Initialized(_, session) = &reply {
        session.narrow(super::live_narrowing::LiveNarrowing::of(
            &gateway.applied,
            backend,
            caller,
        ));
    }
    let reply = match (narrowed, follows_reloads) {
        (Some(answer), _) => answer.reply(reply, era),
        (None, Some(live)) => super::restrict::follows_reloads(reply, live),
        (None, None) => reply,
    };
    let reply = match tool_view {
        Some(view) => super::restrict::tools_list(reply, era, view),
        None => reply,
    };
    match (reply, in_flight) {
        (Reply::Stream(responses, era), Some(hold)) => Reply::Stream(responses.holding(hold), era),
        (reply, _) => reply,
    }
}

/// The client's trace context in `params._meta.traceparent` (2026-07-28 puts it there;
/// any era may); it wins over a `traceparent` header.
fn traceparent(message: &Message) -> Option<std::borrow::Cow<'_, str>> {
    let params = match message {
        Message::Request(r) => r.params.as_ref(),
        Message::Notification(n) => n.params.as_ref(),
        Message::Response(_) => None,
    };
    // That member alone: the rest of the params, and of `_meta`, stays unbuilt.
    params?.meta_member("traceparent")?.as_str()
}

/// The tool, prompt or resource a request names, for its span (at most 256 bytes of it).
fn named(message: &Message) -> Option<String> {
    let Message::Request(request) = message else {
        return None;
    };
    let member = crate::protocol::method::named_param(&request.method)?;
    let name = request.params.as_ref()?.get(member)?.as_str()?;
    let end = (0..=name.len().min(256))
        .rev()
        .find(|i| name.is_char_boundary(*i))
        .unwrap_or(0);
    Some(name[..end].to_owned())
}

/// Whether a client on `session` may send a JSON-RPC batch (2025-03-26 only).
pub fn batches_allowed(session: &SessionLookup) -> bool {
    matches!(session, SessionLookup::Found(s) if s.revision.allows_batches())
}
