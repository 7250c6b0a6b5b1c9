//! `ttlMs` / `cacheScope` policy for the six cacheable 2026-07-28 results.

use serde_json::{Map, Value};

/// Who may reuse a cached result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Any client, shared gateway or proxy may serve it across users.
    Public,
    /// Only within the same authorization context.
    Private,
}

impl CacheScope {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        }
    }
}

/// The caching hints an upstream's results get.
///
/// A `None` field keeps what the upstream said, falling back to the
/// conservative SDK default (`0`, `"private"`) when it said nothing; a `Some`
/// field overrides the upstream. The same scope goes on every page of a list
/// because the policy, not the page, decides it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CachePolicy {
    /// Freshness in milliseconds; `None` keeps the upstream's (default 0).
    pub ttl_ms: Option<u64>,
    /// Scope; `None` keeps the upstream's (default private).
    pub scope: Option<CacheScope>,
}

impl CachePolicy {
    /// Writes `ttlMs` and `cacheScope` into a complete cacheable result.
    pub fn apply(&self, result: &mut Map<String, Value>) {
        let ttl = match (self.ttl_ms, result.get("ttlMs").and_then(Value::as_i64)) {
            (Some(forced), _) => forced,
            (None, Some(upstream)) => upstream.max(0) as u64,
            (None, None) => 0,
        };
        let upstream_scope = match result.get("cacheScope").and_then(Value::as_str) {
            Some("public") => Some(CacheScope::Public),
            Some("private") => Some(CacheScope::Private),
            _ => None,
        };
        let scope = self.scope.or(upstream_scope).unwrap_or(CacheScope::Private);
        result.insert("ttlMs".into(), Value::from(ttl));
        result.insert("cacheScope".into(), Value::from(scope.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn applied(policy: CachePolicy, result: Value) -> Value {
        let mut object = result.as_object().cloned().unwrap();
        policy.apply(&mut object);
        Value::Object(object)
    }

    #[test]
    fn policy_table() {
        let default = CachePolicy::default();
        let forced = CachePolicy {
            ttl_ms: Some(60_000),
            scope: Some(CacheScope::Public),
        };
        let cases = [
            (
                default,
                json!({"tools": []}),
                json!({"tools": [], "ttlMs": 0, "cacheScope": "private"}),
            ),
            (
                default,
                json!({"ttlMs": 5000, "cacheScope": "public"}),
                json!({"ttlMs": 5000, "cacheScope": "public"}),
            ),
            (
                default,
                json!({"ttlMs": -3, "cacheScope": "bogus"}),
                json!({"ttlMs": 0, "cacheScope": "private"}),
            ),
            (
                forced,
                json!({"ttlMs": 5, "cacheScope": "private"}),
                json!({"ttlMs": 60000, "cacheScope": "public"}),
            ),
            (forced, json!({}), json!({"ttlMs": 60000, "cacheScope": "public"})),
        ];
        for (policy, input, expected) in cases {
            assert_eq!(applied(policy, input.clone()), expected, "{input}");
        }
    }
}
