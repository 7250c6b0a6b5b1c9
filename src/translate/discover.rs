//! `server/discover` synthesised from a legacy upstream's `InitializeResult`.

use serde_json::{Map, Value};

use super::cache::CachePolicy;
use crate::protocol::Revision;
use crate::protocol::capabilities;
use crate::protocol::envelope::SERVER_INFO;

/// Builds the `DiscoverResult` a 2026-07-28 client gets for a legacy upstream.
pub(crate) fn discover_result(initialize: &Value, cache: CachePolicy) -> Value {
    let mut result = Map::new();
    result.insert("resultType".into(), Value::from("complete"));
    result.insert("supportedVersions".into(), Value::from(Revision::modern_strings()));
    let upstream_capabilities = initialize.get("capabilities").cloned().unwrap_or_default();
    result.insert(
        "capabilities".into(),
        capabilities::server_legacy_to_modern(&upstream_capabilities),
    );
    if let Some(instructions) = initialize.get("instructions").filter(|v| v.is_string()) {
        result.insert("instructions".into(), instructions.clone());
    }
    if let Some(server_info) = initialize.get("serverInfo") {
        let mut meta = Map::new();
        meta.insert(SERVER_INFO.into(), server_info.clone());
        result.insert("_meta".into(), Value::Object(meta));
    }
    cache.apply(&mut result);
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn from_a_legacy_initialize_result() {
        let initialize = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": true}, "resources": {"subscribe": true}, "tasks": {}},
            "serverInfo": {"name": "everything", "version": "1.0"},
            "instructions": "Be nice."
        });
        let result = discover_result(&initialize, CachePolicy::default());
        assert_eq!(
            result,
            json!({
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": true}, "resources": {"subscribe": true}},
                "instructions": "Be nice.",
                "ttlMs": 0,
                "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "everything", "version": "1.0"}}
            })
        );
    }
}
