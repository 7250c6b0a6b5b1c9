//! `[rate_limits]`: how many requests a principal, a tool or an upstream may
//! take in a period, and where limits shared by replicas are counted (Redis).
//! Only the shape and the sanity of the numbers live here; the decisions are
//! [`crate::policy::rate`]'s.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::ConfigIssue;
use super::duration::Humantime;

/// `[rate_limits]`. Every limit is off unless configured.
#[derive(Clone, Debug, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitsConfig {
    /// Requests each principal may send, all methods and upstreams together.
    pub(crate) per_principal: Option<RateLimit>,
    /// `tools/call`s of the named tool (as the client names it) each principal may send.
    pub(crate) tools: BTreeMap<String, RateLimit>,
    /// Requests the named upstream may receive from every principal together.
    pub(crate) upstreams: BTreeMap<String, RateLimit>,
    /// How limits marked `shared` use Redis (`[redis]` or this section's deprecated `address` is required when one is).
    pub(crate) redis: Option<RedisConfig>,
}

/// One limit: `requests` per `per`, with bursts of up to `burst`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// How many requests a period allows.
    pub(crate) requests: u32,
    /// The period. Default 1 s.
    #[serde(default = "one_second")]
    pub(crate) per: Humantime,
    /// How many may come at once after a quiet spell (a local limit only).
    /// Default `requests`.
    pub(crate) burst: Option<u32>,
    /// Counted in Redis, across every replica, as a fixed window of `per`
    /// holding `requests`, instead of in this process. Default false.
    #[serde(default)]
    pub(crate) shared: bool,
}

fn one_second() -> Humantime {
    Humantime(Duration::from_secs(1))
}

/// `[rate_limits.redis]`: how shared limits use Redis (`[redis]` says where it is).
#[derive(Clone, Debug, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    /// Deprecated: write `[redis] url = "redis://HOST:PORT"`. `host:port` of a
    /// plain-TCP server without AUTH, used when `[redis]` is not set.
    #[serde(default)]
    pub(crate) address: Option<String>,
    /// Prefix of every key shared limits write. Default `[redis] key_prefix`
    /// followed by `rl:` (`eragate:rl:`).
    #[serde(default)]
    pub(crate) key_prefix: Option<String>,
    /// How long one count may take before Redis is taken as down: shorter than
    /// other users', as every limited request waits for it. Default 250 ms.
    #[serde(default)]
    pub(crate) timeout: Option<Humantime>,
    /// What a shared limit does while Redis is down: `open` lets the request
    /// through, `closed` refuses it with 429. Either way it is logged. Default `open`.
    #[serde(default)]
    pub(crate) on_error: OnRedisError,
}

/// `rate_limits.redis.on_error`
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnRedisError {
    /// Let the request through.
    #[default]
    Open,
    /// Refuse it (429).
    Closed,
}

impl RateLimitsConfig {
    /// Whether any limit is counted in Redis.
    pub(crate) fn any_shared(&self) -> bool {
        self.limits().any(|(_, limit)| limit.shared)
    }

    /// Every configured limit with its config path.
    fn limits(&self) -> impl Iterator<Item = (String, &RateLimit)> {
        let principal = self
            .per_principal
            .iter()
            .map(|l| ("rate_limits.per_principal".to_owned(), l));
        let tools = self.tools.iter().map(|(n, l)| (format!("rate_limits.tools.{n}"), l));
        let upstreams = self
            .upstreams
            .iter()
            .map(|(n, l)| (format!("rate_limits.upstreams.{n}"), l));
        principal.chain(tools).chain(upstreams)
    }

    /// Numbers that must not be zero and upstream names that exist (a Redis
    /// server for shared limits is `[redis]`'s check) (`upstream_names`).
    pub(super) fn issues<'a>(&self, upstream_names: impl Iterator<Item = &'a str> + Clone) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        let mut push = |path: String, message: &str| {
            issues.push(ConfigIssue {
                path,
                message: message.into(),
            })
        };
        for (path, limit) in self.limits() {
            if limit.requests == 0 {
                push(format!("{path}.requests"), "must be greater than 0");
            }
            if limit.per.0.is_zero() {
                push(format!("{path}.per"), "must be greater than 0");
            }
            if limit.burst == Some(0) {
                push(format!("{path}.burst"), "must be greater than 0");
            }
            if limit.shared && limit.burst.is_some() {
                push(
                    format!("{path}.burst"),
                    "a shared limit is a fixed window: it has no burst",
                );
            }
        }
        for name in self.upstreams.keys() {
            if !upstream_names.clone().any(|n| n == name) {
                push(format!("rate_limits.upstreams.{name}"), "names no [[upstreams]] entry");
            }
        }
        if let Some(redis) = &self.redis {
            if redis.address.as_ref().is_some_and(|a| a.is_empty() || !a.contains(':')) {
                push("rate_limits.redis.address".into(), "must be host:port");
            }
            if redis.timeout.as_ref().is_some_and(|t| t.0.is_zero()) {
                push("rate_limits.redis.timeout".into(), "must be greater than 0");
            }
        }
        issues
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues(text: &str) -> Vec<String> {
        let config: RateLimitsConfig = toml::from_str(text).unwrap();
        config
            .issues(["files"].into_iter())
            .into_iter()
            .map(|i| format!("{}: {}", i.path, i.message))
            .collect()
    }

    #[test]
    fn limits_are_checked() {
        let table: [(&str, &[&str]); 5] = [
            ("", &[]),
            (
                "per_principal = { requests = 10, per = \"1m\", burst = 20 }\n\
                 tools.echo = { requests = 1 }\nupstreams.files = { requests = 100 }",
                &[],
            ),
            (
                "per_principal = { requests = 0, per = \"0s\", burst = 0 }",
                &[
                    "rate_limits.per_principal.requests: must be greater than 0",
                    "rate_limits.per_principal.per: must be greater than 0",
                    "rate_limits.per_principal.burst: must be greater than 0",
                ],
            ),
            (
                "upstreams.nope = { requests = 1 }",
                &["rate_limits.upstreams.nope: names no [[upstreams]] entry"],
            ),
            (
                "tools.echo = { requests = 1, shared = true, burst = 3 }\n\
                 [redis]\naddress = \"nohost\"\ntimeout = \"0s\"\non_error = \"closed\"",
                &[
                    "rate_limits.tools.echo.burst: a shared limit is a fixed window: it has no burst",
                    "rate_limits.redis.address: must be host:port",
                    "rate_limits.redis.timeout: must be greater than 0",
                ],
            ),
        ];
        for (text, expected) in table {
            assert_eq!(issues(text), expected.to_vec(), "{text}");
        }
    }

    #[test]
    fn on_error_takes_only_open_or_closed() {
        assert!(toml::from_str::<RedisConfig>("address = \"a:1\"\non_error = \"maybe\"").is_err());
        let redis: RedisConfig = toml::from_str("address = \"a:1\"").unwrap();
        assert_eq!(redis.on_error, OnRedisError::Open);
        assert_eq!(redis.key_prefix, None);
    }
}
