//! Results and errors on their way up, from the upstream's era to the client's.

use serde_json::{Map, Value};

use super::cache::CachePolicy;
use crate::protocol::envelope::SERVER_INFO;
use crate::protocol::lazy_json::{LazyJson, MemberValue};
use crate::protocol::{ErrorCode, ErrorObject, ModernMethod, Revision};

/// Decorates a legacy result for a 2026-07-28 client: `resultType`,
/// `_meta[serverInfo]`, and the cache hints on the six cacheable results.
pub fn result_for_modern(result: Value, method: ModernMethod, server_info: &Value, cache: CachePolicy) -> Value {
    let mut object = match result {
        Value::Object(object) => object,
        // A result must be an object; wrap nothing, forward what we got.
        other => return other,
    };
    let complete = match object.get("resultType").and_then(Value::as_str) {
        None => {
            object.insert("resultType".into(), Value::from("complete"));
            true
        }
        Some(kind) => kind == "complete",
    };
    let meta = object.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.entry(SERVER_INFO).or_insert_with(|| server_info.clone());
    }
    if complete && method.is_cacheable() {
        cache.apply(&mut object);
    }
    Value::Object(object)
}

/// An upstream's `serverInfo` as 2026-07-28 results carry it: the tree, and the
/// `_meta` a result without one gets, written once (a session keeps it).
#[derive(Debug)]
pub(crate) struct ServerInfo {
    /// `serverInfo` from the upstream's handshake.
    pub(crate) tree: Value,
    /// `{"io.modelcontextprotocol/serverInfo": tree}` as text.
    meta: Option<Box<str>>,
}

impl ServerInfo {
    /// Keeps `tree` and writes the `_meta` that carries it.
    pub(crate) fn new(tree: Value) -> ServerInfo {
        let meta = serde_json::to_string(&serde_json::json!({ SERVER_INFO: &tree }))
            .ok()
            .map(String::into_boxed_str);
        ServerInfo { tree, meta }
    }
}

/// [`result_for_modern`] on a result as the upstream sent it: `resultType` and
/// `_meta[serverInfo]` are written next to the other members' text, which passes
/// unbuilt (a result without `_meta` gets the one `server_info` keeps written).
/// Cacheable results (their hints need the tree), trees, and results that are not
/// objects take the tree path.
pub(crate) fn text_result_for_modern(
    result: LazyJson,
    method: ModernMethod,
    server_info: &ServerInfo,
    cache: CachePolicy,
) -> LazyJson {
    let members = match result.text_members() {
        Some(members) if !method.is_cacheable() => members,
        _ => return result_for_modern(result.into_value(), method, &server_info.tree, cache).into(),
    };
    let has_type = members.iter().any(|(name, _)| name == "resultType");
    // The last `_meta`, as a tree would keep; a non-object one is left as it is.
    let meta_text = members
        .iter()
        .rev()
        .find(|(name, _)| name == "_meta")
        .map(|(_, text)| *text);
    let meta: Option<Value> = match meta_text {
        None => None,
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(mut meta)) if !meta.contains_key(SERVER_INFO) => {
                meta.insert(SERVER_INFO.into(), server_info.tree.clone());
                Some(Value::Object(meta))
            }
            _ => None,
        },
    };
    let unwritten;
    let written_meta = match &server_info.meta {
        Some(text) => MemberValue::Text(text),
        None => {
            unwritten = serde_json::json!({ SERVER_INFO: &server_info.tree });
            MemberValue::Tree(&unwritten)
        }
    };
    let written = members
        .iter()
        .map(|(name, text)| match (name.as_ref(), &meta) {
            ("_meta", Some(meta)) => ("_meta", MemberValue::Tree(meta)),
            (name, _) => (name, MemberValue::Text(text)),
        })
        .chain((!has_type).then_some(("resultType", MemberValue::Text(r#""complete""#))))
        .chain(meta_text.is_none().then_some(("_meta", written_meta)));
    LazyJson::object_with(written)
}

/// A modern upstream's result for a modern client: untouched but for the cache
/// hints, which the policy may override (and which a complete cacheable result
/// must carry).
pub(crate) fn result_passthrough(result: Value, method: ModernMethod, cache: CachePolicy) -> Value {
    let mut object = match result {
        Value::Object(object) => object,
        other => return other,
    };
    let complete = object
        .get("resultType")
        .and_then(Value::as_str)
        .is_none_or(|t| t == "complete");
    if complete && method.is_cacheable() {
        cache.apply(&mut object);
    }
    Value::Object(object)
}

/// An upstream error as a 2026-07-28 client must see it: the retired
/// resource-not-found code becomes -32602 (its data kept).
pub(crate) fn error_for_modern(mut error: ErrorObject) -> ErrorObject {
    if error.code == ErrorCode::RESOURCE_NOT_FOUND {
        error.code = ErrorCode::INVALID_PARAMS;
    }
    // -32042 is retired; a client that cannot take URL elicitation lacks a capability.
    if error.code == ErrorCode::URL_ELICITATION_REQUIRED {
        error.code = ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY;
        error.data = Some(serde_json::json!({"requiredCapabilities": {"elicitation": {"url": {}}}}));
    }
    error
}

/// The URL elicitations a 2025-11-25 `-32042` error asks for, as
/// `elicitation/create` requests (`mode: "url"`), when it lists any.
pub(crate) fn url_elicitations(error: &ErrorObject) -> Vec<Value> {
    let Some(items) = error
        .data
        .as_ref()
        .and_then(|d| d.get("elicitations"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    if error.code != ErrorCode::URL_ELICITATION_REQUIRED {
        return Vec::new();
    }
    items
        .iter()
        .filter_map(Value::as_object)
        .map(|item| {
            let mut params = item.clone();
            params.insert("mode".into(), Value::from("url"));
            Value::Object(params)
        })
        .collect()
}

/// The `InitializeResult` a legacy client gets from a modern upstream's
/// `DiscoverResult`: its capabilities as the client's revision knows them, its
/// `serverInfo` (else the gateway's), its instructions.
pub(crate) fn initialize_from_discover(discover: &Value, negotiated: Revision, gateway_info: &Value) -> Value {
    let mut result = Map::new();
    result.insert("protocolVersion".into(), Value::from(negotiated.as_str()));
    let capabilities = discover.get("capabilities").cloned().unwrap_or_default();
    result.insert(
        "capabilities".into(),
        crate::protocol::capabilities::server_modern_to_legacy(&capabilities, negotiated),
    );
    let server_info = discover
        .get("_meta")
        .and_then(|m| m.get(SERVER_INFO))
        .cloned()
        .unwrap_or_else(|| gateway_info.clone());
    result.insert("serverInfo".into(), server_info);
    if let Some(instructions) = discover.get("instructions").filter(|v| v.is_string()) {
        result.insert("instructions".into(), instructions.clone());
    }
    Value::Object(result)
}

/// A modern upstream's result as a legacy client of `revision` can use it:
/// the modern-only members removed and content it cannot carry downgraded
/// (audio before 2025-03-26, resource links before 2025-06-18, non-object
/// `structuredContent`).
pub(crate) fn result_for_legacy(result: Value, revision: Revision) -> Value {
    let mut object = match result {
        Value::Object(object) => object,
        other => return other,
    };
    for member in ["resultType", "ttlMs", "cacheScope"] {
        object.remove(member);
    }
    if object.get("structuredContent").is_some_and(|v| !v.is_object()) {
        object.remove("structuredContent");
    }
    if let Some(Value::Array(content)) = object.get_mut("content") {
        for item in content.iter_mut() {
            downgrade_content(item, revision);
        }
    }
    if let Some(Value::Array(messages)) = object.get_mut("messages") {
        for message in messages.iter_mut() {
            if let Some(content) = message.get_mut("content") {
                downgrade_content(content, revision);
            }
        }
    }
    Value::Object(object)
}

fn downgrade_content(item: &mut Value, revision: Revision) {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
    let replacement = match kind {
        "audio" if revision < Revision::V2025_03_26 => {
            let mime = item.get("mimeType").and_then(Value::as_str).unwrap_or("audio");
            format!("[{mime} content omitted: this client's protocol revision has no audio]")
        }
        "resource_link" if revision < Revision::V2025_06_18 => {
            let uri = item.get("uri").and_then(Value::as_str).unwrap_or("");
            let name = item.get("name").and_then(Value::as_str).unwrap_or(uri);
            format!("[resource {name}: {uri}]")
        }
        _ => return,
    };
    *item = serde_json::json!({"type": "text", "text": replacement});
}

/// A modern upstream's error as a legacy client must see it: a resource-not-found
/// (-32602 with `data.uri` on `resources/read`) is -32002 again.
pub(crate) fn error_for_legacy(mut error: ErrorObject, method: &str) -> ErrorObject {
    let names_a_uri = error.data.as_ref().and_then(|d| d.get("uri")).is_some();
    if method == "resources/read" && error.code == ErrorCode::INVALID_PARAMS && names_a_uri {
        error.code = ErrorCode::RESOURCE_NOT_FOUND;
    }
    error
}

/// The `InitializeResult` a legacy client gets: the upstream's, speaking the
/// revision eragate negotiated with the client. When the upstream settled on an
/// older handshake revision, that older one is the honest answer.
pub(crate) fn initialize_result_for_client(mut upstream: Value, negotiated: Revision) -> (Value, Revision) {
    let upstream_revision = upstream
        .get("protocolVersion")
        .and_then(Value::as_str)
        .and_then(Revision::parse)
        .filter(|r| *r <= negotiated);
    let answer = upstream_revision.unwrap_or(negotiated);
    if let Some(object) = upstream.as_object_mut() {
        object.insert("protocolVersion".into(), Value::from(answer.as_str()));
    }
    (upstream, answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decoration_table() {
        let info = json!({"name": "up", "version": "1"});
        let cases = [
            (
                ModernMethod::ToolsList,
                json!({"tools": []}),
                json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                    "_meta": {SERVER_INFO: {"name": "up", "version": "1"}}}),
            ),
            (
                ModernMethod::ToolsCall,
                json!({"content": [], "_meta": {"k": 1}}),
                json!({"content": [], "resultType": "complete", "_meta": {"k": 1, SERVER_INFO: {"name": "up", "version": "1"}}}),
            ),
            (
                ModernMethod::ResourcesRead,
                json!({"resultType": "input_required", "requestState": "s"}),
                json!({"resultType": "input_required", "requestState": "s", "_meta": {SERVER_INFO: {"name": "up", "version": "1"}}}),
            ),
        ];
        for (method, input, expected) in cases {
            assert_eq!(
                result_for_modern(input, method, &info, CachePolicy::default()),
                expected,
                "{method:?}"
            );
        }
    }

    #[test]
    fn resource_not_found_is_renumbered_for_modern_clients() {
        let legacy =
            ErrorObject::new(ErrorCode::RESOURCE_NOT_FOUND, "Resource not found").with_data(json!({"uri": "x://y"}));
        let modern = error_for_modern(legacy);
        assert_eq!(modern.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(modern.data, Some(json!({"uri": "x://y"})));
        let other = ErrorObject::new(ErrorCode::INTERNAL_ERROR, "boom");
        assert_eq!(error_for_modern(other.clone()), other);
    }

    #[test]
    fn modern_results_for_legacy_clients() {
        let result = json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "content": [{"type": "audio", "data": "AA", "mimeType": "audio/wav"},
                        {"type": "resource_link", "uri": "x://a", "name": "a"},
                        {"type": "text", "text": "t"}],
            "structuredContent": [1, 2], "_meta": {"k": 1}});
        assert_eq!(
            result_for_legacy(result.clone(), Revision::V2024_11_05),
            json!({
            "content": [{"type": "text", "text": "[audio/wav content omitted: this client's protocol revision has no audio]"},
                        {"type": "text", "text": "[resource a: x://a]"},
                        {"type": "text", "text": "t"}],
            "_meta": {"k": 1}})
        );
        let newest = result_for_legacy(result, Revision::V2025_11_25);
        assert_eq!(newest["content"][0]["type"], "audio");
        assert_eq!(newest["content"][1]["type"], "resource_link");
    }

    #[test]
    fn resource_not_found_is_minus_32002_again_for_legacy_clients() {
        let modern =
            ErrorObject::new(ErrorCode::INVALID_PARAMS, "Resource not found").with_data(json!({"uri": "x://y"}));
        assert_eq!(
            error_for_legacy(modern.clone(), "resources/read").code,
            ErrorCode::RESOURCE_NOT_FOUND
        );
        assert_eq!(error_for_legacy(modern, "tools/call").code, ErrorCode::INVALID_PARAMS);
        let bad_cursor = ErrorObject::new(ErrorCode::INVALID_PARAMS, "bad cursor");
        assert_eq!(
            error_for_legacy(bad_cursor, "resources/read").code,
            ErrorCode::INVALID_PARAMS
        );
    }

    #[test]
    fn initialize_from_a_discover_result() {
        let discover = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}, "extensions": {"a/b": {}}},
            "instructions": "hi", "ttlMs": 0, "cacheScope": "private",
            "_meta": {SERVER_INFO: {"name": "m", "version": "2"}}});
        assert_eq!(
            initialize_from_discover(&discover, Revision::V2025_06_18, &json!({"name": "g", "version": "1"})),
            json!({
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "m", "version": "2"}, "instructions": "hi"})
        );
    }

    #[test]
    fn url_elicitation_errors() {
        let error = ErrorObject::new(ErrorCode::URL_ELICITATION_REQUIRED, "needs a URL").with_data(
            json!({"elicitations": [{"mode": "url", "elicitationId": "e1", "url": "https://x", "message": "m"}]}),
        );
        assert_eq!(
            url_elicitations(&error),
            vec![json!({"mode": "url", "elicitationId": "e1", "url": "https://x", "message": "m"})]
        );
        let modern = error_for_modern(error);
        assert_eq!(modern.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
        assert_eq!(
            modern.data,
            Some(json!({"requiredCapabilities": {"elicitation": {"url": {}}}}))
        );
    }

    #[test]
    fn initialize_answers_never_exceed_the_negotiated_revision() {
        let (result, rev) =
            initialize_result_for_client(json!({"protocolVersion": "2025-06-18"}), Revision::V2025_11_25);
        assert_eq!(
            (result["protocolVersion"].as_str(), rev),
            (Some("2025-06-18"), Revision::V2025_06_18)
        );
        let (result, rev) =
            initialize_result_for_client(json!({"protocolVersion": "2025-11-25"}), Revision::V2025_03_26);
        assert_eq!(
            (result["protocolVersion"].as_str(), rev),
            (Some("2025-03-26"), Revision::V2025_03_26)
        );
    }

    #[test]
    fn text_results_get_what_tree_results_get() {
        let text = |value: &str| {
            let raw: Box<serde_json::value::RawValue> = serde_json::from_str(value).unwrap();
            LazyJson::from_checked_text(&raw)
        };
        let info = json!({"name": "s", "version": "1"});
        let kept = ServerInfo::new(info.clone());
        let cases = [
            r#"{"content":[{"type":"text","text":"x"}],"isError":false}"#,
            r#"{"content":[],"resultType":"complete"}"#,
            r#"{"content":[],"_meta":{"k":1}}"#,
            r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"other"}}}"#,
            r#"{"content":[],"_meta":7}"#,
            r#"{"resultType":"input_required","inputRequests":{}}"#,
            r#"{"\u0063ontent":[],"a\"b":"x"}"#,
            r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"_meta":{}}"#,
            r#"{}"#,
            r#"[1]"#,
        ];
        for method in [ModernMethod::ToolsCall, ModernMethod::ToolsList] {
            for case in cases {
                let tree = result_for_modern(
                    serde_json::from_str(case).unwrap(),
                    method,
                    &info,
                    CachePolicy::default(),
                );
                let lean = text_result_for_modern(text(case), method, &kept, CachePolicy::default());
                assert_eq!(*lean, tree, "{method:?} {case}");
            }
        }
        let lean = text_result_for_modern(
            text(r#"{"content":[{"type":"text","text":"x"}],"b":1.50}"#),
            ModernMethod::ToolsCall,
            &kept,
            CachePolicy::default(),
        );
        assert_eq!(
            lean.text(),
            Some(
                r#"{"content":[{"type":"text","text":"x"}],"b":1.50,"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#
            )
        );
    }
}
