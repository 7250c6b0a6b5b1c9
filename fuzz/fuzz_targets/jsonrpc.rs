//! JSON-RPC framing: the structural scan and `Frame`/`Message` parsing.
//!
//! Input: one byte choosing the bounds, then the frame's text. Properties:
//! - the scan agrees with serde_json: text serde_json accepts is scanned as
//!   the same kind, with the same top-level item count and at least as many
//!   values (duplicate object keys collapse in a `Value`), within bounds;
//! - a bound crossed is refused before parsing (`Oversized`), never parsed;
//! - every parsed message serialises to one line that parses back to itself
//!   (and to the same JSON as `to_value`), written by hand as serde writes it;
//! - every refusal maps to a JSON-RPC error response that serialises;
//! - params kept as text read as their tree does: `_meta`, a string member,
//!   whether a member is there, and the params a legacy upstream gets (the text
//!   cut by the spans the `_meta` pass found, or its members read again).
#![no_main]

use eragate::protocol::jsonrpc::{Frame, FrameError};
use eragate::protocol::scan::{self, Bounds, Kind, ScanError};
use eragate::protocol::lazy_json::{MetaMember, ParamsView};
use eragate::protocol::{Message, Response};
use eragate::translate::down;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, text)) = data.split_first() else {
        return;
    };
    let bounds = bounds_from(selector);
    check_scan(text, bounds);
    check_frame(text, bounds);
});

/// Small bounds, so that fuzzed inputs of a few KiB cross them.
fn bounds_from(selector: u8) -> Bounds {
    let pick = |bits: u8| match bits & 3 {
        0 => None,
        1 => Some(1),
        2 => Some(4),
        _ => Some(64),
    };
    Bounds {
        values: pick(selector),
        items: pick(selector >> 2),
    }
}

fn check_scan(text: &[u8], bounds: Bounds) {
    let unbounded = scan::scan(text, Bounds::default());
    let bounded = scan::scan(text, bounds);
    if let Ok(shape) = bounded {
        assert!(bounds.values.is_none_or(|limit| shape.values <= limit));
        assert!(bounds.items.is_none_or(|limit| shape.items <= limit));
        assert_eq!(Ok(shape), unbounded, "a bound changed an accepted scan");
    }
    if let Err(ScanError::Malformed { .. } | ScanError::TooDeep) = bounded {
        // Bounds only stop a scan earlier; they never make text well formed.
        assert!(unbounded.is_err());
    }
    let Ok(value) = serde_json::from_slice::<Value>(text) else {
        return;
    };
    let shape = match unbounded {
        Ok(shape) => shape,
        Err(e) => panic!("serde_json parsed what the scan refused: {e:?}"),
    };
    let kind = match &value {
        Value::Object(_) => Kind::Object,
        Value::Array(_) => Kind::Array,
        Value::String(_) => Kind::String,
        Value::Number(_) => Kind::Number,
        Value::Bool(_) => Kind::Bool,
        Value::Null => Kind::Null,
    };
    assert_eq!(shape.kind, kind);
    assert_eq!(shape.items, value.as_array().map_or(0, Vec::len));
    assert!(shape.values >= count(&value), "{} < {}", shape.values, count(&value));
    assert_eq!(scan::opens_array(text), kind == Kind::Array);
}

fn count(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(members) => members.values().map(count).sum(),
        _ => 0,
    }
}

fn check_frame(text: &[u8], bounds: Bounds) {
    check_lean_parse(text);
    let frame = Frame::parse_within(text, bounds);
    let scanned = scan::scan(text, bounds);
    match &frame {
        Err(FrameError::Oversized(e)) => assert_eq!(scanned, Err(*e)),
        _ => assert!(!matches!(
            scanned,
            Err(ScanError::TooManyValues { .. } | ScanError::TooManyItems { .. })
        )),
    }
    match frame {
        Ok(Frame::Single(message)) => {
            assert!(!scan::opens_array(text));
            round_trip(&message);
            assert_eq!(Message::parse_within(text, bounds).as_ref(), Ok(&message));
        }
        Ok(Frame::Batch(items)) => {
            assert!(scan::opens_array(text));
            assert!(scan::is_batch(text, bounds));
            assert!(!items.is_empty());
            for item in items {
                match item {
                    Ok(message) => round_trip(&message),
                    Err(error) => answer(&error),
                }
            }
        }
        Err(error) => answer(&error),
    }
}

/// The parse that keeps params and results as text accepts and refuses what the
/// tree parse does, with the same message or the same refusal.
fn check_lean_parse(text: &[u8]) {
    let lean = Message::parse(text);
    match serde_json::from_slice::<Value>(text) {
        Ok(Value::Array(_)) => {}
        Ok(value) => {
            assert_eq!(lean, Message::from_value(value), "lean and tree parses disagree");
            if let Ok(Message::Request(request)) = &lean {
                check_text_params(request.params.as_ref());
            }
        }
        Err(_) => assert!(matches!(lean, Err(FrameError::Parse(_))), "the lean parse took what serde_json refused"),
    }
}

/// What a stage reads of params kept as text is what it would read of the tree.
fn check_text_params(params: Option<&eragate::protocol::LazyJson>) {
    let Some(params) = params else {
        return;
    };
    let tree: Value = params.clone().into_value();
    let text = params.clone();
    check_meta_members(&params.clone(), &tree);
    assert_eq!(text.meta(), tree.get("_meta"), "_meta read alone");
    for name in ["name", "requestState", "inputResponses", "_meta"] {
        assert_eq!(ParamsView::str_member(&text, name), tree.str_member(name), "{name}");
        if let Some(has) = text.has_member(name) {
            assert_eq!(has, tree.get(name).is_some(), "{name}");
        }
    }
    // A name routed in the text (a federated call) is the tree's name replaced, and the
    // pass over the text that came along reads what a pass over the new text reads.
    let routed = params.clone();
    let _ = routed.meta();
    if let Ok(routed) = routed.with_member("name", "routed") {
        let mut expected = tree.clone();
        if let Some(object) = expected.as_object_mut() {
            object.insert("name".into(), Value::from("routed"));
        }
        assert_eq!(*routed, expected, "a member written anew");
        for name in ["name", "requestState", "_meta"] {
            assert_eq!(ParamsView::str_member(&routed, name), expected.str_member(name), "{name}");
        }
        check_meta_members(&routed, &expected);
        let legacy = down::modern_text_params_for_legacy(routed);
        assert_eq!(*legacy, down::modern_params_for_legacy(expected), "routed params for a legacy upstream");
    }
    let legacy = down::modern_text_params_for_legacy(params.clone());
    assert_eq!(*legacy, down::modern_params_for_legacy(tree), "params for a legacy upstream");
}

/// `_meta`'s members read one by one from the text (a 2026-07-28 envelope) are the tree's.
fn check_meta_members(text: &eragate::protocol::LazyJson, tree: &Value) {
    let meta = tree.get("_meta");
    for key in [
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
        "io.modelcontextprotocol/clientInfo",
        "progressToken",
        "traceparent",
    ] {
        let expected = meta.and_then(|meta| meta.get(key));
        let found = text.meta_member(key);
        assert_eq!(found.map(MetaMember::to_value).as_ref(), expected, "_meta.{key}");
        assert_eq!(found.and_then(MetaMember::as_str).as_deref(), expected.and_then(Value::as_str));
    }
    assert_eq!(ParamsView::has_meta_object(text), meta.is_some_and(Value::is_object), "_meta an object");
    if let Some(mut names) = text.meta_names() {
        names.sort_unstable();
        let keys: Vec<&str> = meta
            .and_then(Value::as_object)
            .map(|meta| meta.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(names, keys, "_meta's names");
    }
}

/// One line out, the same message back in.
fn round_trip(message: &Message) {
    let bytes = message.to_bytes();
    assert!(!bytes.contains(&b'\n'), "a serialised message spans lines");
    // Written by hand as serde writes it, and as an array of one as `[` + itself + `]`.
    assert_eq!(serde_json::to_vec(message).ok().as_ref(), Some(&bytes), "the hand writer differs");
    let array = Message::array_to_bytes(std::slice::from_ref(message));
    assert_eq!(&array[1..array.len() - 1], &bytes[..]);
    assert_eq!(serde_json::from_slice::<Value>(&bytes).ok(), Some(message.to_value()));
    match Message::parse(&bytes) {
        Ok(again) => assert_eq!(&again, message),
        Err(e) => panic!("a parsed message does not parse again: {e}"),
    }
}

/// A refusal becomes a JSON-RPC error response that reads back as one.
fn answer(error: &FrameError) {
    let response: Response = error.to_response();
    let code = match &response.outcome {
        eragate::protocol::jsonrpc::Outcome::Error(e) => e.code.0,
        eragate::protocol::jsonrpc::Outcome::Result(_) => panic!("a refusal answered with a result"),
    };
    assert!(matches!(code, -32700 | -32600), "refusal code {code}");
    let _ = error.rejection();
    round_trip(&response.into_message());
}
