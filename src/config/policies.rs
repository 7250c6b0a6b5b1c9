//! The `[[policies]]` and `[groups]` part of the configuration model: what one
//! principal may see and call on a path (tools, prompts and resources allowed
//! or denied by glob, renamed, described anew), and the checks types cannot make.
//! The rules themselves are applied by [`crate::policy::catalog`].

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::ConfigIssue;

/// `[[policies]]`: one rule set for the callers it names on one path.
#[derive(Clone, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyConfig {
    /// The MCP path (an `[[upstreams]]` `path`, federated or not) it applies on.
    pub(crate) path: String,
    /// The principals it applies to (a static token's `principal`, an OAuth token's `sub`).
    #[serde(default)]
    pub(crate) subjects: Vec<String>,
    /// The `[groups]` whose members it applies to.
    #[serde(default)]
    pub(crate) groups: Vec<String>,
    /// It applies to an OAuth token granted every one of these scopes.
    #[serde(default)]
    pub(crate) scopes: Vec<String>,
    /// `[policies.tools]`: which tools, under which names and descriptions.
    #[serde(default)]
    pub(crate) tools: KindPolicyConfig,
    /// `[policies.prompts]`: which prompts, under which names and descriptions.
    #[serde(default)]
    pub(crate) prompts: KindPolicyConfig,
    /// `[policies.resources]`: which resources and templates (by URI or URI
    /// template), under which descriptions. Resources are not renamed.
    #[serde(default)]
    pub(crate) resources: KindPolicyConfig,
}

impl PolicyConfig {
    /// Whether the entry names no caller: it applies to every caller on its path.
    pub(crate) fn applies_to_everyone(&self) -> bool {
        self.subjects.is_empty() && self.groups.is_empty() && self.scopes.is_empty()
    }
}

/// The rules for one kind of thing a server offers. Every name here is the one
/// the path exposes without a policy (a federated member's prefix included).
#[derive(Clone, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct KindPolicyConfig {
    /// Globs (`*` any run of characters, `?` one): when any is given, only names
    /// matching one are offered.
    pub(crate) allow: Vec<String>,
    /// Globs: names matching one are never offered (deny wins over allow).
    pub(crate) deny: Vec<String>,
    /// Names shown under another name: the caller lists and calls the new one,
    /// and the old one is unknown to it.
    pub(crate) rename: BTreeMap<String, String>,
    /// Descriptions shown instead of the server's own.
    pub(crate) descriptions: BTreeMap<String, String>,
}

/// `[groups]`: named groups of principals, which `[[policies]] groups` name.
pub(crate) type GroupsConfig = BTreeMap<String, Vec<String>>;

/// What types alone cannot check in `[[policies]]` and `[groups]`.
pub(crate) fn policy_issues<'a>(
    policies: &[PolicyConfig],
    groups: &GroupsConfig,
    paths: impl Iterator<Item = &'a str>,
) -> Vec<ConfigIssue> {
    let paths: BTreeSet<&str> = paths.collect();
    let mut issues = Vec::new();
    let mut push = |path: String, message: String| issues.push(ConfigIssue { path, message });
    for (name, members) in groups {
        if members.iter().any(String::is_empty) {
            push(format!("groups.{name}"), "a member must not be empty".into());
        }
    }
    for (i, policy) in policies.iter().enumerate() {
        let at = format!("policies[{i}]");
        if !paths.contains(policy.path.as_str()) {
            push(
                format!("{at}.path"),
                format!("{:?} is no [[upstreams]] path", policy.path),
            );
        }
        for group in &policy.groups {
            if !groups.contains_key(group) {
                push(format!("{at}.groups"), format!("{group:?} is not defined in [groups]"));
            }
        }
        for (key, list) in [("subjects", &policy.subjects), ("scopes", &policy.scopes)] {
            if list.iter().any(String::is_empty) {
                push(format!("{at}.{key}"), "must not hold an empty string".into());
            }
        }
        for (kind, rules) in [
            ("tools", &policy.tools),
            ("prompts", &policy.prompts),
            ("resources", &policy.resources),
        ] {
            for (key, globs) in [("allow", &rules.allow), ("deny", &rules.deny)] {
                if globs.iter().any(String::is_empty) {
                    push(format!("{at}.{kind}.{key}"), "a glob must not be empty".into());
                }
            }
            if kind == "resources" && !rules.rename.is_empty() {
                push(
                    format!("{at}.resources.rename"),
                    "resources keep their URIs; only tools and prompts are renamed".into(),
                );
                continue;
            }
            let mut targets = BTreeMap::new();
            for (from, to) in &rules.rename {
                if from.is_empty() || to.is_empty() {
                    push(format!("{at}.{kind}.rename"), "names must not be empty".into());
                } else if rules.rename.contains_key(to) && to != from {
                    push(
                        format!("{at}.{kind}.rename.{from}"),
                        format!("{to:?} is itself renamed; a name is renamed once"),
                    );
                }
                if let Some(first) = targets.insert(to, from) {
                    push(
                        format!("{at}.{kind}.rename.{from}"),
                        format!("{to:?} is also {first:?}'s new name; each name needs its own"),
                    );
                }
            }
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str) -> PolicyConfig {
        toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn mistakes_are_named_by_their_key() {
        let groups: GroupsConfig = BTreeMap::from([("ops".to_owned(), vec!["alice".to_owned()])]);
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "a good entry",
                "path = \"/mcp\"\nsubjects = [\"bob\"]\ngroups = [\"ops\"]\n[tools]\ndeny = [\"*_delete\"]\nrename = { a = \"b\" }",
                &[],
            ),
            ("an unknown path", "path = \"/nope\"", &["policies[0].path"]),
            (
                "an unknown group",
                "path = \"/mcp\"\ngroups = [\"devs\"]",
                &["policies[0].groups"],
            ),
            (
                "an empty subject",
                "path = \"/mcp\"\nsubjects = [\"\"]",
                &["policies[0].subjects"],
            ),
            (
                "an empty glob",
                "path = \"/mcp\"\n[prompts]\nallow = [\"\"]",
                &["policies[0].prompts.allow"],
            ),
            (
                "a renamed resource",
                "path = \"/mcp\"\n[resources]\nrename = { \"a://x\" = \"a://y\" }",
                &["policies[0].resources.rename"],
            ),
            (
                "two names renamed alike",
                "path = \"/mcp\"\n[tools]\nrename = { a = \"c\", b = \"c\" }",
                &["policies[0].tools.rename.b"],
            ),
            (
                "a chain of renames",
                "path = \"/mcp\"\n[tools]\nrename = { a = \"b\", b = \"c\" }",
                &["policies[0].tools.rename.a"],
            ),
        ];
        for (what, text, expected) in cases {
            let issues = policy_issues(&[policy(text)], &groups, ["/mcp"].into_iter());
            let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
            assert_eq!(paths, *expected, "{what}: {issues:?}");
        }
    }
}
