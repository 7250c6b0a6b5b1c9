//! Bodies read only to be thrown away: the rest of a client's body after a 413,
//! an upstream's stream after its answer, the body of an upstream's answer to a
//! notification. Read to its end, an HTTP/1.1 connection can carry the next
//! message; dropped unread, it is closed. Every discard is bounded in bytes and
//! in time, so a peer that keeps sending or goes silent costs its connection,
//! not a task held forever.

use std::time::Duration;

use bytes::Buf;
use http_body_util::BodyExt;
use hyper::body::Body;

/// How much of a body a discard reads, and for how long, before giving up on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DiscardBounds {
    /// Most bytes read; a body longer than this is dropped unfinished.
    pub(crate) max_bytes: u64,
    /// Most time spent; a body still open then is dropped unfinished.
    pub(crate) max_time: Duration,
}

impl DiscardBounds {
    /// What eragate reads of an upstream's body it does not need: 64 KiB within 1 s.
    /// An answer to a notification or the end of an answered stream is a few bytes.
    pub(crate) const UPSTREAM: DiscardBounds = DiscardBounds {
        max_bytes: 64 * 1024,
        max_time: Duration::from_secs(1),
    };
}

/// Reads `body` to its end and throws it away. True when the body ended within
/// `bounds` (its connection can be reused); false when it was longer, slower or
/// broken, in which case it is dropped unfinished.
pub(crate) async fn discard<B>(mut body: B, bounds: DiscardBounds) -> bool
where
    B: Body + Unpin,
{
    let to_the_end = async {
        let mut read = 0u64;
        loop {
            match body.frame().await {
                None => return true,
                Some(Err(_)) => return false,
                Some(Ok(frame)) => {
                    let len = frame.data_ref().map_or(0, |data| data.remaining());
                    read = read.saturating_add(len as u64);
                    if read > bounds.max_bytes {
                        return false;
                    }
                }
            }
        }
    };
    tokio::time::timeout(bounds.max_time, to_the_end).await.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{Full, StreamBody};
    use hyper::body::Frame;
    use std::convert::Infallible;

    const BOUNDS: DiscardBounds = DiscardBounds {
        max_bytes: 10,
        max_time: Duration::from_secs(1),
    };

    fn chunks(
        parts: &'static [&'static str],
    ) -> StreamBody<impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin> {
        StreamBody::new(futures_util::stream::iter(
            parts
                .iter()
                .map(|part| Ok(Frame::data(Bytes::from_static(part.as_bytes())))),
        ))
    }

    #[tokio::test]
    async fn a_body_within_the_bounds_is_read_to_its_end() {
        assert!(discard(Full::new(Bytes::new()), BOUNDS).await);
        assert!(discard(Full::new(Bytes::from_static(b"0123456789")), BOUNDS).await);
        assert!(discard(chunks(&["01234", "56789"]), BOUNDS).await);
    }

    #[tokio::test]
    async fn a_body_past_the_byte_bound_is_given_up() {
        assert!(!discard(Full::new(Bytes::from_static(b"0123456789A")), BOUNDS).await);
        assert!(!discard(chunks(&["01234", "56789", "A", "never read"]), BOUNDS).await);
    }

    #[tokio::test]
    async fn a_body_that_never_ends_is_given_up_at_the_time_bound() {
        use futures_util::StreamExt;
        let silent = StreamBody::new(
            futures_util::stream::iter([Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"data: {}\n\n")))])
                .chain(futures_util::stream::pending()),
        );
        let bounds = DiscardBounds {
            max_time: Duration::from_millis(50),
            ..BOUNDS
        };
        assert!(!discard(silent, bounds).await);
    }

    #[tokio::test]
    async fn a_broken_body_is_given_up() {
        let broken = StreamBody::new(futures_util::stream::iter([
            Ok(Frame::data(Bytes::from_static(b"01"))),
            Err("reset"),
        ]));
        assert!(!discard(broken, BOUNDS).await);
    }
}
