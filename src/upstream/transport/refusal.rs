//! Upstream messages eragate will not take whole: the bound on the bytes held
//! for messages being read across every session, and the request a refused
//! message answered, so that its caller is failed at once.
//!
//! Every reader (a stdio line, an HTTP body, an SSE event) counts what it holds
//! of the message it is reading in [`Held`], against one process-wide bound
//! (`limits.max_upstream_buffered_bytes`, set by [`set_max_buffered_bytes`]).
//! The first [`FREE_BYTES`] of each message are not counted, so that the usual
//! small message never touches the shared count. A message that would pass the
//! bound, or its own size bound, or whose values are too many
//! (`message_bounds`), is refused: its bytes are dropped as they come
//! and, when it is a response, the request it answers fails with the reason
//! ([`Refused`]) instead of waiting for `request_timeout`. Which request that is
//! is read from its top-level `id` member as its bytes pass ([`IdFinder`]),
//! without keeping them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::Inbound;
use crate::upstream::error::UpstreamError;

/// Bytes of one message that are not counted against the shared bound.
pub(crate) const FREE_BYTES: usize = 64 * 1024;

/// The default of `limits.max_upstream_buffered_bytes`.
pub(crate) const DEFAULT_MAX_BUFFERED_BYTES: usize = 128 * 1024 * 1024;

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_BUFFERED_BYTES);
static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// Sets the bound on the bytes held for upstream messages being read, across
/// every session (`limits.max_upstream_buffered_bytes`). What is held already
/// stays held; a lower bound refuses growth until enough is given back.
pub(crate) fn set_max_buffered_bytes(limit: usize) {
    LIMIT.store(limit, Ordering::Relaxed);
}

/// What the readers hold now, the most they held at once since start, the
/// bound, and how many messages were refused (for the admin view).
pub(crate) fn buffered_stats() -> serde_json::Value {
    serde_json::json!({
        "held": HELD.load(Ordering::Relaxed),
        "peak": PEAK.load(Ordering::Relaxed),
        "bound": LIMIT.load(Ordering::Relaxed),
        "refused": REFUSED.load(Ordering::Relaxed),
    })
}

/// One reader's share of the bound: the bytes past [`FREE_BYTES`] of the
/// message it is reading. Given back when dropped.
#[derive(Debug, Default)]
pub(crate) struct Held {
    counted: usize,
}

/// The shared bound is reached: the message is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Exhausted {
    /// The bound.
    pub(crate) limit: usize,
}

impl Held {
    /// Counts `bytes` held for the message being read (more or fewer than
    /// before). Growing past the shared bound fails, and changes nothing.
    pub(crate) fn fit(&mut self, bytes: usize) -> Result<(), Exhausted> {
        let wanted = bytes.saturating_sub(FREE_BYTES);
        if wanted == self.counted {
            // The usual small message: nothing counted, nothing shared touched.
            return Ok(());
        }
        if wanted < self.counted {
            HELD.fetch_sub(self.counted - wanted, Ordering::Relaxed);
            self.counted = wanted;
            return Ok(());
        }
        let more = wanted - self.counted;
        let limit = LIMIT.load(Ordering::Relaxed);
        let grown = HELD.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
            held.checked_add(more).filter(|total| *total <= limit)
        });
        match grown {
            Ok(before) => {
                self.counted = wanted;
                PEAK.fetch_max(before + more, Ordering::Relaxed);
                Ok(())
            }
            Err(_) => Err(Exhausted { limit }),
        }
    }

    /// Gives back everything held (the message was handed over or dropped).
    pub(crate) fn release(&mut self) {
        if self.counted > 0 {
            HELD.fetch_sub(self.counted, Ordering::Relaxed);
            self.counted = 0;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

/// Why a message was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Larger than one message may be.
    TooLarge {
        /// The bound, in bytes.
        limit: usize,
    },
    /// The shared bound on bytes held for messages being read is reached.
    Exhausted {
        /// The bound, in bytes.
        limit: usize,
    },
    /// Refused by the scan before parsing (too many values, too deep, not JSON).
    Unreadable(String),
}

impl Refused {
    /// What a caller is told.
    pub(crate) fn reason(&self) -> String {
        match self {
            Refused::TooLarge { limit } => {
                format!("its answer was refused: larger than {limit} bytes, the most one upstream message may hold")
            }
            Refused::Exhausted { limit } => format!(
                "its answer was refused: upstream messages being read already hold {limit} bytes \
                 (limits.max_upstream_buffered_bytes); try again"
            ),
            Refused::Unreadable(why) => format!("its answer was refused: {why}"),
        }
    }

    /// The failure of the request a refused message answered.
    pub(crate) fn error(&self, upstream: &str) -> UpstreamError {
        UpstreamError::protocol(upstream, self.reason())
    }

    /// Counts a refusal (for the admin view).
    pub(crate) fn count(&self) {
        REFUSED.fetch_add(1, Ordering::Relaxed);
    }
}

impl From<Exhausted> for Refused {
    fn from(exhausted: Exhausted) -> Refused {
        Refused::Exhausted { limit: exhausted.limit }
    }
}

/// Fails the request of `session` a refused message answered, if it names one
/// (`found`); logs the refusal either way, and counts it.
pub(crate) fn fail_answered<S: Inbound>(session: &S, upstream: &str, refused: &Refused, found: &Found) {
    refused.count();
    match found.answered() {
        Some(upstream_id) => {
            tracing::warn!(upstream, upstream_id, reason = %refused.reason(), "upstream answer refused; its request fails now");
            session.handle_failure(upstream_id, refused.error(upstream));
        }
        None => tracing::warn!(
            upstream,
            reason = %refused.reason(),
            "upstream message refused and skipped (it answers no request of eragate's)"
        ),
    }
}

/// What [`IdFinder`] learned of a message's top level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Found {
    /// The top-level `id`, when it is a non-negative integer (eragate's ids are).
    pub(crate) id: Option<u64>,
    /// Whether a top-level `method` member was seen: a request or a notification.
    pub(crate) has_method: bool,
}

impl Found {
    /// The request of this session a refused message answered: a response's
    /// integer id. A request or notification from the upstream answers nothing.
    pub(crate) fn answered(&self) -> Option<u64> {
        if self.has_method { None } else { self.id }
    }
}

/// Reads the top-level `id` and whether there is a `method` from a JSON
/// object's bytes fed in any number of pieces, keeping no more than a member
/// name's or an id's few bytes: the message itself may be gigabytes that are
/// dropped as they pass. It follows strings (and their escapes) and nesting;
/// names written with escapes are not recognised, and anything malformed
/// simply finds nothing.
#[derive(Debug, Default)]
pub(crate) struct IdFinder {
    depth: usize,
    /// The top-level value is an object.
    object: bool,
    in_string: bool,
    escaped: bool,
    /// At depth 1, a member's name comes next (after `{` or `,`).
    expect_name: bool,
    /// The top-level member name being read, or the last one read; `None` when
    /// it was longer than any name looked for.
    name: Option<Vec<u8>>,
    reading_name: bool,
    /// The `id` member's value being read.
    value: Option<Vec<u8>>,
    found: Found,
}

/// The longest name or id kept.
const KEPT: usize = 24;

impl IdFinder {
    /// Reads `bytes`, the next piece of the message.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.step(byte);
        }
    }

    /// What was found in everything fed.
    pub(crate) fn finish(mut self) -> Found {
        self.end_value();
        self.found
    }

    fn step(&mut self, byte: u8) {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
                self.keep(byte);
            } else if byte == b'\\' {
                self.escaped = true;
                // An escaped name is not one looked for; an escaped id is not eragate's.
                self.name = None;
                self.value = None;
            } else if byte == b'"' {
                self.in_string = false;
                if self.reading_name {
                    self.reading_name = false;
                } else {
                    self.end_value();
                }
            } else {
                self.keep(byte);
            }
            return;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.object && self.expect_name {
                    self.expect_name = false;
                    self.reading_name = true;
                    self.name = Some(Vec::new());
                } else if self.value.is_some() {
                    // A string id: not one eragate minted.
                    self.value = None;
                }
            }
            b'{' | b'[' => {
                // An object or array id: not one eragate minted.
                self.value = None;
                self.depth += 1;
                if self.depth == 1 {
                    self.object = byte == b'{';
                    self.expect_name = self.object;
                }
            }
            b'}' | b']' => {
                self.end_value();
                self.value = None;
                self.depth = self.depth.saturating_sub(1);
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.value = None;
                self.expect_name = self.object;
            }
            b':' if self.depth == 1 && self.object => {
                match self.name.as_deref() {
                    Some(b"id") => self.value = Some(Vec::new()),
                    Some(b"method") => self.found.has_method = true,
                    _ => {}
                }
                self.name = None;
            }
            b' ' | b'\t' | b'\r' | b'\n' => self.end_value(),
            _ => self.keep(byte),
        }
    }

    /// Keeps `byte` of the name or id being read, dropping either once too long.
    fn keep(&mut self, byte: u8) {
        if self.reading_name {
            if let Some(name) = &mut self.name {
                if name.len() < KEPT {
                    name.push(byte);
                } else {
                    self.name = None;
                }
            }
        } else if let Some(value) = &mut self.value {
            if value.len() < KEPT {
                value.push(byte);
            } else {
                self.value = None;
            }
        }
    }

    /// The id's value ended (whitespace before it ends nothing): kept when it is an integer.
    fn end_value(&mut self) {
        if self.value.as_ref().is_some_and(|value| !value.is_empty())
            && let Some(value) = self.value.take()
        {
            self.found.id = std::str::from_utf8(&value).ok().and_then(|text| text.parse().ok());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found_in_pieces(text: &str, piece: usize) -> Found {
        let mut finder = IdFinder::default();
        for chunk in text.as_bytes().chunks(piece.max(1)) {
            finder.feed(chunk);
        }
        finder.finish()
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is_and_however_the_bytes_come() {
        let big = "x".repeat(10_000);
        let cases = [
            // (message, what is found)
            (r#"{"jsonrpc":"2.0","id":7,"result":{}}"#.to_owned(), Some(7), false),
            (
                format!(r#"{{"result":{{"text":"{big}","id":99}},"jsonrpc":"2.0","id":12}}"#),
                Some(12),
                false,
            ),
            (r#"{ "id" : 3 , "result" : [1,{"id":4}] }"#.to_owned(), Some(3), false),
            (r#"{"result":{"a":"\"id\":5"},"id":6}"#.to_owned(), Some(6), false),
            (r#"{"jsonrpc":"2.0","id":"abc","result":{}}"#.to_owned(), None, false),
            (r#"{"jsonrpc":"2.0","id":null,"error":{}}"#.to_owned(), None, false),
            (r#"{"jsonrpc":"2.0","id":-1,"result":{}}"#.to_owned(), None, false),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"sampling/createMessage","params":{}}"#.to_owned(),
                Some(8),
                true,
            ),
            (
                r#"{"method":"notifications/progress","params":{"id":2}}"#.to_owned(),
                None,
                true,
            ),
            (r#"[{"id":1}]"#.to_owned(), None, false),
            // Cut off before the id: nothing found.
            (format!(r#"{{"result":{{"text":"{big}"#), None, false),
            // An escaped name is not recognised.
            (r#"{"\u0069d":5,"result":{}}"#.to_owned(), None, false),
        ];
        for (text, id, has_method) in cases {
            for piece in [1, 2, 3, 7, 64, text.len()] {
                let found = found_in_pieces(&text, piece);
                assert_eq!(
                    found,
                    Found { id, has_method },
                    "{} in pieces of {piece}",
                    &text[..text.len().min(80)]
                );
            }
        }
        assert_eq!(found_in_pieces(r#"{"id":8,"method":"x"}"#, 4).answered(), None);
        assert_eq!(found_in_pieces(r#"{"id":8,"result":1}"#, 4).answered(), Some(8));
    }

    #[test]
    fn what_a_reader_holds_is_counted_past_the_free_bytes_and_given_back() {
        // The shared count is process-wide: other tests' readers may hold some too,
        // so only this reader's own counting is checked against a generous bound.
        set_max_buffered_bytes(usize::MAX / 2);
        let mut held = Held::default();
        assert!(held.fit(FREE_BYTES).is_ok());
        assert_eq!(held.counted, 0);
        assert!(held.fit(FREE_BYTES + 1000).is_ok());
        assert_eq!(held.counted, 1000);
        assert!(held.fit(FREE_BYTES + 10).is_ok());
        assert_eq!(held.counted, 10);
        assert_eq!(held.fit(usize::MAX), Err(Exhausted { limit: usize::MAX / 2 }));
        assert_eq!(held.counted, 10, "a refused growth changes nothing");
        held.release();
        assert_eq!(held.counted, 0);
        set_max_buffered_bytes(DEFAULT_MAX_BUFFERED_BYTES);
    }
}
