//! Capability objects across revisions: what a legacy server's capabilities mean
//! to a 2026-07-28 client, and what a modern client's mean to a legacy server.
//!
//! Unknown members (`experimental`, vendor keys) pass through; only members a
//! revision does not define are removed.

use serde_json::{Map, Value};

use super::revision::Revision;

/// A legacy `InitializeResult.capabilities` as 2026-07-28 `ServerCapabilities`.
///
/// `tasks` has no core meaning in 2026-07-28 and is dropped. `listChanged` and
/// `subscribe` stay as the upstream says: eragate bridges both through
/// `subscriptions/listen`.
pub(crate) fn server_legacy_to_modern(capabilities: &Value) -> Value {
    let mut out = capabilities.as_object().cloned().unwrap_or_default();
    out.remove("tasks");
    Value::Object(out)
}

/// A 2026-07-28 `clientCapabilities` as the capabilities a legacy `initialize`
/// of `revision` may declare.
pub(crate) fn client_modern_to_legacy(capabilities: &Value, revision: Revision) -> Value {
    let source = capabilities.as_object().cloned().unwrap_or_default();
    let mut out = Map::new();
    for (key, value) in source {
        match key.as_str() {
            // Roots exist in every legacy revision; never claim listChanged we cannot relay.
            "roots" => {
                out.insert(key, Value::Object(Map::new()));
            }
            "sampling" => {
                let sampling = if revision >= Revision::V2025_11_25 {
                    value
                } else {
                    Value::Object(Map::new())
                };
                out.insert(key, sampling);
            }
            "elicitation" if revision >= Revision::V2025_11_25 => {
                out.insert(key, value);
            }
            "elicitation" if revision == Revision::V2025_06_18 => {
                out.insert(key, Value::Object(Map::new()));
            }
            "elicitation" | "extensions" | "tasks" => {}
            _ => {
                out.insert(key, value);
            }
        }
    }
    Value::Object(out)
}

/// A legacy client's `initialize` capabilities as a 2026-07-28 `clientCapabilities`.
pub(crate) fn client_legacy_to_modern(capabilities: &Value) -> Value {
    let source = capabilities.as_object().cloned().unwrap_or_default();
    let mut out = Map::new();
    for (key, value) in source {
        match key.as_str() {
            // 2026-07-28 roots have no listChanged.
            "roots" => {
                out.insert(key, Value::Object(Map::new()));
            }
            // 2025-06-18's `elicitation: {}` means form mode.
            "elicitation" if value.as_object().is_some_and(Map::is_empty) => {
                out.insert(key, serde_json::json!({"form": {}}));
            }
            "tasks" => {}
            _ => {
                out.insert(key, value);
            }
        }
    }
    Value::Object(out)
}

/// A 2026-07-28 server's capabilities as a legacy client of `revision` may see
/// them in `InitializeResult`. Resource subscriptions are relayed (through a
/// listen); list changes outside them are not, so `listChanged` is not claimed.
pub(crate) fn server_modern_to_legacy(capabilities: &Value, revision: Revision) -> Value {
    let mut out = capabilities.as_object().cloned().unwrap_or_default();
    out.remove("extensions");
    if revision < Revision::V2025_03_26 {
        out.remove("completions");
    }
    for kind in ["tools", "prompts", "resources"] {
        if let Some(Value::Object(object)) = out.get_mut(kind) {
            object.remove("listChanged");
        }
    }
    Value::Object(out)
}

/// The client capabilities that decide which pooled upstream session a
/// request may share: only the members `revision`'s `ClientCapabilities`
/// defines, each with only its defined flags. A flag keeps its value when it
/// is a boolean and counts by its presence otherwise; `experimental` and
/// `extensions`, whose contents are free-form, count by their presence only.
/// So unknown or vendor keys cannot make new partitions (and sessions); the
/// capabilities themselves still pass through where they are forwarded.
pub(crate) fn partition_profile(capabilities: &Value, revision: Revision) -> Value {
    let known = client_capability_members(revision);
    let mut out = Map::new();
    for (key, flags) in known {
        let Some(value) = capabilities.get(*key) else { continue };
        let mut kept = Map::new();
        for flag in flags.iter() {
            match value.get(*flag) {
                Some(Value::Bool(set)) => {
                    kept.insert((*flag).to_owned(), Value::Bool(*set));
                }
                Some(_) => {
                    kept.insert((*flag).to_owned(), Value::Object(Map::new()));
                }
                None => {}
            }
        }
        out.insert((*key).to_owned(), Value::Object(kept));
    }
    Value::Object(out)
}

/// `ClientCapabilities` members and their flags, per the revision's schema.
fn client_capability_members(revision: Revision) -> &'static [(&'static str, &'static [&'static str])] {
    match revision {
        Revision::V2024_11_05 | Revision::V2025_03_26 => {
            &[("experimental", &[]), ("roots", &["listChanged"]), ("sampling", &[])]
        }
        Revision::V2025_06_18 => &[
            ("elicitation", &[]),
            ("experimental", &[]),
            ("roots", &["listChanged"]),
            ("sampling", &[]),
        ],
        Revision::V2025_11_25 => &[
            ("elicitation", &["form", "url"]),
            ("experimental", &[]),
            ("roots", &["listChanged"]),
            ("sampling", &["context", "tools"]),
            ("tasks", &["cancel", "list", "requests"]),
        ],
        Revision::V2026_07_28 => &[
            ("elicitation", &["form", "url"]),
            ("experimental", &[]),
            ("extensions", &[]),
            ("roots", &[]),
            ("sampling", &["context", "tools"]),
        ],
    }
}

/// Trims a modern `clientInfo` to the members `revision` defines.
pub(crate) fn client_info_for(info: &Value, revision: Revision) -> Value {
    let Some(object) = info.as_object() else {
        return info.clone();
    };
    let allowed: &[&str] = match revision {
        Revision::V2024_11_05 | Revision::V2025_03_26 => &["name", "version"],
        Revision::V2025_06_18 => &["name", "version", "title"],
        _ => return info.clone(),
    };
    Value::Object(
        object
            .iter()
            .filter(|(k, _)| allowed.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_profiles_keep_only_defined_members_and_flags() {
        let a = serde_json::json!({
            "roots": {"listChanged": true, "x": 1},
            "sampling": {"tools": {"deep": 1}},
            "experimental": {"vendor-1": {}},
            "x-vendor-7": {},
        });
        let b = serde_json::json!({
            "roots": {"listChanged": true},
            "sampling": {"tools": {}},
            "experimental": {"vendor-2": {"on": true}},
            "x-vendor-8": {"y": 2},
        });
        let revision = Revision::V2025_11_25;
        assert_eq!(partition_profile(&a, revision), partition_profile(&b, revision));
        assert_eq!(
            partition_profile(&a, revision),
            serde_json::json!({"roots": {"listChanged": true}, "sampling": {"tools": {}}, "experimental": {}})
        );
        let without_roots = serde_json::json!({"sampling": {}});
        assert_ne!(
            partition_profile(&a, revision),
            partition_profile(&without_roots, revision)
        );
        let old = partition_profile(
            &serde_json::json!({"elicitation": {}, "sampling": {"tools": {}}}),
            Revision::V2024_11_05,
        );
        assert_eq!(old, serde_json::json!({"sampling": {}}));
    }
    use serde_json::json;

    #[test]
    fn server_capabilities_for_modern_clients() {
        let legacy = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true},
            "prompts": {}, "logging": {}, "completions": {}, "tasks": {"list": {}}, "experimental": {"x": {}}});
        assert_eq!(
            server_legacy_to_modern(&legacy),
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true},
                "prompts": {}, "logging": {}, "completions": {}, "experimental": {"x": {}}})
        );
    }

    #[test]
    fn client_capabilities_per_revision() {
        let modern = json!({"roots": {}, "sampling": {"context": {}, "tools": {}},
            "elicitation": {"form": {}, "url": {}}, "extensions": {"a/b": {}}, "experimental": {"e": 1}});
        let table = [
            (
                Revision::V2025_11_25,
                json!({"roots": {}, "sampling": {"context": {}, "tools": {}}, "elicitation": {"form": {}, "url": {}}, "experimental": {"e": 1}}),
            ),
            (
                Revision::V2025_06_18,
                json!({"roots": {}, "sampling": {}, "elicitation": {}, "experimental": {"e": 1}}),
            ),
            (
                Revision::V2025_03_26,
                json!({"roots": {}, "sampling": {}, "experimental": {"e": 1}}),
            ),
            (
                Revision::V2024_11_05,
                json!({"roots": {}, "sampling": {}, "experimental": {"e": 1}}),
            ),
        ];
        for (revision, expected) in table {
            assert_eq!(client_modern_to_legacy(&modern, revision), expected, "{revision}");
        }
    }

    #[test]
    fn legacy_clients_to_modern_capabilities() {
        let legacy = json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {}, "tasks": {"list": {}}, "experimental": {"e": 1}});
        assert_eq!(
            client_legacy_to_modern(&legacy),
            json!({"roots": {}, "sampling": {}, "elicitation": {"form": {}}, "experimental": {"e": 1}})
        );
        let url = json!({"elicitation": {"form": {}, "url": {}}});
        assert_eq!(client_legacy_to_modern(&url), url);
    }

    #[test]
    fn modern_servers_to_legacy_capabilities() {
        let modern = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}, "completions": {}, "logging": {}, "extensions": {"x/y": {}}});
        assert_eq!(
            server_modern_to_legacy(&modern, Revision::V2025_11_25),
            json!({"tools": {}, "resources": {"subscribe": true}, "completions": {}, "logging": {}})
        );
        assert_eq!(
            server_modern_to_legacy(&modern, Revision::V2024_11_05),
            json!({"tools": {}, "resources": {"subscribe": true}, "logging": {}})
        );
    }

    #[test]
    fn client_info_is_trimmed_for_old_revisions() {
        let info = json!({"name": "c", "version": "1", "title": "C", "icons": []});
        assert_eq!(
            client_info_for(&info, Revision::V2024_11_05),
            json!({"name": "c", "version": "1"})
        );
        assert_eq!(
            client_info_for(&info, Revision::V2025_06_18),
            json!({"name": "c", "version": "1", "title": "C"})
        );
        assert_eq!(client_info_for(&info, Revision::V2025_11_25), info);
    }
}
