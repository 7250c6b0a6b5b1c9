//! Configuration: the typed model, loading from TOML and from the command line,
//! and validation that names the key path of every mistake.
//!
//! Text becomes typed values (addresses, durations, URIs) once, here; the rest
//! of the gateway never re-checks them.

mod auth;
mod auth_server;
mod credentials;
mod disclosure;
mod duration;
mod limits;
mod model;
mod oauth;
mod policies;
mod proxies;
mod rate_limits;
mod redis;
mod redis_url;
mod tasks;
mod tls;

pub use auth::*;
pub use auth_server::{AuthServerConfig, LocalUser, LoginSource, OidcLogin, StaticClient, StorageKind};
pub(crate) use credentials::{CredentialsConfig, HeaderCredential, OAuthClientCredential};
pub(crate) use disclosure::{DisclosureConfig, DisclosureMode, MAX_SEARCH_LIMIT};
pub(crate) use limits::LimitsConfig;
pub use model::*;
pub(crate) use oauth::check_issuer;
pub(crate) use policies::{GroupsConfig, KindPolicyConfig, PolicyConfig};
pub(crate) use proxies::{ClientIpHeader, TrustedProxies};
pub use rate_limits::{OnRedisError, RateLimit, RateLimitsConfig, RedisConfig};
pub(crate) use redis::RedisUser;
pub use redis::SharedRedisConfig;
pub(crate) use redis_url::RedisEndpoint;
pub(crate) use tasks::{TaskInput, TaskSupport, TasksConfig, UpstreamTasks};
pub use tls::{ListenTlsConfig, UpstreamTlsConfig};

use std::fmt;

/// Where the built-in authorization server's endpoints live (`/oauth/authorize`, …).
pub(crate) const AUTH_SERVER_PREFIX: &str = "/oauth/";

/// Most `[runtime] workers`: far past any machine's useful count, short of a typo's.
const MAX_WORKERS: usize = 1024;
use std::path::Path;

/// One problem with a configuration, located by its key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Dotted key path, such as `upstreams[0].http.url`.
    pub path: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem found in a configuration.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in file order where possible.
    pub issues: Vec<ConfigIssue>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{issue}")?;
        }
        Ok(())
    }
}

/// The name of one `[[upstreams]]` entry, read even when the rest of it is wrong.
struct Identity {
    index: usize,
    name: Option<String>,
}

impl Identity {
    fn from_raw(index: usize, raw: &toml::Value) -> Identity {
        let text = |key: &str| raw.get(key).and_then(toml::Value::as_str).map(str::to_owned);
        Identity {
            index,
            name: text("name"),
        }
    }
}

/// Names used twice, reported on the later entry (a path shared is a federation).
fn duplicate_issues(mut identities: Vec<Identity>) -> Vec<ConfigIssue> {
    identities.sort_by_key(|i| i.index);
    let mut issues = Vec::new();
    let mut names = std::collections::HashSet::new();
    for identity in &identities {
        if let Some(name) = identity.name.as_deref().filter(|n| !n.is_empty())
            && !names.insert(name)
        {
            issues.push(ConfigIssue {
                path: format!("upstreams[{}].name", identity.index),
                message: "is used by another upstream; names must be unique".into(),
            });
        }
    }
    issues
}

/// The federations: upstreams sharing a path agree on one prefix mode, and
/// each has a prefix of its own that can name it in a URI scheme.
fn federation_issues(upstreams: &[UpstreamConfig], indexes: &[usize]) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut by_path: Vec<(&str, Vec<(usize, &UpstreamConfig)>)> = Vec::new();
    for (upstream, &i) in upstreams.iter().zip(indexes) {
        match by_path.iter_mut().find(|(path, _)| *path == upstream.path) {
            Some((_, members)) => members.push((i, upstream)),
            None => by_path.push((&upstream.path, vec![(i, upstream)])),
        }
    }
    for (_, members) in by_path.iter().filter(|(_, members)| members.len() > 1) {
        let mut mode: Option<(usize, crate::federate::names::PrefixMode)> = None;
        let mut prefixes = std::collections::HashMap::new();
        for &(i, member) in members {
            if let Some(own) = member.prefix_mode {
                match mode {
                    Some((first, agreed)) if agreed != own => issues.push(ConfigIssue {
                        path: format!("upstreams[{i}].prefix_mode"),
                        message: format!(
                            "differs from upstreams[{first}].prefix_mode on the same path; the members of a federation share one mode"
                        ),
                    }),
                    Some(_) => {}
                    None => mode = Some((i, own)),
                }
            }
            let key = if member.tool_prefix.is_some() {
                "tool_prefix"
            } else {
                "name"
            };
            let prefix = member.member_prefix();
            if !crate::federate::names::is_uri_prefix(prefix) {
                issues.push(ConfigIssue {
                    path: format!("upstreams[{i}].{key}"),
                    message: format!(
                        "{prefix:?} cannot prefix a federated member's resource URIs: a letter, then letters, digits, '-' or '.' (set tool_prefix)"
                    ),
                });
            }
            if let Some(first) = prefixes.insert(prefix, i) {
                issues.push(ConfigIssue {
                    path: format!("upstreams[{i}].{key}"),
                    message: format!(
                        "prefix {prefix:?} is upstreams[{first}]'s too; members of a federation need distinct prefixes"
                    ),
                });
            }
        }
    }
    issues
}

/// Reads one section, recording its mistake (with the full key path) on failure.
fn section<T: serde::de::DeserializeOwned>(
    prefix: &str,
    value: toml::Value,
    issues: &mut Vec<ConfigIssue>,
) -> Option<T> {
    match serde_path_to_error::deserialize(value) {
        Ok(parsed) => Some(parsed),
        Err(error) => {
            let inner = error.path().to_string();
            let path = if inner == "." {
                prefix.to_owned()
            } else {
                format!("{prefix}.{inner}")
            };
            issues.push(ConfigIssue {
                path,
                message: error.inner().message().trim().to_owned(),
            });
            None
        }
    }
}

impl ConfigError {
    fn one(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            issues: vec![ConfigIssue {
                path: path.into(),
                message: message.into(),
            }],
        }
    }
}

impl Config {
    /// Every environment variable the configuration names as holding a secret (static
    /// tokens, the introspection secret, upstream credentials): no child inherits one
    /// through an `inherit_env` pattern.
    pub(crate) fn secret_env_names(&self) -> Vec<String> {
        let mut names = self.auth.secret_env_names();
        names.extend(self.admin.token_env.clone());
        names.extend(self.redis.as_ref().and_then(|r| r.url_env.clone()));
        names.extend(
            self.upstreams
                .iter()
                .filter_map(|upstream| upstream.credentials.secret_env_name().map(str::to_owned)),
        );
        names
    }

    /// Reads and validates a TOML file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::one(path.display().to_string(), format!("cannot read: {e}")))?;
        Config::from_toml(&text)
    }

    /// Parses and validates TOML text, reporting every mistake it can find
    /// (each section and each upstream is read on its own, so one typo does not
    /// hide the next).
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let table: toml::Table =
            toml::from_str(text).map_err(|e| ConfigError::one("(file)", e.to_string().trim().to_owned()))?;
        let mut issues = Vec::new();
        let mut config = Config::default();
        // The file's index of each upstream that parsed, so later issues name the right entry.
        let mut indexes = Vec::new();
        let mut unparsed = Vec::new();
        let mut upstream_entries = 0;
        for (key, value) in table {
            match key.as_str() {
                "listen" => config.listen = section(&key, value, &mut issues).unwrap_or_default(),
                "sessions" => config.sessions = section(&key, value, &mut issues).unwrap_or_default(),
                "admin" => config.admin = section(&key, value, &mut issues).unwrap_or_default(),
                "auth" => config.auth = section(&key, value, &mut issues).unwrap_or_default(),
                "limits" => config.limits = section(&key, value, &mut issues).unwrap_or_default(),
                "rate_limits" => config.rate_limits = section(&key, value, &mut issues).unwrap_or_default(),
                "redis" => config.redis = section(&key, value, &mut issues),
                "log" => config.log = section(&key, value, &mut issues).unwrap_or_default(),
                "telemetry" => config.telemetry = section(&key, value, &mut issues).unwrap_or_default(),
                "runtime" => config.runtime = section(&key, value, &mut issues).unwrap_or_default(),
                "groups" => config.groups = section(&key, value, &mut issues).unwrap_or_default(),
                "tasks" => config.tasks = section(&key, value, &mut issues).unwrap_or_default(),
                "policies" => {
                    let toml::Value::Array(items) = value else {
                        issues.push(ConfigIssue {
                            path: key,
                            message: "must be an array of tables: [[policies]]".into(),
                        });
                        continue;
                    };
                    for (i, item) in items.into_iter().enumerate() {
                        // A broken entry stays in place (empty), so later entries keep their index.
                        let policy = section(&format!("policies[{i}]"), item, &mut issues);
                        config.policies.push(policy.unwrap_or_default());
                    }
                }
                "disclosure" => {
                    let toml::Value::Array(items) = value else {
                        issues.push(ConfigIssue {
                            path: key,
                            message: "must be an array of tables: [[disclosure]]".into(),
                        });
                        continue;
                    };
                    for (i, item) in items.into_iter().enumerate() {
                        if let Some(entry) = section(&format!("disclosure[{i}]"), item, &mut issues) {
                            config.disclosure.push(entry);
                        }
                    }
                }
                "upstreams" => {
                    let toml::Value::Array(items) = value else {
                        issues.push(ConfigIssue {
                            path: key,
                            message: "must be an array of tables: [[upstreams]]".into(),
                        });
                        continue;
                    };
                    upstream_entries = items.len();
                    for (i, item) in items.into_iter().enumerate() {
                        let identity = Identity::from_raw(i, &item);
                        match section(&format!("upstreams[{i}]"), item, &mut issues) {
                            Some(upstream) => {
                                config.upstreams.push(upstream);
                                indexes.push(i);
                            }
                            None => unparsed.push(identity),
                        }
                    }
                }
                _ => issues.push(ConfigIssue {
                    path: key,
                    message:
                        "unknown section; expected one of `listen`, `sessions`, `upstreams`, `admin`, `auth`, `limits`, `rate_limits`, `redis`, `log`, `telemetry`, `runtime`, `policies`, `groups`, `disclosure`, `tasks`"
                            .into(),
                }),
            }
        }
        // Types may be wrong somewhere; still report what validation finds in the rest.
        issues.extend(config.field_issues(&indexes, upstream_entries));
        let mut identities = unparsed;
        identities.extend(config.upstreams.iter().zip(&indexes).map(|(u, &i)| Identity {
            index: i,
            name: Some(u.name.clone()),
        }));
        issues.extend(duplicate_issues(identities));
        if issues.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError { issues })
        }
    }

    /// Checks what types alone cannot: at least one upstream, one transport
    /// each, unique names, federations that agree, sane bounds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let indexes: Vec<usize> = (0..self.upstreams.len()).collect();
        let issues = self.issues(&indexes, self.upstreams.len());
        if issues.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { issues })
        }
    }

    /// The validation issues; `indexes[i]` is upstream `i`'s position in the
    /// file, which had `entries` upstreams in all.
    fn issues(&self, indexes: &[usize], entries: usize) -> Vec<ConfigIssue> {
        let identities: Vec<Identity> = self
            .upstreams
            .iter()
            .zip(indexes)
            .map(|(u, &i)| Identity {
                index: i,
                name: Some(u.name.clone()),
            })
            .collect();
        let mut issues = self.field_issues(indexes, entries);
        issues.extend(duplicate_issues(identities));
        issues
    }

    fn field_issues(&self, indexes: &[usize], entries: usize) -> Vec<ConfigIssue> {
        let mut issues = self.limits.issues();
        issues.extend(self.rate_limits.issues(self.upstreams.iter().map(|u| u.name.as_str())));
        issues.extend(self.redis_issues());
        issues.extend(self.tasks.issues());
        let mut push = |path: String, message: &str| {
            issues.push(ConfigIssue {
                path,
                message: message.into(),
            })
        };
        if entries == 0 {
            push("upstreams".into(), "at least one [[upstreams]] entry is required");
        }
        match (self.runtime.workers, self.runtime.single_thread) {
            (Some(_), true) => push(
                "runtime.workers".into(),
                "cannot be set with single_thread = true (one thread serves everything)",
            ),
            (Some(workers), false) if workers == 0 || workers > MAX_WORKERS => push(
                "runtime.workers".into(),
                &format!("must be between 1 and {MAX_WORKERS}"),
            ),
            _ => {}
        }
        if self.listen.max_body_bytes == 0 {
            push("listen.max_body_bytes".into(), "must be greater than 0");
        }
        let session_counts = [
            ("max_sessions_per_principal", self.sessions.max_sessions_per_principal),
            ("max_suspended_calls", self.sessions.max_suspended_calls),
            (
                "max_suspended_calls_per_principal",
                self.sessions.max_suspended_calls_per_principal,
            ),
            ("input_lifetime", usize::from(!self.sessions.input_lifetime.0.is_zero())),
        ];
        for (key, n) in session_counts {
            if n == 0 {
                push(format!("sessions.{key}"), "must be greater than 0");
            }
        }
        if self.sessions.max_sessions == 0 {
            push("sessions.max_sessions".into(), "must be greater than 0");
        }
        for (i, token) in self.auth.tokens.iter().enumerate() {
            if let TokenSource::Env(name) = &token.source
                && std::env::var(name).map_or(true, |v| v.is_empty())
            {
                push(
                    format!("auth.tokens[{i}].env"),
                    &format!("environment variable {name} is not set"),
                );
            }
        }
        if let Some(oauth) = &self.auth.oauth {
            issues.extend(oauth::oauth_issues(oauth, &self.listen));
        }
        if let Some(server) = &self.auth.server {
            let oauth_issuer = self.auth.oauth.as_ref().map(|o| o.issuer.as_str());
            issues.extend(auth_server::server_issues(server, &self.listen, oauth_issuer));
            for (upstream, &i) in self.upstreams.iter().zip(indexes) {
                if upstream.path.starts_with(AUTH_SERVER_PREFIX) {
                    issues.push(ConfigIssue {
                        path: format!("upstreams[{i}].path"),
                        message: format!("{AUTH_SERVER_PREFIX}… belongs to the authorization server ([auth.server])"),
                    });
                }
            }
        }
        if let Some(tls) = &self.listen.tls {
            issues.extend(tls::listen_tls_issues(tls, "listen.tls"));
        }
        issues.extend(self.telemetry_issues());
        issues.extend(federation_issues(&self.upstreams, indexes));
        issues.extend(policies::policy_issues(
            &self.policies,
            &self.groups,
            self.upstreams.iter().map(|u| u.path.as_str()),
        ));
        issues.extend(disclosure::disclosure_issues(
            &self.disclosure,
            self.upstreams.iter().map(|u| u.path.as_str()),
        ));
        for (upstream, &i) in self.upstreams.iter().zip(indexes) {
            issues.extend(upstream_issues(upstream, i));
        }
        issues
    }
}

impl Config {
    /// `[telemetry]` and `[admin]` keys types alone cannot check.
    fn telemetry_issues(&self) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        let telemetry = &self.telemetry;
        if telemetry
            .sample_ratio
            .is_some_and(|ratio| !(0.0..=1.0).contains(&ratio))
        {
            issues.push(ConfigIssue {
                path: "telemetry.sample_ratio".into(),
                message: "must be between 0.0 and 1.0".into(),
            });
        }
        if let Some(endpoint) = &telemetry.otlp_endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            issues.push(ConfigIssue {
                path: "telemetry.otlp_endpoint".into(),
                message: "must be an http:// or https:// URL (OTLP over HTTP/protobuf)".into(),
            });
        }
        if let Some(level) = &self.log.level
            && let Err(error) = tracing_subscriber::EnvFilter::try_new(level)
        {
            issues.push(ConfigIssue {
                path: "log.level".into(),
                message: format!("not a log filter: {error}"),
            });
        }
        if telemetry.service_name.as_deref().is_some_and(str::is_empty) {
            issues.push(ConfigIssue {
                path: "telemetry.service_name".into(),
                message: "must not be empty".into(),
            });
        }
        if let Some(name) = &self.admin.token_env
            && std::env::var(name).map_or(true, |v| v.is_empty())
        {
            issues.push(ConfigIssue {
                path: "admin.token_env".into(),
                message: format!("environment variable {name} is not set"),
            });
        }
        for (key, count) in [
            ("listen.max_connections", self.listen.max_connections),
            ("admin.max_connections", self.admin.max_connections),
            ("admin.max_connections_per_ip", self.admin.max_connections_per_ip),
        ] {
            if count == 0 {
                issues.push(ConfigIssue {
                    path: key.into(),
                    message: "must be greater than 0".into(),
                });
            }
        }
        issues
    }
}

/// The problems of the upstream at index `i` of the file.
// A flat list of independent checks, one per key (72 lines): split, they would only scatter.
fn upstream_issues(upstream: &UpstreamConfig, i: usize) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut push = |path: String, message: &str| {
        issues.push(ConfigIssue {
            path,
            message: message.into(),
        })
    };
    let at = |key: &str| format!("upstreams[{i}].{key}");
    if upstream.name.is_empty() {
        push(at("name"), "must not be empty");
    }
    if !upstream.path.starts_with('/') {
        push(at("path"), "must start with '/'");
    }
    let transports = [
        upstream.stdio.is_some(),
        upstream.http.is_some(),
        upstream.sse.is_some(),
    ];
    match transports.iter().filter(|t| **t).count() {
        0 => push(
            at("stdio"),
            "each upstream needs exactly one transport: [upstreams.stdio], [upstreams.http] or [upstreams.sse]",
        ),
        1 => {}
        _ => push(
            at("http"),
            "each upstream needs exactly one transport; keep one of [upstreams.stdio], [upstreams.http], [upstreams.sse]",
        ),
    }
    if let Some(stdio) = &upstream.stdio {
        if stdio.command.first().is_none_or(|c| c.is_empty()) {
            push(at("stdio.command"), "must name a program: [\"program\", \"arg\", ...]");
        }
        if stdio.max_children == 0 {
            push(at("stdio.max_children"), "must be greater than 0");
        }
        if stdio.spares > stdio.max_children {
            push(at("stdio.spares"), "must not exceed stdio.max_children");
        }
    }
    if let Some(http) = &upstream.http {
        if http.members().is_empty() {
            push(
                at("http.url"),
                "name the endpoint: url = \"http://…\" (or urls = [...])",
            );
        }
        if http
            .members()
            .iter()
            .any(|u| !matches!(u.scheme_str(), Some("http" | "https")))
        {
            push(at("http.url"), "must be an absolute http:// or https:// URL");
        }
    }
    if upstream.pool.size == 0 {
        push(at("pool.size"), "must be greater than 0");
    }
    if upstream.pool.max_partitions == 0 {
        push(at("pool.max_partitions"), "must be greater than 0");
    }
    if upstream.pool.max_children_per_principal == 0 {
        push(at("pool.max_children_per_principal"), "must be greater than 0");
    }
    if upstream.pool.max_partitions_per_principal == 0 {
        push(at("pool.max_partitions_per_principal"), "must be greater than 0");
    }
    if upstream.pool.max_in_flight_per_session == 0 {
        push(at("pool.max_in_flight_per_session"), "must be greater than 0");
    }
    if upstream.health.unhealthy_after == 0 {
        push(at("health.unhealthy_after"), "must be greater than 0");
    }
    if let Some(sse) = &upstream.sse
        && !matches!(sse.url.scheme_str(), Some("http" | "https"))
    {
        push(at("sse.url"), "must be an absolute http:// or https:// URL");
    }
    if upstream.max_in_flight == 0 {
        push(at("max_in_flight"), "must be greater than 0");
    }
    if upstream.stdio.is_some() && upstream.tls != UpstreamTlsConfig::default() {
        push(at("tls"), "only http and sse upstreams use TLS");
    }
    if upstream.pins.mode != PinMode::Off && upstream.pins.store.is_none() {
        push(
            at("pins.store"),
            "name the pin file, store = \"pins.json\", or store = \"redis\" (required unless mode = \"off\")",
        );
    }
    issues.extend(upstream.tasks.issues(&at("tasks")));
    issues.extend(tls::upstream_tls_issues(&upstream.tls, &at("tls")));
    issues.extend(credentials::credentials_issues(
        &upstream.credentials,
        &at("credentials"),
        upstream.stdio.is_some(),
    ));
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_stdio_config() {
        let config =
            Config::from_toml("[[upstreams]]\nname = \"e\"\nstdio.command = [\"server\", \"stdio\"]\n").unwrap();
        assert_eq!(config.listen.address.to_string(), "127.0.0.1:8080");
        assert_eq!(config.upstreams[0].path, "/mcp");
        assert_eq!(config.upstreams[0].request_timeout.0.as_secs(), 60);
    }

    #[test]
    fn every_mistake_is_reported_at_once() {
        let text = "[listen]\nadress = \"127.0.0.1:1\"\n[[upstreams]]\nname = \"e\"\nrequest_timeout = \"soon\"\nstdio.command = [\"x\"]\n[[upstreams]]\nname = \"f\"\nstdio.command = []\n";
        let error = Config::from_toml(text).unwrap_err();
        let paths: Vec<&str> = error.issues.iter().map(|i| i.path.as_str()).collect();
        assert!(paths.contains(&"listen.adress"), "{error}");
        assert!(paths.contains(&"upstreams[0].request_timeout"), "{error}");
    }

    #[test]
    fn mistakes_name_their_key_path() {
        let cases = [
            (
                "[[upstreams]]\nname = \"e\"\nrequest_timeout = \"soon\"\nstdio.command = [\"x\"]\n",
                "upstreams[0].request_timeout",
            ),
            ("[listen]\nadress = \"127.0.0.1:1\"\n", "listen.adress"),
            ("[listen]\naddress = \"nowhere\"\n", "listen.address"),
            ("", "upstreams"),
            ("[[upstreams]]\nname = \"e\"\n", "upstreams[0].stdio"),
            (
                "[[upstreams]]\nname = \"e\"\nhttp.url = \"ftp://x/\"\n",
                "upstreams[0].http.url",
            ),
            (
                "[[upstreams]]\nname = \"e\"\nstdio.command = []\n",
                "upstreams[0].stdio.command",
            ),
            (
                "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\npath = \"/b\"\n",
                "upstreams[1].name",
            ),
            (
                "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\ncache.scope = \"world\"\n",
                "upstreams[0].cache.scope",
            ),
            (
                "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\ncache.relist_interval = \"soon\"\n",
                "upstreams[0].cache.relist_interval",
            ),
            (
                "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\npins.mode = \"hide\"\n",
                "upstreams[0].pins.store",
            ),
            (
                "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\npins.mode = \"hide\"\npins.store = \"redis\"\n",
                "upstreams[0].pins.store",
            ),
            (
                "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\npins.mode = \"loud\"\n",
                "upstreams[0].pins.mode",
            ),
            (
                "[telemetry]\nsample_ratio = 1.5\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
                "telemetry.sample_ratio",
            ),
            (
                "[telemetry]\notlp_endpoint = \"127.0.0.1:4318\"\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
                "telemetry.otlp_endpoint",
            ),
            (
                "[telemetry]\nservice_name = \"\"\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
                "telemetry.service_name",
            ),
            (
                "[log]\nformat = \"xml\"\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
                "log.format",
            ),
            (
                "[admin]\ntoken_env = \"ERAGATE_TEST_SURELY_UNSET_ADMIN_TOKEN\"\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
                "admin.token_env",
            ),
        ];
        for (text, path) in cases {
            let error = Config::from_toml(text).unwrap_err();
            assert!(error.issues.iter().any(|i| i.path == path), "{text:?} gave {error}");
        }
    }

    #[test]
    fn upstreams_sharing_a_path_are_a_federation() {
        let member =
            |name: &str, extra: &str| format!("[[upstreams]]\nname = \"{name}\"\nstdio.command = [\"x\"]\n{extra}");
        let good = [
            format!("{}{}", member("a", ""), member("b", "")),
            format!("{}{}", member("a", "prefix_mode = \"never\"\n"), member("b", "")),
            format!(
                "{}{}",
                member("a_1", "tool_prefix = \"a1\"\n"),
                member("b", "prefix_mode = \"on_collision\"\n")
            ),
            // Alone on its path, a name needs no URI-scheme letters.
            format!("{}{}", member("a_1", ""), member("b", "path = \"/b\"\n")),
        ];
        for text in good {
            assert!(Config::from_toml(&text).is_ok(), "{text}");
        }
        let bad = [
            (
                format!(
                    "{}{}",
                    member("a", "prefix_mode = \"never\"\n"),
                    member("b", "prefix_mode = \"always\"\n")
                ),
                "upstreams[1].prefix_mode",
            ),
            (format!("{}{}", member("a_1", ""), member("b", "")), "upstreams[0].name"),
            (
                format!("{}{}", member("a", "tool_prefix = \"2x\"\n"), member("b", "")),
                "upstreams[0].tool_prefix",
            ),
            (
                format!(
                    "{}{}",
                    member("a", "tool_prefix = \"p\"\n"),
                    member("b", "tool_prefix = \"p\"\n")
                ),
                "upstreams[1].tool_prefix",
            ),
            (
                format!("{}{}", member("a", "prefix_mode = \"sometimes\"\n"), member("b", "")),
                "upstreams[0].prefix_mode",
            ),
        ];
        for (text, path) in bad {
            let error = Config::from_toml(&text).unwrap_err();
            assert!(error.issues.iter().any(|i| i.path == path), "{text:?} gave {error}");
        }
    }
}
