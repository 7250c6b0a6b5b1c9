//! Reading a request body: the byte bound (`listen.max_body_bytes`), the read
//! deadline (`limits.body_read_timeout`) and, after a 413 on HTTP/1.x, the
//! lingering drain that lets a client still sending its body read the answer
//! instead of a broken pipe.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{CONTENT_LENGTH, EXPECT};
use http::{HeaderMap, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::discard::{DiscardBounds, discard};
use crate::protocol::errors::Rejection;

/// What bounds one body read.
#[derive(Clone, Copy, Debug)]
pub(super) struct BodyLimits {
    /// Most bytes accepted.
    pub(crate) max_bytes: usize,
    /// How long the whole body may take.
    pub(crate) deadline: Duration,
    /// After a 413, most bytes read and discarded before answering.
    pub(crate) linger_bytes: u64,
    /// ... and for at most this long.
    pub(crate) linger_for: Duration,
}

/// The body of a request with `headers`, or the refusal to answer instead.
pub(super) async fn read(
    version: Version,
    headers: &HeaderMap,
    mut body: Incoming,
    limits: BodyLimits,
) -> Result<Bytes, Rejection> {
    let too_large = Rejection::BodyTooLarge {
        limit: limits.max_bytes,
    };
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limits.max_bytes as u64) {
        if lingers(version, headers, declared, limits) {
            linger(body, limits).await;
        }
        return Err(too_large);
    }
    // Looked at once before the deadline is armed: most bodies came with their head,
    // and a timer set and dropped unpolled still reads the clock and builds an entry.
    let collected = {
        let mut collecting = std::pin::pin!(collect(&mut body, limits.max_bytes));
        match std::future::poll_fn(|cx| Poll::Ready(collecting.as_mut().poll(cx))).await {
            Poll::Ready(collected) => Ok(collected),
            Poll::Pending => tokio::time::timeout(limits.deadline, collecting).await,
        }
    };
    match collected {
        Err(_) => Err(Rejection::BodyTimeout),
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(Collect::TooLarge)) => {
            if lingers(version, headers, declared, limits) {
                linger(body, limits).await;
            }
            Err(too_large)
        }
        Ok(Err(Collect::Unreadable(why))) => Err(Rejection::BodyUnreadable(why)),
    }
}

/// Why a body could not be collected.
enum Collect {
    /// Past the byte bound.
    TooLarge,
    /// The connection failed.
    Unreadable(String),
}

/// The frames of `body` up to `limit` bytes; a single frame is kept without a copy.
async fn collect(body: &mut Incoming, limit: usize) -> Result<Bytes, Collect> {
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Collect::Unreadable(e.to_string()))?;
        let Ok(data) = frame.into_data() else { continue };
        total = total.saturating_add(data.len());
        if total > limit {
            return Err(Collect::TooLarge);
        }
        match (&mut joined, first.take()) {
            (Some(joined), _) => joined.extend_from_slice(&data),
            (None, None) => first = Some(data),
            (None, Some(earlier)) => {
                let mut buffer = BytesMut::with_capacity(total);
                buffer.extend_from_slice(&earlier);
                buffer.extend_from_slice(&data);
                joined = Some(buffer);
            }
        }
    }
    Ok(joined.map(BytesMut::freeze).or(first).unwrap_or_default())
}

/// Whether draining helps: HTTP/1.x (h2 resets just the stream), a client not
/// waiting for `100 Continue` (it has sent nothing yet), and a declared rest
/// within the linger bound.
fn lingers(version: Version, headers: &HeaderMap, declared: Option<u64>, limits: BodyLimits) -> bool {
    let http1 = matches!(version, Version::HTTP_10 | Version::HTTP_11);
    let waits_for_continue = headers
        .get(EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    http1 && !waits_for_continue && declared.is_none_or(|len| len <= limits.linger_bytes)
}

/// Reads and discards what is left of `body`, within the linger bounds.
async fn linger(body: Incoming, limits: BodyLimits) {
    let bounds = DiscardBounds {
        max_bytes: limits.linger_bytes,
        max_time: limits.linger_for,
    };
    discard(body, bounds).await;
}
