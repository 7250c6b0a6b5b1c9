//! A 2026-07-28 `resources/read` in front of a modern upstream: answered from
//! the result the backend keeps ([`crate::router::read_cache`]) while the upstream's
//! own `ttlMs` lasts, for whom its `cacheScope` allows; else sent, and its
//! answer kept when the upstream says it may be. Hits and misses are counted.

use std::time::Instant;

use serde_json::Value;

use super::reply::Reply;
use crate::auth::Principal;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{Message, Request, Response};
use crate::router::Pool;

/// A read eragate has no current result for: sent upstream, its answer to keep.
pub(crate) struct ReadMiss {
    uri: String,
}

/// The kept answer to `request` for `principal`, or (`Err`) what to keep its
/// answer under. A read that resumes a multi round-trip exchange, or names no
/// URI, is neither served from nor kept (`Err(None)`).
pub(crate) fn lookup(pool: &Pool, request: &Request, principal: &Principal) -> Result<Reply, Option<ReadMiss>> {
    let params = request.params.as_ref();
    let resuming = params.is_some_and(|p| p.get("requestState").is_some() || p.get("inputResponses").is_some());
    let uri = match params.and_then(|p| p.get("uri")).and_then(Value::as_str) {
        Some(uri) if !resuming => uri,
        _ => return Err(None),
    };
    match pool.lists().reads().lookup(uri, principal.as_str(), Instant::now()) {
        Some(result) => {
            pool.stats().read_cache_hit();
            Ok(Reply::result(request.id.clone(), result))
        }
        None => {
            pool.stats().read_cache_miss();
            Err(Some(ReadMiss { uri: uri.to_owned() }))
        }
    }
}

/// `reply` (the upstream's answer to the read `miss`) as it is, kept on the
/// way when the upstream's hints allow.
pub(crate) fn keep(pool: &Pool, miss: ReadMiss, principal: &Principal, reply: Reply) -> Reply {
    let pool = pool.clone();
    let principal = principal.as_str().to_owned();
    let keep_result = move |message: &Message| {
        let Message::Response(Response {
            outcome: Outcome::Result(result),
            ..
        }) = message
        else {
            return;
        };
        let Some(object) = result.as_object() else {
            return;
        };
        if object.get("resultType").and_then(Value::as_str).unwrap_or("complete") != "complete" {
            return; // input required: nothing to keep
        }
        if let Some(hints) = pool.cache_policy().keep_read(object) {
            pool.lists()
                .reads()
                .store(&miss.uri, &principal, Value::clone(result), hints, Instant::now());
        }
    };
    match reply {
        Reply::Message(status, message) => {
            keep_result(&message);
            Reply::Message(status, message)
        }
        Reply::Stream(from_call, era) => Reply::Stream(
            from_call.reshaped_by(move |message| {
                keep_result(&message);
                message
            }),
            era,
        ),
        other => other,
    }
}
