//! `x-mcp-header` (2026-07-28, spec §1.7): which `tools/call` arguments a
//! client mirrors into `Mcp-Param-<Token>` headers, and their values. A legacy
//! client knows nothing of it, so eragate mirrors the arguments itself when it
//! sends that client's call to a modern HTTP upstream.

use serde_json::Value;

use crate::protocol::headers::{MCP_PARAM_PREFIX, encode_value};

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
}
