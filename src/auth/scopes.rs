//! Scopes per method and per tool (`[auth.oauth.scopes_for]`): which scopes an OAuth
//! token needs for one JSON-RPC message, on top of `required_scopes`. Pure.
//!
//! A rule is keyed by a method (`"tools/call"`) or by a method and the name it acts on
//! (`"tools/call:delete_file"`, `"prompts/get:NAME"`, `"resources/read:URI"`); a message
//! needs the union of both rules that match it.

use std::collections::BTreeMap;

use serde_json::Value;

/// The rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScopePolicy {
    rules: BTreeMap<String, Vec<String>>,
}

impl ScopePolicy {
    /// The policy of `[auth.oauth.scopes_for]`.
    pub fn new(rules: &BTreeMap<String, Vec<String>>) -> ScopePolicy {
        ScopePolicy { rules: rules.clone() }
    }

    /// Whether there is any rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The scopes `method` on `params` needs that `granted` lacks; empty when none.
    pub fn missing(&self, granted: &[String], method: &str, params: Option<&Value>) -> Vec<String> {
        if self.rules.is_empty() {
            return Vec::new();
        }
        let named = named_param(method)
            .and_then(|member| params?.get(member)?.as_str())
            .and_then(|name| self.rules.get(&format!("{method}:{name}")));
        let mut missing: Vec<String> = Vec::new();
        for scope in self.rules.get(method).into_iter().chain(named).flatten() {
            if !granted.contains(scope) && !missing.contains(scope) {
                missing.push(scope.clone());
            }
        }
        missing
    }

    /// Every scope the rules name, for the metadata's `scopes_supported`.
    pub fn scopes(&self) -> impl Iterator<Item = &String> {
        self.rules.values().flatten()
    }
}

/// The `params` member naming what a method acts on.
pub fn named_param(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_by_method_and_by_name_add_up() {
        let rules = BTreeMap::from([
            ("tools/call".to_owned(), vec!["mcp:tools".to_owned()]),
            ("tools/call:wipe".to_owned(), vec!["mcp:admin".to_owned()]),
            (
                "resources/read:file:///secret".to_owned(),
                vec!["mcp:secret".to_owned()],
            ),
        ]);
        let policy = ScopePolicy::new(&rules);
        let granted = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let call = |name: &str| json!({"name": name, "arguments": {}});
        assert!(
            policy
                .missing(&granted(&["mcp:tools"]), "tools/call", Some(&call("echo")))
                .is_empty()
        );
        assert_eq!(
            policy.missing(&granted(&[]), "tools/call", Some(&call("echo"))),
            ["mcp:tools"]
        );
        assert_eq!(
            policy.missing(&granted(&["mcp:tools"]), "tools/call", Some(&call("wipe"))),
            ["mcp:admin"]
        );
        assert_eq!(
            policy.missing(&granted(&[]), "tools/call", Some(&call("wipe"))),
            ["mcp:tools", "mcp:admin"]
        );
        assert!(policy.missing(&granted(&[]), "tools/list", None).is_empty());
        assert_eq!(
            policy.missing(&granted(&[]), "resources/read", Some(&json!({"uri": "file:///secret"}))),
            ["mcp:secret"]
        );
    }
}
