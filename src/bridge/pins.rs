//! The admission stage's definition-pinning step (issue 37, docs/pins.md): a list of a
//! pinned upstream's tools, prompts or resource templates is compared with its pins as
//! the answer passes back (once per listing, never per call); under `hide` a call or get
//! of a definition awaiting approval is refused like an unknown name, under `block` every
//! request to a drifted upstream is. An unpinned upstream costs one branch.

use std::sync::Arc;

use serde_json::Value;

use super::reply::{Reply, Status};
use crate::federate::route::{ListShape, NameKind};
use crate::gateway::Gateway;
use crate::pins::Kind;
use crate::pins::book::PinBook;
use crate::protocol::errors::{ErrorCode, ErrorObject};
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::lazy_json::ParamsView;
use crate::protocol::{Era, LazyJson, Message, ModernMethod, Request, Response};
use crate::router::Backend;

/// A list request to a pinned upstream: its answer is compared and shaped.
pub(crate) struct PinnedAnswer {
    book: Arc<PinBook>,
    kind: Kind,
    /// The request asked for a later page (a cursor): its answer is not a whole listing.
    paged: bool,
}

/// What the pinning step says of a request: `Ok(None)` passes it unchanged, `Ok(Some)`
/// passes it with its answer to compare and shape, `Err` is the answer (a reply to send
/// as it is) to a request the pins refuse.
pub(crate) type Pinning = Result<Option<PinnedAnswer>, Box<Reply>>;

/// The pinning step for `message` on `backend`. A federation's members are compared
/// each under its own names where their answers are merged (`federated::lists`).
pub(crate) fn admit(gateway: &Gateway, backend: &Backend, message: &Message) -> Pinning {
    let pins = gateway.pins();
    if pins.is_empty() {
        return Ok(None);
    }
    let (Backend::Pool(pool), Message::Request(request)) = (backend, message) else {
        return Ok(None);
    };
    match pins.book(pool.name()) {
        Some(book) => admit_to(book, request),
        None => Ok(None),
    }
}

/// The step for a request to the upstream `book` pins.
pub(crate) fn admit_to(book: &Arc<PinBook>, request: &Request) -> Pinning {
    let method = request.method.as_str();
    if book.blocked() && !matches!(method, "initialize" | "ping" | "server/discover") {
        return refuse(request, blocked_error(book.upstream()));
    }
    if let Some(kind) = Kind::listed_by(method) {
        let paged = request
            .params
            .as_ref()
            .is_some_and(|p| ParamsView::str_member(p, "cursor").is_some());
        return Ok(Some(PinnedAnswer {
            book: Arc::clone(book),
            kind,
            paged,
        }));
    }
    let kind = match method {
        "tools/call" if book.hiding() => Kind::Tool,
        "prompts/get" if book.hiding() => Kind::Prompt,
        _ => return Ok(None),
    };
    // Read from the params' text: a call's arguments stay unparsed.
    match request.params.as_ref().and_then(|p| ParamsView::str_member(p, "name")) {
        Some(name) if book.hides(kind, &name) => refuse(request, awaiting_error(kind, &name)),
        _ => Ok(None),
    }
}

/// The error of a call or get of a definition `hide` leaves out: an unknown name's code.
pub(crate) fn awaiting_error(kind: Kind, name: &str) -> ErrorObject {
    let what = match kind {
        Kind::Prompt => "Prompt",
        Kind::Tool | Kind::ResourceTemplate => "Tool",
    };
    ErrorObject::invalid_params(format!(
        "{what} {name} not found: its definition changed and awaits approval (eragate pins diff)"
    ))
}

/// The error of every request to a `block` upstream with drifts pending.
pub(crate) fn blocked_error(upstream: &str) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::INTERNAL_ERROR,
        format!(
            "upstream {upstream} is blocked: its definitions changed and await approval (eragate pins diff --upstream {upstream})"
        ),
    )
}

/// Compares the definitions in a list `result` with `book`'s pins and shapes them as its
/// mode says; `paged` when the request named a cursor. Returns how many were left out.
pub(crate) fn observe_result(book: &PinBook, kind: Kind, result: &mut Value, paged: bool) -> usize {
    let whole = !paged && result.get("nextCursor").is_none_or(Value::is_null);
    let Some(Value::Array(items)) = result.get_mut(kind.items_member()) else {
        return 0;
    };
    book.observe(kind, items, whole)
}

impl PinnedAnswer {
    /// The answer `reply` to a client of `era`, compared and shaped.
    pub(crate) fn reply(self, reply: Reply, era: Era) -> Reply {
        let PinnedAnswer { book, kind, paged } = self;
        let shaped = move |message: Message| match message {
            Message::Response(Response {
                id,
                outcome: Outcome::Result(mut result),
            }) => {
                let left_out = observe_result(&book, kind, &mut result, paged);
                if book.blocked() {
                    return Response::error(id, blocked_error(book.upstream())).into_message();
                }
                if left_out > 0 {
                    tracing::debug!(left_out, upstream = %book.upstream(), "definitions awaiting approval left out");
                    if era == Era::Modern
                        && let Some(object) = result.as_object_mut()
                    {
                        crate::translate::cache::narrowed_for_caller(object);
                    }
                }
                Message::Response(Response {
                    id,
                    outcome: Outcome::Result(result),
                })
            }
            other => other,
        };
        match reply {
            Reply::Message(status, message) => Reply::Message(status, shaped(message)),
            Reply::Stream(responses, era) => Reply::Stream(responses.reshaped_by(shaped), era),
            other => other,
        }
    }
}

/// Why a federation's request to its member `member` (an upstream's name) is refused by
/// the member's pins: `block` with drifts pending, or a call or get of a definition `hide`
/// leaves out (named by the member's own name).
pub(crate) fn member_refusal(
    gateway: &Gateway,
    member: &str,
    method: ModernMethod,
    params: &LazyJson,
) -> Option<ErrorObject> {
    let book = gateway.pins().book(member)?;
    if book.blocked() && method != ModernMethod::Discover {
        return Some(blocked_error(member));
    }
    let kind = match method {
        ModernMethod::ToolsCall if book.hiding() => Kind::Tool,
        ModernMethod::PromptsGet if book.hiding() => Kind::Prompt,
        _ => return None,
    };
    let name = ParamsView::str_member(params, "name")?;
    book.hides(kind, &name).then(|| awaiting_error(kind, &name))
}

/// A page of a federation member's list `shape`, compared with the member's pins under its
/// own names (before prefixes) and shaped by its mode; `paged` when asked at a cursor.
pub(crate) fn member_page(
    gateway: &Gateway,
    member: &str,
    shape: ListShape,
    paged: bool,
    mut page: Value,
) -> Result<Value, ErrorObject> {
    let Some(book) = gateway.pins().book(member) else {
        return Ok(page);
    };
    let kind = match shape {
        ListShape::Named(NameKind::Tools) => Kind::Tool,
        ListShape::Named(NameKind::Prompts) => Kind::Prompt,
        ListShape::Templates => Kind::ResourceTemplate,
        ListShape::Resources => return Ok(page),
    };
    observe_result(book, kind, &mut page, paged);
    match book.blocked() {
        true => Err(blocked_error(member)),
        false => Ok(page),
    }
}

/// Whether `member` is pinned (its calls then take the path `member_refusal` checks).
pub(crate) fn pinned(gateway: &Gateway, member: &str) -> bool {
    gateway.pins().book(member).is_some()
}

fn refuse(request: &Request, error: ErrorObject) -> Pinning {
    tracing::debug!(method = %request.method, "refused by definition pinning");
    let answer = Response::error(Some(request.id.clone()), error).into_message();
    Err(Box::new(Reply::Message(Status::Ok, answer)))
}
