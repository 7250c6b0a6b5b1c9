//! eragate's own meta-tools on a path with `[[disclosure]] mode = "search"`:
//! their definitions (written for a model to read), their arguments as a model
//! sends them, their results, and the short listing that replaces the full one.
//! Pure: the request path fetches the listing and routes the calls.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::Catalogue;
use crate::policy::catalog::glob_matches;

/// Finds tools by a description of the task.
pub(crate) const SEARCH_TOOLS: &str = "search_tools";
/// Calls a found tool by name.
pub(crate) const CALL_TOOL: &str = "call_tool";
/// Adds found tools to a session's listing.
pub(crate) const LOAD_TOOLS: &str = "load_tools";

/// Every meta-tool name.
pub(crate) const META_TOOLS: [&str; 3] = [SEARCH_TOOLS, CALL_TOOL, LOAD_TOOLS];

/// Most tools one session may load.
pub(crate) const MAX_LOADED: usize = 256;

/// Most names one `load_tools` call may carry.
const MAX_NAMES_PER_LOAD: usize = 50;

/// Closest names offered for a name that is not known.
const SUGGESTIONS: usize = 3;

/// The definitions of the meta-tools a client sees; `load_tools` only where the
/// client has a session to keep what it loads.
pub(crate) fn definitions(with_session: bool, max_limit: usize) -> Vec<Value> {
    let mut tools = vec![
        json!({
            "name": SEARCH_TOOLS,
            "title": "Search tools",
            "description": "Find the tools this server offers for a task. Only a few tools are listed; \
                search_tools finds the others. Describe what you want to do in a few words (for example \
                \"which open pull requests still need a review\"); the best matching tools come back \
                best first, each with its input schema. Then call one by its name, or through call_tool.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The task, in a few words."},
                    "limit": {
                        "type": "integer", "minimum": 1, "maximum": max_limit,
                        "description": "How many tools to return at most."
                    }
                },
                "required": ["query"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
        json!({
            "name": CALL_TOOL,
            "title": "Call a found tool",
            "description": "Call a tool that search_tools found, by its exact name, with the arguments \
                its input schema describes. Returns exactly what the tool returns.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name, as search_tools gave it."},
                    "arguments": {"type": "object", "description": "The tool's arguments."}
                },
                "required": ["name"]
            }
        }),
    ];
    if with_session {
        tools.push(json!({
            "name": LOAD_TOOLS,
            "title": "Load found tools",
            "description": "Add tools that search_tools found to your tool list for the rest of this \
                session, so that you can call them directly by name. The tool list changes at once.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "names": {
                        "type": "array", "items": {"type": "string"},
                        "minItems": 1, "maxItems": MAX_NAMES_PER_LOAD,
                        "description": "The exact names of the tools to load."
                    }
                },
                "required": ["names"]
            }
        }));
    }
    tools
}

/// The meta-tool a `tools/call` names, if it names one.
pub(crate) fn meta_tool(name: &str) -> Option<&'static str> {
    META_TOOLS.into_iter().find(|meta| *meta == name)
}

/// A tool of the path's own whose name is a meta-tool's, if one is.
pub(crate) fn collision(tools: &[Value]) -> Option<&'static str> {
    tools
        .iter()
        .find_map(|tool| tool.get("name").and_then(Value::as_str).and_then(meta_tool))
}

/// The listing a client sees: the tools matching `always` or `loaded`, in the
/// path's order, then the meta-tools.
pub(crate) fn disclosed(
    tools: &[Value],
    always: &[String],
    loaded: &BTreeSet<String>,
    with_session: bool,
    max_limit: usize,
) -> Vec<Value> {
    let shown = tools.iter().filter(|tool| {
        tool.get("name")
            .and_then(Value::as_str)
            .is_some_and(|name| loaded.contains(name) || always.iter().any(|glob| glob_matches(glob, name)))
    });
    shown.cloned().chain(definitions(with_session, max_limit)).collect()
}

/// A meta-tool's answer as a model reads it: text, and what it found as
/// structured content where there is some.
#[derive(Debug, PartialEq)]
pub(crate) struct MetaResult {
    /// The text content.
    pub(crate) text: String,
    /// `structuredContent`, if any.
    pub(crate) structured: Option<Value>,
    /// The call went wrong, and the text says how to fix it.
    pub(crate) is_error: bool,
}

impl MetaResult {
    /// A `CallToolResult`-shaped value (without the era's own members).
    pub(crate) fn into_value(self) -> Value {
        let mut result = Map::new();
        result.insert("content".into(), json!([{"type": "text", "text": self.text}]));
        if let Some(structured) = self.structured {
            result.insert("structuredContent".into(), structured);
        }
        if self.is_error {
            result.insert("isError".into(), Value::Bool(true));
        }
        Value::Object(result)
    }

    fn error(text: String) -> MetaResult {
        MetaResult {
            text,
            structured: None,
            is_error: true,
        }
    }
}

/// A `search_tools` call's arguments: the query and how many results.
pub(crate) fn search_arguments(arguments: Option<&Value>, default_limit: usize) -> Result<(String, usize), MetaResult> {
    let query = arguments
        .and_then(|a| a.get("query"))
        .and_then(Value::as_str)
        .map(str::trim);
    let Some(query) = query.filter(|q| !q.is_empty()) else {
        return Err(MetaResult::error(
            "search_tools needs a `query`: a few words describing the task, for example \
             {\"query\": \"send a message to a channel\"}."
                .into(),
        ));
    };
    let limit = match arguments.and_then(|a| a.get("limit")) {
        None | Some(Value::Null) => default_limit,
        Some(limit) => match limit.as_u64().and_then(|n| usize::try_from(n).ok()) {
            Some(n) if (1..=crate::config::MAX_SEARCH_LIMIT).contains(&n) => n,
            _ => {
                return Err(MetaResult::error(format!(
                    "search_tools: `limit` must be an integer from 1 to {}; leave it out for {default_limit}.",
                    crate::config::MAX_SEARCH_LIMIT
                )));
            }
        },
    };
    Ok((query.to_owned(), limit))
}

/// The answer to a search for `query` in `catalogue`: the found tools, best first.
pub(crate) fn search(catalogue: &Catalogue, query: &str, limit: usize) -> MetaResult {
    let hits = catalogue.index.search(query, limit);
    let found: Vec<&Value> = hits.iter().filter_map(|hit| catalogue.tools.get(hit.tool)).collect();
    let mut text = String::new();
    if found.is_empty() {
        text.push_str(&format!(
            "No tool matches \"{query}\" among {} tools. Try other words for the task.",
            catalogue.tools.len()
        ));
    }
    let summaries: Vec<Value> = found
        .iter()
        .map(|tool| {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            let line = one_line(tool);
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(name);
            if !line.is_empty() {
                text.push_str(" — ");
                text.push_str(&line);
            }
            summary(tool)
        })
        .collect();
    MetaResult {
        text,
        structured: Some(json!({ "tools": summaries })),
        is_error: false,
    }
}

/// A found tool as search results carry it.
fn summary(tool: &Value) -> Value {
    let mut out = Map::new();
    for member in ["name", "title", "description", "inputSchema", "annotations"] {
        if let Some(value) = tool.get(member) {
            out.insert(member.into(), value.clone());
        }
    }
    out.entry("description").or_insert_with(|| Value::String(String::new()));
    out.entry("inputSchema").or_insert_with(|| json!({"type": "object"}));
    Value::Object(out)
}

/// The first line of a tool's description (or its title), at most 160 characters.
fn one_line(tool: &Value) -> String {
    let text = ["description", "title"]
        .into_iter()
        .filter_map(|m| tool.get(m).and_then(Value::as_str))
        .map(str::trim)
        .find(|t| !t.is_empty())
        .unwrap_or_default();
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(160) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_owned(),
    }
}

/// A `call_tool` call's arguments: the tool's name and its arguments.
pub(crate) fn call_arguments(arguments: Option<&Value>) -> Result<(String, Option<Value>), MetaResult> {
    let name = arguments.and_then(|a| a.get("name")).and_then(Value::as_str);
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return Err(MetaResult::error(
            "call_tool needs the `name` of a tool (as search_tools gave it) and its `arguments` object, \
             for example {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}."
                .into(),
        ));
    };
    match arguments.and_then(|a| a.get("arguments")) {
        None | Some(Value::Null) => Ok((name.to_owned(), None)),
        Some(object @ Value::Object(_)) => Ok((name.to_owned(), Some(object.clone()))),
        Some(_) => Err(MetaResult::error(format!(
            "call_tool: `arguments` must be an object holding {name}'s arguments."
        ))),
    }
}

/// A `load_tools` call's names.
pub(crate) fn load_arguments(arguments: Option<&Value>) -> Result<Vec<String>, MetaResult> {
    let names = arguments.and_then(|a| a.get("names")).and_then(Value::as_array);
    let names: Option<Vec<String>> = names.and_then(|names| {
        names
            .iter()
            .map(|n| n.as_str().filter(|n| !n.is_empty()).map(str::to_owned))
            .collect()
    });
    match names {
        Some(names) if !names.is_empty() && names.len() <= MAX_NAMES_PER_LOAD => Ok(names),
        _ => Err(MetaResult::error(format!(
            "load_tools needs `names`: from 1 to {MAX_NAMES_PER_LOAD} exact tool names that search_tools \
             found, for example {{\"names\": [\"get_weather\"]}}."
        ))),
    }
}

/// The answer to a call naming `name`, a tool the caller cannot use or that does not exist.
pub(crate) fn unknown_tool(meta: &str, name: &str, catalogue: &Catalogue) -> MetaResult {
    MetaResult::error(format!(
        "{meta}: no tool is named \"{name}\".{}",
        closest_text(name, catalogue)
    ))
}

/// The answer to `load_tools` naming tools that do not exist: nothing was loaded.
pub(crate) fn unknown_tools(names: &[&str], catalogue: &Catalogue) -> MetaResult {
    let each: Vec<String> = names
        .iter()
        .map(|name| format!("\"{name}\".{}", closest_text(name, catalogue)))
        .collect();
    MetaResult::error(format!(
        "load_tools: nothing was loaded; no tool is named {}",
        each.join(" No tool is named ")
    ))
}

/// The answer to a `load_tools` that succeeded.
pub(crate) fn loaded(names: &[String]) -> MetaResult {
    MetaResult {
        text: format!(
            "Loaded {}. They are in your tool list now; call them directly by name.",
            names.join(", ")
        ),
        structured: Some(json!({ "loaded": names })),
        is_error: false,
    }
}

/// The answer to a `load_tools` past the session's bound.
pub(crate) fn too_many_loaded() -> MetaResult {
    MetaResult::error(format!(
        "load_tools: a session may load at most {MAX_LOADED} tools; call the others through call_tool."
    ))
}

/// The answer to `load_tools` from a client without a session.
pub(crate) fn load_needs_session() -> MetaResult {
    MetaResult::error(
        "load_tools keeps tools for a session, and this client has none: call a found tool by its name, \
         or through call_tool."
            .into(),
    )
}

fn closest_text(name: &str, catalogue: &Catalogue) -> String {
    let closest = closest(name, catalogue);
    if closest.is_empty() {
        return " Use search_tools to find one.".into();
    }
    format!(" Closest: {}.", closest.join(", "))
}

/// The names in `catalogue` closest to `name`: by spelling, then by what the words say.
fn closest(name: &str, catalogue: &Catalogue) -> Vec<String> {
    let names: Vec<&str> = catalogue
        .tools
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect();
    let wanted = name.to_lowercase();
    let mut near: Vec<(usize, &str)> = names
        .iter()
        .map(|candidate| (edit_distance(&wanted, &candidate.to_lowercase()), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.chars().count() / 3).max(2))
        .collect();
    near.sort();
    let mut out: Vec<String> = near.into_iter().map(|(_, n)| n.to_owned()).collect();
    for hit in catalogue.index.search(name, SUGGESTIONS) {
        if let Some(found) = names.get(hit.tool)
            && !out.iter().any(|n| n == found)
        {
            out.push((*found).to_owned());
        }
    }
    out.truncate(SUGGESTIONS);
    out
}

/// Levenshtein distance over characters (names are short: at most a few hundred).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().take(256).collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().take(256).enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalogue() -> Catalogue {
        Catalogue::new(vec![
            json!({"name": "get_weather", "description": "Current weather for a city.\nUses a public API.",
                   "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}),
            json!({"name": "send_message", "title": "Send", "description": "Post a message to a chat channel.",
                   "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": false}, "_meta": {"x": 1}}),
            json!({"name": "list_pull_requests", "description": "List open pull requests awaiting review.",
                   "inputSchema": {"type": "object"}}),
        ])
    }

    #[test]
    fn the_listing_keeps_always_and_loaded_tools_then_the_meta_tools() {
        let tools = catalogue().tools;
        let loaded: BTreeSet<String> = ["list_pull_requests".to_owned()].into();
        let names = |listed: Vec<Value>| -> Vec<String> {
            listed
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        };
        let cases: &[(&[&str], bool, &[&str])] = &[
            (&[], false, &["search_tools", "call_tool"]),
            (&["get_*"], false, &["get_weather", "search_tools", "call_tool"]),
            (
                &["*"],
                false,
                &[
                    "get_weather",
                    "send_message",
                    "list_pull_requests",
                    "search_tools",
                    "call_tool",
                ],
            ),
            (
                &["send_message"],
                true,
                &[
                    "send_message",
                    "list_pull_requests",
                    "search_tools",
                    "call_tool",
                    "load_tools",
                ],
            ),
        ];
        for (always, session, expected) in cases {
            let always: Vec<String> = always.iter().map(|s| (*s).to_owned()).collect();
            let none = BTreeSet::new();
            let loaded = if *session { &loaded } else { &none };
            assert_eq!(
                names(disclosed(&tools, &always, loaded, *session, 50)),
                *expected,
                "{always:?}"
            );
        }
    }

    #[test]
    fn a_search_gives_the_best_tools_with_their_schemas_and_one_line_each() {
        let result = search(&catalogue(), "weather in a city", 5);
        assert!(!result.is_error);
        assert_eq!(
            result.text.lines().next(),
            Some("get_weather — Current weather for a city.")
        );
        let found = &result.structured.as_ref().expect("structured")["tools"];
        assert_eq!(found[0]["name"], "get_weather");
        assert_eq!(found[0]["inputSchema"]["properties"]["city"]["type"], "string");
        let search_send = search(&catalogue(), "post to a chat channel", 1);
        let only = &search_send.structured.expect("structured")["tools"];
        assert_eq!(only.as_array().map(Vec::len), Some(1));
        assert_eq!(
            only[0],
            json!({"name": "send_message", "title": "Send",
            "description": "Post a message to a chat channel.", "inputSchema": {"type": "object"},
            "annotations": {"destructiveHint": false}})
        );
    }

    #[test]
    fn a_search_that_finds_nothing_says_so() {
        let result = search(&catalogue(), "zzz", 5);
        assert!(!result.is_error);
        assert!(
            result.text.starts_with("No tool matches \"zzz\" among 3 tools"),
            "{}",
            result.text
        );
        assert_eq!(result.structured, Some(json!({"tools": []})));
    }

    #[test]
    fn bad_arguments_get_an_error_a_model_can_act_on() {
        let cases: &[(Value, bool)] = &[
            (json!({"query": "weather"}), true),
            (json!({"query": "weather", "limit": 50}), true),
            (json!({"query": "  "}), false),
            (json!({}), false),
            (json!({"query": 3}), false),
            (json!({"query": "weather", "limit": 0}), false),
            (json!({"query": "weather", "limit": 51}), false),
            (json!({"query": "weather", "limit": "5"}), false),
        ];
        for (arguments, ok) in cases {
            let parsed = search_arguments(Some(arguments), 5);
            assert_eq!(parsed.is_ok(), *ok, "{arguments}");
            if let Err(error) = parsed {
                assert!(
                    error.is_error && error.text.starts_with("search_tools"),
                    "{}",
                    error.text
                );
            }
        }
        assert!(search_arguments(None, 5).is_err());
        assert_eq!(call_arguments(Some(&json!({"name": "a"}))), Ok(("a".into(), None)));
        assert!(call_arguments(Some(&json!({"name": "a", "arguments": [1]}))).is_err());
        assert!(call_arguments(Some(&json!({"arguments": {}}))).is_err());
        assert_eq!(
            load_arguments(Some(&json!({"names": ["a", "b"]}))),
            Ok(vec!["a".into(), "b".into()])
        );
        for bad in [
            json!({"names": []}),
            json!({"names": ["a", 1]}),
            json!({"names": "a"}),
            json!({}),
        ] {
            assert!(load_arguments(Some(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_unknown_name_is_answered_with_the_closest_names() {
        let result = unknown_tool(CALL_TOOL, "get_wether", &catalogue());
        assert!(result.is_error);
        assert!(result.text.contains("Closest: get_weather"), "{}", result.text);
        let none = unknown_tool(CALL_TOOL, "qqqqqqqq", &catalogue());
        assert!(none.text.ends_with("Use search_tools to find one."), "{}", none.text);
        let load = unknown_tools(&["send_mesage"], &catalogue());
        assert!(load.text.starts_with("load_tools: nothing was loaded"), "{}", load.text);
        assert!(load.text.contains("send_message"), "{}", load.text);
    }

    #[test]
    fn a_collision_names_the_meta_tool() {
        assert_eq!(collision(&catalogue().tools), None);
        assert_eq!(collision(&[json!({"name": "call_tool"})]), Some(CALL_TOOL));
    }

    #[test]
    fn edit_distances() {
        for (a, b, d) in [
            ("", "", 0),
            ("abc", "abc", 0),
            ("abc", "abd", 1),
            ("kitten", "sitting", 3),
            ("", "ab", 2),
        ] {
            assert_eq!(edit_distance(a, b), d, "{a} {b}");
        }
    }
}
