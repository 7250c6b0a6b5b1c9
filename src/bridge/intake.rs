//! The one intake of what a client sends, for every transport (a Streamable
//! HTTP POST, an HTTP+SSE message POST, a stdio line): bounds, batch or
//! single, parse, trace, then [`dispatch`] for each message. A transport only
//! reads the bytes and renders what comes back, so a rule written here holds
//! for all of them.

use crate::auth::Admitted;
use crate::protocol::errors::Rejection;
use crate::protocol::jsonrpc::{Frame, FrameError};
use crate::protocol::scan::{self, Bounds};
use crate::protocol::{Id, Message};
use crate::router::Backend;
use crate::telemetry::trace;
use crate::translate::RoutingHeaders;

use super::admission::Admission;
use super::dispatch::{Inbound, dispatch};
use super::legacy::SessionLookup;
use super::reply::{Reply, Status};
use crate::gateway::Gateway;

/// The refusal of a batch on a session (or none) whose revision may not batch.
const BATCHES_FOR_2025_03_26: Rejection = Rejection::BatchNotAllowed {
    reason: "invalid request: JSON-RPC batches are only allowed for 2025-03-26 sessions",
};

/// The refusal of a batch on a transport that never carries one.
const NO_BATCHES_HERE: Rejection = Rejection::BatchNotAllowed {
    reason: "invalid request: JSON-RPC batches are not supported on this transport",
};

/// Whether a transport carries JSON-RPC batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Batches {
    /// When the client's session negotiated 2025-03-26 (Streamable HTTP, stdio).
    OfTheSession,
    /// Never (the 2024-11-05 HTTP+SSE transport).
    Never,
}

/// What a transport knows of one body it read.
pub(crate) struct Intake<'a> {
    /// The backend its path routes to.
    pub(crate) backend: &'a Backend,
    /// Who sent it.
    pub(crate) caller: &'a Admitted,
    /// The legacy client session it belongs to, if any.
    pub(crate) session: SessionLookup,
    /// The 2026-07-28 routing headers (`Mcp-Method`, `Mcp-Name`...); none off HTTP.
    pub(crate) routing: RoutingHeaders<'a>,
    /// Transport headers a modern upstream must see as they came (`Mcp-Param-*`).
    pub(crate) forwarded: &'a [(String, String)],
    /// The client's `traceparent` header, if it sent one.
    pub(crate) traceparent: Option<&'a str>,
    /// Whether a batch may come this way.
    pub(crate) batches: Batches,
}

/// What became of one body.
pub(crate) enum Taken {
    /// One message, and its answer (the request's id, for a transport that tracks it).
    One(Option<Id>, Reply),
    /// A 2025-03-26 batch: each member's answer, in order.
    Batch(Vec<Reply>),
    /// Refused as a whole before any message was served (the id when one was read).
    Refused(Option<Id>, Rejection),
}

/// Takes one body from a client: checks it within the configured bounds,
/// parses it, and serves each message it holds.
pub(crate) async fn take(gateway: &Gateway, bytes: &[u8], intake: Intake<'_>) -> Taken {
    let bounds = bounds(gateway);
    let batches_allowed = match intake.batches {
        Batches::OfTheSession => batches_allowed(&intake.session),
        Batches::Never => false,
    };
    let refused_batch = match intake.batches {
        Batches::OfTheSession => BATCHES_FOR_2025_03_26,
        Batches::Never => NO_BATCHES_HERE,
    };
    // A batch where none is allowed is refused before a byte of it is parsed.
    if !batches_allowed && scan::is_batch(bytes, bounds) {
        return Taken::Refused(None, refused_batch);
    }
    // The client's trace header matters only to a traced gateway; the future is
    // built where it is awaited (each move of it is a copy).
    let traceparent = intake
        .traceparent
        .filter(|_| gateway.telemetry().is_tracing())
        .map(str::to_owned);
    match Frame::parse_within(bytes, bounds) {
        Ok(Frame::Single(message)) => {
            let id = match &message {
                Message::Request(r) => Some(r.id.clone()),
                _ => None,
            };
            let Intake {
                backend,
                caller,
                session,
                routing,
                forwarded,
                ..
            } = intake;
            let inbound = Inbound {
                message,
                routing,
                forwarded,
                session,
            };
            let reply = match traceparent {
                None => dispatch(gateway, backend, inbound, caller).await,
                Some(header) => trace::with_header(header, dispatch(gateway, backend, inbound, caller)).await,
            };
            Taken::One(id, reply)
        }
        Ok(Frame::Batch(items)) if batches_allowed => {
            // Each member's span takes the request's `traceparent` header as its parent.
            let batch = Box::pin(serve_batch(gateway, items, intake));
            match traceparent {
                None => batch.await,
                Some(header) => trace::with_header(header, batch).await,
            }
        }
        Ok(Frame::Batch(_)) => Taken::Refused(None, refused_batch),
        Err(error) => Taken::Refused(error.id(), error.rejection()),
    }
}

/// A 2025-03-26 batch: each member served on its own, in order.
///
/// The batch is answered as one: a member whose token lacks a scope refuses
/// it all (the step-up challenge is the HTTP answer's), so that step is asked
/// of every member before any is served.
async fn serve_batch(gateway: &Gateway, items: Vec<Result<Message, FrameError>>, intake: Intake<'_>) -> Taken {
    let admission = Admission {
        gateway,
        backend: intake.backend,
        caller: intake.caller,
    };
    for message in items.iter().flatten() {
        if let super::admission::Verdict::Refuse(super::admission::Refusal::Rejected(rejection)) =
            admission.scopes(message)
        {
            return Taken::Refused(None, rejection);
        }
    }
    let mut replies = Vec::with_capacity(items.len());
    for item in items {
        let reply = match item {
            Ok(Message::Request(r)) if r.method == "initialize" => {
                Reply::rejected(Some(r.id), Rejection::InitializeInBatch)
            }
            Ok(message) => {
                let inbound = Inbound {
                    message,
                    routing: intake.routing,
                    forwarded: &[],
                    session: intake.session.clone(),
                };
                dispatch(gateway, intake.backend, inbound, intake.caller).await
            }
            Err(error) => Reply::Message(Status::Ok, error.to_response().into_message()),
        };
        replies.push(reply);
    }
    Taken::Batch(replies)
}

/// The bounds a client's message is scanned within before it is parsed, as applied now.
fn bounds(gateway: &Gateway) -> Bounds {
    let limits = &gateway.limits().limits;
    Bounds {
        values: Some(limits.max_request_values),
        items: Some(limits.max_batch_items),
    }
}

/// Whether a client on `session` may send a JSON-RPC batch (2025-03-26 only).
fn batches_allowed(session: &SessionLookup) -> bool {
    matches!(session, SessionLookup::Found(s) if s.revision.allows_batches())
}
