//! What one caller may see and call on a path under `[[policies]]`: which
//! entry applies to it ([`select`]), its lists filtered, renamed and described
//! ([`Catalog::restrict`]), and its requests checked and given back the path's
//! own names ([`Catalog::admit`]). Pure: no I/O, no state; a name the caller may
//! not see is unknown to it, exactly like a name no server has.

use serde_json::Value;

use super::tools::restrict_list;
use crate::config::{GroupsConfig, KindPolicyConfig, PolicyConfig};
use crate::protocol::{Era, ErrorCode, ErrorObject};

/// Who is asking, as `[[policies]]` entries name callers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caller<'a> {
    /// The principal (empty for an open gateway).
    pub(crate) subject: &'a str,
    /// An OAuth token's scopes (`None` for a static token or an open gateway).
    pub(crate) scopes: Option<&'a [String]>,
}

/// Which rules apply to a caller on a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Selection {
    /// The path has no `[[policies]]`: every caller sees the same.
    Unrestricted,
    /// The path has some: the first entry naming the caller applies (by its
    /// index in `[[policies]]`), or none; either way the caller's lists depend
    /// on who asks.
    Narrowed(Option<usize>),
}

/// The `[[policies]]` entry that applies to `caller` on `path`: the first, in
/// file order, whose `subjects`, `groups` or `scopes` name it (an entry naming
/// nobody applies to everyone).
pub(crate) fn select(policies: &[PolicyConfig], groups: &GroupsConfig, path: &str, caller: Caller<'_>) -> Selection {
    let mut on_path = policies
        .iter()
        .enumerate()
        .filter(|(_, policy)| path_matches(&policy.path, path))
        .peekable();
    if on_path.peek().is_none() {
        return Selection::Unrestricted;
    }
    let chosen = on_path
        .find(|(_, policy)| names(policy, groups, caller))
        .map(|(i, _)| i);
    Selection::Narrowed(chosen)
}

fn path_matches(configured: &str, served: &str) -> bool {
    configured == served || configured.strip_suffix('/') == Some(served) || served.strip_suffix('/') == Some(configured)
}

/// Whether `policy` names `caller`.
fn names(policy: &PolicyConfig, groups: &GroupsConfig, caller: Caller<'_>) -> bool {
    if policy.applies_to_everyone() {
        return true;
    }
    let subject = caller.subject;
    let by_subject = !subject.is_empty() && policy.subjects.iter().any(|s| s == subject);
    let by_group = !subject.is_empty()
        && policy
            .groups
            .iter()
            .filter_map(|group| groups.get(group))
            .any(|members| members.iter().any(|m| m == subject));
    let by_scopes = !policy.scopes.is_empty()
        && caller
            .scopes
            .is_some_and(|granted| policy.scopes.iter().all(|s| granted.contains(s)));
    by_subject || by_group || by_scopes
}

/// The kinds of things a policy rules on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Tools, by name.
    Tools,
    /// Prompts, by name.
    Prompts,
    /// Resources by URI, and resource templates by URI template.
    Resources,
}

impl Kind {
    fn what(self) -> &'static str {
        match self {
            Kind::Tools => "tool",
            Kind::Prompts => "prompt",
            Kind::Resources => "resource",
        }
    }
}

/// A list method's items: their kind, the member holding them, the key naming each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListShape {
    kind: Kind,
    items: &'static str,
    key: &'static str,
}

impl ListShape {
    /// The shape of `method`'s result, when it is one of the four lists.
    pub(crate) fn of(method: &str) -> Option<ListShape> {
        let (kind, items, key) = match method {
            "tools/list" => (Kind::Tools, "tools", "name"),
            "prompts/list" => (Kind::Prompts, "prompts", "name"),
            "resources/list" => (Kind::Resources, "resources", "uri"),
            "resources/templates/list" => (Kind::Resources, "resourceTemplates", "uriTemplate"),
            _ => return None,
        };
        Some(ListShape { kind, items, key })
    }
}

/// The rules one caller is served under on a narrowed path (none: it sees all,
/// but its lists are still private, since another caller's may differ).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Catalog<'a> {
    rules: Option<&'a PolicyConfig>,
}

/// The empty rules, for a caller no entry names.
static NO_RULES: KindPolicyConfig = KindPolicyConfig {
    allow: Vec::new(),
    deny: Vec::new(),
    rename: std::collections::BTreeMap::new(),
    descriptions: std::collections::BTreeMap::new(),
};

impl<'a> Catalog<'a> {
    /// The catalog of a caller `rules` apply to (`None`: no entry names it).
    pub(crate) fn new(rules: Option<&'a PolicyConfig>) -> Catalog<'a> {
        Catalog { rules }
    }

    fn rules(&self, kind: Kind) -> &'a KindPolicyConfig {
        match (self.rules, kind) {
            (None, _) => &NO_RULES,
            (Some(policy), Kind::Tools) => &policy.tools,
            (Some(policy), Kind::Prompts) => &policy.prompts,
            (Some(policy), Kind::Resources) => &policy.resources,
        }
    }

    /// The name the caller sees for the path's `name`, or `None` when hidden:
    /// not allowed, denied, or shadowed by another name renamed to it.
    pub(crate) fn expose<'n>(&self, kind: Kind, name: &'n str) -> Option<&'n str>
    where
        'a: 'n,
    {
        let rules = self.rules(kind);
        if !permitted(rules, name) {
            return None;
        }
        match rules.rename.get(name) {
            Some(renamed) => Some(renamed.as_str()),
            None if rules.rename.values().any(|to| to == name) => None,
            None => Some(name),
        }
    }

    /// The path's own name behind the caller's `name`, or `None` when the
    /// caller may not use it (hidden, or renamed away).
    pub(crate) fn restore<'n>(&self, kind: Kind, name: &'n str) -> Option<&'n str>
    where
        'a: 'n,
    {
        let rules = self.rules(kind);
        let own = match rules.rename.iter().find(|(_, to)| to.as_str() == name) {
            Some((from, _)) => from.as_str(),
            None if rules.rename.contains_key(name) => return None,
            None => name,
        };
        permitted(rules, own).then_some(own)
    }

    /// A list result of `shape` as the caller sees it: hidden items removed,
    /// renamed and described items rewritten, and (modern) private. Returns
    /// how many items were removed.
    pub(crate) fn restrict(&self, shape: ListShape, result: &mut Value, era: Era) -> usize {
        let rules = self.rules(shape.kind);
        restrict_list(result, shape.items, shape.key, era, |name, item| {
            let Some(exposed) = self.expose(shape.kind, name) else {
                return false;
            };
            if exposed != name {
                let exposed = Value::from(exposed);
                item.insert(shape.key.into(), exposed);
            }
            if let Some(description) = rules.descriptions.get(name) {
                item.insert("description".into(), Value::from(description.as_str()));
            }
            true
        })
    }

    /// Checks a request of `method` against the rules and gives the thing it
    /// names its path name back (in `params`). A name the caller may not use
    /// fails as an unknown one would. A `subscriptions/listen` loses the
    /// resource subscriptions the caller may not see, so its acknowledgement
    /// names only what it may (as it names only what the server honours).
    pub(crate) fn admit(&self, method: &str, params: Option<&mut Value>) -> Result<(), ErrorObject> {
        if method == "subscriptions/listen" {
            self.narrow_listen(params);
            return Ok(());
        }
        let (kind, at): (Kind, &[&str]) = match method {
            "tools/call" => (Kind::Tools, &["name"]),
            "prompts/get" => (Kind::Prompts, &["name"]),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => (Kind::Resources, &["uri"]),
            "completion/complete" => {
                let kind = params
                    .as_deref()
                    .and_then(|p| p.get("ref")?.get("type")?.as_str().map(str::to_owned));
                match kind.as_deref() {
                    Some("ref/prompt") => (Kind::Prompts, &["ref", "name"]),
                    Some("ref/resource") => (Kind::Resources, &["ref", "uri"]),
                    _ => return Ok(()),
                }
            }
            _ => return Ok(()),
        };
        let Some(slot) = params.and_then(|params| member_at(params, at)) else {
            return Ok(()); // no name: the server's own answer says what is wrong
        };
        let Some(name) = slot.as_str() else {
            return Ok(());
        };
        match self.restore(kind, name) {
            Some(own) if own == name => Ok(()),
            Some(own) => {
                *slot = Value::from(own.to_owned());
                Ok(())
            }
            None => Err(unknown(kind, name)),
        }
    }
}

impl Catalog<'_> {
    /// Drops from a listen's `notifications.resourceSubscriptions` the URIs the
    /// caller may not see; returns how many. Anything not a URI string stays,
    /// for the server to judge.
    fn narrow_listen(&self, params: Option<&mut Value>) -> usize {
        let Some(uris) = params
            .and_then(|params| member_at(params, &["notifications", "resourceSubscriptions"]))
            .and_then(Value::as_array_mut)
        else {
            return 0;
        };
        let before = uris.len();
        uris.retain(|uri| {
            uri.as_str()
                .is_none_or(|uri| self.restore(Kind::Resources, uri).is_some())
        });
        before - uris.len()
    }

    /// Whether a notification of `method` the server sends on its own (a GET
    /// stream's, a listen's) may reach the caller: `notifications/resources/updated`
    /// only for a resource the caller may see. Nothing else a server sends
    /// unasked names a tool, prompt or resource (progress and task status name
    /// a token and a task id), so the rest passes.
    pub(crate) fn shows(&self, method: &str, params: Option<&Value>) -> bool {
        if method != "notifications/resources/updated" {
            return true;
        }
        match params.and_then(|p| p.get("uri")).and_then(Value::as_str) {
            Some(uri) => self.expose(Kind::Resources, uri).is_some(),
            None => true,
        }
    }
}

/// Whether `name` passes `allow` and `deny`.
fn permitted(rules: &KindPolicyConfig, name: &str) -> bool {
    let allowed = rules.allow.is_empty() || rules.allow.iter().any(|glob| glob_matches(glob, name));
    allowed && !rules.deny.iter().any(|glob| glob_matches(glob, name))
}

fn member_at<'v>(value: &'v mut Value, path: &[&str]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |value, key| value.get_mut(*key))
}

/// The error a name nobody serves gets; the same for one the caller may not see.
fn unknown(kind: Kind, name: &str) -> ErrorObject {
    let code = match kind {
        Kind::Resources => ErrorCode::RESOURCE_NOT_FOUND,
        Kind::Tools | Kind::Prompts => ErrorCode::INVALID_PARAMS,
    };
    let mut error = ErrorObject::new(code, format!("Unknown {}: {name:?}", kind.what()));
    if kind == Kind::Resources {
        error.data = Some(serde_json::json!({ "uri": name }));
    }
    error
}

/// Whether `text` matches `glob`: `*` any run of characters (none too), `?`
/// exactly one, anything else itself. Linear backtracking over the last `*`.
pub(crate) fn glob_matches(glob: &str, text: &str) -> bool {
    let glob: Vec<char> = glob.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut g, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, t));
                g += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                g += 1;
                t += 1;
            }
            _ => match star {
                Some((star_g, star_t)) => {
                    g = star_g + 1;
                    t = star_t + 1;
                    star = Some((star_g, star_t + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn policy(text: &str) -> PolicyConfig {
        toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn globs() {
        let cases = [
            ("*", "", true),
            ("*", "anything", true),
            ("echo", "echo", true),
            ("echo", "echo2", false),
            ("py_*", "py_echo", true),
            ("py_*", "ts2_echo", false),
            ("*_delete", "files_delete", true),
            ("*_delete", "files_delete_all", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*a*b*", "xxaxxbxx", true),
            ("*a*b*", "xxbxxaxx", false),
            ("py+test://*", "py+test://static/hello", true),
            ("é?", "éè", true),
        ];
        for (glob, text, expected) in cases {
            assert_eq!(glob_matches(glob, text), expected, "{glob:?} on {text:?}");
        }
    }

    #[test]
    fn the_first_entry_naming_the_caller_applies() {
        let policies = [
            policy("path = \"/mcp\"\nsubjects = [\"alice\"]"),
            policy("path = \"/mcp\"\ngroups = [\"ops\"]"),
            policy("path = \"/mcp\"\nscopes = [\"mcp:admin\", \"mcp:write\"]"),
            policy("path = \"/mcp\""),
            policy("path = \"/other\"\nsubjects = [\"bob\"]"),
        ];
        let groups: GroupsConfig = BTreeMap::from([("ops".to_owned(), vec!["carol".to_owned(), "alice".to_owned()])]);
        let admin = ["mcp:admin".to_owned(), "mcp:write".to_owned()];
        let half = ["mcp:admin".to_owned()];
        type Case<'a> = (&'a str, &'a str, &'a str, Option<&'a [String]>, Selection);
        let cases: [Case<'_>; 8] = [
            ("by subject", "/mcp", "alice", None, Selection::Narrowed(Some(0))),
            ("by group", "/mcp", "carol", None, Selection::Narrowed(Some(1))),
            (
                "by every scope",
                "/mcp",
                "dave",
                Some(&admin),
                Selection::Narrowed(Some(2)),
            ),
            (
                "some scopes only: the catch-all",
                "/mcp",
                "dave",
                Some(&half),
                Selection::Narrowed(Some(3)),
            ),
            (
                "anonymous: the catch-all",
                "/mcp",
                "",
                None,
                Selection::Narrowed(Some(3)),
            ),
            (
                "a trailing slash is the same path",
                "/mcp/",
                "alice",
                None,
                Selection::Narrowed(Some(0)),
            ),
            (
                "no catch-all: narrowed, no rules",
                "/other",
                "alice",
                None,
                Selection::Narrowed(None),
            ),
            (
                "a path without policies",
                "/free",
                "alice",
                None,
                Selection::Unrestricted,
            ),
        ];
        for (what, path, subject, scopes, expected) in cases {
            let caller = Caller { subject, scopes };
            assert_eq!(select(&policies, &groups, path, caller), expected, "{what}");
        }
    }

    const RULES: &str = r#"
path = "/mcp"
[tools]
allow = ["py_*", "ts2_*"]
deny = ["*_delete"]
rename = { py_echo = "say", py_add = "ts2_add" }
descriptions = { py_echo = "Says it back.", ts2_echo = "Echoes." }
[prompts]
deny = ["secret*"]
rename = { welcome = "hi" }
[resources]
deny = ["py+test://private/*"]
descriptions = { "py+test://static/hello" = "A greeting." }
"#;

    #[test]
    fn names_exposed_and_restored() {
        let rules = policy(RULES);
        let catalog = Catalog::new(Some(&rules));
        use Kind::{Prompts, Resources, Tools};
        let cases = [
            ("renamed", Tools, "py_echo", Some("say")),
            ("kept", Tools, "ts2_echo", Some("ts2_echo")),
            ("not allowed", Tools, "everything_echo", None),
            ("denied over allowed", Tools, "py_delete", None),
            ("shadowed by a rename to its name", Tools, "ts2_add", None),
            ("renamed onto a shadowed name", Tools, "py_add", Some("ts2_add")),
            ("a prompt denied", Prompts, "secret_plan", None),
            ("a prompt kept (no allow list)", Prompts, "greet", Some("greet")),
            ("a resource denied", Resources, "py+test://private/key", None),
            (
                "a resource kept",
                Resources,
                "py+test://static/hello",
                Some("py+test://static/hello"),
            ),
        ];
        for (what, kind, name, exposed) in cases {
            assert_eq!(catalog.expose(kind, name), exposed, "{what}: expose");
            if let Some(exposed) = exposed {
                assert_eq!(catalog.restore(kind, exposed), Some(name), "{what}: restore");
            }
        }
        let unknown = [
            ("renamed away", Tools, "py_echo"),
            ("never allowed", Tools, "everything_echo"),
            ("denied", Tools, "py_delete"),
            ("denied prompt", Prompts, "secret_plan"),
        ];
        for (what, kind, name) in unknown {
            assert_eq!(catalog.restore(kind, name), None, "{what}");
        }
        let open = Catalog::new(None);
        assert_eq!(open.expose(Tools, "everything_echo"), Some("everything_echo"));
        assert_eq!(open.restore(Tools, "everything_echo"), Some("everything_echo"));
    }

    #[test]
    fn lists_filtered_renamed_described_and_private() {
        let rules = policy(RULES);
        let catalog = Catalog::new(Some(&rules));
        let tools = ListShape::of("tools/list").expect("a list");
        let resources = ListShape::of("resources/list").expect("a list");
        let templates = ListShape::of("resources/templates/list").expect("a list");
        let cases = [
            (
                "tools, modern: hidden, renamed, described, private; the rest untouched",
                tools,
                Era::Modern,
                json!({"tools": [
                    {"name": "py_echo", "description": "echo", "inputSchema": {}, "x": 1},
                    {"name": "py_delete"},
                    {"name": "ts2_add", "description": "ts2's"},
                    {"name": "py_add"},
                    {"name": "ts2_echo"},
                    {"name": "everything_echo"}],
                    "nextCursor": "c", "ttlMs": 5000, "cacheScope": "public", "_meta": {"k": 1}}),
                json!({"tools": [
                    {"name": "say", "description": "Says it back.", "inputSchema": {}, "x": 1},
                    {"name": "ts2_add"},
                    {"name": "ts2_echo", "description": "Echoes."}],
                    "nextCursor": "c", "ttlMs": 5000, "cacheScope": "private", "_meta": {"k": 1}}),
                3,
            ),
            (
                "tools, legacy: no caching hints added",
                tools,
                Era::Legacy,
                json!({"tools": [{"name": "py_echo"}, {"name": "other"}]}),
                json!({"tools": [{"name": "say", "description": "Says it back."}]}),
                1,
            ),
            (
                "resources by URI",
                resources,
                Era::Legacy,
                json!({"resources": [{"uri": "py+test://private/key"}, {"uri": "py+test://static/hello", "name": "hello"}]}),
                json!({"resources": [{"uri": "py+test://static/hello", "name": "hello", "description": "A greeting."}]}),
                1,
            ),
            (
                "templates by URI template",
                templates,
                Era::Modern,
                json!({"resourceTemplates": [{"uriTemplate": "py+test://private/{id}"}, {"uriTemplate": "py+test://items/{id}"}]}),
                json!({"resourceTemplates": [{"uriTemplate": "py+test://items/{id}"}], "ttlMs": 0, "cacheScope": "private"}),
                1,
            ),
        ];
        for (what, shape, era, mut result, expected, removed) in cases {
            assert_eq!(catalog.restrict(shape, &mut result, era), removed, "{what}");
            assert_eq!(result, expected, "{what}");
        }
        let mut unruled = json!({"tools": [{"name": "a"}], "cacheScope": "public", "ttlMs": 9});
        Catalog::new(None).restrict(tools, &mut unruled, Era::Modern);
        assert_eq!(
            unruled,
            json!({"tools": [{"name": "a"}], "cacheScope": "private", "ttlMs": 9}),
            "a caller no entry names sees everything, privately"
        );
    }

    #[test]
    fn unsolicited_notifications_shown_only_for_what_the_caller_sees() {
        let rules = policy(RULES);
        let catalog = Catalog::new(Some(&rules));
        let cases = [
            (
                "an update of a denied resource",
                "notifications/resources/updated",
                Some(json!({"uri": "py+test://private/k"})),
                false,
            ),
            (
                "an update of a seen resource",
                "notifications/resources/updated",
                Some(json!({"uri": "py+test://static/hello", "_meta": {}})),
                true,
            ),
            ("an update without a URI", "notifications/resources/updated", None, true),
            (
                "a list change",
                "notifications/resources/list_changed",
                Some(json!({})),
                true,
            ),
            (
                "progress names a token, not a tool",
                "notifications/progress",
                Some(json!({"progressToken": "py_echo", "progress": 1})),
                true,
            ),
        ];
        for (what, method, params, shown) in cases {
            assert_eq!(catalog.shows(method, params.as_ref()), shown, "{what}");
        }
        let update = json!({"uri": "py+test://private/k"});
        assert!(
            Catalog::new(None).shows("notifications/resources/updated", Some(&update)),
            "a caller no entry names sees every update"
        );
    }

    #[test]
    fn requests_checked_and_given_their_own_names() {
        let rules = policy(RULES);
        let catalog = Catalog::new(Some(&rules));
        let cases = [
            (
                "a renamed tool routes back",
                "tools/call",
                json!({"name": "say", "arguments": {"a": 1}}),
                Ok(json!({"name": "py_echo", "arguments": {"a": 1}})),
            ),
            (
                "a kept tool passes",
                "tools/call",
                json!({"name": "ts2_echo"}),
                Ok(json!({"name": "ts2_echo"})),
            ),
            (
                "the old name of a renamed tool is unknown",
                "tools/call",
                json!({"name": "py_echo"}),
                Err(-32602),
            ),
            (
                "a denied tool is unknown",
                "tools/call",
                json!({"name": "py_delete"}),
                Err(-32602),
            ),
            (
                "a denied prompt is unknown",
                "prompts/get",
                json!({"name": "secret"}),
                Err(-32602),
            ),
            (
                "a denied resource is not found",
                "resources/read",
                json!({"uri": "py+test://private/k"}),
                Err(-32002),
            ),
            (
                "a denied resource cannot be subscribed",
                "resources/subscribe",
                json!({"uri": "py+test://private/k"}),
                Err(-32002),
            ),
            (
                "a completion of a denied prompt",
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "secret"}, "argument": {"name": "a", "value": ""}}),
                Err(-32602),
            ),
            (
                "a completion of a kept prompt",
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "greet"}}),
                Ok(json!({"ref": {"type": "ref/prompt", "name": "greet"}})),
            ),
            (
                "a completion of a renamed prompt routes back",
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "hi"}, "argument": {"name": "a", "value": ""}}),
                Ok(json!({"ref": {"type": "ref/prompt", "name": "welcome"}, "argument": {"name": "a", "value": ""}})),
            ),
            (
                "a completion of a prompt renamed away",
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "welcome"}}),
                Err(-32602),
            ),
            (
                "a completion of a denied resource template",
                "completion/complete",
                json!({"ref": {"type": "ref/resource", "uri": "py+test://private/{id}"}}),
                Err(-32002),
            ),
            (
                "a listen loses the subscriptions the caller may not see",
                "subscriptions/listen",
                json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": [
                    "py+test://private/k", "py+test://static/hello", 7, "py+test://private/j"]}, "_meta": {"m": 1}}),
                Ok(
                    json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": [
                    "py+test://static/hello", 7]}, "_meta": {"m": 1}}),
                ),
            ),
            (
                "a listen without subscriptions passes",
                "subscriptions/listen",
                json!({"notifications": {"promptsListChanged": true}}),
                Ok(json!({"notifications": {"promptsListChanged": true}})),
            ),
            (
                "a listen whose every subscription is hidden asks for none",
                "subscriptions/listen",
                json!({"notifications": {"resourceSubscriptions": ["py+test://private/k"]}}),
                Ok(json!({"notifications": {"resourceSubscriptions": []}})),
            ),
            (
                "other methods pass",
                "tools/list",
                json!({"cursor": "x"}),
                Ok(json!({"cursor": "x"})),
            ),
            (
                "no name: the server answers",
                "tools/call",
                json!({"arguments": {}}),
                Ok(json!({"arguments": {}})),
            ),
        ];
        for (what, method, mut params, expected) in cases {
            let outcome = catalog.admit(method, Some(&mut params));
            match expected {
                Ok(rewritten) => {
                    assert_eq!(outcome, Ok(()), "{what}");
                    assert_eq!(params, rewritten, "{what}");
                }
                Err(code) => {
                    let error = outcome.expect_err(what);
                    assert_eq!(error.code.0, code, "{what}");
                    assert!(error.message.starts_with("Unknown "), "{what}: {}", error.message);
                }
            }
        }
    }
}
