//! The transport-independent entry point: one client message in, one
//! [`Reply`] out. Classification decides the era; the era's module serves it.

use super::Gateway;
use super::legacy::{self, SessionLookup};
use super::modern;
use super::reply::Reply;
use crate::auth::Principal;
use crate::protocol::Message;
use crate::protocol::errors::Rejection;
use crate::router::Backend;
use crate::translate::{Classification, RoutingHeaders, classify};

/// Serves one message from a client. `forwarded` are transport headers a modern
/// upstream must see as they came (`Mcp-Param-*`); stdio has none. The
/// request runs as `principal`.
pub async fn dispatch(
    gateway: &Gateway,
    backend: &Backend,
    message: Message,
    routing: RoutingHeaders<'_>,
    forwarded: &[(String, String)],
    session: SessionLookup,
    principal: &Principal,
) -> Reply {
    let verdict = match &message {
        Message::Request(r) => classify::classify(&r.method, r.params.as_ref(), true, routing),
        Message::Notification(n) => classify::classify(&n.method, n.params.as_ref(), false, routing),
        Message::Response(_) => Classification::Legacy,
    };
    match (verdict, message) {
        (Classification::Legacy, message) => legacy::serve(gateway, backend, message, session, principal).await,
        (Classification::Modern(request), Message::Request(message)) => {
            modern::serve(gateway, backend, message, request, forwarded, principal).await
        }
        // On HTTP a modern client cancels by closing its stream; notifications need no answer.
        (Classification::ModernNotification, _) | (Classification::Modern(_), _) => Reply::Accepted,
        (Classification::Rejected(error), message) => {
            let id = match message {
                Message::Request(r) => Some(r.id),
                _ => None,
            };
            Reply::rejected(id, Rejection::Classified(error))
        }
    }
}

/// Whether a client on `session` may send a JSON-RPC batch (2025-03-26 only).
pub fn batches_allowed(session: &SessionLookup) -> bool {
    matches!(session, SessionLookup::Found(s) if s.revision.allows_batches())
}
