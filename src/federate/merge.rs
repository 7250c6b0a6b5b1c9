//! One handshake for the federation: members' `initialize` (or
//! `server/discover`) results merged. A capability is offered when any member
//! offers it, a flag inside one (`listChanged`, `subscribe`) when any member
//! sets it; eragate names itself in `serverInfo` and lists the members in
//! `_meta`; members' instructions are joined under a heading each.

use serde_json::{Map, Value, json};

use crate::protocol::envelope::SERVER_INFO;

/// The `_meta` key listing the members: `[{name, serverInfo}]`, and those left out.
pub(crate) const MEMBERS_META: &str = "dev.eragate/members";

/// One member's handshake result, by the member's name; `None` when it could
/// not be reached (it is listed as left out).
pub(crate) struct MemberResult<'a> {
    /// The member (upstream) name.
    pub(crate) name: &'a str,
    /// Its `initialize` or `server/discover` result.
    pub(crate) result: Option<&'a Value>,
}

/// Members' capabilities merged: the union of their members, flags OR-ed,
/// objects merged member by member, any other value the first member's.
pub(crate) fn capabilities(all: &[&Value]) -> Value {
    let mut merged = Value::Object(Map::new());
    for capabilities in all {
        union(&mut merged, capabilities);
    }
    merged
}

fn union(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                match into.get_mut(key) {
                    Some(existing) => union(existing, value),
                    None => {
                        into.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Bool(into), Value::Bool(from)) => *into |= *from,
        _ => {} // the first member's value stands
    }
}

/// The federation's handshake result: merged capabilities, eragate's
/// `server_info`, the members in `_meta`, instructions under headings.
/// Every other member of the first reachable member's result passes (e.g.
/// `protocolVersion`, which the caller sets for the client's era).
pub(crate) fn handshake(members: &[MemberResult<'_>], server_info: &Value) -> Value {
    let reached: Vec<(&str, &Value)> = members.iter().filter_map(|m| Some((m.name, m.result?))).collect();
    let mut result = reached
        .first()
        .and_then(|(_, r)| r.as_object().cloned())
        .unwrap_or_default();
    let caps: Vec<&Value> = reached.iter().filter_map(|(_, r)| r.get("capabilities")).collect();
    result.insert("capabilities".into(), capabilities(&caps));
    result.insert("serverInfo".into(), server_info.clone());
    match instructions(&reached) {
        Some(text) => result.insert("instructions".into(), Value::from(text)),
        None => result.remove("instructions"),
    };
    let listed: Vec<Value> = members
        .iter()
        .map(|m| match m.result {
            Some(r) => json!({"name": m.name, "serverInfo": r.get("serverInfo").cloned().unwrap_or(Value::Null)}),
            None => json!({"name": m.name, "unavailable": true}),
        })
        .collect();
    let meta = result.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(MEMBERS_META.into(), Value::Array(listed));
    }
    Value::Object(result)
}

/// The federation's 2026-07-28 `server/discover` result from members'
/// (modern-shaped) ones: as [`handshake`], with each member's identity read
/// from, and eragate's written to, `_meta["io.modelcontextprotocol/serverInfo"]`.
pub(crate) fn discover(members: &[MemberResult<'_>], server_info: &Value) -> Value {
    let lifted: Vec<Option<Value>> = members
        .iter()
        .map(|m| {
            let mut result = m.result?.clone();
            let identity = result.get("_meta").and_then(|meta| meta.get(SERVER_INFO)).cloned();
            if let (Some(object), Some(identity)) = (result.as_object_mut(), identity) {
                object.entry("serverInfo").or_insert(identity);
            }
            Some(result)
        })
        .collect();
    let lifted_members: Vec<MemberResult<'_>> = members
        .iter()
        .zip(&lifted)
        .map(|(m, r)| MemberResult {
            name: m.name,
            result: r.as_ref(),
        })
        .collect();
    let mut merged = handshake(&lifted_members, server_info);
    if let Some(object) = merged.as_object_mut() {
        let identity = object.remove("serverInfo").unwrap_or(Value::Null);
        if let Some(meta) = object.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.insert(SERVER_INFO.into(), identity);
        }
    }
    merged
}

/// `## <member>` then its instructions, for every member that has any.
fn instructions(reached: &[(&str, &Value)]) -> Option<String> {
    let sections: Vec<String> = reached
        .iter()
        .filter_map(|(name, r)| {
            let text = r.get("instructions")?.as_str()?.trim();
            (!text.is_empty()).then(|| format!("## {name}\n\n{text}"))
        })
        .collect();
    (!sections.is_empty()).then(|| sections.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_a_union() {
        let cases = [
            (
                "a capability any member offers; a flag any member sets",
                vec![
                    json!({"tools": {"listChanged": false}, "logging": {}}),
                    json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}}),
                    json!({"prompts": {}}),
                ],
                json!({"tools": {"listChanged": true}, "logging": {}, "resources": {"subscribe": true}, "prompts": {}}),
            ),
            (
                "unknown members pass; a non-flag value is the first member's",
                vec![
                    json!({"experimental": {"x": {"v": 1}}, "tasks": {"list": {}}}),
                    json!({"experimental": {"x": {"v": 2}, "y": {}}}),
                ],
                json!({"experimental": {"x": {"v": 1}, "y": {}}, "tasks": {"list": {}}}),
            ),
            ("no members", vec![], json!({})),
        ];
        for (what, members, expected) in cases {
            let refs: Vec<&Value> = members.iter().collect();
            assert_eq!(capabilities(&refs), expected, "{what}");
        }
    }

    #[test]
    fn one_handshake_for_the_members() {
        let everything = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "everything", "version": "1"}, "instructions": "Test everything."});
        let py = json!({"protocolVersion": "2025-06-18", "capabilities": {"prompts": {}},
            "serverInfo": {"name": "py", "version": "2"}});
        let gateway = json!({"name": "eragate", "version": "0.1.0"});
        let merged = handshake(
            &[
                MemberResult {
                    name: "everything",
                    result: Some(&everything),
                },
                MemberResult {
                    name: "ts2",
                    result: None,
                },
                MemberResult {
                    name: "py",
                    result: Some(&py),
                },
            ],
            &gateway,
        );
        assert_eq!(
            merged,
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": true}, "prompts": {}},
                "serverInfo": gateway,
                "instructions": "## everything\n\nTest everything.",
                "_meta": {MEMBERS_META: [
                    {"name": "everything", "serverInfo": {"name": "everything", "version": "1"}},
                    {"name": "ts2", "unavailable": true},
                    {"name": "py", "serverInfo": {"name": "py", "version": "2"}},
                ]},
            })
        );
        let both = json!({"instructions": "Say hi.", "capabilities": {}});
        let merged = handshake(
            &[
                MemberResult {
                    name: "a",
                    result: Some(&everything),
                },
                MemberResult {
                    name: "b",
                    result: Some(&both),
                },
            ],
            &gateway,
        );
        assert_eq!(merged["instructions"], "## a\n\nTest everything.\n\n## b\n\nSay hi.");
    }

    #[test]
    fn one_discover_for_the_members() {
        let everything = json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "ttlMs": 0,
            "cacheScope": "private", "capabilities": {"tools": {"listChanged": true}, "resources": {"subscribe": true}},
            "_meta": {SERVER_INFO: {"name": "everything", "version": "1"}}});
        let ts2 = json!({"resultType": "complete", "capabilities": {"prompts": {}},
            "_meta": {SERVER_INFO: {"name": "ts2", "version": "2"}}});
        let gateway = json!({"name": "eragate", "version": "0.1.0"});
        let merged = discover(
            &[
                MemberResult {
                    name: "everything",
                    result: Some(&everything),
                },
                MemberResult {
                    name: "ts2",
                    result: Some(&ts2),
                },
            ],
            &gateway,
        );
        assert_eq!(
            merged,
            json!({
                "resultType": "complete", "supportedVersions": ["2026-07-28"], "ttlMs": 0, "cacheScope": "private",
                "capabilities": {"tools": {"listChanged": true}, "resources": {"subscribe": true}, "prompts": {}},
                "_meta": {
                    SERVER_INFO: gateway,
                    MEMBERS_META: [
                        {"name": "everything", "serverInfo": {"name": "everything", "version": "1"}},
                        {"name": "ts2", "serverInfo": {"name": "ts2", "version": "2"}},
                    ],
                },
            })
        );
    }
}
