//! The configuration model: every key, its type and its default.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::seal::SealKey;
use crate::translate::{CachePolicy, CacheScope};

/// The whole configuration file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where and how clients reach eragate.
    #[serde(default)]
    pub listen: ListenConfig,
    /// Legacy client sessions.
    #[serde(default)]
    pub sessions: SessionsConfig,
    /// The upstream MCP servers, each served on its own path.
    #[serde(default)]
    pub upstreams: Vec<UpstreamConfig>,
}

/// `[listen]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenConfig {
    /// Socket address to bind. Default `127.0.0.1:8080`: loopback unless told otherwise.
    pub address: SocketAddr,
    /// Largest accepted request body in bytes; larger gets 413. Default 4 MiB.
    pub max_body_bytes: usize,
    /// Origins allowed besides the listener's own (`http://host:port` as sent
    /// in `Origin`). A request with any other `Origin` gets 403. Default none.
    pub allowed_origins: Vec<String>,
    /// Interval of SSE keep-alive comments. Default 15 s.
    pub sse_keep_alive: Humantime,
    /// How long a request may stay silent before its answer switches from
    /// `application/json` to an SSE stream (so keep-alives flow and a client
    /// disconnect is noticed). Default 2 s.
    pub stream_after: Humantime,
    /// Most concurrent client connections. Default 10 000.
    pub max_connections: usize,
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            address: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_body_bytes: 4 * 1024 * 1024,
            allowed_origins: Vec::new(),
            sse_keep_alive: Humantime(Duration::from_secs(15)),
            stream_after: Humantime(Duration::from_secs(2)),
            max_connections: 10_000,
        }
    }
}

/// `[sessions]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionsConfig {
    /// A legacy client session unused this long is ended (404 afterwards). Default 30 min.
    pub idle_timeout: Humantime,
    /// Most concurrent legacy client sessions; past it the least recently used
    /// idle session is ended. Default 1000.
    pub max_sessions: usize,
    /// Key that seals session ids (base64 of 32 random bytes). Replicas sharing
    /// it serve each other's sessions. Default: `ERAGATE_SESSION_KEY`, else a
    /// random key per process (sessions then die with the process).
    #[serde(deserialize_with = "deserialize_key")]
    pub key: Option<SealKey>,
    /// The key before the last rotation; it still opens session ids for `previous_key_valid_for`.
    #[serde(deserialize_with = "deserialize_key")]
    pub previous_key: Option<SealKey>,
    /// How long after start the previous key is still accepted. Default 1 h.
    pub previous_key_valid_for: Humantime,
    /// Absolute lifetime of a session id, sealed into it. Default 24 h.
    pub lifetime: Humantime,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            idle_timeout: Humantime(Duration::from_secs(30 * 60)),
            max_sessions: 1000,
            key: None,
            previous_key: None,
            previous_key_valid_for: Humantime(Duration::from_secs(3600)),
            lifetime: Humantime(Duration::from_secs(24 * 3600)),
        }
    }
}

fn deserialize_key<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<SealKey>, D::Error> {
    let text = String::deserialize(deserializer)?;
    SealKey::from_base64(&text).map(Some).map_err(|e| {
        serde::de::Error::custom(format!(
            "invalid key: {e}; create one with `head -c 32 /dev/urandom | base64`"
        ))
    })
}

/// `[[upstreams]]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Name used in logs and in errors that clients see. Required, unique.
    pub name: String,
    /// The MCP path this upstream is served on. Default `/mcp`.
    #[serde(default = "default_path")]
    pub path: String,
    /// A local server process spoken to over stdio.
    pub stdio: Option<StdioConfig>,
    /// A Streamable HTTP server.
    pub http: Option<HttpConfig>,
    /// A server speaking only the 2024-11-05 HTTP+SSE transport.
    pub sse: Option<SseConfig>,
    /// How long a request may wait for the upstream's answer. Default 60 s.
    #[serde(default = "default_request_timeout")]
    pub request_timeout: Humantime,
    /// How long opening an upstream session (start + `initialize`) may take. Default 30 s.
    #[serde(default = "default_handshake_timeout")]
    pub handshake_timeout: Humantime,
    /// Most requests in flight to this upstream; past it clients get 503 with `Retry-After`. Default 512.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// Cache hints for the six cacheable results.
    #[serde(default)]
    pub cache: CacheConfig,
    /// The upstream's era: `"auto"` (learned with `server/discover`, then
    /// `initialize`), `"legacy"` or `"modern"`. Default `"auto"`.
    #[serde(default)]
    pub era: EraSetting,
}

/// `upstreams.era`
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EraSetting {
    /// Probe: `server/discover` first, `initialize` on any other answer.
    #[default]
    Auto,
    /// A handshake-era server.
    Legacy,
    /// A 2026-07-28 (or dual-era) server.
    Modern,
}

/// `[upstreams.stdio]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdioConfig {
    /// Program and arguments, e.g. `["npx", "-y", "@modelcontextprotocol/server-everything", "stdio"]`.
    pub command: Vec<String>,
    /// Extra environment variables for the child.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory of the child. Default: eragate's.
    pub cwd: Option<PathBuf>,
    /// Started but unclaimed children kept ready, so a new session costs no start-up wait. Default 1.
    #[serde(default = "default_spares")]
    pub spares: usize,
    /// Most children alive at once (pooled plus one per legacy client session). Default 64.
    #[serde(default = "default_max_children")]
    pub max_children: usize,
    /// Grace period between closing a child's stdin and killing its process group. Default 2 s.
    #[serde(default = "default_kill_grace")]
    pub kill_grace: Humantime,
}

/// `[upstreams.http]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// The upstream's MCP endpoint, e.g. `http://127.0.0.1:3001/mcp`.
    #[serde(deserialize_with = "deserialize_uri")]
    pub url: http::Uri,
}

/// `[upstreams.sse]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SseConfig {
    /// The upstream's SSE endpoint, e.g. `http://127.0.0.1:3002/sse`.
    #[serde(deserialize_with = "deserialize_uri")]
    pub url: http::Uri,
}

/// `[upstreams.cache]`
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// `ttlMs` on cacheable results. Default: the upstream's own, else 0.
    pub ttl_ms: Option<u64>,
    /// `cacheScope` (`"public"` or `"private"`) on every page. Default: the upstream's own, else `"private"`.
    pub scope: Option<CacheScope>,
}

impl CacheConfig {
    /// The translation policy these settings describe.
    pub fn policy(&self) -> CachePolicy {
        CachePolicy {
            ttl_ms: self.ttl_ms,
            scope: self.scope,
        }
    }
}

/// A duration written as text: `"250ms"`, `"30s"`, `"10m"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Humantime(pub Duration);

impl<'de> Deserialize<'de> for Humantime {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text).map(Humantime).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?} ({e}); write e.g. \"30s\" or \"500ms\""
            ))
        })
    }
}

fn deserialize_uri<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<http::Uri, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse::<http::Uri>()
        .map_err(|e| serde::de::Error::custom(format!("invalid URL {text:?}: {e}")))
}

fn default_path() -> String {
    "/mcp".into()
}
fn default_request_timeout() -> Humantime {
    Humantime(Duration::from_secs(60))
}
fn default_handshake_timeout() -> Humantime {
    Humantime(Duration::from_secs(30))
}
fn default_max_in_flight() -> usize {
    512
}
fn default_spares() -> usize {
    1
}
fn default_max_children() -> usize {
    64
}
fn default_kill_grace() -> Humantime {
    Humantime(Duration::from_secs(2))
}

impl UpstreamConfig {
    /// An upstream with every default, for the command line's zero-config start.
    pub fn with_transport(
        name: &str,
        stdio: Option<StdioConfig>,
        http: Option<HttpConfig>,
        sse: Option<SseConfig>,
    ) -> UpstreamConfig {
        UpstreamConfig {
            name: name.into(),
            path: default_path(),
            stdio,
            http,
            sse,
            request_timeout: default_request_timeout(),
            handshake_timeout: default_handshake_timeout(),
            max_in_flight: default_max_in_flight(),
            cache: CacheConfig::default(),
            era: EraSetting::Auto,
        }
    }
}

impl StdioConfig {
    /// A child started from this program and arguments, every other key at its default.
    pub fn from_command(command: Vec<String>) -> StdioConfig {
        StdioConfig {
            command,
            env: BTreeMap::new(),
            cwd: None,
            spares: default_spares(),
            max_children: default_max_children(),
            kill_grace: default_kill_grace(),
        }
    }
}
