//! `[redis]`: the one Redis server (or cluster) every user of shared state reaches
//! (shared rate limits, the authorization server with `storage = "redis"`, ended
//! sessions), its checks, and each user's [`Target`] resolved from it, from the
//! user's own overrides, or from the deprecated keys (`[rate_limits.redis]
//! address`, `[auth.server] redis_url`), which keep working with a warning.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::duration::Humantime;
use super::{Config, ConfigIssue, StorageKind};
use crate::store::redis::{Target, redacted};

/// `[redis]`.
#[derive(Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedRedisConfig {
    /// `redis://` or `rediss://` (TLS), with an ACL user and password if any:
    /// `rediss://USER:PASSWORD@HOST:PORT/DB`.
    #[serde(default)]
    pub(crate) url: Option<String>,
    /// The environment variable holding `url` (keeps the password out of the file).
    #[serde(default)]
    pub(crate) url_env: Option<String>,
    /// A PEM file of the CA that signs the server's certificate. Default: the
    /// webpki roots (the public CAs).
    #[serde(default)]
    pub(crate) tls_ca: Option<PathBuf>,
    /// The node URLs of a Redis Cluster, instead of `url`.
    #[serde(default)]
    pub(crate) cluster: Vec<String>,
    /// Prepended to every key; each user adds its own namespace (`rl:`, `as:`,
    /// `sess:`). Default `eragate:`.
    #[serde(default = "default_prefix")]
    pub(crate) key_prefix: String,
    /// How long one command may take, for users that set no timeout of their own.
    /// Default: shared rate limits 250 ms, ended sessions 250 ms, the authorization server 2 s.
    #[serde(default)]
    pub(crate) timeout: Option<Humantime>,
}

impl std::fmt::Debug for SharedRedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRedisConfig")
            .field("url", &self.url.as_deref().map(redacted))
            .field("url_env", &self.url_env)
            .field("tls_ca", &self.tls_ca)
            .field("cluster", &self.cluster.iter().map(|u| redacted(u)).collect::<Vec<_>>())
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

fn default_prefix() -> String {
    "eragate:".into()
}

/// Who uses shared state: each has its own key namespace and default timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RedisUser {
    /// Shared rate limits (`[rate_limits.redis]`).
    RateLimits,
    /// The authorization server's clients, codes, tokens, keys and login attempts.
    AuthServer,
    /// Ids of sessions ended on some replica.
    Sessions,
    /// Tasks (records, and requests for the replica running each).
    Tasks,
    /// Definition pins (`[upstreams.pins] store = "redis"`).
    Pins,
}

impl RedisUser {
    fn namespace(self) -> &'static str {
        match self {
            RedisUser::RateLimits => "rl:",
            RedisUser::AuthServer => "as:",
            RedisUser::Sessions => "sess:",
            RedisUser::Tasks => "tasks:",
            RedisUser::Pins => "pins:",
        }
    }

    fn default_timeout(self) -> Duration {
        match self {
            RedisUser::RateLimits | RedisUser::Sessions => Duration::from_millis(250),
            RedisUser::AuthServer | RedisUser::Tasks | RedisUser::Pins => Duration::from_secs(2),
        }
    }
}

impl SharedRedisConfig {
    /// The URL: `url`, or the value of `url_env` (empty when unset: the check says so).
    fn resolved_url(&self) -> (String, &'static str) {
        match (&self.url, &self.url_env) {
            (Some(url), _) => (url.clone(), "redis.url"),
            (None, Some(name)) => (std::env::var(name).unwrap_or_default(), "redis.url_env"),
            (None, None) => (String::new(), "redis.cluster"),
        }
    }
}

impl Config {
    /// Where `user` keeps its shared state: `[redis]` with the user's overrides,
    /// else the user's deprecated key; `None` when it has none.
    pub(crate) fn redis_target(&self, user: RedisUser) -> Option<Target> {
        let (own_prefix, own_timeout, legacy_url, legacy_key) = match user {
            RedisUser::RateLimits => {
                let section = self.rate_limits.redis.as_ref();
                (
                    section.and_then(|r| r.key_prefix.clone()),
                    section.and_then(|r| r.timeout.as_ref().map(|t| t.0)),
                    section.and_then(|r| r.address.as_ref().map(|a| format!("redis://{a}"))),
                    "rate_limits.redis.address",
                )
            }
            RedisUser::AuthServer => {
                let server = self.auth.server.as_ref().filter(|s| s.storage == StorageKind::Redis)?;
                (
                    server.redis_key_prefix.clone(),
                    server.redis_timeout.as_ref().map(|t| t.0),
                    server.redis_url.clone(),
                    "auth.server.redis_url",
                )
            }
            RedisUser::Sessions | RedisUser::Tasks | RedisUser::Pins => (None, None, None, ""),
        };
        let shared = self.redis.as_ref();
        let (url, url_key) = match shared {
            Some(redis) => redis.resolved_url(),
            None => (legacy_url?, legacy_key),
        };
        let base = shared.map_or("eragate:", |r| r.key_prefix.as_str());
        Some(Target {
            url,
            url_key,
            tls_ca: shared.and_then(|r| r.tls_ca.clone()),
            cluster: shared.map(|r| r.cluster.clone()).unwrap_or_default(),
            timeout: own_timeout
                .or_else(|| shared.and_then(|r| r.timeout.as_ref().map(|t| t.0)))
                .unwrap_or_else(|| user.default_timeout()),
            prefix: own_prefix.unwrap_or_else(|| format!("{base}{}", user.namespace())),
        })
    }

    /// What to write instead of each deprecated Redis key in use: logged at
    /// start and printed by `check-config`.
    pub fn redis_deprecations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(address) = self.rate_limits.redis.as_ref().and_then(|r| r.address.as_ref()) {
            out.push(format!(
                "rate_limits.redis.address is deprecated and will be removed: write [redis] url = \"redis://{address}\" instead"
            ));
        }
        if let Some(url) = self.auth.server.as_ref().and_then(|s| s.redis_url.as_ref()) {
            out.push(format!(
                "auth.server.redis_url is deprecated and will be removed: write [redis] url = \"{}\" instead",
                redacted(url)
            ));
        }
        out
    }

    /// `[redis]` itself, and that every user of shared state has a server.
    pub(super) fn redis_issues(&self) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        let mut push = |path: &str, message: String| {
            issues.push(ConfigIssue {
                path: path.into(),
                message,
            })
        };
        let rate_limits_legacy = self.rate_limits.redis.as_ref().and_then(|r| r.address.as_ref());
        let auth_server = self.auth.server.as_ref().filter(|s| s.storage == StorageKind::Redis);
        match &self.redis {
            None => {
                if self.rate_limits.any_shared() && rate_limits_legacy.is_none() {
                    push("redis", "a shared rate limit needs [redis] url".into());
                }
                if auth_server.is_some_and(|s| s.redis_url.is_none()) {
                    push("redis", "auth.server.storage = \"redis\" needs [redis] url".into());
                }
                for (i, upstream) in self.upstreams.iter().enumerate() {
                    if upstream.pins.mode != super::PinMode::Off && upstream.pins.in_redis() {
                        push(
                            &format!("upstreams[{i}].pins.store"),
                            "store = \"redis\" needs [redis] url (or name a pin file)".into(),
                        );
                    }
                }
            }
            Some(redis) => {
                if rate_limits_legacy.is_some() {
                    push(
                        "rate_limits.redis.address",
                        "[redis] is set: remove this deprecated key".into(),
                    );
                }
                if auth_server.is_some_and(|s| s.redis_url.is_some()) {
                    push(
                        "auth.server.redis_url",
                        "[redis] is set: remove this deprecated key".into(),
                    );
                }
                shared_issues(redis, &mut push);
            }
        }
        issues
    }
}

fn shared_issues(redis: &SharedRedisConfig, push: &mut impl FnMut(&str, String)) {
    let given = [redis.url.is_some(), redis.url_env.is_some(), !redis.cluster.is_empty()];
    match given.iter().filter(|&&g| g).count() {
        0 => push("redis", "set one of url, url_env or cluster".into()),
        1 => {}
        _ => push("redis", "set only one of url, url_env and cluster".into()),
    }
    if let Some(url) = &redis.url {
        check_url("redis.url", url, push);
    }
    if let Some(name) = &redis.url_env {
        match std::env::var(name) {
            Ok(url) => check_url("redis.url_env", &url, push),
            Err(_) => push("redis.url_env", format!("the environment variable {name} is not set")),
        }
    }
    for (i, url) in redis.cluster.iter().enumerate() {
        check_url(&format!("redis.cluster[{i}]"), url, push);
    }
    if let Some(path) = &redis.tls_ca
        && let Err(error) = std::fs::read(path)
    {
        push("redis.tls_ca", format!("cannot read {}: {error}", path.display()));
    }
    if redis.timeout.as_ref().is_some_and(|t| t.0.is_zero()) {
        push("redis.timeout", "must be greater than 0".into());
    }
}

/// A `redis://` or `rediss://` URL naming a host (the password is never echoed).
fn check_url(key: &str, url: &str, push: &mut impl FnMut(&str, String)) {
    match url::Url::parse(url) {
        Ok(parsed) if !matches!(parsed.scheme(), "redis" | "rediss") => {
            push(key, "must be a redis:// or rediss:// URL".into())
        }
        Ok(parsed) if parsed.host_str().is_none_or(str::is_empty) => push(key, "names no host".into()),
        Ok(_) => {}
        Err(error) => push(key, format!("{} is not a URL ({error})", redacted(url))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<Config, Vec<String>> {
        Config::from_toml(&format!(
            "[[upstreams]]\nname = \"a\"\npath = \"/a\"\nstdio = {{ command = [\"x\"] }}\n{text}"
        ))
        .map_err(|e| {
            e.issues
                .into_iter()
                .map(|i| format!("{}: {}", i.path, i.message))
                .collect()
        })
    }

    #[test]
    fn every_user_resolves_its_target_from_redis() {
        let config = config(
            "[redis]\nurl = \"rediss://app:pw@h:6380\"\ntimeout = \"1s\"\n\
             [rate_limits]\ntools.t = { requests = 1, shared = true }\n\
             [rate_limits.redis]\ntimeout = \"100ms\"",
        )
        .unwrap();
        let limits = config.redis_target(RedisUser::RateLimits).unwrap();
        assert_eq!(limits.url, "rediss://app:pw@h:6380");
        assert_eq!(limits.prefix, "eragate:rl:");
        assert_eq!(limits.timeout, Duration::from_millis(100));
        let sessions = config.redis_target(RedisUser::Sessions).unwrap();
        assert_eq!(
            (sessions.prefix.as_str(), sessions.timeout),
            ("eragate:sess:", Duration::from_secs(1))
        );
        assert_eq!(config.redis_target(RedisUser::AuthServer), None);
        assert!(config.redis_deprecations().is_empty());
    }

    #[test]
    fn the_old_address_still_works_and_says_what_to_write() {
        let config = config(
            "[rate_limits]\ntools.t = { requests = 1, shared = true }\n\
             [rate_limits.redis]\naddress = \"10.0.0.1:6379\"",
        )
        .unwrap();
        let target = config.redis_target(RedisUser::RateLimits).unwrap();
        assert_eq!(
            (target.url.as_str(), target.prefix.as_str()),
            ("redis://10.0.0.1:6379", "eragate:rl:")
        );
        assert_eq!(target.timeout, Duration::from_millis(250));
        assert_eq!(config.redis_target(RedisUser::Sessions), None);
        assert_eq!(
            config.redis_deprecations(),
            [
                "rate_limits.redis.address is deprecated and will be removed: write [redis] url = \"redis://10.0.0.1:6379\" instead"
            ]
        );
    }

    #[test]
    fn mistakes_name_their_key() {
        let table: [(&str, &[&str]); 5] = [
            (
                "[rate_limits]\ntools.t = { requests = 1, shared = true }",
                &["redis: a shared rate limit needs [redis] url"],
            ),
            (
                "[redis]\nkey_prefix = \"x\"",
                &["redis: set one of url, url_env or cluster"],
            ),
            (
                "[redis]\nurl = \"http://h\"\ntimeout = \"0s\"",
                &[
                    "redis.url: must be a redis:// or rediss:// URL",
                    "redis.timeout: must be greater than 0",
                ],
            ),
            (
                "[redis]\nurl_env = \"ERAGATE_TEST_UNSET_REDIS_URL\"",
                &["redis.url_env: the environment variable ERAGATE_TEST_UNSET_REDIS_URL is not set"],
            ),
            (
                "[redis]\nurl = \"redis://h\"\n[rate_limits.redis]\naddress = \"h:1\"",
                &["rate_limits.redis.address: [redis] is set: remove this deprecated key"],
            ),
        ];
        for (text, expected) in table {
            assert_eq!(config(text).err().unwrap_or_default(), expected.to_vec(), "{text}");
        }
    }
}
