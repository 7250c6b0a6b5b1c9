//! A handshake-era client's call to a handshake-era member, relayed as it came
//! (only the name restored and the id rewritten) on a member session, the way
//! the single-upstream path relays on its session: no round trip through the
//! 2026-07-28 shape, and what the member asks the client during the call
//! (sampling, elicitation, roots) reaches it on the call's stream; its
//! responses go back to that member.
//!
//! The member session is one of the member's pooled sessions of the caller's
//! partition (principal and capability profile, at the newest handshake
//! revision): the one a 2026-07-28 request with the same capabilities gets, so
//! that what a call changes in a stateful member is what the lists show; an
//! answer for an older revision is downgraded (`pump`). Never shared across principals; a client that may be asked for input (sampling,
//! elicitation, roots) gets a session with nothing else in flight, since a
//! stdio server's request names no request. A session per client session and
//! member would save the partition lookup per call, but cost one upstream
//! session (a child process on stdio) per client and member, held while the
//! client is idle: the pool's sessions serve every client of the partition.
//! The shared session a client's last call ran on is remembered (weakly) and
//! tried first, which saves most of the lookup while the pool keeps the session.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::auth::Principal;
use crate::bridge::pooled_session;
use crate::bridge::pump::{self, ClientSide};
use crate::bridge::reply::Reply;
use crate::bridge::sessions::{ClientSession, stateless_envelope};
use crate::protocol::errors::Rejection;
use crate::protocol::{Id, LazyJson, ModernMethod, Response, Revision};
use crate::router::{OnDrop, PartitionKey, Pool, SessionNeed, UpstreamError, UpstreamSession, gateway_client_info};
use crate::translate::down;

/// Relays `session`'s request `id` (`method`, with `params` as the member
/// names things) to `member`, a legacy upstream, and streams its answer.
pub(crate) async fn relay(
    (index, member): (usize, &Pool),
    session: &Arc<ClientSession>,
    id: Id,
    method: ModernMethod,
    params: LazyJson,
    principal: &Principal,
) -> Reply {
    let permit = match member.admit().await {
        Ok(permit) => permit,
        Err(error) => return Reply::upstream_failure(Some(id), &error),
    };
    let params = Some(params);
    let mut retried = false;
    let (call, upstream) = loop {
        // The shared session the client's last call ran on saves the pool's lookup.
        let upstream = match session.member_session(index).filter(|_| !retried) {
            Some(upstream) => upstream,
            None => match member_session(member, session, principal).await {
                Ok((upstream, shared)) => {
                    if shared {
                        session.remember_member_session(index, &upstream);
                    }
                    upstream
                }
                Err(error) => return Reply::upstream_failure(Some(id), &error),
            },
        };
        match upstream
            .call(method.as_str(), params.clone(), id.clone(), OnDrop::Detach)
            .await
        {
            Ok(call) => break (call, upstream),
            Err(error) if !retried => {
                // The pooled session died between lookup and send (a crashed child): one fresh try.
                tracing::debug!(upstream = %member.name(), error = %error, "pooled session unusable; reopening");
                member.discard(&upstream);
                retried = true;
            }
            Err(error) => return Reply::upstream_failure(Some(id), &error),
        }
    };
    let tracked = call.upstream_id();
    session.track(id.clone(), tracked);
    let timeout = member.timeout_for(method.as_str());
    let side = ClientSide::Legacy {
        session: session.clone(),
        tracked,
        method: method.as_str().to_owned(),
        reissue: None,
        param_headers: Vec::new(),
        member: Some(upstream),
    };
    pump::stream_call(call, side, id, Some(timeout), permit)
}

/// A pooled session of `member` for `session`'s partition (its principal,
/// revision and capabilities), opened with the client's capabilities so that
/// the member may ask it what it declared; and whether other calls share it
/// (not when the member may ask the client: then the call is alone on it).
async fn member_session(
    member: &Pool,
    session: &ClientSession,
    principal: &Principal,
) -> Result<(Arc<UpstreamSession>, bool), UpstreamError> {
    // The partition (and handshake) a 2026-07-28 request of the same capabilities gets
    // (`bridge::pooled_session`): the member's state a call changes is the state its lists show.
    let revision = Revision::LATEST_LEGACY;
    let envelope = || {
        session
            .envelope()
            .unwrap_or_else(|| stateless_envelope(&json!({}), &Value::Null))
    };
    let (key, may_be_asked) = session.member_partition(|| {
        let profile = pooled_session::capability_profile(&envelope().client_capabilities);
        let may_be_asked = ["sampling", "elicitation", "roots"]
            .iter()
            .any(|capability| profile.get(capability).is_some());
        (PartitionKey::of(principal, &profile), may_be_asked)
    });
    let key = key.clone();
    let initialize = move || down::initialize_for_envelope(&envelope(), revision, &gateway_client_info());
    let need = match may_be_asked {
        true => SessionNeed::Alone { key, initialize },
        false => SessionNeed::Shared { key, initialize },
    };
    member.session(need).await.map(|upstream| (upstream, !may_be_asked))
}

/// A client's response to a request a member asked during a relayed call:
/// sent back to that member under its own id; one that answers nothing asked
/// is refused.
pub(crate) async fn response_to_member(session: &ClientSession, response: Response) -> Reply {
    let Err(mut response) = session.answer(response) else {
        return Reply::Accepted;
    };
    let relayed = response.id.as_ref().and_then(|id| session.take_relayed(id));
    let Some((member_id, Some(member))) = relayed else {
        return Reply::rejected(None, Rejection::ResponseToUnknownRequest);
    };
    response.id = Some(member_id);
    if let Err(error) = member.respond(response).await {
        tracing::debug!(upstream = %member.upstream_name(), error = %error, "could not forward a response to a member");
    }
    Reply::Accepted
}
