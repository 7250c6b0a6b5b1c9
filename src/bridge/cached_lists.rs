//! A 2026-07-28 list request in front of a legacy upstream: answered from the
//! page the backend keeps ([`crate::router::list_cache`]) while it is current, else
//! fetched on a pooled session and kept. Hits and misses are counted; the
//! caching hints follow from how the page is watched and who it may differ for.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::pooled_session::pooled_session;
use super::reply::{self, Reply};
use crate::auth::Principal;
use crate::gateway::Gateway;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{ModernMethod, Request, Response};
use crate::router::list_cache::{ListKind, PageKey, PageParts};
use crate::router::{CallStep, OnDrop, Pool, UpstreamError, UpstreamSession};
use crate::translate::cache::{Audience, Watch};
use crate::translate::{ModernRequest, down, up};

/// Answers the list request `request` (its method is of `kind`).
pub(crate) async fn serve(
    gateway: &Gateway,
    pool: &Pool,
    request: Request,
    modern: &ModernRequest,
    kind: ListKind,
    principal: &Principal,
) -> Reply {
    let key = page_key(&request, modern, principal);
    let lists = pool.lists();
    let per_caller = pool.per_principal() || gateway.auth().filters_lists();
    if let Some(page) = lists.lookup(&key, Instant::now()) {
        pool.stats().list_cache_hit();
        let audience = lists.audience(&key, per_caller);
        let result = decorate(
            pool,
            &page.result,
            &page.server_info,
            modern.method,
            page.watch,
            audience,
        );
        return Reply::result(request.id, result);
    }
    pool.stats().list_cache_miss();
    let ticket = lists.ticket(kind);
    let id = request.id.clone();
    let (session, response) = match fetch(pool, request, modern, principal).await {
        Ok(fetched) => fetched,
        Err(error) => return Reply::upstream_failure(Some(id), &error),
    };
    let result = match response.outcome {
        Outcome::Result(result) => Arc::new(result.into_value()),
        Outcome::Error(error) => {
            let message = Response::error(Some(id), up::error_for_modern(error)).into_message();
            return Reply::Message(reply::Status::Ok, message);
        }
    };
    let server_info = Arc::new(session.server_info());
    let watch = lists.watch_for(kind, &session);
    let parts = PageParts {
        result: result.clone(),
        server_info: server_info.clone(),
        watch,
    };
    lists.store(key.clone(), ticket, parts, &session, Instant::now());
    let audience = lists.audience(&key, per_caller);
    Reply::result(
        id,
        decorate(pool, &result, &server_info, modern.method, watch, audience),
    )
}

/// Sends the list request on a pooled session (a fresh one if that one turns
/// out dead) and waits for its answer within the method's timeout.
async fn fetch(
    pool: &Pool,
    request: Request,
    modern: &ModernRequest,
    principal: &Principal,
) -> Result<(Arc<UpstreamSession>, Response), UpstreamError> {
    let _permit = pool.admit().await?;
    let params = request.params.map(down::modern_text_params_for_legacy);
    let mut retried = false;
    let (session, mut call) = loop {
        let session = pooled_session(pool, modern, principal, false).await?;
        let sent = session
            .call(
                &request.method,
                params.clone(),
                request.id.clone(),
                OnDrop::CancelUpstream,
            )
            .await;
        match sent {
            Ok(call) => break (session, call),
            // The pooled session died between lookup and send (a crashed child): one fresh try.
            Err(_) if !retried => {
                pool.discard(&session);
                retried = true;
            }
            Err(error) => return Err(error),
        }
    };
    let timeout = pool.timeout_for(modern.method.as_str());
    // A list asks the client nothing and reports no progress: only its answer matters.
    let answered = tokio::time::timeout(timeout, async {
        loop {
            if let CallStep::Done(done) = call.next().await {
                return done;
            }
        }
    })
    .await;
    match answered {
        Ok(done) => done.map(|response| (session, response)),
        Err(_) => {
            call.time_out();
            Err(UpstreamError::Timeout {
                upstream: pool.name().to_owned(),
                after_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            })
        }
    }
}

/// The page this request asks for, in the partition its session would be of.
fn page_key(request: &Request, modern: &ModernRequest, principal: &Principal) -> PageKey {
    let partition = super::pooled_session::partition_key(modern, principal);
    let cursor = request
        .params
        .as_ref()
        .and_then(|p| p.get("cursor"))
        .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned));
    PageKey {
        principal: partition.principal,
        profile: partition.capability_profile,
        method: modern.method,
        cursor,
    }
}

/// A kept (or just fetched) legacy page as this modern client gets it.
fn decorate(
    pool: &Pool,
    result: &Value,
    server_info: &Value,
    method: ModernMethod,
    watch: Watch,
    audience: Audience,
) -> Value {
    let policy = pool.cache_policy().with_facts(watch, audience);
    up::result_for_modern(result.clone(), method, server_info, policy)
}
