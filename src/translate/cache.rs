//! `ttlMs` / `cacheScope` for the six cacheable 2026-07-28 results: the one
//! place where eragate decides what it can promise about a result's freshness
//! and audience (`CachePolicy::hints`), and the digest lists are compared by.
//! Pure: the facts (how a change would be noticed, who the result may differ
//! for) are worked out by the caller and handed in.

use std::hash::{Hash, Hasher};

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
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        }
    }

    fn parse(text: &str) -> Option<CacheScope> {
        match text {
            "public" => Some(CacheScope::Public),
            "private" => Some(CacheScope::Private),
            _ => None,
        }
    }
}

/// The longest `ttlMs` eragate states when no `[upstreams.cache] ttl_ms` caps it.
pub(crate) const DEFAULT_MAX_TTL_MS: u64 = 60_000;

/// How eragate would learn that a result changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Watch {
    /// It would not: a read, a discover, or a list it does not keep.
    #[default]
    Blind,
    /// The upstream announces changes (`list_changed`) on a session eragate
    /// keeps open and listens to: a change is known as soon as it is made.
    Notified,
    /// eragate lists again when its copy is this many milliseconds old and
    /// compares digests: a change is known within that time.
    Relisted(u32),
}

/// Whether the result may differ with who asks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Audience {
    /// Nothing known either way: the upstream's own scope stands (else private).
    #[default]
    Unproven,
    /// Provably the same for everyone: no per-principal filtering, no
    /// per-principal credential toward the upstream, and every principal that
    /// fetched it got the same digest (or the operator vouched for the upstream).
    Anyone,
    /// It may differ: filtered or renamed for the caller, fetched with the
    /// caller's own credential, or two principals got different digests.
    PerCaller,
}

/// The caching hints a result gets: the configured bounds, and the facts of
/// this result. Small (it rides along with every call in flight).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachePolicy {
    /// The longest `ttlMs` to state (`[upstreams.cache] ttl_ms`, default
    /// [`DEFAULT_MAX_TTL_MS`]).
    pub(crate) max_ttl_ms: u64,
    /// `[upstreams.cache] scope`: `private` makes every result private;
    /// `public` vouches that the upstream answers everyone alike (an
    /// [`Audience::Unproven`] result becomes public, a per-caller one stays private).
    pub(crate) scope: Option<CacheScope>,
    /// How a change would be noticed.
    pub(crate) watch: Watch,
    /// Who the result may differ for.
    pub(crate) audience: Audience,
}

impl Default for CachePolicy {
    fn default() -> CachePolicy {
        CachePolicy {
            max_ttl_ms: DEFAULT_MAX_TTL_MS,
            scope: None,
            watch: Watch::Blind,
            audience: Audience::Unproven,
        }
    }
}

impl CachePolicy {
    /// The same bounds, for a result with these facts.
    pub(crate) fn with_facts(self, watch: Watch, audience: Audience) -> CachePolicy {
        CachePolicy {
            watch,
            audience,
            ..self
        }
    }

    /// The same policy for a result that depends on who asks.
    pub(crate) fn per_caller(self) -> CachePolicy {
        CachePolicy {
            audience: Audience::PerCaller,
            ..self
        }
    }

    /// The rule. `upstream_ttl` and `upstream_scope` are what the upstream
    /// itself said (a 2026-07-28 upstream; a legacy one says nothing).
    ///
    /// - `ttlMs` is what eragate can honour: for a result it watches, the time
    ///   within which it notices a change (its re-list interval; the cap when
    ///   notified); for one it does not, the upstream's own value, else 0. Never
    ///   more than the cap, never more than the upstream's own value.
    /// - `cacheScope` is `public` only when the result provably does not depend
    ///   on who asks: never when configured `private`, when the upstream says
    ///   `private`, or when the audience is per caller; when unproven, the
    ///   upstream's own (or `public` if the operator vouched), else `private`.
    pub(crate) fn hints(&self, upstream_ttl: Option<u64>, upstream_scope: Option<CacheScope>) -> (u64, CacheScope) {
        let cap = self.max_ttl_ms;
        let own = match self.watch {
            Watch::Blind => upstream_ttl.unwrap_or(0),
            Watch::Notified => cap,
            Watch::Relisted(interval) => u64::from(interval),
        };
        let ttl = own.min(cap).min(upstream_ttl.unwrap_or(u64::MAX));
        let scope = match (self.scope, upstream_scope, self.audience) {
            (Some(CacheScope::Private), _, _) | (_, Some(CacheScope::Private), _) | (_, _, Audience::PerCaller) => {
                CacheScope::Private
            }
            (_, _, Audience::Anyone) => CacheScope::Public,
            (vouched, upstream, Audience::Unproven) => upstream.or(vouched).unwrap_or(CacheScope::Private),
        };
        (ttl, scope)
    }

    /// Writes `ttlMs` and `cacheScope` into a complete cacheable result, by
    /// [`CachePolicy::hints`] over what the result already says.
    pub(crate) fn apply(&self, result: &mut Map<String, Value>) {
        let upstream_ttl = result.get("ttlMs").and_then(Value::as_i64).map(|t| t.max(0) as u64);
        let upstream_scope = result
            .get("cacheScope")
            .and_then(Value::as_str)
            .and_then(CacheScope::parse);
        let (ttl, scope) = self.hints(upstream_ttl, upstream_scope);
        result.insert("ttlMs".into(), Value::from(ttl));
        result.insert("cacheScope".into(), Value::from(scope.as_str()));
    }
}

impl CachePolicy {
    /// Whether eragate may keep a modern upstream's `resources/read` result,
    /// and for how long and whom: only when the upstream itself gave it a
    /// positive `ttlMs` (a read eragate cannot watch), bounded by
    /// [`CachePolicy::hints`] (the cap, a configured or per-caller `private`).
    /// `None`: not kept.
    pub(crate) fn keep_read(&self, result: &Map<String, Value>) -> Option<(u64, CacheScope)> {
        let upstream_ttl = result.get("ttlMs").and_then(Value::as_u64)?;
        let upstream_scope = result
            .get("cacheScope")
            .and_then(Value::as_str)
            .and_then(CacheScope::parse);
        let blind = CachePolicy {
            watch: Watch::Blind,
            ..*self
        };
        let (ttl, scope) = blind.hints(Some(upstream_ttl), upstream_scope);
        (ttl > 0).then_some((ttl, scope))
    }
}

/// Restates the hints of a result eragate narrowed for its caller (a list
/// filtered or renamed per principal): the freshness it had, and private.
pub(crate) fn narrowed_for_caller(result: &mut Map<String, Value>) {
    let policy = CachePolicy {
        max_ttl_ms: u64::MAX,
        audience: Audience::PerCaller,
        ..CachePolicy::default()
    };
    policy.apply(result);
}

/// A list result's digest: every member but the caching hints and `_meta`
/// (which say how, not what), so two fetches of the same list compare equal.
/// Stable within a process; never sent anywhere.
pub fn list_digest(result: &Value) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    if let Some(object) = result.as_object() {
        let mut keys: Vec<&String> = object.keys().collect();
        keys.sort_unstable();
        for key in keys {
            if matches!(key.as_str(), "ttlMs" | "cacheScope" | "_meta" | "resultType") {
                continue;
            }
            key.hash(&mut hasher);
            object[key].to_string().hash(&mut hasher);
        }
    } else {
        result.to_string().hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use CacheScope::{Private, Public};
    use serde_json::json;

    fn policy(max: Option<u64>, scope: Option<CacheScope>, watch: Watch, audience: Audience) -> CachePolicy {
        CachePolicy {
            max_ttl_ms: max.unwrap_or(DEFAULT_MAX_TTL_MS),
            scope,
            watch,
            audience,
        }
    }

    #[test]
    fn the_rule() {
        use Audience::{Anyone, PerCaller, Unproven};
        use Watch::{Blind, Notified, Relisted};
        type Case = (
            &'static str,
            CachePolicy,
            Option<u64>,
            Option<CacheScope>,
            (u64, CacheScope),
        );
        #[rustfmt::skip]
        let cases: &[Case] = &[
            ("legacy, unwatched: 0 and private",
             policy(None, None, Blind, Unproven), None, None, (0, Private)),
            ("legacy, notified: the default cap",
             policy(None, None, Notified, Unproven), None, None, (DEFAULT_MAX_TTL_MS, Private)),
            ("notified: the configured cap",
             policy(Some(5_000), None, Notified, Unproven), None, None, (5_000, Private)),
            ("re-listed: the interval",
             policy(None, None, Relisted(10_000), Unproven), None, None, (10_000, Private)),
            ("re-listed: the interval, capped",
             policy(Some(3_000), None, Relisted(10_000), Unproven), None, None, (3_000, Private)),
            ("modern, unwatched: the upstream's own",
             policy(None, None, Blind, Unproven), Some(5_000), Some(Public), (5_000, Public)),
            ("modern, unwatched: the upstream's own, capped",
             policy(Some(1_000), None, Blind, Unproven), Some(5_000), None, (1_000, Private)),
            ("never longer than the upstream's own",
             policy(None, None, Notified, Unproven), Some(2_000), None, (2_000, Private)),
            ("re-listed, the upstream's own shorter",
             policy(None, None, Relisted(10_000), Unproven), Some(0), None, (0, Private)),
            ("seen alike by every principal: public",
             policy(None, None, Notified, Anyone), None, None, (DEFAULT_MAX_TTL_MS, Public)),
            ("filtered or per-principal credential: private whatever the upstream says",
             policy(None, None, Notified, PerCaller), None, Some(Public), (DEFAULT_MAX_TTL_MS, Private)),
            ("the upstream says private: private",
             policy(None, None, Blind, Anyone), Some(7), Some(Private), (7, Private)),
            ("configured private: private",
             policy(None, Some(Private), Notified, Anyone), None, None, (DEFAULT_MAX_TTL_MS, Private)),
            ("the operator vouches: an unproven result is public",
             policy(None, Some(Public), Blind, Unproven), None, None, (0, Public)),
            ("the operator vouches, but the list is per caller: private",
             policy(None, Some(Public), Blind, PerCaller), None, None, (0, Private)),
            ("a cap of 0 states nothing",
             policy(Some(0), None, Notified, Anyone), Some(9), Some(Public), (0, Public)),
            ("narrowed by [[policies]] (or a token's scopes): private, the freshness it had",
             policy(Some(u64::MAX), None, Blind, PerCaller), Some(30_000), Some(Public), (30_000, Private)),
        ];
        for (what, policy, ttl, scope, expected) in cases {
            assert_eq!(policy.hints(*ttl, *scope), *expected, "{what}");
        }
    }

    #[test]
    fn apply_reads_what_the_result_says() {
        let cases = [
            (
                json!({"tools": []}),
                json!({"tools": [], "ttlMs": 0, "cacheScope": "private"}),
            ),
            (
                json!({"ttlMs": 5000, "cacheScope": "public"}),
                json!({"ttlMs": 5000, "cacheScope": "public"}),
            ),
            (
                json!({"ttlMs": -3, "cacheScope": "bogus"}),
                json!({"ttlMs": 0, "cacheScope": "private"}),
            ),
        ];
        for (input, expected) in cases {
            let mut object = input.as_object().cloned().unwrap();
            CachePolicy::default().apply(&mut object);
            assert_eq!(Value::Object(object), expected, "{input}");
        }
    }

    #[test]
    fn a_read_is_kept_only_as_its_upstream_says() {
        use Audience::{PerCaller, Unproven};
        use Watch::Blind;
        #[rustfmt::skip]
        let cases = [
            ("public with a ttl: kept for everyone",
             policy(None, None, Blind, Unproven), json!({"ttlMs": 5000, "cacheScope": "public"}), Some((5_000, Public))),
            ("private with a ttl: kept per principal",
             policy(None, None, Blind, Unproven), json!({"ttlMs": 5000, "cacheScope": "private"}), Some((5_000, Private))),
            ("a ttl without a scope: per principal",
             policy(None, None, Blind, Unproven), json!({"ttlMs": 5000}), Some((5_000, Private))),
            ("ttl 0: not kept",
             policy(None, None, Blind, Unproven), json!({"ttlMs": 0, "cacheScope": "public"}), None),
            ("no ttl (a legacy answer): not kept",
             policy(None, None, Blind, Unproven), json!({"contents": []}), None),
            ("a negative ttl: not kept",
             policy(None, None, Blind, Unproven), json!({"ttlMs": -1, "cacheScope": "public"}), None),
            ("capped by ttl_ms",
             policy(Some(1_000), None, Blind, Unproven), json!({"ttlMs": 5000, "cacheScope": "public"}), Some((1_000, Public))),
            ("a cap of 0: not kept",
             policy(Some(0), None, Blind, Unproven), json!({"ttlMs": 5000, "cacheScope": "public"}), None),
            ("configured private: per principal",
             policy(None, Some(Private), Blind, Unproven), json!({"ttlMs": 5000, "cacheScope": "public"}), Some((5_000, Private))),
            ("per-principal credentials: per principal",
             policy(None, None, Blind, PerCaller), json!({"ttlMs": 5000, "cacheScope": "public"}), Some((5_000, Private))),
        ];
        for (what, policy, result, expected) in cases {
            let result = result.as_object().cloned().unwrap();
            assert_eq!(policy.keep_read(&result), expected, "{what}");
        }
    }

    #[test]
    fn a_list_narrowed_for_its_caller_is_private() {
        let cases = [
            (
                "a public page filtered or renamed: private, its ttl kept",
                json!({"tools": [], "ttlMs": 30000, "cacheScope": "public"}),
                json!({"tools": [], "ttlMs": 30000, "cacheScope": "private"}),
            ),
            (
                "a page without hints: nothing promised",
                json!({"prompts": []}),
                json!({"prompts": [], "ttlMs": 0, "cacheScope": "private"}),
            ),
        ];
        for (what, input, expected) in cases {
            let mut object = input.as_object().cloned().unwrap();
            narrowed_for_caller(&mut object);
            assert_eq!(Value::Object(object), expected, "{what}");
        }
    }

    #[test]
    fn digests_ignore_how_and_see_what() {
        let a = json!({"tools": [{"name": "a"}], "ttlMs": 1, "_meta": {"x": 1}});
        let same = json!({"_meta": {"y": 2}, "cacheScope": "public", "tools": [{"name": "a"}]});
        let other = json!({"tools": [{"name": "b"}]});
        let paged = json!({"tools": [{"name": "a"}], "nextCursor": "2"});
        assert_eq!(list_digest(&a), list_digest(&same));
        assert_ne!(list_digest(&a), list_digest(&other));
        assert_ne!(list_digest(&a), list_digest(&paged));
    }
}
