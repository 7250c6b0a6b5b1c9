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
    pub id: Option<String>,
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
#[derive(Debug)]
pub struct SseParser {
    buffer: BytesMut,
    pending: Event,
    has_data: bool,
    max_event_bytes: usize,
}

impl SseParser {
    /// A parser that refuses events larger than `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> SseParser {
        SseParser {
            buffer: BytesMut::new(),
            pending: Event::default(),
            has_data: false,
            max_event_bytes,
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next complete event, `Ok(None)` when more bytes are needed.
    pub fn next_event(&mut self) -> Result<Option<Event>, SseError> {
        loop {
            let Some(end) = self.buffer.iter().position(|b| *b == b'\n' || *b == b'\r') else {
                if self.buffer.len() + self.pending.data.len() > self.max_event_bytes {
                    return Err(SseError::TooLarge(self.max_event_bytes));
                }
                return Ok(None);
            };
            // A lone CR at the end of the buffer may be the first half of CRLF.
            if self.buffer[end] == b'\r' && end + 1 == self.buffer.len() {
                return Ok(None);
            }
            let line = self.buffer.split_to(end);
            let crlf = self.buffer.len() >= 2 && self.buffer[0] == b'\r' && self.buffer[1] == b'\n';
            self.buffer.advance(if crlf { 2 } else { 1 });
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
                if self.pending.data.len() + value.len() > self.max_event_bytes {
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
            _ => {}
        }
        Ok(())
    }
}

/// Frames one JSON message as an SSE `message` event.
pub fn message_frame(json: &[u8]) -> Vec<u8> {
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

    #[test]
    fn frames_round_trip() {
        let frame = message_frame(br#"{"jsonrpc":"2.0"}"#);
        assert_eq!(parse_all(&[&frame])[0].data, r#"{"jsonrpc":"2.0"}"#);
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
    }
}
