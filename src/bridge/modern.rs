//! Serving a 2026-07-28 request. In front of a legacy upstream: `server/discover`
//! from a warm session's handshake, everything else on a pooled upstream
//! session. In front of a modern upstream: a faithful passthrough.

use super::listen::ListenHold;
use super::modern_client::ModernSide;
use super::mrtr::{self, Retried};
use super::param_headers::SentParams;
use super::pooled_session::{call_on_pooled_session, pooled_session};
use super::pump::{self, ClientSide};
use super::reply::{self, Reply};
use super::tasks::{self, CallMode};
use crate::auth::Principal;
use crate::gateway::Gateway;
use crate::protocol::Era;
use crate::protocol::errors::Rejection;
use crate::protocol::lazy_json::ParamsView;
use crate::protocol::{ErrorCode, ErrorObject, Id, ModernMethod, Request, Response};
use crate::router::list_cache::ListKind;
use crate::router::{Admission, OnDrop, Pool, SessionNeed, discover_params, gateway_client_info};
use crate::translate::mrtr::conversation::{Binding, InputPolicy, input_responses};
use crate::translate::{ModernRequest, discover, down};

/// Whether a `subscriptions/listen` served here takes a place in its
/// principal's listen quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListenCounting {
    /// A client's own listen: it does.
    Counted,
    /// One member's share of a listen counted once where it was joined (a
    /// federation's), or eragate's own (a federation's watch): it does not.
    CountedElsewhere,
}

/// Answers one validated modern request; `sent` are the client's
/// `Mcp-Param-*` headers: passed on to a modern upstream as they came, checked
/// against the body for a legacy one (which never sees them).
pub(crate) async fn serve(
    gateway: &Gateway,
    pool: &Pool,
    request: Request,
    modern: &ModernRequest,
    sent: SentParams<'_>,
    principal: &Principal,
    listens: ListenCounting,
) -> Reply {
    let forwarded = sent.forwarded();
    let listen_hold = || match listens {
        ListenCounting::Counted => gateway.listens().hold(principal.as_str()).map(Some),
        ListenCounting::CountedElsewhere => Ok(None),
    };
    // Known after the first request; learning it (a probe) is boxed so that it does not
    // size every request's state.
    let era = match pool.era_if_known() {
        Some(era) => Ok(era),
        None => Box::pin(pool.era(principal)).await,
    };
    match era {
        Err(error) => Reply::upstream_failure(Some(request.id), &error),
        Ok(Era::Modern) if modern.method == ModernMethod::SubscriptionsListen => {
            let hold = match listen_hold() {
                Ok(hold) => hold,
                Err(refusal) => return Reply::rejected(Some(request.id), refusal),
            };
            passthrough(pool, request, modern.method, forwarded, principal, hold).await
        }
        Ok(Era::Modern) if modern.method == ModernMethod::Discover && gateway.telemetry().live_discover() => {
            let reply = passthrough(pool, request, modern.method, forwarded, principal, None).await;
            super::live_discover::with_summary(reply, pool)
        }
        Ok(Era::Modern) if modern.method == ModernMethod::ResourcesRead => {
            match super::cached_reads::lookup(pool, &request, principal) {
                Ok(kept) => kept,
                Err(miss) => {
                    let reply = passthrough(pool, request, modern.method, forwarded, principal, None).await;
                    match miss {
                        Some(miss) => super::cached_reads::keep(pool, miss, principal, reply),
                        None => reply,
                    }
                }
            }
        }
        Ok(Era::Modern) => passthrough(pool, request, modern.method, forwarded, principal, None).await,
        Ok(Era::Legacy) => match modern.method {
            ModernMethod::Discover => Box::pin(discover(gateway, pool, request.id, principal)).await,
            ModernMethod::SubscriptionsListen => {
                let hold = match listen_hold() {
                    Ok(hold) => hold,
                    Err(refusal) => return Reply::rejected(Some(request.id), refusal),
                };
                let session = match pooled_session(pool, modern, principal, false).await {
                    Ok(session) => session,
                    Err(error) => return Reply::upstream_failure(Some(request.id), &error),
                };
                Box::pin(super::listen::on_legacy_upstream(gateway, session, request, hold)).await
            }
            method => match ListKind::of(method) {
                Some(kind) => {
                    Box::pin(super::cached_lists::serve(
                        gateway, pool, request, modern, kind, principal,
                    ))
                    .await
                }
                None if method == ModernMethod::ToolsCall => {
                    let request = tasks::without_task_hint(request);
                    if let Err(refusal) = check_param_headers(gateway, pool, &request, modern, principal, sent).await {
                        return refusal;
                    }
                    let mode = match tasks::call_mode(pool, &request, modern) {
                        Ok(CallMode::Ordinary) => {
                            Box::pin(tasks::upstream_call_mode(gateway, pool, &request, modern, principal)).await
                        }
                        mode => mode,
                    };
                    match mode {
                        Ok(mode @ (CallMode::Task | CallMode::UpstreamTask)) => {
                            Box::pin(tasks::start(gateway, pool, request, modern, principal, mode)).await
                        }
                        Ok(mode) => forward(gateway, pool, request, modern, principal, mode).await,
                        Err(error) => {
                            let message = Response::error(Some(request.id), error).into_message();
                            Reply::Message(reply::Status::Ok, message)
                        }
                    }
                }
                None => forward(gateway, pool, request, modern, principal, CallMode::Ordinary).await,
            },
        },
    }
}

/// A `tools/call` toward a legacy upstream, which cannot check its
/// `Mcp-Param-*` headers: checked here against the tool's `x-mcp-header`
/// annotations, as a 2026-07-28 server would; a mismatch is refused 400/-32020.
async fn check_param_headers(
    gateway: &Gateway,
    pool: &Pool,
    request: &Request,
    modern: &ModernRequest,
    principal: &Principal,
    sent: SentParams<'_>,
) -> Result<(), Reply> {
    let checked = gateway
        .tool_facts()
        .check_call(pool, request.params.as_ref(), modern, principal, sent);
    // Boxed: a listing of the upstream's tools would otherwise size every request's state.
    match Box::pin(checked).await {
        Ok(()) => Ok(()),
        Err(mismatch) => {
            tracing::debug!(upstream = %pool.name(), %mismatch, "Mcp-Param header refused");
            let error = ErrorObject::new(ErrorCode::HEADER_MISMATCH, mismatch.to_string());
            Err(Reply::rejected(Some(request.id.clone()), Rejection::Classified(error)))
        }
    }
}

/// A modern request to a modern upstream: sent as it is (ids rewritten,
/// routing headers regenerated), answered as the upstream answered. A listen
/// (`listen` is its place in the quota) takes an admission slot only to be
/// sent: it may stay open for hours, and must not starve the calls.
async fn passthrough(
    pool: &Pool,
    request: Request,
    method: ModernMethod,
    forwarded: &[(String, String)],
    principal: &Principal,
    listen: Option<ListenHold>,
) -> Reply {
    let permit = match pool.admit().await {
        Ok(permit) => permit,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let session = match pool.session(SessionNeed::stateless(principal)).await {
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
        cache: pool.cache_policy(),
    };
    match listen {
        // A listen lives until either side closes it.
        Some(hold) => {
            drop(permit);
            pump::stream_call(call, side, request.id, None, hold)
        }
        None => {
            let timeout = pool.timeout_for(method.as_str());
            pump::stream_call(call, side, request.id, Some(timeout), permit)
        }
    }
}

/// `server/discover`, also answered for a legacy-shaped probe without `_meta`;
/// with `[telemetry] live_discover`, carrying the upstream's live summary.
pub(crate) async fn discover(gateway: &Gateway, pool: &Pool, id: Id, principal: &Principal) -> Reply {
    let reply = discover_result(pool, id, principal).await;
    if gateway.telemetry().live_discover() {
        super::live_discover::with_summary(reply, pool)
    } else {
        reply
    }
}

async fn discover_result(pool: &Pool, id: Id, principal: &Principal) -> Reply {
    if let Ok(Era::Modern) = pool.era(principal).await {
        let params = discover_params(&gateway_client_info());
        let request = Request {
            id,
            method: ModernMethod::Discover.as_str().into(),
            params: Some(params.into()),
        };
        return passthrough(pool, request, ModernMethod::Discover, &[], principal, None).await;
    }
    match pool.initialize_result(principal).await {
        Ok(initialize) => {
            let mut result = discover::discover_result(&initialize, pool.cache_policy());
            if pool.config().tasks.any() {
                tasks::advertise(&mut result);
            }
            Reply::result(id, result)
        }
        Err(error) => Reply::upstream_failure(Some(id), &error),
    }
}

/// A modern request to a legacy upstream: a retry resumes the call it
/// answers (which becomes a task for [`CallMode::TaskAfterInput`]), anything
/// else is sent.
async fn forward(
    gateway: &Gateway,
    pool: &Pool,
    request: Request,
    modern: &ModernRequest,
    principal: &Principal,
    mode: CallMode,
) -> Reply {
    let permit = match pool.admit().await {
        Ok(permit) => permit,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    // Read alone: a first request (no state) keeps its params unbuilt.
    let state = request
        .params
        .as_ref()
        .and_then(|p| ParamsView::str_member(p, "requestState"));
    if let Some(state) = state {
        match mrtr::retry(gateway.suspended(), &request, &state, principal.as_str()).await {
            Retried::Invalid(error) => {
                let message = Response::error(Some(request.id), error).into_message();
                return Reply::Message(reply::Status::Ok, message);
            }
            Retried::AskedAgain(result) => return Reply::result(request.id, result),
            Retried::Resumed { call, side, .. } if mode == CallMode::TaskAfterInput => {
                return Box::pin(tasks::adopt(gateway, call, side, modern, principal, request.id, permit)).await;
            }
            Retried::Resumed { call, side, input } => {
                // The time the user took to answer is not the upstream's: the retry gets a full timeout.
                let timeout = pool.timeout_for(&request.method);
                let side = ClientSide::Modern {
                    side,
                    input: InputPolicy::Asks(input),
                    store: gateway.suspended().clone(),
                };
                return pump::stream_call(call, side, request.id, Some(timeout), permit);
            }
            // The upstream had ended the call (URL elicitation): send it again, answers stripped.
            Retried::Reissue => {}
        }
    }
    send(gateway, pool, request, modern, principal, permit).await
}

/// Sends a modern request to a legacy upstream on a pooled session and streams
/// its answer; the client may be asked for input as its capabilities allow.
async fn send(
    gateway: &Gateway,
    pool: &Pool,
    request: Request,
    modern: &ModernRequest,
    principal: &Principal,
    permit: Admission,
) -> Reply {
    let capabilities = &modern.envelope.client_capabilities;
    let input = InputPolicy::for_request(modern.method.allows_input_required(), capabilities, || {
        Binding::of(&request.method, request.params.as_deref(), principal.as_str())
    })
    .with_presented(input_responses(presented_params(&request)));
    let may_ask = matches!(input, InputPolicy::Asks(_));
    let params = request.params.map(down::modern_text_params_for_legacy);
    let sent = call_on_pooled_session(
        pool,
        modern,
        principal,
        may_ask,
        &request.method,
        params,
        request.id.clone(),
    )
    .await;
    let call = match sent {
        Ok(call) => call,
        Err(error) => return Reply::upstream_failure(Some(request.id), &error),
    };
    let side = ModernSide {
        method: modern.method,
        log_level: modern.envelope.log_level,
        server_info: call.session().server_info_for_modern(),
        cache: pool.cache_policy(),
    };
    let side = ClientSide::Modern {
        side,
        input,
        store: gateway.suspended().clone(),
    };
    let timeout = Some(pool.timeout_for(modern.method.as_str()));
    pump::stream_call(call, side, request.id, timeout, permit)
}

/// The params to look for `inputResponses` in: `None` when text params have no
/// such member (a first request), so that they are not built just to find that out.
fn presented_params(request: &Request) -> Option<&serde_json::Value> {
    let params = request.params.as_ref()?;
    // Known from the pass that read the envelope, when it found where the members lie.
    match params.has_member("inputResponses") {
        Some(false) => return None,
        Some(true) => return Some(params),
        None => {}
    }
    match params.text_members() {
        Some(members) if !members.iter().any(|(name, _)| name == "inputResponses") => None,
        _ => Some(params),
    }
}
