//! Results and errors on their way up, from the upstream's era to the client's.

use serde_json::{Map, Value};

use super::cache::CachePolicy;
use crate::protocol::envelope::SERVER_INFO;
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

/// An upstream error as a 2026-07-28 client must see it: the retired
/// resource-not-found code becomes -32602 (its data kept).
pub fn error_for_modern(mut error: ErrorObject) -> ErrorObject {
    if error.code == ErrorCode::RESOURCE_NOT_FOUND {
        error.code = ErrorCode::INVALID_PARAMS;
    }
    error
}

/// The `InitializeResult` a legacy client gets: the upstream's, speaking the
/// revision eragate negotiated with the client. When the upstream settled on an
/// older handshake revision, that older one is the honest answer.
pub fn initialize_result_for_client(mut upstream: Value, negotiated: Revision) -> (Value, Revision) {
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
}
