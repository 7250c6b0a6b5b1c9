//! The `[[disclosure]]` part of the configuration model: on which paths
//! `tools/list` shows a few tools and eragate's search meta-tools instead of
//! every tool, and the checks types cannot make. Applied by
//! `crate::bridge::disclosure`.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::ConfigIssue;

/// Most results one search may ask for.
pub(crate) const MAX_SEARCH_LIMIT: usize = 50;

/// `[[disclosure]]`: how one path discloses its tools.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DisclosureConfig {
    /// The MCP path (an `[[upstreams]]` `path`, federated or not).
    pub(crate) path: String,
    /// `off` lists every tool; `search` lists the `always` tools and the meta-tools.
    #[serde(default)]
    pub(crate) mode: DisclosureMode,
    /// Search only when the caller may see more tools than this on the path.
    #[serde(default)]
    pub(crate) threshold: usize,
    /// Globs of tools always listed in full (names as the path shows them).
    #[serde(default)]
    pub(crate) always: Vec<String>,
    /// Results per search when the caller gives no `limit`.
    #[serde(default = "default_limit")]
    pub(crate) limit: usize,
}

fn default_limit() -> usize {
    5
}

/// What `tools/list` shows on a path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DisclosureMode {
    /// Every tool the caller may see.
    #[default]
    Off,
    /// The `always` tools and the meta-tools that search, load and call the rest.
    Search,
}

/// What types cannot check: known paths, one entry a path, a sane limit.
pub(crate) fn disclosure_issues<'a>(
    entries: &[DisclosureConfig],
    paths: impl Iterator<Item = &'a str>,
) -> Vec<ConfigIssue> {
    let paths: BTreeSet<&str> = paths.collect();
    let mut seen = BTreeSet::new();
    let mut issues = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("disclosure[{i}]");
        let mut push = |key: &str, message: String| {
            issues.push(ConfigIssue {
                path: format!("{at}.{key}"),
                message,
            });
        };
        if !paths.contains(entry.path.as_str()) {
            push("path", format!("{:?} is no [[upstreams]] path", entry.path));
        } else if !seen.insert(entry.path.as_str()) {
            push("path", format!("{:?} has another [[disclosure]] entry", entry.path));
        }
        if entry.limit == 0 || entry.limit > MAX_SEARCH_LIMIT {
            push("limit", format!("must be between 1 and {MAX_SEARCH_LIMIT}"));
        }
        if entry.always.iter().any(String::is_empty) {
            push("always", "must not hold an empty glob".into());
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> DisclosureConfig {
        match toml::from_str(text) {
            Ok(entry) => entry,
            Err(error) => panic!("{text}: {error}"),
        }
    }

    #[test]
    fn defaults_are_off_with_five_results() {
        let parsed = entry(r#"path = "/mcp""#);
        assert_eq!(parsed.mode, DisclosureMode::Off);
        assert_eq!((parsed.threshold, parsed.limit), (0, 5));
        assert!(parsed.always.is_empty());
    }

    #[test]
    fn wrong_entries_are_named() {
        let cases: &[(&[&str], &[&str])] = &[
            (
                &[r#"path = "/mcp"
mode = "search""#],
                &[],
            ),
            (&[r#"path = "/elsewhere""#], &["disclosure[0].path"]),
            (&[r#"path = "/mcp""#, r#"path = "/mcp""#], &["disclosure[1].path"]),
            (
                &[r#"path = "/mcp"
limit = 0"#],
                &["disclosure[0].limit"],
            ),
            (
                &[r#"path = "/mcp"
limit = 51"#],
                &["disclosure[0].limit"],
            ),
            (
                &[r#"path = "/mcp"
always = [""]"#],
                &["disclosure[0].always"],
            ),
        ];
        for (texts, expected) in cases {
            let entries: Vec<DisclosureConfig> = texts.iter().map(|t| entry(t)).collect();
            let issues = disclosure_issues(&entries, ["/mcp"].into_iter());
            let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
            assert_eq!(paths, *expected, "{texts:?}: {issues:?}");
        }
    }

    #[test]
    fn an_unknown_mode_is_refused() {
        let parsed: Result<DisclosureConfig, _> = toml::from_str("path = \"/mcp\"\nmode = \"all\"");
        assert!(parsed.is_err());
    }
}
