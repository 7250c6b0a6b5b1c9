//! A list as one caller may see it: only the tools its token may call
//! ([`restrict_tools_list`]), or the items a `[[policies]]` entry lets it see
//! ([`restrict_list`], used by [`super::catalog`]); and, for a 2026-07-28
//! client, `cacheScope: "private"`, since the list now depends on who asks.

use serde_json::{Map, Value};

use crate::protocol::Era;
use crate::translate::cache::narrowed_for_caller;

/// Removes from a `tools/list` result every tool `may_call` refuses. Returns how many
/// were removed. Every other member (`nextCursor`, `_meta`, the tools' own fields)
/// passes untouched; a result without a `tools` array is left as it is.
///
/// For a modern client the page is marked `cacheScope: "private"` whether or not a
/// tool was removed: another caller's page may differ, so no shared cache may keep it.
pub(crate) fn restrict_tools_list(result: &mut Value, era: Era, may_call: impl Fn(&str) -> bool) -> usize {
    restrict_list(result, "tools", "name", era, |name, _| may_call(name))
}

/// The shape of every per-caller list: keeps the items of `result[items]` that
/// `keep` accepts, given each item's `key` (its name or URI) and the item itself,
/// which `keep` may change (rename, describe). An item without a string `key` is
/// dropped: nobody could call it. Returns how many were removed; a modern page is
/// made private ([`narrowed_for_caller`]) whatever was removed.
pub(crate) fn restrict_list(
    result: &mut Value,
    items: &str,
    key: &str,
    era: Era,
    mut keep: impl FnMut(&str, &mut Map<String, Value>) -> bool,
) -> usize {
    let Some(object) = result.as_object_mut() else {
        return 0;
    };
    let mut removed = 0;
    if let Some(Value::Array(list)) = object.get_mut(items) {
        let before = list.len();
        list.retain_mut(|item| {
            let Some(item) = item.as_object_mut() else {
                return false;
            };
            match item.get(key).and_then(Value::as_str).map(str::to_owned) {
                Some(name) => keep(&name, item),
                None => false,
            }
        });
        removed = before - list.len();
    }
    if era == Era::Modern {
        narrowed_for_caller(object);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn not_delete(name: &str) -> bool {
        !name.starts_with("delete_")
    }

    #[test]
    fn hidden_tools_are_removed_and_everything_else_passes() {
        let cases = [
            (
                "a modern page: two hidden, the cursor and unknown members kept, scope made private",
                Era::Modern,
                json!({"tools": [
                        {"name": "echo", "inputSchema": {"type": "object"}, "x-vendor": 1},
                        {"name": "delete_file", "inputSchema": {"type": "object"}},
                        {"name": "delete_all", "inputSchema": {"type": "object"}}],
                       "nextCursor": "c2", "resultType": "complete", "ttlMs": 60000,
                       "cacheScope": "public", "_meta": {"k": "v"}}),
                json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}, "x-vendor": 1}],
                       "nextCursor": "c2", "resultType": "complete", "ttlMs": 60000,
                       "cacheScope": "private", "_meta": {"k": "v"}}),
                2,
            ),
            (
                "a legacy page: no cacheScope is added",
                Era::Legacy,
                json!({"tools": [{"name": "delete_file"}, {"name": "echo"}]}),
                json!({"tools": [{"name": "echo"}]}),
                1,
            ),
            (
                "nothing hidden: a modern page is still private",
                Era::Modern,
                json!({"tools": [{"name": "echo"}], "cacheScope": "public", "ttlMs": 5}),
                json!({"tools": [{"name": "echo"}], "cacheScope": "private", "ttlMs": 5}),
                0,
            ),
            (
                "a tool without a name is hidden",
                Era::Legacy,
                json!({"tools": [{"title": "nameless"}, {"name": 7}, {"name": "echo"}]}),
                json!({"tools": [{"name": "echo"}]}),
                2,
            ),
            (
                "not a list result: untouched",
                Era::Legacy,
                json!({"content": []}),
                json!({"content": []}),
                0,
            ),
        ];
        for (what, era, mut result, expected, removed) in cases {
            assert_eq!(restrict_tools_list(&mut result, era, not_delete), removed, "{what}");
            assert_eq!(result, expected, "{what}");
        }
    }
}
