//! The transport-independent entry point: one client message in, one
//! [`Reply`] out. Classification decides the era; the backend decides whether
//! one upstream (`modern`, `legacy`) or a federation (`federated`) serves it,
//! here and nowhere else; the policy stage then shapes what this caller may
//! see of the answer. On a path with `[[disclosure]]`, the disclosure step
//! comes before admission ([`super::disclosure`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

use super::admission::Admission;
use super::disclosure::{Disclosure, Lister, MetaOutcome, Step};
use super::federated;
use super::legacy::{self, SessionLookup};
use super::modern::{self, ListenCounting};
use super::param_headers::SentParams;
use super::reply::Reply;
use crate::auth::Admitted;
use crate::gateway::Gateway;
use crate::protocol::errors::Rejection;
use crate::protocol::{Era, Id, Message, Request, Revision};
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

// The body of `dispatch`: classify, disclose, admit, route; the record is
// filled in as the message is classified.
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
    let mut sent = SentParams::of(routing, forwarded);
    let classification = classified(&message, routing, exchange);
    if let Some(answer) = answered_by(&classification, &message) {
        return answer;
    }
    let disclosure = Disclosure::of(gateway, backend);
    let step = disclosure.as_ref().map_or(Step::Pass, |_| Disclosure::step(&message));
    if let (Some(disclosure), Step::List | Step::Meta(_)) = (&disclosure, step) {
        let modern = matches!(classification, Classification::Modern(_));
        let disclosing = Disclosing {
            disclosure,
            lister: PathLister {
                gateway,
                backend,
                caller,
                session: session.clone(),
                meta: modern.then(|| envelope_of(&message)).flatten(),
            },
            modern,
        };
        if let Some(answer) = disclosing.serve(step, &mut message, &mut sent, exchange).await {
            return answer;
        }
    }
    let reply = admitted(gateway, backend, caller, message, classification, sent, session).await;
    match step {
        Step::Initialize => super::disclosure::announcing_list_changes(reply),
        _ => reply,
    }
}

/// A message on a path with `[[disclosure]]`, from a client of an era.
struct Disclosing<'a> {
    disclosure: &'a Disclosure,
    lister: PathLister<'a>,
    modern: bool,
}

impl Disclosing<'_> {
    /// The disclosure step's answer to a `tools/list` or a meta-tool call, or
    /// `None` when the message goes on to admission (`call_tool` made the
    /// direct call it names; a legacy message without a live session).
    async fn serve(
        &self,
        step: Step,
        message: &mut Message,
        sent: &mut SentParams<'_>,
        exchange: &mut Exchange,
    ) -> Option<Reply> {
        let session = match &self.lister.session {
            SessionLookup::Found(found) => Some(found.as_ref()),
            // A legacy message without a live session gets the answer its era gives it.
            _ if !self.modern => return None,
            _ => None,
        };
        let Message::Request(request) = &*message else {
            return None;
        };
        let id = request.id.clone();
        let (disclosure, lister, modern) = (self.disclosure, &self.lister, self.modern);
        match step {
            Step::List => Some(disclosure.list(id, lister, session, modern).await),
            Step::Meta(name) => {
                let catalogues = lister.gateway.catalogues();
                match disclosure
                    .meta(name, message, lister, session, modern, catalogues)
                    .await
                {
                    MetaOutcome::Answered(reply) => Some(*reply),
                    MetaOutcome::Call(tool) => {
                        exchange.names(|| Some(tool));
                        // The client's headers described the meta-tool's call, not this one.
                        *sent = SentParams::NoHeaders;
                        None
                    }
                }
            }
            Step::Initialize | Step::Pass => None,
        }
    }
}

// Admits a classified message and routes it to its backend.
async fn admitted(
    gateway: &Gateway,
    backend: &Backend,
    caller: &Admitted,
    mut message: Message,
    classification: Classification,
    sent: SentParams<'_>,
    session: SessionLookup,
) -> Reply {
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
        (backend, Classification::Modern(request), Message::Request(message))
            if request.method.is_tasks() && super::tasks::served_here(backend) =>
        {
            (
                super::tasks::serve_method(gateway, message, &request, principal).await,
                Era::Modern,
            )
        }
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

/// The disclosure step's own `tools/list` requests: made as the caller, on its
/// session or with its envelope, and admitted and narrowed like the caller's.
struct PathLister<'a> {
    gateway: &'a Gateway,
    backend: &'a Backend,
    caller: &'a Admitted,
    session: SessionLookup,
    /// A 2026-07-28 client's `_meta` (its envelope), which each request carries.
    meta: Option<Value>,
}

impl Lister for PathLister<'_> {
    fn page(&self, cursor: Option<String>) -> Pin<Box<dyn Future<Output = Reply> + Send + '_>> {
        Box::pin(async move {
            let mut params = Map::new();
            if let Some(meta) = &self.meta {
                params.insert("_meta".into(), meta.clone());
            }
            if let Some(cursor) = cursor {
                params.insert("cursor".into(), Value::String(cursor));
            }
            let listing = NEXT_LISTING.fetch_add(1, Ordering::Relaxed);
            let message = Message::Request(Request {
                id: Id::text(format!("eragate-disclosure-{listing}")),
                method: "tools/list".into(),
                params: Some(Value::Object(params).into()),
            });
            let classification = match &message {
                Message::Request(r) => classify::classify(&r.method, r.params.as_ref(), true, RoutingHeaders::None),
                _ => Classification::Legacy,
            };
            if let Some(answer) = answered_by(&classification, &message) {
                return answer;
            }
            let (gateway, backend, caller) = (self.gateway, self.backend, self.caller);
            let session = self.session.clone();
            admitted(
                gateway,
                backend,
                caller,
                message,
                classification,
                SentParams::NoHeaders,
                session,
            )
            .await
        })
    }
}

/// Numbers the disclosure step's own requests.
static NEXT_LISTING: AtomicU64 = AtomicU64::new(1);

/// A 2026-07-28 request's `_meta`, its envelope.
fn envelope_of(message: &Message) -> Option<Value> {
    match message {
        Message::Request(request) => request.params.as_ref()?.meta().cloned(),
        _ => None,
    }
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
