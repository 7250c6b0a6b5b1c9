//! Server-Sent Events framing: an incremental parser over arbitrary byte chunks
//! and the writer for the frames eragate sends.
//!
//! The parser is bounded: an event larger than its limit is an error, not
//! unbounded memory.

use bytes::{Buf, BytesMut};

/// One dispatched SSE event.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Event {
    /// `event:` field; empty means the default type `message`.
    pub event: String,
    /// `data:` lines joined with `\n`.
    pub data: String,
    /// `id:` field, when present.
    pub(crate) id: Option<String>,
}

/// Why the stream cannot be parsed further.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A single event grew past the configured bound.
    #[error("SSE event exceeds {0} bytes")]
    TooLarge(usize),
    /// A line is not UTF-8.
    #[error("SSE stream is not UTF-8")]
    NotUtf8,
}

/// Incremental parser: feed bytes with [`SseParser::push`], then drain events
/// with [`SseParser::next_event`] until it returns `Ok(None)`.
///
/// Linear in its input however it is chunked: the search for a line's end
/// resumes where the last one stopped (`scanned`), so a long line trickled in
/// small chunks is read once, not once per chunk. Follows the WHATWG
/// event-stream rules (LF, CR and CRLF line ends, comments, `data` lines
/// joined with LF, one leading BOM ignored, `retry`), except that `id` is
/// reported per event rather than carried over to later events.
#[derive(Debug)]
pub struct SseParser {
    buffer: BytesMut,
    /// Bytes at the front of `buffer` already known to hold no line end.
    scanned: usize,
    pending: Event,
    has_data: bool,
    /// Whether the stream's first bytes were checked for a BOM.
    started: bool,
    retry: Option<u64>,
    max_event_bytes: usize,
}

impl SseParser {
    /// A parser that refuses events larger than `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> SseParser {
        SseParser {
            buffer: BytesMut::new(),
            scanned: 0,
            pending: Event::default(),
            has_data: false,
            started: false,
            retry: None,
            max_event_bytes,
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The bytes it holds now: what was pushed and not yet read as events, and
    /// the data of the event being read.
    pub(crate) fn held_bytes(&self) -> usize {
        self.buffer.len() + self.pending.data.len()
    }

    /// The reconnection time the stream last asked for (`retry:`), in milliseconds.
    #[cfg(test)]
    pub(crate) fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// The next complete event, `Ok(None)` when more bytes are needed.
    pub fn next_event(&mut self) -> Result<Option<Event>, SseError> {
        if !self.skip_bom() {
            return Ok(None);
        }
        loop {
            let Some(line) = self.next_line()? else {
                return Ok(None);
            };
            let line = std::str::from_utf8(&line).map_err(|_| SseError::NotUtf8)?;
            if line.is_empty() {
                if self.has_data {
                    self.has_data = false;
                    return Ok(Some(std::mem::take(&mut self.pending)));
                }
                self.pending = Event::default();
                continue;
            }
            self.field(line)?;
        }
    }

    /// Drops a UTF-8 BOM at the very start; `false` while too few bytes have come to tell.
    fn skip_bom(&mut self) -> bool {
        const BOM: &[u8] = b"\xEF\xBB\xBF";
        if self.started {
            return true;
        }
        let have = self.buffer.len().min(BOM.len());
        if self.buffer[..have] != BOM[..have] {
            self.started = true;
        } else if have == BOM.len() {
            self.buffer.advance(BOM.len());
            self.started = true;
        }
        self.started
    }

    /// The next whole line without its end, `None` when none is complete yet.
    fn next_line(&mut self) -> Result<Option<BytesMut>, SseError> {
        let found = self.buffer[self.scanned..]
            .iter()
            .position(|b| *b == b'\n' || *b == b'\r');
        let Some(offset) = found else {
            self.scanned = self.buffer.len();
            self.check_size(self.buffer.len())?;
            return Ok(None);
        };
        let end = self.scanned + offset;
        // A lone CR at the end of the buffer may be the first half of CRLF.
        if self.buffer[end] == b'\r' && end + 1 == self.buffer.len() {
            self.scanned = end;
            return Ok(None);
        }
        let line = self.buffer.split_to(end);
        let crlf = self.buffer.len() >= 2 && self.buffer[0] == b'\r' && self.buffer[1] == b'\n';
        self.buffer.advance(if crlf { 2 } else { 1 });
        self.scanned = 0;
        Ok(Some(line))
    }

    /// An event whose unfinished line is `line_bytes` long so far must fit the bound.
    fn check_size(&self, line_bytes: usize) -> Result<(), SseError> {
        if line_bytes.saturating_add(self.pending.data.len()) > self.max_event_bytes {
            return Err(SseError::TooLarge(self.max_event_bytes));
        }
        Ok(())
    }

    fn field(&mut self, line: &str) -> Result<(), SseError> {
        if line.starts_with(':') {
            return Ok(()); // comment, e.g. keep-alive
        }
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match name {
            "data" => {
                // The LF joining this line to the previous one counts too.
                let joined = value.len() + usize::from(self.has_data);
                if self.pending.data.len() + joined > self.max_event_bytes {
                    return Err(SseError::TooLarge(self.max_event_bytes));
                }
                if self.has_data {
                    self.pending.data.push('\n');
                }
                self.pending.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.pending.event = value.to_owned(),
            "id" if !value.contains('\0') => self.pending.id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
        Ok(())
    }
}

/// Frames one JSON message as an SSE `message` event.
pub(crate) fn message_frame(json: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(json.len() + 24);
    append_message_frame(&mut frame, json);
    frame
}

/// Appends the SSE event for one JSON-RPC message to `out` (frames ready
/// together are written at once).
pub fn append_message_frame(out: &mut Vec<u8>, json: &[u8]) {
    out.reserve(json.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
}

/// An SSE event with a custom type (for example the legacy `endpoint` event).
pub fn event_frame(event: &str, data: &str) -> Vec<u8> {
    format!("event: {event}\ndata: {data}\n\n").into_bytes()
}

/// A keep-alive comment.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<Event> {
        let mut parser = SseParser::new(1 << 20);
        let mut events = Vec::new();
        for chunk in chunks {
            parser.push(chunk);
            while let Some(event) = parser.next_event().unwrap() {
                events.push(event);
            }
        }
        events
    }

    #[test]
    fn parses_the_spec_stream_shapes() {
        let stream = b"event: message\ndata: {\"a\":1}\n\n: keep-alive\n\nid: 7\ndata: x\ndata: y\n\nevent: endpoint\r\ndata: /messages/?session_id=1\r\n\r\n";
        let events = parse_all(&[stream]);
        assert_eq!(events.len(), 3);
        assert_eq!(
            events[0],
            Event {
                event: "message".into(),
                data: "{\"a\":1}".into(),
                id: None
            }
        );
        assert_eq!(events[1].data, "x\ny");
        assert_eq!(events[1].id.as_deref(), Some("7"));
        assert_eq!(events[2].event, "endpoint");
        assert_eq!(events[2].data, "/messages/?session_id=1");
    }

    #[test]
    fn priming_events_without_data_are_not_dispatched() {
        assert!(parse_all(&[b"id: 1\ndata\n\n"]).len() == 1);
        assert!(parse_all(&[b"id: 1\n\n"]).is_empty());
    }

    #[test]
    fn oversized_events_are_errors() {
        let mut parser = SseParser::new(8);
        parser.push(b"data: 0123456789\n\n");
        assert_eq!(parser.next_event(), Err(SseError::TooLarge(8)));
    }

    /// Found by the `sse` fuzz target: the LFs joining `data` lines were not
    /// counted, so an event could end one byte past the bound.
    #[test]
    fn the_bound_counts_the_lines_joining_data() {
        let cases: [(&[u8], Result<&str, ()>); 6] = [
            (b"data: 0123\ndata: 4567\n\n", Ok("0123\n4567")),
            (b"data: 01234\ndata: 567\n\n", Ok("01234\n567")),
            (b"data: 01234\ndata: 5678\n\n", Err(())),
            (b"data: 012345678\ndata\n\n", Err(())),
            (
                b"data\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\n\n",
                Ok("\n\n\n\n\n\n\n\n\n"),
            ),
            (
                b"data\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\n\n",
                Err(()),
            ),
        ];
        for (stream, expected) in cases {
            let mut parser = SseParser::new(9);
            parser.push(stream);
            let got = parser.next_event();
            match expected {
                Ok(data) => assert_eq!(got.map(|e| e.map(|e| e.data)), Ok(Some(data.to_owned())), "{stream:?}"),
                Err(()) => assert_eq!(got, Err(SseError::TooLarge(9)), "{stream:?}"),
            }
        }
    }

    #[test]
    fn frames_round_trip() {
        let frame = message_frame(br#"{"jsonrpc":"2.0"}"#);
        assert_eq!(parse_all(&[&frame])[0].data, r#"{"jsonrpc":"2.0"}"#);
    }

    fn event(data: &str, id: Option<&str>) -> Event {
        Event {
            event: String::new(),
            data: data.into(),
            id: id.map(Into::into),
        }
    }

    #[test]
    fn whatwg_examples() {
        // https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
        let stock = parse_all(&[b"data: YHOO\ndata: +2\ndata: 10\n\n"]);
        assert_eq!(stock, [event("YHOO\n+2\n10", None)]);
        let ids =
            parse_all(&[b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n"]);
        assert_eq!(ids, [event("first event", Some("1")), event("second event", Some(""))]);
        let empty = parse_all(&[b"data\n\ndata\ndata\n\ndata:"]);
        assert_eq!(empty, [event("", None), event("\n", None)]);
        let spaces = parse_all(&[b"data:test\n\ndata: test\n\n"]);
        assert_eq!(spaces, [event("test", None), event("test", None)]);
    }

    #[test]
    fn every_line_end_and_a_leading_bom() {
        for stream in [
            &b"\xEF\xBB\xBFdata: a\r\ndata: b\r\n\r\n"[..],
            // A CR last in the buffer may be half a CRLF: the next byte settles it.
            b"data: a\rdata: b\r\r:\n",
            b"data: a\ndata: b\n\n",
            b"data: a\r\ndata: b\rdata\n\r\n",
        ] {
            let events = parse_all(&[stream]);
            assert!(events[0].data.starts_with("a\nb"), "{stream:?}: {events:?}");
            assert_eq!(events.len(), 1, "{stream:?}");
        }
    }

    #[test]
    fn retry_comments_and_unknown_fields() {
        let mut parser = SseParser::new(1 << 20);
        parser.push(b"retry: 2500\n:comment\nfoo: bar\nretry: soon\nevent: ping\ndata: x\n\n");
        let event = parser.next_event().unwrap().unwrap();
        assert_eq!((event.event.as_str(), event.data.as_str()), ("ping", "x"));
        assert_eq!(parser.retry(), Some(2500));
    }

    #[test]
    fn a_trickled_line_is_bounded_without_rescanning() {
        let mut parser = SseParser::new(1024);
        parser.push(b"data: ");
        for _ in 0..1017 {
            parser.push(b"x");
            assert_eq!(parser.next_event(), Ok(None));
            assert_eq!(parser.scanned, parser.buffer.len());
        }
        parser.push(b"xx");
        assert_eq!(parser.next_event(), Err(SseError::TooLarge(1024)));
    }

    proptest! {
        #[test]
        fn any_chunking_gives_the_same_events(split in 0usize..60) {
            let stream: &[u8] = b"event: message\r\ndata: {\"id\":1}\r\n\r\ndata: two\ndata: lines\n\n";
            let split = split.min(stream.len());
            let whole = parse_all(&[stream]);
            let parts = parse_all(&[&stream[..split], &stream[split..]]);
            prop_assert_eq!(whole, parts);
        }

        #[test]
        fn any_chunking_of_any_stream_gives_the_same_events(
            lines in proptest::collection::vec(
                proptest::sample::select(vec![
                    "data: a", "data:b", "data", "event: e", "id: 1", "id", ": c", "retry: 5", "x: y", "",
                ]),
                0..24,
            ),
            ends in proptest::collection::vec(proptest::sample::select(vec!["\n", "\r", "\r\n"]), 24),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let mut stream = Vec::new();
            for (line, end) in lines.iter().zip(&ends) {
                stream.extend_from_slice(line.as_bytes());
                stream.extend_from_slice(end.as_bytes());
            }
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(stream.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([stream.len()]) {
                chunks.push(&stream[from..cut]);
                from = cut;
            }
            let one_byte: Vec<&[u8]> = stream.chunks(1).collect();
            prop_assert_eq!(parse_all(&[&stream]), parse_all(&chunks));
            prop_assert_eq!(parse_all(&[&stream]), parse_all(&one_byte));
        }
    }
}
