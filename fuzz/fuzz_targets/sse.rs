//! The SSE parser, fed in arbitrary chunks.
//!
//! Input: one byte for the event bound, one for the chunking, then the stream.
//! Properties:
//! - however the stream is chunked, the same events come out in the same
//!   order; the outcomes differ only where a chunked read saw an unfinished
//!   line grow past the bound (an oversized comment or unknown field that a
//!   single push would have skipped whole);
//! - no event's data exceeds the bound; an event over it is an error, not memory;
//! - a stream of frames eragate writes parses back to exactly those messages.
#![no_main]

use eragate::protocol::sse::{Event, KEEP_ALIVE, SseError, SseParser, append_message_frame, event_frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [bound, chunking, stream @ ..] = data else {
        return;
    };
    let max = 1 + usize::from(*bound) * 4;
    let (whole, whole_end) = drain(max, [stream]);
    for event in &whole {
        assert!(
            event.data.len() <= max,
            "{} bytes past a {max}-byte bound",
            event.data.len()
        );
    }
    let step = 1 + usize::from(*chunking % 17);
    let (chunked, chunked_end) = drain(max, stream.chunks(step));
    let common = whole.len().min(chunked.len());
    assert_eq!(whole[..common], chunked[..common], "chunks of {step} changed an event");
    match (&whole_end, &chunked_end) {
        (Ok(()), Ok(())) => assert_eq!(whole.len(), chunked.len(), "chunks of {step} changed the events"),
        (Err(a), Err(b)) if a == b => {}
        (_, Err(SseError::TooLarge(_))) => assert!(chunked.len() <= whole.len()),
        (a, b) => panic!("at once {a:?}, in chunks of {step} {b:?}"),
    }
    writer_round_trip(stream);
});

/// Every event until the parser needs more bytes or fails, and how it ended.
fn drain<'a>(max: usize, chunks: impl IntoIterator<Item = &'a [u8]>) -> (Vec<Event>, Result<(), SseError>) {
    let mut parser = SseParser::new(max);
    let mut events = Vec::new();
    for chunk in chunks {
        parser.push(chunk);
        loop {
            match parser.next_event() {
                Ok(Some(event)) => events.push(event),
                Ok(None) => break,
                Err(e) => return (events, Err(e)),
            }
        }
    }
    (events, Ok(()))
}

/// eragate's own frames: each line of the input as a message event, with a
/// keep-alive after each and a custom event at the end.
fn writer_round_trip(stream: &[u8]) {
    let text = String::from_utf8_lossy(stream);
    let payloads: Vec<&str> = text.split(['\n', '\r']).collect();
    let mut out = Vec::new();
    for payload in &payloads {
        append_message_frame(&mut out, payload.as_bytes());
        out.extend_from_slice(KEEP_ALIVE);
    }
    out.extend_from_slice(&event_frame("endpoint", "/messages?session_id=1"));
    let (events, end) = drain(usize::MAX, [&out[..]]);
    assert_eq!(end, Ok(()));
    assert_eq!(events.len(), payloads.len() + 1);
    for (event, payload) in events.iter().zip(&payloads) {
        assert_eq!(event.event, "message");
        assert_eq!(event.data, *payload);
    }
    assert_eq!(events.last().map(|e| e.event.as_str()), Some("endpoint"));
}
