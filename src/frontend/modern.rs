//! Serving a 2026-07-28 request. In front of a legacy upstream: `server/discover`
//! from a warm session's handshake, everything else on a pooled upstream
//! session. In front of a modern upstream: a faithful passthrough.

use std::sync::Arc;

use super::Gateway;
use super::reply::{self, ClientSide, ModernSide, MrtrContext, Reply};
use crate::auth::Principal;
use crate::protocol::capabilities::{self, ListenSupport};
use crate::protocol::{Era, Id, ModernMethod, Request, Response, Revision};
use crate::translate::{ModernRequest, discover, down, mrtr};
use crate::upstream::pool::gateway_client_info;
use crate::upstream::probe;
use crate::upstream::{OnDrop, PartitionKey, Upstream, UpstreamError, UpstreamSession};

/// Which list notifications a legacy upstream can feed a `subscriptions/listen`.
const LISTEN_SUPPORT: ListenSupport = ListenSupport::Bridged;

/// Answers one validated modern request; `forwarded` are the client's
/// `Mcp-Param-*` headers, passed on to a modern upstream as they came.
pub async fn serve(
    gateway: &Gateway,
    upstream: &Arc<Upstream>,
    request: Request,
    modern: ModernRequest,
    forwarded: &[(String, String)],
    principal: &Principal,
) -> Reply {
    match upstream.era().await {
        Err(error) => Reply::upstream_failure(Some(request.id), &error),
        Ok(Era::Modern) => passthrough(upstream, request, modern.method, forwarded).await,
        Ok(Era::Legacy) => match modern.method {
            ModernMethod::Discover => discover(upstream, request.id).await,
            ModernMethod::SubscriptionsListen => {
                let session = match pooled_session(upstream, &modern, principal, false).await {
                    Ok(session) => session,
                    Err(error) => return Reply::upstream_failure(Some(request.id), &error),
                };
                super::listen::on_legacy_upstream(gateway, session, request).await
            }
            _ => forward(gateway, upstream, request, modern, principal).await,
        },
    }
}

/// A modern request to a modern upstream: sent as it is (ids rewritten,
/// routing headers regenerated), answered as the upstream answered.
async fn passthrough(
    upstream: &Arc<Upstream>,
    request: Request,
    method: ModernMethod,
    forwarded: &[(String, String)],
) -> Reply {
    let permit = match upstream.admit().await {
        Ok(permit) => permit,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let session = match upstream.modern_session().await {
        Ok(session) => session,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let sent = session
        .call_with_headers(
            &request.method,
            request.params,
            request.id.clone(),
            OnDrop::CancelUpstream,
            forwarded,
        )
        .await;
    let call = match sent {
        Ok(call) => call,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let side = ClientSide::Passthrough {
        method,
        cache: upstream.cache_policy(),
    };
    // A listen lives until either side closes it.
    let timeout = (method != ModernMethod::SubscriptionsListen).then(|| upstream.config().timeout_for(method.as_str()));
    reply::stream_call(call, side, request.id, timeout, permit)
}

/// `server/discover`, also answered for a legacy-shaped probe without `_meta`.
pub async fn discover(upstream: &Arc<Upstream>, id: Id) -> Reply {
    if let Ok(Era::Modern) = upstream.era().await {
        let params = probe::discover_params(&gateway_client_info());
        let request = Request {
            id,
            method: ModernMethod::Discover.as_str().into(),
            params: Some(params),
        };
        return passthrough(upstream, request, ModernMethod::Discover, &[]).await;
    }
    match upstream.initialize_result().await {
        Ok(initialize) => Reply::result(
            id,
            discover::discover_result(&initialize, upstream.cache_policy(), LISTEN_SUPPORT),
        ),
        Err(error) => Reply::upstream_failure(Some(id), &error),
    }
}

async fn forward(
    gateway: &Gateway,
    upstream: &Arc<Upstream>,
    request: Request,
    modern: ModernRequest,
    principal: &Principal,
) -> Reply {
    let permit = match upstream.admit().await {
        Ok(permit) => permit,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let mut permit = permit;
    if let Some(state) = request.param_str("requestState").map(str::to_owned) {
        match resume(gateway, upstream, &request, &state, principal, permit).await {
            Ok(reply) => return reply,
            // The upstream had ended the call (URL elicitation): send it again, answers stripped.
            Err(returned) => permit = returned,
        }
    }
    let may_ask = modern.method.allows_input_required() && mrtr::declares_input(&modern.envelope.client_capabilities);
    let context = may_ask.then(|| MrtrContext {
        store: gateway.suspended.clone(),
        capabilities: modern.envelope.client_capabilities.clone(),
        method: request.method.clone(),
        digest: mrtr::params_digest(request.params.as_ref()),
        principal: principal.as_str().to_owned(),
    });
    let params = request.params.map(down::modern_params_for_legacy);
    let mut retried = false;
    loop {
        let session = match pooled_session(upstream, &modern, principal, may_ask).await {
            Ok(session) => session,
            Err(error) => return Reply::upstream_failure(Some(request.id), &error),
        };
        let sent = session
            .call(
                &request.method,
                params.clone(),
                request.id.clone(),
                OnDrop::CancelUpstream,
            )
            .await;
        let call = match sent {
            Ok(call) => call,
            Err(error) if !retried => {
                // The pooled session died between lookup and send (a crashed child): one fresh try.
                tracing::debug!(upstream = %upstream.name(), error = %error, "pooled session unusable; reopening");
                upstream.discard(&session);
                retried = true;
                continue;
            }
            Err(error) => return Reply::upstream_failure(Some(request.id), &error),
        };
        let side = ClientSide::Modern(ModernSide {
            method: modern.method,
            log_level: modern.envelope.log_level,
            server_info: session.server_info(),
            cache: upstream.cache_policy(),
            mrtr: context,
        });
        let timeout = Some(upstream.config().timeout_for(modern.method.as_str()));
        return reply::stream_call(call, side, request.id, timeout, permit);
    }
}

/// A warm pooled session for the request's principal and capability profile.
async fn pooled_session(
    upstream: &Arc<Upstream>,
    modern: &ModernRequest,
    principal: &Principal,
    exclusive: bool,
) -> Result<Arc<UpstreamSession>, UpstreamError> {
    let revision = Revision::LATEST_LEGACY;
    let capabilities = capabilities::client_modern_to_legacy(&modern.envelope.client_capabilities, revision);
    let key = PartitionKey::new(principal.as_str(), &capabilities);
    // Built only when a session has to be opened: a warm one needs no handshake.
    let params = || {
        down::initialize_for_envelope(
            &modern.envelope,
            revision,
            &crate::upstream::pool::gateway_client_info(),
        )
    };
    if exclusive {
        // On stdio a server→client request names no request: keep requests that
        // may be asked for input alone on their session so it can only be theirs.
        upstream.pooled_exclusive(key, params).await
    } else {
        upstream.pooled(key, params).await
    }
}

/// A retry carrying `requestState`: answer the upstream's questions with the
/// client's `inputResponses`, then resume the suspended call (or ask again for
/// what is still missing).
async fn resume(
    gateway: &Gateway,
    upstream: &Arc<Upstream>,
    request: &Request,
    state: &str,
    principal: &Principal,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Result<Reply, tokio::sync::OwnedSemaphorePermit> {
    let suspended = match gateway
        .suspended
        .resume(state, &request.method, request.params.as_ref(), principal.as_str())
    {
        Ok(suspended) => suspended,
        Err(error) => {
            let message = Response::error(Some(request.id.clone()), error).into_message();
            return Ok(Reply::Message(reply::Status::Ok, message));
        }
    };
    let Some(call) = suspended.call else {
        return Err(permit);
    };
    let responses = request
        .params
        .as_ref()
        .and_then(|p| p.get("inputResponses"))
        .cloned()
        .unwrap_or_default();
    let session = call.session().clone();
    let mut missing = Vec::new();
    for (key, asked) in suspended.awaiting {
        match responses.get(&key) {
            Some(answer) => {
                let _ = session.respond(Response::result(asked.id, answer.clone())).await;
            }
            None => missing.push((key, asked)),
        }
    }
    if !missing.is_empty() {
        let digest = mrtr::params_digest(request.params.as_ref());
        let server_info = suspended.side.server_info.clone();
        let method = suspended.side.method;
        let result = gateway.suspended.suspend(
            Some(call),
            suspended.side,
            missing,
            &request.method,
            digest,
            principal.as_str(),
            suspended.deadline,
        );
        let result = crate::translate::up::result_for_modern(result, method, &server_info, Default::default());
        return Ok(Reply::result(request.id.clone(), result));
    }
    // The time the user took to answer is not the upstream's: the retry gets a full timeout.
    let timeout = upstream.config().timeout_for(&request.method);
    let deadline = tokio::time::Instant::now() + timeout;
    Ok(reply::resume_call(
        call,
        suspended.side,
        request.id.clone(),
        deadline,
        timeout,
        permit,
    ))
}
