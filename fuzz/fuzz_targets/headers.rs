//! Routing headers: the `=?base64?…?=` sentinel, `Mcp-Name` mirroring and the
//! `x-mcp-header` parameter headers.
//!
//! Input: one selector byte, then text. Properties:
//! - any string encodes to a header-safe value (visible ASCII and space, no
//!   leading or trailing space) that decodes back to itself;
//! - decoding arbitrary text never panics; whatever decodes re-encodes to a
//!   value that decodes to the same string (one canonical encoding);
//! - `declared` over an arbitrary schema yields RFC 9110 tokens, unique
//!   case-insensitively, and `headers_for` emits only those, with safe values.
#![no_main]

use eragate::protocol::headers::{MCP_PARAM_PREFIX, decode_value, encode_value, mirrored_name};
use eragate::translate::param_headers::{declared, headers_for};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector % 3 {
        0 => sentinel(rest),
        1 => mirrored(rest),
        _ => param_headers(rest),
    }
});

fn header_safe(value: &str) -> bool {
    value.bytes().all(|b| (0x20..=0x7e).contains(&b)) && !value.starts_with(' ') && !value.ends_with(' ')
}

fn sentinel(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let encoded = encode_value(&text);
    assert!(header_safe(&encoded), "unsafe header value {encoded:?}");
    assert_eq!(decode_value(&encoded).as_deref(), Ok(&*text));
    // Arbitrary received header text.
    if let Ok(decoded) = decode_value(&text) {
        let again = encode_value(&decoded);
        assert_eq!(decode_value(&again).as_deref(), Ok(&*decoded));
        // ("=?base64?=" is plain to the decoder, yet the encoder, conservative, wraps it.)
        if header_safe(&text) && decoded == text && !text.starts_with("=?base64?") {
            assert_eq!(again, text, "a plain value changed on re-encoding");
        }
    }
}

fn mirrored(bytes: &[u8]) {
    let Some((&which, body)) = bytes.split_first() else {
        return;
    };
    let method = ["tools/call", "prompts/get", "resources/read", "tools/list"][usize::from(which % 4)];
    let Ok(params) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    let expected = key.and_then(|k| params.get(k)).and_then(Value::as_str);
    let mirrored = mirrored_name(method, Some(&params));
    assert_eq!(mirrored.is_some(), expected.is_some());
    if let (Some(value), Some(body)) = (mirrored, expected) {
        assert!(header_safe(&value));
        assert_eq!(decode_value(&value).as_deref(), Ok(body));
    }
}

fn param_headers(bytes: &[u8]) {
    // A schema and arguments: two JSON texts separated by a NUL.
    let mut parts = bytes.splitn(2, |b| *b == 0);
    let (Some(schema), arguments) = (parts.next(), parts.next()) else {
        return;
    };
    let Ok(schema) = serde_json::from_slice::<Value>(schema) else {
        return;
    };
    let arguments = arguments.and_then(|a| serde_json::from_slice::<Value>(a).ok());
    let found = declared(&schema);
    let mut seen = std::collections::HashSet::new();
    for header in &found {
        assert!(!header.token.is_empty());
        assert!(
            header
                .token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        );
        assert!(seen.insert(header.token.to_ascii_lowercase()), "token used twice");
        assert!(!header.path.is_empty() && header.path.len() <= 32);
    }
    let emitted = headers_for(&found, arguments.as_ref());
    assert!(emitted.len() <= found.len());
    for (name, value) in emitted {
        let token = name.strip_prefix(MCP_PARAM_PREFIX).expect("prefixed");
        assert!(seen.contains(token), "a header nobody declared: {name}");
        assert!(header_safe(&value), "unsafe header value {value:?}");
        assert!(decode_value(&value).is_ok());
    }
}
