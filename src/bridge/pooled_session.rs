//! The pooled upstream session a 2026-07-28 request to a legacy upstream runs
//! on: its partition (principal, capability profile), the warm session of it, and
//! a call sent on it.

use std::sync::Arc;

use crate::auth::Principal;
use crate::protocol::capabilities;
use crate::protocol::{Id, LazyJson, Revision};
use crate::router::{
    Call, OnDrop, PartitionKey, Pool, SessionNeed, UpstreamError, UpstreamSession, gateway_client_info,
};
use crate::translate::{ModernRequest, down};

/// The partition of a modern request's pooled session: its principal and
/// capability profile.
pub(crate) fn partition_key(modern: &ModernRequest, principal: &Principal) -> PartitionKey {
    PartitionKey::of(principal, &capability_profile(&modern.envelope.client_capabilities))
}

/// The capability profile of a pooled session for a client declaring
/// `client_capabilities` (2026-07-28 names): what the session's handshake
/// declares at [`Revision::LATEST_LEGACY`], reduced to what partitions sessions.
pub(crate) fn capability_profile(client_capabilities: &serde_json::Value) -> serde_json::Value {
    let revision = Revision::LATEST_LEGACY;
    let declared = capabilities::client_modern_to_legacy(client_capabilities, revision);
    capabilities::partition_profile(&declared, revision)
}

/// A warm pooled session for the request's principal and capability profile.
pub(crate) async fn pooled_session(
    pool: &Pool,
    modern: &ModernRequest,
    principal: &Principal,
    exclusive: bool,
) -> Result<Arc<UpstreamSession>, UpstreamError> {
    let revision = Revision::LATEST_LEGACY;
    let key = partition_key(modern, principal);
    // Built only when a session has to be opened: a warm one needs no handshake.
    let params = || down::initialize_for_envelope(&modern.envelope, revision, &gateway_client_info());
    if exclusive {
        // On stdio a server→client request names no request: keep requests that
        // may be asked for input alone on their session so it can only be theirs.
        pool.session(SessionNeed::Alone {
            key,
            initialize: params,
        })
        .await
    } else {
        pool.session(SessionNeed::Shared {
            key,
            initialize: params,
        })
        .await
    }
}

/// Sends `method` on a pooled session ([`pooled_session`]); when that session died
/// between lookup and send (a crashed child), once more on a fresh one.
pub(crate) async fn call_on_pooled_session(
    pool: &Pool,
    modern: &ModernRequest,
    principal: &Principal,
    exclusive: bool,
    method: &str,
    params: Option<LazyJson>,
    id: Id,
) -> Result<Call, UpstreamError> {
    let mut retried = false;
    loop {
        let session = pooled_session(pool, modern, principal, exclusive).await?;
        match session
            .call(method, params.clone(), id.clone(), OnDrop::CancelUpstream)
            .await
        {
            Ok(call) => return Ok(call),
            Err(error) if !retried => {
                tracing::debug!(upstream = %pool.name(), %error, "pooled session unusable; reopening");
                pool.discard(&session);
                retried = true;
            }
            Err(error) => return Err(error),
        }
    }
}
