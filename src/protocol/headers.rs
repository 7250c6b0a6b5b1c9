//! The HTTP routing headers of 2026-07-28 and the `=?base64?…?=` sentinel that
//! carries values a header cannot hold as they are.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// Protocol version header (also sent by legacy clients after `initialize`).
pub(crate) const MCP_PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// The JSON-RPC method, mirrored.
pub(crate) const MCP_METHOD: &str = "mcp-method";
/// The tool or prompt name or the resource URI, mirrored.
pub(crate) const MCP_NAME: &str = "mcp-name";
/// Legacy session id.
pub(crate) const MCP_SESSION_ID: &str = "mcp-session-id";
/// Prefix of tool-parameter headers.
pub const MCP_PARAM_PREFIX: &str = "mcp-param-";

/// The `Mcp-Name` value a request must carry (sentinel-encoded when needed):
/// `params.name` for `tools/call` and `prompts/get`, `params.uri` for `resources/read`.
pub fn mirrored_name(method: &str, params: Option<&serde_json::Value>) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    let value = params?.get(key)?.as_str()?;
    Some(encode_value(value).into_owned())
}

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// Why a header value could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SentinelError {
    /// The base64 between the markers is malformed or not in canonical form.
    #[error("malformed base64 in header sentinel")]
    BadBase64,
    /// The decoded bytes are not UTF-8.
    #[error("header sentinel does not decode to UTF-8")]
    NotUtf8,
}

/// Encodes a value for a header: as it is when safe, else as the base64 sentinel.
///
/// Safe means printable ASCII (0x20–0x7E) without leading or trailing
/// whitespace that does not itself look like a sentinel.
pub fn encode_value(value: &str) -> Cow<'_, str> {
    if is_plain_safe(value) {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(format!("{SENTINEL_START}{}{SENTINEL_END}", STANDARD.encode(value)))
    }
}

/// Decodes a header value, undoing the sentinel when present.
pub fn decode_value(value: &str) -> Result<Cow<'_, str>, SentinelError> {
    let Some(inner) = value
        .strip_prefix(SENTINEL_START)
        .and_then(|rest| rest.strip_suffix(SENTINEL_END))
    else {
        return Ok(Cow::Borrowed(value));
    };
    let bytes = STANDARD.decode(inner).map_err(|_| SentinelError::BadBase64)?;
    // Canonical form only: a value has exactly one encoding.
    if STANDARD.encode(&bytes) != inner {
        return Err(SentinelError::BadBase64);
    }
    String::from_utf8(bytes)
        .map(Cow::Owned)
        .map_err(|_| SentinelError::NotUtf8)
}

fn is_plain_safe(value: &str) -> bool {
    let bytes = value.as_bytes();
    let printable = bytes.iter().all(|b| (0x20..=0x7e).contains(b));
    let trimmed = bytes.first() != Some(&b' ') && bytes.last() != Some(&b' ');
    let looks_encoded = value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END);
    printable && trimmed && !looks_encoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spec_examples() {
        let cases = [
            ("get_weather", "get_weather"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            ("météo", "=?base64?bcOpdMOpbw==?="),
            (" padded", "=?base64?IHBhZGRlZA==?="),
            ("line\nbreak", "=?base64?bGluZQpicmVhaw==?="),
            ("tab\there", "=?base64?dGFiCWhlcmU=?="),
            ("=?base64?abc?=", "=?base64?PT9iYXNlNjQ/YWJjPz0=?="),
            ("file:///tmp/a b.txt", "file:///tmp/a b.txt"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(encode_value(plain), encoded, "{plain:?}");
            assert_eq!(decode_value(encoded).unwrap(), plain, "{encoded:?}");
        }
    }

    #[test]
    fn mirrored_names() {
        let call = serde_json::json!({"name": "météo", "arguments": {}});
        assert_eq!(
            mirrored_name("tools/call", Some(&call)).as_deref(),
            Some("=?base64?bcOpdMOpbw==?=")
        );
        let read = serde_json::json!({"uri": "file:///a"});
        assert_eq!(
            mirrored_name("resources/read", Some(&read)).as_deref(),
            Some("file:///a")
        );
        assert_eq!(mirrored_name("tools/list", Some(&call)), None);
        assert_eq!(mirrored_name("prompts/get", None), None);
    }

    #[test]
    fn rejects_bad_sentinels() {
        assert_eq!(decode_value("=?base64?!!!?="), Err(SentinelError::BadBase64));
        // Missing padding is not canonical.
        assert_eq!(decode_value("=?base64?bcOpdMOpbw?="), Err(SentinelError::BadBase64));
        assert_eq!(decode_value("=?base64?/w==?="), Err(SentinelError::NotUtf8));
        // Upper-case markers are not a sentinel: the value is taken literally.
        assert_eq!(decode_value("=?BASE64?YQ==?=").unwrap(), "=?BASE64?YQ==?=");
    }

    proptest! {
        #[test]
        fn sentinel_round_trips(value in any::<String>()) {
            let encoded = encode_value(&value);
            prop_assert!(encoded.bytes().all(|b| (0x20..=0x7e).contains(&b)));
            let decoded = decode_value(&encoded).unwrap().into_owned();
            prop_assert_eq!(decoded, value.clone());
        }

        #[test]
        fn decoding_never_panics(value in any::<String>()) {
            let _ = decode_value(&value);
        }
    }
}
