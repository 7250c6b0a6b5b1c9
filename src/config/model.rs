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
    /// The operators' listener.
    #[serde(default)]
    pub admin: AdminConfig,
    /// Who may use the MCP endpoints.
    #[serde(default)]
    pub auth: AuthConfig,
}

/// `[auth]`: bearer tokens clients must present. With none configured (the
/// default) every client is admitted as the same anonymous principal.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// `[[auth.tokens]]`: each token and the principal it names. Several tokens
    /// may name one principal (rotation).
    pub tokens: Vec<TokenConfig>,
    /// `[auth.oauth]`: eragate as an OAuth 2.1 protected resource of an
    /// existing authorization server. Default: off.
    pub oauth: Option<OAuthConfig>,
}

/// `[auth.oauth]`: access tokens from the authorization server `issuer`,
/// validated by eragate (the resource server) for its own canonical URI.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server's issuer identifier, compared exactly with a
    /// token's `iss`; its metadata is found by RFC 8414, then OpenID discovery.
    /// `https://` (or `http://` on a loopback host). Required.
    pub issuer: String,
    /// The canonical URI of the first (or only) MCP path, which tokens' `aud`
    /// must contain. Default: `listen.public_url` (else the listener's URL) + the path.
    #[serde(default)]
    pub resource: Option<String>,
    /// Scopes advertised in the protected resource metadata. Default: `required_scopes`.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// Scopes every token must carry; a token without them gets 403
    /// `insufficient_scope`. Default none.
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// Signature algorithms accepted, from `RS256`, `ES256`, `EdDSA`, `PS256`,
    /// `ES384`, `RS384`, `RS512`. Default `["RS256", "ES256", "EdDSA"]`.
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf`. Default 30 s.
    #[serde(default = "default_leeway")]
    pub leeway: Humantime,
    /// Shortest interval between two JWKS fetches caused by an unknown `kid`
    /// (so forged key ids cannot hammer the issuer). Default 30 s.
    #[serde(default = "default_jwks_min_refetch")]
    pub jwks_min_refetch: Humantime,
    /// How long one request to the authorization server may take. Default 5 s.
    #[serde(default = "default_oauth_timeout")]
    pub timeout: Humantime,
    /// `resource_name` in the protected resource metadata. Default none.
    #[serde(default)]
    pub resource_name: Option<String>,
    /// `resource_documentation` (a URL) in the protected resource metadata. Default none.
    #[serde(default)]
    pub resource_documentation: Option<String>,
    /// `[auth.oauth.introspection]`: opaque tokens checked by RFC 7662. Default: off
    /// (only JWT access tokens are accepted).
    #[serde(default)]
    pub introspection: Option<IntrospectionConfig>,
    /// `[auth.oauth.scopes_for]`: scopes a method (`"tools/call"`) or one tool, prompt
    /// or resource (`"tools/call:NAME"`, `"prompts/get:NAME"`, `"resources/read:URI"`)
    /// needs on top of `required_scopes`. Default none.
    #[serde(default)]
    pub scopes_for: BTreeMap<String, Vec<String>>,
}

/// `[auth.oauth.introspection]`: eragate's own client at the authorization server,
/// for asking about opaque tokens.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// eragate's client id at the authorization server. Required.
    pub client_id: String,
    /// The client secret, in the file. Give this or `client_secret_env`.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// An environment variable holding the client secret, read at start.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// The introspection endpoint. Default: the issuer metadata's `introspection_endpoint`.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Longest time an active answer is reused (it is never reused past the token's
    /// `exp`). Default 5 min.
    #[serde(default = "default_introspection_cache")]
    pub cache_max: Humantime,
    /// Most answers cached. Default 10 000.
    #[serde(default = "default_introspection_entries")]
    pub max_entries: usize,
}

fn default_introspection_cache() -> Humantime {
    Humantime(Duration::from_secs(300))
}
fn default_introspection_entries() -> usize {
    10_000
}

impl IntrospectionConfig {
    /// The client secret: the file's, else the environment variable's (`None` if unset).
    pub fn secret(&self) -> Option<String> {
        match (&self.client_secret, &self.client_secret_env) {
            (Some(secret), _) => Some(secret.clone()),
            (None, Some(name)) => std::env::var(name).ok().filter(|v| !v.is_empty()),
            (None, None) => None,
        }
    }
}

fn default_algorithms() -> Vec<String> {
    ["RS256", "ES256", "EdDSA"].map(String::from).to_vec()
}
fn default_leeway() -> Humantime {
    Humantime(Duration::from_secs(30))
}
fn default_jwks_min_refetch() -> Humantime {
    Humantime(Duration::from_secs(30))
}
fn default_oauth_timeout() -> Humantime {
    Humantime(Duration::from_secs(5))
}

impl OAuthConfig {
    /// `[auth.oauth]` for `issuer` with every other key at its default.
    pub fn for_issuer(issuer: &str) -> OAuthConfig {
        OAuthConfig {
            issuer: issuer.to_owned(),
            resource: None,
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
            algorithms: default_algorithms(),
            leeway: default_leeway(),
            jwks_min_refetch: default_jwks_min_refetch(),
            timeout: default_oauth_timeout(),
            resource_name: None,
            resource_documentation: None,
            introspection: None,
            scopes_for: BTreeMap::new(),
        }
    }

    /// The scopes the metadata advertises: `scopes_supported`, else `required_scopes`
    /// and those of `scopes_for`.
    pub fn advertised_scopes(&self) -> Vec<String> {
        if !self.scopes_supported.is_empty() {
            return self.scopes_supported.clone();
        }
        let mut scopes = self.required_scopes.clone();
        for scope in self.scopes_for.values().flatten() {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
        scopes
    }
}

/// `[[auth.tokens]]`: `principal` and exactly one of `sha256` (the hex SHA-256
/// of the token, so the file holds no secret) or `env` (a variable holding the token).
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "RawToken")]
pub struct TokenConfig {
    /// Who the token's bearer is: the partition of their upstream sessions, the
    /// owner of their legacy sessions and `requestState`.
    pub principal: String,
    /// Where the token comes from.
    pub source: TokenSource,
}

/// Where a configured token comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// Its SHA-256 digest.
    Sha256([u8; 32]),
    /// The environment variable holding it, read at start.
    Env(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    principal: String,
    sha256: Option<String>,
    env: Option<String>,
}

impl TryFrom<RawToken> for TokenConfig {
    type Error = String;

    fn try_from(raw: RawToken) -> Result<TokenConfig, String> {
        if raw.principal.is_empty() {
            return Err("principal must not be empty".into());
        }
        let source = match (raw.sha256, raw.env) {
            (Some(hex), None) => TokenSource::Sha256(parse_digest(&hex)?),
            (None, Some(env)) if !env.is_empty() => TokenSource::Env(env),
            (None, Some(_)) => return Err("env must name an environment variable".into()),
            _ => return Err("give exactly one of `sha256` (hex SHA-256 of the token) or `env`".into()),
        };
        Ok(TokenConfig {
            principal: raw.principal,
            source,
        })
    }
}

fn parse_digest(hex: &str) -> Result<[u8; 32], String> {
    let invalid = || "sha256 must be 64 hex digits: `printf %s \"$TOKEN\" | sha256sum`".to_owned();
    let hex = hex.trim();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid());
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(hex.as_bytes().chunks(2)) {
        let text = std::str::from_utf8(pair).map_err(|_| invalid())?;
        *byte = u8::from_str_radix(text, 16).map_err(|_| invalid())?;
    }
    Ok(digest)
}

/// `[admin]`: a separate listener for operators, off unless `address` is set.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Where to serve `/healthz`, `/readyz` and `/pools` (JSON). Default: off.
    pub address: Option<SocketAddr>,
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
    /// The URL clients reach this listener at (`https://mcp.example.com`, no
    /// path), used to name the protected resource. Default `http://` + the bound address.
    pub public_url: Option<String>,
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
            public_url: None,
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
    /// How long an upstream call suspended for a 2026-07-28 client's input
    /// (`input_required`) waits for the retry before it is cancelled. Default 2 min.
    pub input_expiry: Humantime,
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
            input_expiry: Humantime(Duration::from_secs(120)),
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
    /// Most requests in flight to this upstream; past it requests wait in the
    /// queue (`pool.queue`), and past that clients get 503 with `Retry-After`. Default 512.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// Per-method request timeouts overriding `request_timeout`, e.g. `{ "tools/call" = "5m" }`.
    #[serde(default)]
    pub timeouts: BTreeMap<String, Humantime>,
    /// How sessions are pooled and spread over members.
    #[serde(default)]
    pub pool: PoolConfig,
    /// Active and passive health checking of members.
    #[serde(default)]
    pub health: HealthConfig,
    /// Restarting stdio children.
    #[serde(default)]
    pub restart: RestartConfig,
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
    #[serde(default, deserialize_with = "deserialize_optional_uri")]
    pub url: Option<http::Uri>,
    /// Several endpoints of one service, balanced by least outstanding requests.
    #[serde(default, deserialize_with = "deserialize_uris")]
    pub urls: Vec<http::Uri>,
}

impl HttpConfig {
    /// One endpoint.
    pub fn single(url: http::Uri) -> HttpConfig {
        HttpConfig {
            url: Some(url),
            urls: Vec::new(),
        }
    }

    /// Every member endpoint: `url` first, then `urls`.
    pub fn members(&self) -> Vec<http::Uri> {
        self.url.iter().chain(self.urls.iter()).cloned().collect()
    }
}

/// How legacy client sessions map onto upstream sessions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LegacySessions {
    /// A dedicated upstream session (a stdio child) per legacy client session:
    /// `logging/setLevel`, subscriptions and server→client requests stay the client's own.
    #[default]
    Dedicated,
    /// Legacy clients share the pooled sessions modern traffic uses (ids
    /// rewritten); cheaper, but session-scoped state is shared by every client.
    Shared,
}

/// `[upstreams.pool]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PoolConfig {
    /// Upstream sessions (stdio children) per partition for pooled traffic. Default 1.
    pub size: usize,
    /// In-flight requests on one pooled session before another one is opened
    /// (up to `size`). Default 32.
    pub max_in_flight_per_session: usize,
    /// Requests that may wait for capacity past `max_in_flight`; past it, 503. Default 256.
    pub queue: usize,
    /// How long a request may wait in that queue. Default 5 s.
    pub queue_timeout: Humantime,
    /// `"dedicated"` (default) or `"shared"`.
    pub legacy_sessions: LegacySessions,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            size: 1,
            max_in_flight_per_session: 32,
            queue: 256,
            queue_timeout: Humantime(Duration::from_secs(5)),
            legacy_sessions: LegacySessions::Dedicated,
        }
    }
}

/// `[upstreams.health]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    /// Interval of active probes (`ping` on a legacy member, `server/discover` on a
    /// modern one); `"0s"` turns them off. Default 10 s.
    pub interval: Humantime,
    /// How long a probe may take. Default 5 s.
    pub timeout: Humantime,
    /// Consecutive failures (requests or probes) that take a member out of rotation. Default 3.
    pub unhealthy_after: u32,
    /// Consecutive successful probes that take it back. Default 1.
    pub healthy_after: u32,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            interval: Humantime(Duration::from_secs(10)),
            timeout: Humantime(Duration::from_secs(5)),
            unhealthy_after: 3,
            healthy_after: 1,
        }
    }
}

/// `[upstreams.restart]`
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RestartConfig {
    /// First wait before starting a child after one crashed. Default 250 ms.
    pub backoff_initial: Humantime,
    /// Longest wait between restarts (exponential, with jitter). Default 30 s.
    pub backoff_max: Humantime,
    /// A child that exits within this time of starting counts as a crash. Default 10 s.
    pub crash_window: Humantime,
    /// Consecutive crashes after which the upstream is reported as crash-looping. Default 5.
    pub crash_loop_after: u32,
    /// Requests after which a pooled child is replaced (drained, then stopped); 0 = never. Default 0.
    pub max_requests: u64,
    /// Age after which a pooled child is replaced; `"0s"` = never. Default never.
    pub max_lifetime: Humantime,
}

impl Default for RestartConfig {
    fn default() -> Self {
        RestartConfig {
            backoff_initial: Humantime(Duration::from_millis(250)),
            backoff_max: Humantime(Duration::from_secs(30)),
            crash_window: Humantime(Duration::from_secs(10)),
            crash_loop_after: 5,
            max_requests: 0,
            max_lifetime: Humantime(Duration::ZERO),
        }
    }
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

fn deserialize_optional_uri<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<http::Uri>, D::Error> {
    deserialize_uri(deserializer).map(Some)
}

fn deserialize_uris<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<http::Uri>, D::Error> {
    let texts = Vec::<String>::deserialize(deserializer)?;
    texts
        .iter()
        .map(|text| {
            text.parse::<http::Uri>()
                .map_err(|e| serde::de::Error::custom(format!("invalid URL {text:?}: {e}")))
        })
        .collect()
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
    /// The timeout for one request of `method`.
    pub fn timeout_for(&self, method: &str) -> Duration {
        self.timeouts.get(method).map_or(self.request_timeout.0, |t| t.0)
    }

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
            timeouts: BTreeMap::new(),
            pool: PoolConfig::default(),
            health: HealthConfig::default(),
            restart: RestartConfig::default(),
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
