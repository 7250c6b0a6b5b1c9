//! Handshake-era clients on a federated path: eragate answers `initialize`
//! with the merged handshake and a sealed session holding no upstream session
//! (`handshake`);
//! a call to a legacy member is relayed on a member session as it came
//! (`relay`), `resources/subscribe` is kept as a listen joined across the
//! owners (`subscriptions`), every other request is served by the members like a 2026-07-28
//! one, and the answer reshaped for the client's revision. A client's `notifications/cancelled`
//! cancels the call it names: the member's request is dropped (and so cancelled
//! toward the member in its own era), and the client gets no answer.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use super::{Asking, ClientEra, error_reply};
use crate::auth::Principal;
use crate::bridge::legacy::SessionLookup;
use crate::bridge::param_headers::SentParams;
use crate::bridge::reply::Reply;
use crate::bridge::sessions::stateless_envelope;
use crate::gateway::Gateway;
use crate::protocol::envelope::Envelope;
use crate::protocol::errors::Rejection;
use crate::protocol::method::MethodClass;
use crate::protocol::{ErrorCode, ErrorObject, Message, ModernMethod, Revision};
use crate::router::federation::{Federation, TrackedCall};

/// Answers one handshake-era message on `federation`'s path.
/// eragate answers `initialize` itself with the merged handshake and a sealed
/// session that holds no upstream session: every request is served by the
/// members on their own pooled sessions; the session's GET stream carries the
/// federation's list changes.
pub(crate) async fn serve_legacy(
    gateway: &Gateway,
    federation: &Arc<Federation>,
    message: Message,
    session: SessionLookup,
    principal: &Principal,
) -> Reply {
    let request = match (message, session) {
        (Message::Request(request), _) if request.method == "initialize" => {
            return super::handshake::initialize_session(gateway, federation, request, principal).await;
        }
        (Message::Notification(notification), SessionLookup::Found(session))
            if notification.method == "notifications/cancelled" && session.backend.same_route(federation.config()) =>
        {
            let named = notification.params.as_ref().and_then(|p| p.get("requestId"));
            if let Some(request_id) = named
                && federation.cancel_call(&session.id, request_id)
            {
                tracing::debug!(federation = %federation.name(), "a legacy client cancelled a call");
            }
            return Reply::Accepted;
        }
        // A response to what a member asked during a relayed call goes back to that member.
        (Message::Response(response), SessionLookup::Found(session))
            if session.backend.same_route(federation.config()) =>
        {
            return super::relay::response_to_member(&session, response).await;
        }
        // Other notifications and responses: nothing of them reaches a member.
        (Message::Notification(_) | Message::Response(_), _) => return Reply::Accepted,
        (Message::Request(request), SessionLookup::Found(session))
            if session.backend.same_route(federation.config()) =>
        {
            let tracked = federation.track_call(&session.id, &request.id);
            (request, session.revision, tracked, Some(session))
        }
        (Message::Request(request), SessionLookup::Found(_) | SessionLookup::Unknown) => {
            return Reply::rejected(Some(request.id), Rejection::SessionNotFound);
        }
        (Message::Request(request), SessionLookup::Absent) => match request.method.as_str() {
            "ping" | "server/discover" => (request, Revision::LATEST_LEGACY, None, None),
            _ => return Reply::rejected(Some(request.id), Rejection::SessionRequired),
        },
    };
    let (request, revision, tracked, session) = request;
    if let Some(session) = &session
        && matches!(request.method.as_str(), "resources/subscribe" | "resources/unsubscribe")
    {
        // The listen is the session's: asked with its own envelope, on the
        // member sessions of its partition (where its calls run).
        let envelope = session.envelope().unwrap_or_else(|| capabilityless().clone());
        let asking = Asking {
            gateway,
            federation,
            prefixes: federation.prefixes(),
            envelope: &envelope,
            principal,
            session: None,
            sent: SentParams::NoHeaders,
            client: None,
        };
        return super::subscriptions::change(&asking, session, request).await;
    }
    let asking = Asking {
        gateway,
        federation,
        prefixes: federation.prefixes(),
        envelope: capabilityless(),
        client: None,
        principal,
        session: session.as_ref(),
        sent: SentParams::NoHeaders,
    };
    let method = request.method.as_str();
    match (method, ModernMethod::classify(method)) {
        ("ping" | "logging/setLevel", _) => Reply::result(request.id, json!({})),
        (_, MethodClass::Modern(ModernMethod::Discover)) => {
            let result = asking.discover(&request.id).await;
            Reply::result(request.id, result)
        }
        (_, MethodClass::Modern(method)) if method != ModernMethod::SubscriptionsListen => {
            let serving = asking.serve(request, method, ClientEra::Legacy(revision));
            match tracked {
                Some(tracked) => cancellable(serving, tracked).await,
                None => serving.await,
            }
        }
        _ => {
            let message = format!("Method not found: {method} is not served on a federated path");
            error_reply(request.id, ErrorObject::new(ErrorCode::METHOD_NOT_FOUND, message))
        }
    }
}

/// The envelope of a legacy client's requests served like a 2026-07-28 one's:
/// no capabilities, so members never ask them (a call relayed to a legacy
/// member is asked on its member session instead). Its lists and its
/// subscriptions' listen carry its own (`ClientSession::envelope`): nothing is
/// asked on those, and they then come from the partition its calls run in.
fn capabilityless() -> &'static Envelope {
    static ENVELOPE: OnceLock<Envelope> = OnceLock::new();
    ENVELOPE.get_or_init(|| stateless_envelope(&json!({}), &Value::Null))
}

/// A call served until the client cancels it: then the member's request is
/// dropped (which cancels it toward the member) and the client gets no answer:
/// `202` if it had none yet, else the end of its stream.
async fn cancellable(serving: impl Future<Output = Reply>, tracked: TrackedCall) -> Reply {
    let cancelled = tracked.token.clone();
    let reply = tokio::select! {
        reply = serving => reply,
        () = cancelled.cancelled() => return Reply::Accepted,
    };
    match reply {
        Reply::Stream(from_member, era) => {
            let token = tracked.token.clone();
            Reply::Stream(from_member.cancelled_by(token, tracked), era)
        }
        other => other,
    }
}
