//! Scopes per method and per tool (`[auth.oauth.scopes_for]`): which scopes an OAuth
//! token needs for one JSON-RPC message, on top of `required_scopes`, and which tools a
//! token may see in `tools/list` ([`ToolView`]). Pure.
//!
//! A rule is keyed by a method (`"tools/call"`) or by a method and the name it acts on
//! (`"tools/call:delete_file"`, `"prompts/get:NAME"`, `"resources/read:URI"`). A name
//! ending in `*` is a prefix (`"tools/call:delete_*"`). A message needs the union of
//! every rule that matches it: the method's, the exact name's and each matching prefix's.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::protocol::method::named_param;

/// The rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ScopePolicy {
    /// Rules by method, and by method and exact name (`"tools/call:wipe"`).
    exact: BTreeMap<String, Vec<String>>,
    /// Rules by method and a name prefix: (`"tools/call"`, `"delete_"`, scopes).
    prefixes: Vec<(String, String, Vec<String>)>,
}

impl ScopePolicy {
    /// The policy of `[auth.oauth.scopes_for]`.
    pub(crate) fn new(rules: &BTreeMap<String, Vec<String>>) -> ScopePolicy {
        let mut policy = ScopePolicy::default();
        for (key, scopes) in rules {
            match key.split_once(':') {
                Some((method, name)) if name.ends_with('*') => {
                    let prefix = name.trim_end_matches('*');
                    policy
                        .prefixes
                        .push((method.to_owned(), prefix.to_owned(), scopes.clone()));
                }
                _ => {
                    policy.exact.insert(key.clone(), scopes.clone());
                }
            }
        }
        policy
    }

    /// Whether there is any rule.
    pub(crate) fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefixes.is_empty()
    }

    /// Whether some rule names a single tool, so that callers with different scopes
    /// may call different tools (and must see different `tools/list` results).
    pub(crate) fn has_tool_rules(&self) -> bool {
        self.names_for("tools/call")
    }

    /// The scopes `method` needs that `granted` lacks; empty when none. `name_in(member)`
    /// reads the member of the params that names what `method` acts on (`"name"`,
    /// `"uri"`); it is asked only when a rule for `method` names something, since reading
    /// it may build the params' tree.
    pub(crate) fn missing<'p>(
        &self,
        granted: &[String],
        method: &str,
        name_in: impl FnOnce(&'static str) -> Option<&'p str>,
    ) -> Vec<String> {
        if self.is_empty() {
            return Vec::new();
        }
        let name = match named_param(method) {
            Some(member) if self.names_for(method) => name_in(member),
            _ => None,
        };
        self.missing_for(granted, method, name)
    }

    /// Whether a rule for `method` names what it acts on (exactly or by a prefix).
    fn names_for(&self, method: &str) -> bool {
        self.prefixes.iter().any(|(m, _, _)| m == method)
            || self
                .exact
                .keys()
                .any(|key| key.split_once(':').is_some_and(|(m, _)| m == method))
    }

    /// The scopes `method` acting on `name` (if it names anything) needs that
    /// `granted` lacks; empty when none.
    pub(crate) fn missing_for(&self, granted: &[String], method: &str, name: Option<&str>) -> Vec<String> {
        let by_name = name.and_then(|name| self.exact.get(&format!("{method}:{name}")));
        let by_prefix = self
            .prefixes
            .iter()
            .filter(|(m, prefix, _)| m == method && name.is_some_and(|name| name.starts_with(prefix.as_str())))
            .map(|(_, _, scopes)| scopes);
        let mut missing: Vec<String> = Vec::new();
        for scope in self
            .exact
            .get(method)
            .into_iter()
            .chain(by_name)
            .chain(by_prefix)
            .flatten()
        {
            if !granted.contains(scope) && !missing.contains(scope) {
                missing.push(scope.clone());
            }
        }
        missing
    }
}

/// Which tools one token may call, and so may see in `tools/list`.
#[derive(Clone, Debug)]
pub(crate) struct ToolView {
    policy: Arc<ScopePolicy>,
    granted: Arc<[String]>,
}

impl ToolView {
    /// The view of a token granted `granted` under `policy`.
    pub(crate) fn new(policy: Arc<ScopePolicy>, granted: Arc<[String]>) -> ToolView {
        ToolView { policy, granted }
    }

    /// Whether the token may call the tool `name`.
    pub(crate) fn may_call(&self, name: &str) -> bool {
        self.policy
            .missing_for(&self.granted, "tools/call", Some(name))
            .is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// What the gateway reads from a request's params: the member naming what it acts on.
    fn name_in<'p>(params: &'p Value) -> impl FnOnce(&'static str) -> Option<&'p str> + 'p {
        move |member| params.get(member)?.as_str()
    }

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
        let (echo, wipe, secret) = (call("echo"), call("wipe"), json!({"uri": "file:///secret"}));
        assert!(
            policy
                .missing(&granted(&["mcp:tools"]), "tools/call", name_in(&echo))
                .is_empty()
        );
        assert_eq!(
            policy.missing(&granted(&[]), "tools/call", name_in(&echo)),
            ["mcp:tools"]
        );
        assert_eq!(
            policy.missing(&granted(&["mcp:tools"]), "tools/call", name_in(&wipe)),
            ["mcp:admin"]
        );
        assert_eq!(
            policy.missing(&granted(&[]), "tools/call", name_in(&wipe)),
            ["mcp:tools", "mcp:admin"]
        );
        assert!(policy.missing(&granted(&[]), "tools/list", |_| None).is_empty());
        assert_eq!(
            policy.missing(&granted(&[]), "resources/read", name_in(&secret)),
            ["mcp:secret"]
        );
    }

    #[test]
    fn a_name_ending_in_a_star_is_a_prefix() {
        let rules = BTreeMap::from([
            ("tools/call:delete_*".to_owned(), vec!["mcp:admin".to_owned()]),
            ("tools/call:delete_all".to_owned(), vec!["mcp:root".to_owned()]),
            ("prompts/get:*".to_owned(), vec!["mcp:prompts".to_owned()]),
        ]);
        let policy = ScopePolicy::new(&rules);
        // (method, name, granted, missing)
        type Case<'a> = (&'a str, Option<&'a str>, &'a [&'a str], &'a [&'a str]);
        let cases: [Case; 7] = [
            ("tools/call", Some("delete_file"), &[], &["mcp:admin"]),
            ("tools/call", Some("delete_file"), &["mcp:admin"], &[]),
            ("tools/call", Some("delete_all"), &[], &["mcp:root", "mcp:admin"]),
            ("tools/call", Some("delete"), &[], &[]),
            ("tools/call", Some("undelete_file"), &[], &[]),
            ("prompts/get", Some("greet"), &[], &["mcp:prompts"]),
            ("tools/call", None, &[], &[]),
        ];
        for (method, name, granted, missing) in cases {
            let granted: Vec<String> = granted.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(policy.missing_for(&granted, method, name), missing, "{method} {name:?}");
        }
        assert!(policy.has_tool_rules());
        assert!(!ScopePolicy::new(&BTreeMap::from([("tools/call".to_owned(), vec!["a".to_owned()])])).has_tool_rules());

        let view = ToolView::new(Arc::new(policy), Arc::from(vec!["mcp:root".to_owned()]));
        assert!(view.may_call("echo"));
        assert!(
            !view.may_call("delete_file"),
            "mcp:root does not grant the prefix rule's mcp:admin"
        );
    }
}
