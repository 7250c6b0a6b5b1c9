//! Requests on their way down, from a client's era to the upstream's.

use serde_json::{Map, Value};

use crate::protocol::Revision;
use crate::protocol::capabilities;
use crate::protocol::envelope::{self, Envelope, RESERVED_PREFIX};
use crate::protocol::lazy_json::{Edited, LazyJson, MemberEdit, MemberValue};

/// Members of a modern retry that a legacy upstream must never see.
const MRTR_MEMBERS: [&str; 2] = ["inputResponses", "requestState"];

/// Params of a 2026-07-28 request as a legacy upstream receives them: the
/// `io.modelcontextprotocol/*` keys and multi round-trip members removed,
/// everything else (arguments, `progressToken`, trace keys, vendor keys) kept.
pub fn modern_params_for_legacy(mut params: Value) -> Value {
    envelope::strip_reserved(&mut params);
    if let Some(object) = params.as_object_mut() {
        for member in MRTR_MEMBERS {
            object.remove(member);
        }
    }
    params
}

/// [`modern_params_for_legacy`] on params as the client sent them: `_meta` is
/// built only when it mixes reserved keys with others (its names decide, read by
/// the pass that found it); every other member is passed on as its text. Where
/// that pass also found where the members lie, they are cut out of the text
/// without another pass; otherwise the members are read once more. A tree, or
/// params that are not an object, take the tree path.
pub fn modern_text_params_for_legacy(params: LazyJson) -> LazyJson {
    // The names alone tell, unless `_meta` mixes reserved keys with others (or
    // its names were not found): then what is left of it is built.
    let reserved = |key: &&str| key.starts_with(RESERVED_PREFIX);
    let meta = match params.meta_names() {
        Some(names) if names.iter().all(reserved) => MetaFate::Drop,
        Some(names) if !names.iter().any(reserved) => MetaFate::Keep,
        _ => meta_fate(&params),
    };
    let edited = params.edit_members(|name, last| match name {
        name if MRTR_MEMBERS.contains(&name) => MemberEdit::Drop,
        // The last `_meta` is the one a tree keeps; the others go.
        "_meta" if !last => MemberEdit::Drop,
        "_meta" => match &meta {
            MetaFate::Keep => MemberEdit::Keep,
            MetaFate::Drop => MemberEdit::Drop,
            MetaFate::Write(meta) => MemberEdit::Replace(meta),
        },
        _ => MemberEdit::Keep,
    });
    match edited {
        Some(Edited::Unchanged) => return params,
        Some(Edited::Written(written)) => return written,
        None => {}
    }
    let Some(members) = params.text_members() else {
        return modern_params_for_legacy(params.into_value()).into();
    };
    let written = members.iter().filter_map(|(name, text)| match name.as_ref() {
        name if MRTR_MEMBERS.contains(&name) => None,
        "_meta" => match &meta {
            MetaFate::Keep => Some(("_meta", MemberValue::Text(text))),
            MetaFate::Drop => None,
            MetaFate::Write(meta) => Some(("_meta", MemberValue::Tree(meta))),
        },
        name => Some((name, MemberValue::Text(text))),
    });
    LazyJson::object_with(written)
}

/// What becomes of `_meta`, read from its tree.
fn meta_fate(params: &LazyJson) -> MetaFate {
    match params.meta() {
        Some(Value::Object(meta)) => {
            let reserved = meta.keys().filter(|key| key.starts_with(RESERVED_PREFIX)).count();
            if reserved == meta.len() {
                MetaFate::Drop
            } else if reserved == 0 {
                MetaFate::Keep
            } else {
                let kept: Map<String, Value> = meta
                    .iter()
                    .filter(|(key, _)| !key.starts_with(RESERVED_PREFIX))
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect();
                MetaFate::Write(Value::Object(kept))
            }
        }
        _ => MetaFate::Keep,
    }
}

/// What becomes of a request's `_meta` on its way to a legacy upstream.
enum MetaFate {
    /// Nothing reserved in it: its text passes.
    Keep,
    /// Only reserved keys (or none): it goes.
    Drop,
    /// What is left of it.
    Write(Value),
}

/// The `initialize` params eragate sends to open a pooled upstream session for
/// modern clients with this envelope.
pub(crate) fn initialize_for_envelope(envelope: &Envelope, revision: Revision, gateway_info: &Value) -> Value {
    let client_info = envelope.client_info.as_ref().map_or_else(
        || gateway_info.clone(),
        |info| capabilities::client_info_for(&info.value(), revision),
    );
    initialize_params(
        revision,
        capabilities::client_modern_to_legacy(&envelope.client_capabilities, revision),
        client_info,
    )
}

/// Params of a legacy client's request as a modern upstream receives them: the
/// session's envelope added to `_meta` (the client's own `progressToken` and
/// other keys kept).
pub(crate) fn legacy_params_for_modern(params: Option<Value>, envelope: &Envelope) -> Value {
    let mut params = match params {
        Some(Value::Object(object)) => object,
        _ => Map::new(),
    };
    let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Some(meta) = meta.as_object_mut() {
        envelope.insert_into(meta);
    }
    Value::Object(params)
}

/// `initialize` params.
pub(crate) fn initialize_params(revision: Revision, capabilities: Value, client_info: Value) -> Value {
    let mut params = Map::new();
    params.insert("protocolVersion".into(), Value::from(revision.as_str()));
    params.insert("capabilities".into(), capabilities);
    params.insert("clientInfo".into(), client_info);
    Value::Object(params)
}

/// A legacy client's own `initialize` params, with the version eragate negotiated.
pub(crate) fn legacy_initialize_for_upstream(client_params: Option<&Value>, negotiated: Revision) -> Value {
    let mut params = client_params.and_then(Value::as_object).cloned().unwrap_or_default();
    params.insert("protocolVersion".into(), Value::from(negotiated.as_str()));
    params
        .entry("capabilities")
        .or_insert_with(|| Value::Object(Map::new()));
    params
        .entry("clientInfo")
        .or_insert_with(|| serde_json::json!({"name": "unknown-client", "version": "0"}));
    Value::Object(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reserved_and_mrtr_members_never_reach_a_legacy_upstream() {
        let params = json!({
            "name": "echo", "arguments": {"text": "hi"},
            "inputResponses": {"k": {}}, "requestState": "s",
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "progressToken": 7, "traceparent": "00-1", "tracestate": "a=b"}
        });
        assert_eq!(
            modern_params_for_legacy(params),
            json!({
                "name": "echo", "arguments": {"text": "hi"},
                "_meta": {"progressToken": 7, "traceparent": "00-1", "tracestate": "a=b"}
            })
        );
    }

    #[test]
    fn legacy_requests_carry_the_session_envelope() {
        let envelope = Envelope {
            protocol_version: "2026-07-28".into(),
            client_capabilities: json!({"roots": {}}),
            client_info: Some(crate::protocol::envelope::ClientInfo::of(
                &json!({"name": "c", "version": "1"}),
            )),
            log_level: Some(crate::protocol::envelope::LogLevel::Warning),
        };
        let params = legacy_params_for_modern(Some(json!({"name": "t", "_meta": {"progressToken": 3}})), &envelope);
        assert_eq!(
            params,
            json!({"name": "t", "_meta": {"progressToken": 3,
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            "io.modelcontextprotocol/logLevel": "warning"}})
        );
        assert_eq!(
            legacy_params_for_modern(None, &envelope)["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
    }

    #[test]
    fn legacy_initialize_takes_the_negotiated_version() {
        let client = json!({"protocolVersion": "2024-10-07", "capabilities": {"roots": {"listChanged": true}}, "clientInfo": {"name": "ts", "version": "1"}});
        let params = legacy_initialize_for_upstream(Some(&client), Revision::V2024_11_05);
        assert_eq!(params["protocolVersion"], "2024-11-05");
        assert_eq!(params["capabilities"], json!({"roots": {"listChanged": true}}));
    }

    /// Params as text, as `Message::parse` keeps them.
    fn text(value: &str) -> LazyJson {
        let raw: Box<serde_json::value::RawValue> = serde_json::from_str(value).unwrap();
        LazyJson::from_checked_text(&raw)
    }

    #[test]
    fn text_params_lose_what_tree_params_lose() {
        let cases = [
            r#"{"name":"t","arguments":{"a":[1,{"_meta":1}]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#,
            r#"{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7,"vendor/x":{"k":1}}}"#,
            r#"{"name":"t","_meta":{"progressToken":"p"}}"#,
            r#"{"name":"t","_meta":{}}"#,
            r#"{"name":"t","_meta":3}"#,
            r#"{"name":"t","inputResponses":{"a":{}},"requestState":"s","z":null}"#,
            r#"{"_meta":{"io.modelcontextprotocol/a":1},"_meta":{"k":2}}"#,
            r#"{}"#,
            r#"[1,2]"#,
            // Spans found by the envelope's pass: whitespace, strings that look like structure, order.
            r#" { "_meta" : { "io.modelcontextprotocol/protocolVersion" : "x" } , "name" : "a\",\"b}" , "z" : [ 1 , { } ] } "#,
            r#"{"a":"}","requestState":"s","_meta":{"progressToken":1,"io.modelcontextprotocol/x":{}},"inputResponses":{},"b":{"_meta":{}}}"#,
            r#"{"_meta":{"k":1},"name":"t","_meta":{"io.modelcontextprotocol/x":1}}"#,
            r#"{"_meta":{"io.modelcontextprotocol/x":1},"name":"t","_meta":{"k":1}}"#,
            r#"{"_meta":{"progressToken":1},"name":"t"}"#,
            r#"{"_meta":{"progressToken":1},"requestState":"s"}"#,
            r#"{"_meta":{"io.modelcontextprotocol/x":1}}"#,
            // Spans not kept: an escaped name, more members than are located.
            r#"{"n\u0061me":"t","_meta":{"io.modelcontextprotocol/x":1},"requestState":"s"}"#,
            r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"requestState":"s","_meta":{"io.modelcontextprotocol/x":1,"k":2}}"#,
        ];
        for case in cases {
            let tree = modern_params_for_legacy(serde_json::from_str(case).unwrap());
            let lean = modern_text_params_for_legacy(text(case));
            assert_eq!(*lean, tree, "{case}");
        }
        // Members eragate does not own keep their text and their order.
        let lean = modern_text_params_for_legacy(text(
            r#"{"name":"t","arguments":{"b":1.50,"a":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}"#,
        ));
        assert_eq!(lean.text(), Some(r#"{"name":"t","arguments":{"b":1.50,"a":2}}"#));
    }
}
