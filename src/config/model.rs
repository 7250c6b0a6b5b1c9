//! The configuration model: every key, its type and its default.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::auth::AuthConfig;
use super::credentials::CredentialsConfig;
pub(crate) use super::duration::Humantime;
use super::limits::LimitsConfig;
use super::proxies::{ClientIpHeader, TrustedProxies};
use super::rate_limits::RateLimitsConfig;
use super::tls::{ListenTlsConfig, UpstreamTlsConfig};
use crate::federate::names::PrefixMode;
use crate::seal::SealKey;
use crate::translate::{CachePolicy, CacheScope};

/// The whole configuration file.
#[derive(Clone, Debug, PartialEq, Default, Deserialize)]
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
    pub(crate) admin: AdminConfig,
    /// Who may use the MCP endpoints.
    #[serde(default)]
    pub auth: AuthConfig,
    /// Timeouts and bounds protecting clients from each other.
    #[serde(default)]
    pub(crate) limits: LimitsConfig,
    /// Requests per period, per principal, tool and upstream.
    #[serde(default)]
    pub(crate) rate_limits: RateLimitsConfig,
    /// `[redis]`: where state shared by replicas lives.
    #[serde(default)]
    pub(crate) redis: Option<super::SharedRedisConfig>,
    /// How eragate logs.
    #[serde(default)]
    pub log: LogConfig,
    /// Traces and the live `server/discover` summary.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// `[[policies]]`: what each principal may see and call on a path.
    #[serde(default)]
    pub(crate) policies: Vec<super::PolicyConfig>,
    /// `[groups]`: named groups of principals, for `[[policies]] groups`.
    #[serde(default)]
    pub(crate) groups: super::GroupsConfig,
    /// `[[disclosure]]`: paths whose tools are searched and loaded on demand.
    #[serde(default)]
    pub(crate) disclosure: Vec<super::DisclosureConfig>,
    /// `[tasks]`: the bounds of the tasks eragate runs (docs/tasks.md).
    #[serde(default)]
    pub(crate) tasks: super::TasksConfig,
    /// The threads that serve: how many, or one for everything.
    #[serde(default)]
    pub runtime: RuntimeConfig,
}

/// `[runtime]` (read at start)
#[derive(Clone, Debug, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
    /// Worker threads serving requests. Default: the CPUs eragate may run on
    /// (its affinity mask and cgroup quota), or `TOKIO_WORKER_THREADS` when set.
    /// One worker is served as `single_thread` is.
    pub workers: Option<usize>,
    /// One thread serves everything (accepting, clients, upstreams, timers):
    /// no hand-offs between threads, for a sidecar that has a share of one
    /// core. `workers` must then be unset. Default false.
    pub single_thread: bool,
}

/// `[log]`
#[derive(Clone, Debug, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `text` (default) or `json` (one JSON object a line). `--log-format` overrides it.
    pub format: LogFormat,
    /// One access-log line per client request (target `eragate::access`).
    /// Default: on with `format = "json"`, off with `text`.
    pub(crate) access: Option<bool>,
    /// Which lines are logged: `tracing` filter directives (`warn`,
    /// `info,eragate::upstream=debug`). The `ERAGATE_LOG` environment variable,
    /// when set, overrides it. Reloaded live. Default `info`.
    pub(crate) level: Option<String>,
}

impl LogConfig {
    /// The filter directives to log with: `ERAGATE_LOG`, else `level`, else `info`.
    pub fn filter(&self) -> String {
        std::env::var("ERAGATE_LOG")
            .ok()
            .filter(|v| !v.is_empty())
            .or_else(|| self.level.clone())
            .unwrap_or_else(|| "info".to_owned())
    }
}

/// The shape of log lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, fields at the top level.
    Json,
}

/// `[telemetry]`
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Where OpenTelemetry spans are exported, OTLP over HTTP/protobuf
    /// (e.g. `http://127.0.0.1:4318/v1/traces`). Default: `OTEL_EXPORTER_OTLP_*`,
    /// else none, no traces.
    pub otlp_endpoint: Option<String>,
    /// The share of new traces sampled, 0.0–1.0; a client's sampled parent is
    /// always followed. Default: `OTEL_TRACES_SAMPLER`, else 1.0.
    pub sample_ratio: Option<f64>,
    /// The `service.name` of exported spans. Default: `OTEL_SERVICE_NAME`, else `eragate`.
    pub(crate) service_name: Option<String>,
    /// Answer `server/discover` with a live summary of the upstream in
    /// `_meta` (era learned, members healthy, last successful call). Default off.
    pub(crate) live_discover: bool,
}

/// `[admin]`: a separate listener for operators, off unless `address` is set.
/// It keeps `[limits]`' header and idle timeouts and `[listen]`'s Host and
/// Origin checks, with connection caps of its own.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct AdminConfig {
    /// Where to serve `/healthz`, `/readyz`, `/pools` (JSON), `/metrics` and the
    /// status page `/`. Default: off.
    pub(crate) address: Option<SocketAddr>,
    /// An environment variable holding a token the admin endpoints require
    /// (`Authorization: Bearer …`, or `?token=` for the status page);
    /// `/healthz` and `/readyz` stay open for probes. Default: none.
    pub(crate) token_env: Option<String>,
    /// Most concurrent connections to the admin listener; past it a client
    /// waits in the kernel's backlog, holding none of eragate's descriptors. Default 64.
    pub(crate) max_connections: usize,
    /// Most concurrent admin connections from one IP address (one past it is
    /// answered 503 and closed). Default 16.
    pub(crate) max_connections_per_ip: usize,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            address: None,
            token_env: None,
            max_connections: 64,
            max_connections_per_ip: 16,
        }
    }
}

/// `[listen]`
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenConfig {
    /// Socket address to bind. Default `127.0.0.1:8080`: loopback unless told otherwise.
    pub address: SocketAddr,
    /// Largest accepted request body in bytes; larger gets 413. Default 4 MiB.
    pub(crate) max_body_bytes: usize,
    /// Origins allowed besides the listener's own (`http://host:port` as sent
    /// in `Origin`). A request with any other `Origin` gets 403. Default none.
    pub(crate) allowed_origins: Vec<String>,
    /// Host names (`host` or `host:port`, as sent in `Host`) served besides the
    /// listener's address, `public_url`'s host and, on a loopback or wildcard
    /// bind, `localhost`. A request without `Origin` naming any other `Host`
    /// gets 421 (DNS rebinding defence); `"*"` allows every host. Default none.
    pub(crate) allowed_hosts: Vec<String>,
    /// Interval of SSE keep-alive comments. Default 15 s. Read when a stream opens
    /// (a reload applies it to the next one).
    pub(crate) sse_keep_alive: Humantime,
    /// How long a request may stay silent before its answer switches from
    /// `application/json` to an SSE stream (so keep-alives flow and a client
    /// disconnect is noticed). Default 2 s. Read for each answer (a reload applies it
    /// to the next one).
    pub(crate) stream_after: Humantime,
    /// Most concurrent client connections. Default 10 000.
    pub(crate) max_connections: usize,
    /// The URL clients reach this listener at (`https://mcp.example.com`, no
    /// path), used to name the protected resource. Default `http://` + the bound address.
    pub public_url: Option<String>,
    /// HTTPS on this listener: certificate and key files. Default: plain HTTP.
    pub tls: Option<ListenTlsConfig>,
    /// Proxies (addresses or `ADDRESS/BITS` ranges) whose `client_ip_header` names
    /// the client: every per-address count (login attempts, registrations,
    /// `limits.max_connections_per_ip`) counts that client, not the proxy; a
    /// connection from one is not capped per address. Default none: every peer is
    /// its own client. Read at start.
    pub(crate) trusted_proxies: TrustedProxies,
    /// The header a trusted proxy writes: `x-forwarded-for` (default) or `forwarded` (RFC 7239).
    pub(crate) client_ip_header: ClientIpHeader,
}

impl Default for ListenConfig {
    fn default() -> Self {
        ListenConfig {
            address: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_body_bytes: 4 * 1024 * 1024,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            sse_keep_alive: Humantime(Duration::from_secs(15)),
            stream_after: Humantime(Duration::from_secs(2)),
            max_connections: 10_000,
            public_url: None,
            tls: None,
            trusted_proxies: TrustedProxies::default(),
            client_ip_header: ClientIpHeader::default(),
        }
    }
}

/// `[sessions]`
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionsConfig {
    /// A legacy client session unused this long is ended (404 afterwards). Default 30 min.
    pub idle_timeout: Humantime,
    /// Most concurrent legacy client sessions; past it the least recently used
    /// idle session is ended. Default 1000.
    pub max_sessions: usize,
    /// Most concurrent legacy client sessions of one principal; past it that
    /// principal's least recently used session is ended (never another's), and
    /// when `max_sessions` is reached the principal holding the most gives way. Default 100.
    pub max_sessions_per_principal: usize,
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
    /// Absolute bound on a suspended call's life from its first suspension:
    /// retries that answer nothing new never extend it past this. Default 10 min.
    pub input_lifetime: Humantime,
    /// Most upstream calls suspended for client input at once. Default 1000.
    pub max_suspended_calls: usize,
    /// ... of one principal. Default 20.
    pub max_suspended_calls_per_principal: usize,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            idle_timeout: Humantime(Duration::from_secs(30 * 60)),
            max_sessions: 1000,
            max_sessions_per_principal: 100,
            key: None,
            previous_key: None,
            previous_key_valid_for: Humantime(Duration::from_secs(3600)),
            lifetime: Humantime(Duration::from_secs(24 * 3600)),
            input_expiry: Humantime(Duration::from_secs(120)),
            input_lifetime: Humantime(Duration::from_secs(600)),
            max_suspended_calls: 1000,
            max_suspended_calls_per_principal: 20,
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
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Name used in logs and in errors that clients see. Required, unique.
    pub name: String,
    /// The MCP path this upstream is served on. Default `/mcp`. Several
    /// upstreams on one path are one federated server (docs/federation.md).
    #[serde(default = "default_path")]
    pub path: String,
    /// In a federation: the prefix of this member's tool and prompt names
    /// (`<prefix>_<name>`) and of its resource URIs (`<prefix>+<uri>`). Default
    /// the upstream's `name`; a URI scheme's letters (a letter, then letters,
    /// digits, `-` or `.`).
    #[serde(default)]
    pub(crate) tool_prefix: Option<String>,
    /// In a federation: when members' names get their prefix, `"always"`,
    /// `"on_collision"` or `"never"` (a name two members share is then an error).
    /// Every member of a path that sets it sets the same; default `"always"`.
    #[serde(default)]
    pub prefix_mode: Option<PrefixMode>,
    /// A local server process spoken to over stdio.
    pub stdio: Option<StdioConfig>,
    /// A Streamable HTTP server.
    pub http: Option<HttpConfig>,
    /// A server speaking only the 2024-11-05 HTTP+SSE transport.
    pub sse: Option<SseConfig>,
    /// How long a request may wait for the upstream's answer. Default 60 s.
    #[serde(default = "default_request_timeout")]
    pub(crate) request_timeout: Humantime,
    /// How long opening an upstream session (start + `initialize`) may take. Default 30 s.
    #[serde(default = "default_handshake_timeout")]
    pub(crate) handshake_timeout: Humantime,
    /// Most requests in flight to this upstream; past it requests wait in the
    /// queue (`pool.queue`), and past that clients get 503 with `Retry-After`. Default 512.
    #[serde(default = "default_max_in_flight")]
    pub(crate) max_in_flight: usize,
    /// Per-method request timeouts overriding `request_timeout`, e.g. `{ "tools/call" = "5m" }`.
    #[serde(default)]
    pub(crate) timeouts: BTreeMap<String, Humantime>,
    /// How sessions are pooled and spread over members.
    #[serde(default)]
    pub(crate) pool: PoolConfig,
    /// Active and passive health checking of members.
    #[serde(default)]
    pub(crate) health: HealthConfig,
    /// Restarting stdio children.
    #[serde(default)]
    pub(crate) restart: RestartConfig,
    /// Cache hints for the six cacheable results.
    #[serde(default)]
    pub(crate) cache: CacheConfig,
    /// The upstream's era: `"auto"` (learned with `server/discover`, then
    /// `initialize`), `"legacy"` or `"modern"`. Default `"auto"`.
    #[serde(default)]
    pub(crate) era: EraSetting,
    /// What eragate presents to this upstream (HTTP and HTTP+SSE only; never the
    /// client's own token). Default `kind = "none"`.
    #[serde(default)]
    pub(crate) credentials: CredentialsConfig,
    /// How an `https://` upstream is checked (`ca`) and what eragate presents
    /// (`cert`, `key`). Default: the public roots, no client certificate.
    #[serde(default)]
    pub(crate) tls: UpstreamTlsConfig,
    /// Definition pinning (docs/pins.md): what a drift from the approved
    /// definitions does. Default `mode = "off"`.
    #[serde(default)]
    pub(crate) pins: PinsConfig,
    /// Which tools answer 2026-07-28 clients with a task (docs/tasks.md).
    #[serde(default)]
    pub(crate) tasks: super::UpstreamTasks,
}

/// `[upstreams.pins]`
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PinsConfig {
    /// What a drift does: `"off"`, `"warn"`, `"hide"` or `"block"`. Default `"off"`.
    #[serde(default)]
    pub(crate) mode: PinMode,
    /// Where the pins live, required unless `off`: a pin file, shared by every upstream and
    /// replica that names it, or `"redis"`: the `[redis]` server, every replica's.
    pub(crate) store: Option<PathBuf>,
    /// Strip hidden content (tag, zero-width, bidi, control characters, HTML
    /// comments) from the definitions clients receive. Default false.
    #[serde(default)]
    pub(crate) sanitize: bool,
}

impl PinsConfig {
    /// Whether the pins live in `[redis]` (`store = "redis"`; a file of that name is `./redis`).
    pub(crate) fn in_redis(&self) -> bool {
        self.store.as_deref() == Some(std::path::Path::new("redis"))
    }
}

/// `upstreams.pins.mode`
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PinMode {
    /// No pinning: nothing is compared.
    #[default]
    Off,
    /// Drifts are served, logged, counted and shown.
    Warn,
    /// As `warn`, and changed or new tools and prompts are hidden until approved.
    Hide,
    /// As `warn`, and every request to the upstream is refused until approved.
    Block,
}

/// `upstreams.era`
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EraSetting {
    /// Probe: `server/discover` first, `initialize` on any other answer.
    #[default]
    Auto,
    /// A handshake-era server.
    Legacy,
    /// A 2026-07-28 (or dual-era) server.
    Modern,
}

/// `[upstreams.stdio]`
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdioConfig {
    /// Program and arguments, e.g. `["npx", "-y", "@modelcontextprotocol/server-everything", "stdio"]`.
    pub(crate) command: Vec<String>,
    /// Extra environment variables for the child, set after the inherited ones.
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    /// Which of eragate's environment variables the child inherits: names, or
    /// `PREFIX_*` patterns. A pattern never matches `ERAGATE_*` or a variable
    /// holding a configured token or client secret; an exact name does.
    /// Default: the list in `upstream::transport::child::DEFAULT_INHERIT_ENV`
    /// (`PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `LANG`, `LANGUAGE`, `LC_*`,
    /// `TERM`, `TZ`, `TMPDIR`, `XDG_*`, proxy and CA-bundle variables).
    #[serde(default)]
    pub(crate) inherit_env: Option<Vec<String>>,
    /// Working directory of the child. Default: eragate's.
    pub(crate) cwd: Option<PathBuf>,
    /// Started but unclaimed children kept ready, so a new session costs no start-up wait. Default 1.
    #[serde(default = "default_spares")]
    pub(crate) spares: usize,
    /// Most children alive at once (pooled plus one per legacy client session). Default 64.
    #[serde(default = "default_max_children")]
    pub(crate) max_children: usize,
    /// Grace period between closing a child's stdin and killing its process group. Default 2 s.
    #[serde(default = "default_kill_grace")]
    pub(crate) kill_grace: Humantime,
}

/// `[upstreams.http]`
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// The upstream's MCP endpoint, e.g. `http://127.0.0.1:3001/mcp`.
    #[serde(default, deserialize_with = "deserialize_optional_uri")]
    pub(crate) url: Option<http::Uri>,
    /// Several endpoints of one service, balanced by least outstanding requests.
    #[serde(default, deserialize_with = "deserialize_uris")]
    pub(crate) urls: Vec<http::Uri>,
    /// Idle keep-alive connections kept open to each endpoint for the next
    /// requests; past it a connection is closed once its request ends (a burst
    /// of concurrent requests leaves no more than this behind). Default: the
    /// upstream's `max_in_flight`, so that steady traffic up to that
    /// concurrency never closes and reopens connections.
    #[serde(default)]
    pub(crate) max_idle_connections: Option<usize>,
}

impl HttpConfig {
    /// One endpoint.
    pub fn single(url: http::Uri) -> HttpConfig {
        HttpConfig {
            url: Some(url),
            urls: Vec::new(),
            max_idle_connections: None,
        }
    }

    /// Every member endpoint: `url` first, then `urls`.
    pub(crate) fn members(&self) -> Vec<http::Uri> {
        self.url.iter().chain(self.urls.iter()).cloned().collect()
    }
}

/// How legacy client sessions map onto upstream sessions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LegacySessions {
    /// A dedicated upstream session (a stdio child) per legacy client session:
    /// `logging/setLevel`, subscriptions and server→client requests stay the client's own.
    #[default]
    Dedicated,
    /// Legacy clients share the pooled sessions modern traffic uses (ids
    /// rewritten); cheaper, but session-scoped state is shared by every client.
    Shared,
}

/// `[upstreams.pool]`
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct PoolConfig {
    /// Upstream sessions (stdio children) per partition for pooled traffic. Default 1.
    pub(crate) size: usize,
    /// In-flight requests on one pooled session before another one is opened
    /// (up to `size`). Default 32.
    pub(crate) max_in_flight_per_session: usize,
    /// Requests that may wait for capacity past `max_in_flight`; past it, 503. Default 256.
    pub(crate) queue: usize,
    /// How long a request may wait in that queue. Default 5 s.
    pub(crate) queue_timeout: Humantime,
    /// `"dedicated"` (default) or `"shared"`.
    pub(crate) legacy_sessions: LegacySessions,
    /// Most pooled partitions (principal × capability profile) in all; past
    /// it the principal holding the most gives up its least recently used
    /// idle one. Default 32.
    pub(crate) max_partitions: usize,
    /// Most pooled partitions of one principal; past it that principal's
    /// least recently used idle one is closed. Default 8.
    pub(crate) max_partitions_per_principal: usize,
    /// Most upstream sessions (stdio children) one principal holds here, of
    /// every kind: its pooled partitions' sessions, its legacy clients' own,
    /// sessions opened for calls that must be alone (and calls suspended on
    /// them). Past it a legacy client's new session ends that principal's least
    /// recently used one; a call that needs one more is refused (429, -32029).
    /// When a stdio upstream's `max_children` are taken, the principal holding
    /// the most legacy sessions gives way. Replaces `max_dedicated_per_principal`
    /// (still read). Default 16.
    #[serde(alias = "max_dedicated_per_principal")]
    pub(crate) max_children_per_principal: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            size: 1,
            max_in_flight_per_session: 32,
            queue: 256,
            queue_timeout: Humantime(Duration::from_secs(5)),
            legacy_sessions: LegacySessions::Dedicated,
            max_partitions: 32,
            max_partitions_per_principal: 8,
            max_children_per_principal: 16,
        }
    }
}

/// `[upstreams.health]`
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct HealthConfig {
    /// Interval of active probes (`ping` on a legacy member, `server/discover` on a
    /// modern one); `"0s"` turns them off. Default 10 s.
    pub(crate) interval: Humantime,
    /// How long a probe may take. Default 5 s.
    pub(crate) timeout: Humantime,
    /// Consecutive failures (requests or probes) that take a member out of rotation. Default 3.
    pub(crate) unhealthy_after: u32,
    /// Consecutive successful probes that take it back. Default 1.
    pub(crate) healthy_after: u32,
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
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RestartConfig {
    /// First wait before starting a child after one crashed. Default 250 ms.
    pub(crate) backoff_initial: Humantime,
    /// Longest wait between restarts (exponential, with jitter). Default 30 s.
    pub(crate) backoff_max: Humantime,
    /// A child that exits within this time of starting counts as a crash. Default 10 s.
    pub(crate) crash_window: Humantime,
    /// Consecutive crashes after which the upstream is reported as crash-looping. Default 5.
    pub(crate) crash_loop_after: u32,
    /// Requests after which a pooled child is replaced (drained, then stopped); 0 = never. Default 0.
    pub(crate) max_requests: u64,
    /// Age after which a pooled child is replaced; `"0s"` = never. Default never.
    pub(crate) max_lifetime: Humantime,
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
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SseConfig {
    /// The upstream's SSE endpoint, e.g. `http://127.0.0.1:3002/sse`.
    #[serde(deserialize_with = "deserialize_uri")]
    pub url: http::Uri,
}

/// `[upstreams.cache]`: the bounds of the caching hints eragate states and of
/// the lists it keeps (the rule is [`CachePolicy::hints`]).
#[derive(Clone, Copy, Debug, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CacheConfig {
    /// The longest `ttlMs` stated. Default: 60000.
    pub(crate) ttl_ms: Option<u64>,
    /// `"private"` makes every result private; `"public"` vouches that the
    /// upstream answers everyone alike (never overriding a per-caller result).
    /// Default: public only when proven.
    pub(crate) scope: Option<CacheScope>,
    /// For lists the upstream cannot announce changes of: how old eragate's
    /// copy may grow before it lists again. Default: such lists are not kept.
    pub(crate) relist_interval: Option<Humantime>,
    /// Most list pages kept for the upstream (all partitions). Default: 1000.
    pub(crate) max_entries: Option<usize>,
}

impl CacheConfig {
    /// The default of `max_entries`.
    pub(crate) const DEFAULT_MAX_ENTRIES: usize = 1000;

    /// The hint bounds these settings describe (no facts yet: 0, private).
    pub(crate) fn policy(&self) -> CachePolicy {
        let defaults = CachePolicy::default();
        CachePolicy {
            max_ttl_ms: self.ttl_ms.unwrap_or(defaults.max_ttl_ms),
            scope: self.scope,
            ..defaults
        }
    }

    /// The re-list interval, if lists that cannot be announced are kept at all.
    pub(crate) fn relist_interval(&self) -> Option<Duration> {
        self.relist_interval.map(|h| h.0).filter(|d| !d.is_zero())
    }

    /// Most list pages kept.
    pub(crate) fn max_entries(&self) -> usize {
        self.max_entries.unwrap_or(Self::DEFAULT_MAX_ENTRIES)
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
    /// The prefix of this upstream's names in a federation: `tool_prefix`, else its name.
    pub(crate) fn member_prefix(&self) -> &str {
        self.tool_prefix.as_deref().unwrap_or(&self.name)
    }

    /// The timeout for one request of `method`.
    pub(crate) fn timeout_for(&self, method: &str) -> Duration {
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
            tool_prefix: None,
            prefix_mode: None,
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
            credentials: CredentialsConfig::None {},
            tls: UpstreamTlsConfig::default(),
            pins: PinsConfig::default(),
            tasks: super::UpstreamTasks::default(),
        }
    }
}

impl StdioConfig {
    /// A child started from this program and arguments, every other key at its default.
    pub fn from_command(command: Vec<String>) -> StdioConfig {
        StdioConfig {
            command,
            env: BTreeMap::new(),
            inherit_env: None,
            cwd: None,
            spares: default_spares(),
            max_children: default_max_children(),
            kill_grace: default_kill_grace(),
        }
    }
}
