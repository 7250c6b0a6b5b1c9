//! The transport-independent entry point: one client message in, one
//! [`Reply`] out. Classification decides the era; the backend decides whether
//! one upstream (`modern`, `legacy`) or a federation (`federated`) serves it,
//! here and nowhere else; the policy stage then shapes what this caller may
//! see of the answer.

use super::admission::Admission;
use super::federated;
use super::legacy::{self, SessionLookup};
use super::modern::{self, ListenCounting};
use super::param_headers::SentParams;
use super::reply::Reply;
use crate::auth::Admitted;
use crate::gateway::Gateway;
use crate::protocol::errors::Rejection;
use crate::protocol::{Era, Id, Message, Revision};
use crate::router::Backend;
use crate::telemetry::{Exchange, MethodLabel, trace};
use crate::translate::{Classification, RoutingHeaders, classify};

/// One message from a client, with what its transport says about it.
pub(crate) struct Inbound<'a> {
    /// The message.
    pub(crate) message: Message,
    /// The 2026-07-28 routing headers (`Mcp-Method`, `Mcp-Name`...); none on stdio.
    pub(crate) routing: RoutingHeaders<'a>,
    /// Transport headers a modern upstream must see as they came (`Mcp-Param-*`).
    pub(crate) forwarded: &'a [(String, String)],
    /// The legacy client session the message names, if any.
    pub(crate) session: SessionLookup,
}

/// Serves one message from a client. The request runs as `caller.principal`,
/// and sees what `caller`'s token may see. Its telemetry record is opened here
/// and closed with its answer.
pub(crate) async fn dispatch(gateway: &Gateway, backend: &Backend, inbound: Inbound<'_>, caller: &Admitted) -> Reply {
    let message = &inbound.message;
    let method = match &message {
        Message::Request(r) => MethodLabel::of(&r.method),
        Message::Notification(n) => MethodLabel::of(&n.method),
        Message::Response(_) => MethodLabel::RESPONSE,
    };
    let header = trace::header();
    let from_meta = traceparent(message);
    let parent = from_meta.as_deref().or(header.as_deref());
    let mut exchange = gateway.telemetry().begin(method, backend.stats(), parent);
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

// The body of `dispatch`: classify, admit, route; the record is filled in as
// the message is classified.
async fn serve(
    gateway: &Gateway,
    backend: &Backend,
    inbound: Inbound<'_>,
    caller: &Admitted,
    exchange: &mut Exchange,
) -> Reply {
    let Inbound {
        mut message,
        routing,
        forwarded,
        session,
    } = inbound;
    let sent = SentParams::of(routing, forwarded);
    let classification = classified(&message, routing, exchange);
    if let Some(answer) = answered_by(&classification, &message) {
        return answer;
    }
    let admission = Admission {
        gateway,
        backend,
        caller,
    };
    let pass = match admission.admit(&mut message).await {
        Ok(pass) => pass,
        Err(refusal) => return refusal.into_reply(&message),
    };
    let principal = &caller.principal;
    // The one place a request learns whether one upstream or a federation serves it.
    let (reply, era) = match (backend, classification, message) {
        (Backend::Pool(pool), Classification::Modern(request), Message::Request(message)) => {
            let counting = ListenCounting::Counted;
            let reply = modern::serve(gateway, pool, message, &request, sent, principal, counting).await;
            (reply, Era::Modern)
        }
        (Backend::Federated(federation), Classification::Modern(request), Message::Request(message)) => {
            let reply = federated::serve_modern(gateway, federation, message, request, sent, principal).await;
            (reply, Era::Modern)
        }
        (Backend::Pool(pool), _, message) => {
            let reply = legacy::serve(gateway, pool, message, session, principal).await;
            (reply, Era::Legacy)
        }
        (Backend::Federated(federation), _, message) => {
            let reply = federated::serve_legacy(gateway, federation, message, session, principal).await;
            (reply, Era::Legacy)
        }
    };
    pass.answer(reply, era, &admission)
}

/// The message's era, noted in its record.
fn classified(message: &Message, routing: RoutingHeaders<'_>, exchange: &mut Exchange) -> Classification {
    let classification = match message {
        Message::Request(r) => classify::classify(&r.method, r.params.as_ref(), true, routing),
        Message::Notification(n) => classify::classify(&n.method, n.params.as_ref(), false, routing),
        Message::Response(_) => Classification::Legacy,
    };
    match &classification {
        Classification::Modern(request) => {
            exchange.classified(Era::Modern, Revision::parse(&request.envelope.protocol_version));
            exchange.count_revision();
        }
        Classification::Legacy => {}
        Classification::ModernNotification | Classification::Rejected(_) => exchange.classified(Era::Modern, None),
    }
    classification
}

/// The answer classification alone gives, if it does: a refusal, or to a
/// 2026-07-28 notification (its only meaning, a cancellation, is the
/// transport's to act on). Otherwise the message is admitted and served.
fn answered_by(classification: &Classification, message: &Message) -> Option<Reply> {
    match (classification, message) {
        (Classification::Rejected(error), _) => {
            let id = match message {
                Message::Request(r) => Some(r.id.clone()),
                _ => None,
            };
            Some(Reply::rejected(id, Rejection::Classified(error.clone())))
        }
        (Classification::ModernNotification, Message::Notification(n)) if n.method == "notifications/cancelled" => {
            let cancelled = n
                .params
                .as_deref()
                .and_then(|p| p.get("requestId"))
                .and_then(Id::from_value);
            Some(cancelled.map_or(Reply::Accepted, Reply::Cancelled))
        }
        // Notifications need no answer; on HTTP a modern client cancels by closing its stream.
        (Classification::ModernNotification, _)
        | (Classification::Modern(_), Message::Notification(_) | Message::Response(_)) => Some(Reply::Accepted),
        _ => None,
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
