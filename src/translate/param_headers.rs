//! `x-mcp-header` (2026-07-28, spec §1.7): which `tools/call` arguments a
//! client mirrors into `Mcp-Param-<Token>` headers, and their values. A legacy
//! client knows nothing of it, so eragate mirrors the arguments itself when it
//! sends that client's call to a modern HTTP upstream. A 2026-07-28 client's
//! headers toward a legacy upstream, which cannot check them, are checked here
//! (`check`) as the spec asks of a server.

use serde_json::Value;

use crate::protocol::headers::{MCP_PARAM_PREFIX, decode_value, encode_value};

/// One annotated argument: the header token and the chain of `properties` keys leading to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamHeader {
    /// `x-mcp-header` of the property (the header is `Mcp-Param-<token>`).
    pub token: String,
    /// The property's path from the schema root.
    pub path: Vec<String>,
}

/// JSON-Schema types that may carry `x-mcp-header`.
const MIRRORABLE_TYPES: [&str; 3] = ["string", "integer", "boolean"];

/// Most nesting followed into `properties` (schemas are input; recursion is bounded).
const MAX_DEPTH: usize = 32;

/// The valid `x-mcp-header` annotations of a tool's `inputSchema`: on
/// string/integer/boolean properties reachable through `properties` alone,
/// with an RFC 9110 token, case-insensitively unique (a token used twice is
/// ambiguous: neither property is mirrored). Invalid annotations are skipped.
pub fn declared(input_schema: &Value) -> Vec<ParamHeader> {
    let mut found = Vec::new();
    let mut path = Vec::new();
    walk(input_schema, &mut path, &mut found, 0);
    let mut uses = std::collections::HashMap::new();
    for header in &found {
        *uses.entry(header.token.to_ascii_lowercase()).or_insert(0) += 1;
    }
    found.retain(|h| uses.get(&h.token.to_ascii_lowercase()) == Some(&1));
    found
}

fn walk(schema: &Value, path: &mut Vec<String>, found: &mut Vec<ParamHeader>, depth: usize) {
    if depth >= MAX_DEPTH {
        return;
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, property) in properties {
        path.push(key.clone());
        if let Some(token) = property.get("x-mcp-header").and_then(Value::as_str)
            && is_token(token)
            && property
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| MIRRORABLE_TYPES.contains(&t))
        {
            found.push(ParamHeader {
                token: token.to_owned(),
                path: path.clone(),
            });
        }
        walk(property, path, found, depth + 1);
        path.pop();
    }
}

/// An RFC 9110 `token`: one or more tchars.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The `Mcp-Param-*` headers (lowercase names) for `arguments` of a tool that
/// declared `headers`: strings as they are, numbers in decimal, booleans as
/// `true`/`false`, sentinel-encoded when not header-safe; absent, `null` and
/// non-scalar values get no header.
pub fn headers_for(declared: &[ParamHeader], arguments: Option<&Value>) -> Vec<(String, String)> {
    let Some(arguments) = arguments else {
        return Vec::new();
    };
    declared
        .iter()
        .filter_map(|header| {
            let value = header.path.iter().try_fold(arguments, |node, key| node.get(key))?;
            let rendered = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            let name = format!("{MCP_PARAM_PREFIX}{}", header.token.to_ascii_lowercase());
            Some((name, encode_value(&rendered).into_owned()))
        })
        .collect()
}

/// Why a 2026-07-28 client's `Mcp-Param-*` headers do not mirror its body
/// (each is answered 400/-32020, spec §1.7).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParamMismatch {
    /// The body has a value for the annotated argument and no header carries it.
    #[error("Mcp-Param-{0} is required: the body has a value for its argument")]
    Missing(String),
    /// A header for an annotated argument the body has no value for.
    #[error("Mcp-Param-{0} was sent but the body has no value for its argument")]
    Unmatched(String),
    /// The header's value is not the body's.
    #[error("Mcp-Param-{0} does not match the body")]
    Differs(String),
    /// The header's `=?base64?…?=` value is malformed or not UTF-8.
    #[error("Mcp-Param-{0} is not a valid header value")]
    Undecodable(String),
    /// The header was sent more than once.
    #[error("Mcp-Param-{0} was sent more than once")]
    Repeated(String),
}

/// Checks the `Mcp-Param-*` headers `sent` (lowercase names, as the edge read
/// them) against `arguments` of a tool that declared `declared`: each declared
/// header carries the body's value (sentinel decoded, integers compared as
/// numbers), is absent exactly when the value is absent or `null`, and is sent
/// once. Headers the tool does not declare are not looked at. Allocates nothing
/// unless it refuses.
pub(crate) fn check(
    declared: &[ParamHeader],
    arguments: Option<&Value>,
    sent: &[(String, String)],
) -> Result<(), ParamMismatch> {
    for header in declared {
        let mut values = sent.iter().filter(|(name, _)| is_header_of(name, &header.token));
        let value = values.next().map(|(_, value)| value.as_str());
        if values.next().is_some() {
            return Err(ParamMismatch::Repeated(header.token.clone()));
        }
        let body = arguments
            .and_then(|arguments| header.path.iter().try_fold(arguments, |node, key| node.get(key)))
            .filter(|value| !value.is_null());
        match (body, value) {
            (None, None) => {}
            (None, Some(_)) => return Err(ParamMismatch::Unmatched(header.token.clone())),
            // A value no header can carry (an object or array) is the schema's to refuse, upstream.
            (Some(body), None) if !is_scalar(body) => {}
            (Some(_), None) => return Err(ParamMismatch::Missing(header.token.clone())),
            (Some(body), Some(value)) => {
                // RFC 9110 §5.5: optional whitespace around a field value is not part of it.
                let decoded = decode_value(value.trim_matches([' ', '\t']))
                    .map_err(|_| ParamMismatch::Undecodable(header.token.clone()))?;
                if !mirrors(body, &decoded) {
                    return Err(ParamMismatch::Differs(header.token.clone()));
                }
            }
        }
    }
    Ok(())
}

/// Whether `name` (lowercase) is `Mcp-Param-<token>`, case-insensitively.
fn is_header_of(name: &str, token: &str) -> bool {
    name.strip_prefix(MCP_PARAM_PREFIX)
        .is_some_and(|suffix| suffix.eq_ignore_ascii_case(token))
}

fn is_scalar(value: &Value) -> bool {
    matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

/// Whether the decoded header value `header` carries the body's `value`:
/// strings byte for byte, numbers numerically (`42` is `42.0`), booleans as
/// `true`/`false`.
fn mirrors(value: &Value, header: &str) -> bool {
    match value {
        Value::String(s) => s == header,
        Value::Bool(b) => header == if *b { "true" } else { "false" },
        Value::Number(n) => match (n.as_f64(), header.parse::<f64>()) {
            (Some(body), Ok(header)) => body == header,
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn header(token: &str, path: &[&str]) -> ParamHeader {
        ParamHeader {
            token: token.into(),
            path: path.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn annotations_the_spec_allows() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "count": {"type": "integer", "x-mcp-header": "Count"},
                "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
                "ratio": {"type": "number", "x-mcp-header": "Ratio"},
                "bad": {"type": "string", "x-mcp-header": "has space"},
                "empty": {"type": "string", "x-mcp-header": ""},
                "again": {"type": "string", "x-mcp-header": "region"},
                "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}},
                "choice": {"anyOf": [{"type": "string", "x-mcp-header": "Choice"}]},
                "nested": {"type": "object", "properties": {
                    "zone": {"type": "string", "x-mcp-header": "Zone"}}}
            }
        });
        let declared = declared(&schema);
        let mut tokens: Vec<&str> = declared.iter().map(|h| h.token.as_str()).collect();
        tokens.sort_unstable();
        assert_eq!(tokens, ["Count", "Dry-Run", "Zone"]);
        assert!(declared.contains(&header("Zone", &["nested", "zone"])));
        assert_eq!(super::declared(&json!({"type": "object"})), []);
    }

    #[test]
    fn values_render_as_the_spec_says() {
        let declared = [
            header("Region", &["region"]),
            header("Count", &["count"]),
            header("Dry", &["dry"]),
            header("Zone", &["nested", "zone"]),
            header("Absent", &["absent"]),
            header("Null", &["null"]),
            header("Object", &["object"]),
        ];
        let arguments = json!({
            "region": "Hello, 世界", "count": 42, "dry": false, "nested": {"zone": "eu-1"},
            "null": null, "object": {"a": 1}
        });
        assert_eq!(
            headers_for(&declared, Some(&arguments)),
            [
                (
                    "mcp-param-region".to_owned(),
                    "=?base64?SGVsbG8sIOS4lueVjA==?=".to_owned()
                ),
                ("mcp-param-count".to_owned(), "42".to_owned()),
                ("mcp-param-dry".to_owned(), "false".to_owned()),
                ("mcp-param-zone".to_owned(), "eu-1".to_owned()),
            ]
        );
        assert_eq!(headers_for(&declared, None), []);
    }

    /// The headers one case sends.
    type Sent = &'static [(&'static str, &'static str)];

    fn sent(headers: &[(&str, &str)]) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn checks_the_declared_headers_against_the_body() {
        let declared = [
            header("Text", &["text"]),
            header("Count", &["count"]),
            header("Dry", &["dry"]),
        ];
        let body = json!({"text": "good", "count": 42, "dry": true});
        let all = [
            ("mcp-param-text", "good"),
            ("mcp-param-count", "42.0"),
            ("mcp-param-dry", "true"),
        ];
        assert_eq!(check(&declared, Some(&body), &sent(&all)), Ok(()));
        // Undeclared headers are not looked at; names compare case-insensitively; OWS is trimmed.
        let more = [
            ("mcp-param-text", " good "),
            ("mcp-param-count", "42"),
            ("mcp-param-dry", "true"),
            ("mcp-param-other", "anything"),
        ];
        assert_eq!(check(&declared, Some(&body), &sent(&more)), Ok(()));
        let cases: [(Sent, Value, ParamMismatch); 7] = [
            (
                &[("mcp-param-text", "evil")],
                json!({"text": "good"}),
                ParamMismatch::Differs("Text".into()),
            ),
            (&[], json!({"text": "good"}), ParamMismatch::Missing("Text".into())),
            (
                &[("mcp-param-text", "good")],
                json!({}),
                ParamMismatch::Unmatched("Text".into()),
            ),
            (
                &[("mcp-param-text", "good")],
                json!({"text": null}),
                ParamMismatch::Unmatched("Text".into()),
            ),
            (
                &[("mcp-param-text", "=?base64?SGVsbG8?=")],
                json!({"text": "Hello"}),
                ParamMismatch::Undecodable("Text".into()),
            ),
            (
                &[("mcp-param-text", "a"), ("mcp-param-text", "a")],
                json!({"text": "a"}),
                ParamMismatch::Repeated("Text".into()),
            ),
            (
                &[("mcp-param-count", "41")],
                json!({"count": 42}),
                ParamMismatch::Differs("Count".into()),
            ),
        ];
        for (headers, body, expected) in cases {
            assert_eq!(
                check(&declared, Some(&body), &sent(headers)),
                Err(expected),
                "{headers:?} {body}"
            );
        }
        // The sentinel is decoded; a value that only looks like one half of it is literal.
        let hello = [("mcp-param-text", "=?base64?SGVsbG8=?=")];
        assert_eq!(check(&declared, Some(&json!({"text": "Hello"})), &sent(&hello)), Ok(()));
        let literal = [("mcp-param-text", "=?base64?SGVsbG8=")];
        assert_eq!(
            check(&declared, Some(&json!({"text": "=?base64?SGVsbG8="})), &sent(&literal)),
            Ok(())
        );
        assert_eq!(check(&[], Some(&body), &sent(&[("mcp-param-text", "evil")])), Ok(()));
    }
}
