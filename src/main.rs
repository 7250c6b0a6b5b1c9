//! The `eragate` command: parse the command line, load configuration, run the gateway.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use eragate::config::{
    AuthServerConfig, Config, ConfigError, HttpConfig, ListenTlsConfig, LocalUser, LogConfig, LogFormat, LoginSource,
    OAuthConfig, RuntimeConfig, SseConfig, StdioConfig, UpstreamConfig,
};

#[derive(Parser)]
#[command(
    name = "eragate",
    version,
    about = "A protocol-translating reverse proxy for the Model Context Protocol"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over HTTP in front of an upstream server.
    Run(RunArgs),
    /// Serve one local client over stdin/stdout in front of an upstream server.
    Stdio(StdioArgs),
    /// Validate a configuration file and explain every mistake.
    CheckConfig {
        /// The TOML file.
        file: PathBuf,
    },
    /// GET a health endpoint (e.g. http://127.0.0.1:8080/healthz): exit 0 on 2xx, else 1.
    Health {
        /// The endpoint, plain http://.
        url: String,
        /// How long the whole check may take.
        #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
    /// Print the Argon2id hash of a password read from stdin (one line), for
    /// `--user NAME:HASH` and `[[auth.server.users]] password_argon2`.
    HashPassword,
    /// Print the version.
    Version,
    /// Definition pins (docs/pins.md): of a running gateway through its admin listener
    /// (the admin token is read from ERAGATE_ADMIN_TOKEN), or seeded from a configuration.
    Pins {
        #[command(subcommand)]
        action: PinsAction,
    },
}

/// What `eragate pins` does.
#[derive(Subcommand)]
enum PinsAction {
    /// The pins, pending drifts and hidden content of every pinned upstream.
    List(PinsArgs),
    /// The pending drifts, before and after, and the digest `approve` takes.
    Diff(PinsArgs),
    /// Accept exactly the drifts `diff` showed (by its digest) as the new pins.
    Approve {
        #[command(flatten)]
        target: PinsArgs,
        /// The digest `eragate pins diff` showed.
        #[arg(long)]
        digest: String,
    },
    /// Forget an upstream's pins (with --name, only the pins of that name): what was
    /// forgotten is trusted on first use at its next listing; the other pins stay.
    Reset(PinsArgs),
    /// Write the pins ahead of time, for review and commit, from the upstreams themselves,
    /// without serving traffic: list each pinned upstream of the configuration and pin on
    /// first use what has no pins. Prints a JSON summary; exits 1 when existing pins drifted
    /// or a listing failed (nothing is overwritten: use approve or reset), 2 on a bad config.
    Seed(SeedArgs),
}

#[derive(clap::Args)]
struct SeedArgs {
    /// The TOML configuration file, as `eragate run --config` takes it.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Only this upstream (a federation's member lists its path, so the federation's
    /// other pinned members are seeded too).
    #[arg(long)]
    upstream: Option<String>,
}

#[derive(clap::Args)]
struct PinsArgs {
    /// The admin listener, e.g. http://127.0.0.1:9090.
    #[arg(long, value_name = "URL")]
    admin: String,
    /// Only this upstream (required by approve and reset).
    #[arg(long)]
    upstream: Option<String>,
    /// Only the definition of this name.
    #[arg(long)]
    name: Option<String>,
    /// How long the request may take.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

#[derive(clap::Args, Clone)]
struct RunArgs {
    #[command(flatten)]
    upstream: UpstreamArgs,
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// How long shutdown waits for in-flight requests.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key); overrides [listen.tls].
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// How often the --config file is checked for a change to reload ("0s": only on SIGHUP).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    watch_config: Duration,
}

#[derive(clap::Args)]
struct StdioArgs {
    #[command(flatten)]
    upstream: UpstreamArgs,
    /// Which configured upstream to serve (default: the first).
    #[arg(long)]
    upstream_name: Option<String>,
}

#[derive(clap::Args, Clone)]
struct UpstreamArgs {
    /// A TOML configuration file; the other flags override its listener and add an upstream.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A stdio upstream: one string, split into program and arguments as a shell would.
    #[arg(long, conflicts_with_all = ["http", "sse"])]
    stdio: Option<String>,
    /// A Streamable HTTP upstream URL.
    #[arg(long, conflicts_with = "sse")]
    http: Option<String>,
    /// An upstream speaking only the 2024-11-05 HTTP+SSE transport (its SSE URL).
    #[arg(long)]
    sse: Option<String>,
    /// Require OAuth access tokens from this authorization server (its issuer URL).
    #[arg(long, value_name = "URL")]
    oauth_issuer: Option<String>,
    /// The URL clients reach eragate at (scheme, host, port), naming the protected resource.
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// A scope every access token must carry (repeatable); also advertised.
    #[arg(long = "scope", value_name = "S")]
    scopes: Vec<String>,
    /// Serve eragate's own authorization server (`local`: users from --user or
    /// [[auth.server.users]]); its issuer is the --public-url, DCR and CIMD are on.
    #[arg(long, value_enum, value_name = "SOURCE")]
    auth_server: Option<AuthServerFlag>,
    /// A local user of --auth-server: NAME:ARGON2HASH (repeatable; `eragate hash-password`).
    #[arg(long = "user", value_name = "NAME:ARGON2HASH")]
    users: Vec<String>,
    /// Log lines as `text` or `json` (one object a line, with an access-log line
    /// per request); overrides `[log] format`.
    #[arg(long, value_enum, value_name = "FORMAT")]
    log_format: Option<LogFormat>,
}

/// Who logs in to `--auth-server`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum AuthServerFlag {
    /// Local users (`--user`).
    Local,
}

fn main() -> ExitCode {
    // First of all, before a secret is read or a child started.
    let private = keep_memory_private();
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("eragate {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Health { url, timeout } => health(&url, timeout),
        Command::HashPassword => hash_password(),
        Command::Pins {
            action: PinsAction::Seed(args),
        } => pins_seed(&args, private),
        Command::Pins { action } => pins(&action),
        Command::CheckConfig { file } => match Config::load(&file) {
            Ok(config) => match probe_federations(&config) {
                Some(error) => {
                    report(&file.display().to_string(), &error);
                    ExitCode::from(2)
                }
                None => {
                    println!("{}: ok ({} upstream(s))", file.display(), config.upstreams.len());
                    probe_issuer(&config);
                    for deprecation in config.redis_deprecations() {
                        eprintln!("warning: {deprecation}");
                    }
                    ExitCode::SUCCESS
                }
            },
            Err(error) => {
                report(&file.display().to_string(), &error);
                ExitCode::from(2)
            }
        },
        Command::Stdio(args) => match stdio(args, private) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("eragate: {error:#}");
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => match run(args, private) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("eragate: {error:#}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `eragate health URL`: one line on stdout when healthy, one on stderr when not.
fn health(url: &str, timeout: Duration) -> ExitCode {
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))
        .and_then(|runtime| runtime.block_on(eragate::health::check(url, timeout)));
    match result {
        Ok(status) => {
            println!("{url}: {status}");
            ExitCode::SUCCESS
        }
        Err(reason) => {
            eprintln!("eragate health: {url}: {reason}");
            ExitCode::FAILURE
        }
    }
}

/// `eragate pins ACTION`: the admin listener's JSON answer on stdout; exit 1 when it refused.
fn pins(action: &PinsAction) -> ExitCode {
    let (name, target, digest) = match action {
        PinsAction::List(target) => ("list", target, None),
        PinsAction::Diff(target) => ("diff", target, None),
        PinsAction::Approve { target, digest } => ("approve", target, Some(digest.as_str())),
        PinsAction::Reset(target) => ("reset", target, None),
        PinsAction::Seed(_) => {
            eprintln!("eragate pins seed takes no --admin: it runs from the configuration");
            return ExitCode::from(2);
        }
    };
    let token = std::env::var("ERAGATE_ADMIN_TOKEN").ok().filter(|t| !t.is_empty());
    let args = [
        ("upstream", target.upstream.as_deref()),
        ("name", target.name.as_deref()),
        ("digest", digest),
    ];
    let request = eragate::admin_client::PinsRequest {
        admin: &target.admin,
        action: name,
        args: args.into_iter().filter_map(|(k, v)| Some((k, v?))).collect(),
        token: token.as_deref(),
    };
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))
        .and_then(|runtime| runtime.block_on(eragate::admin_client::pins(request, target.timeout)));
    match result {
        Ok((status, body)) if (200..300).contains(&status) => {
            println!("{}", body.trim_end());
            ExitCode::SUCCESS
        }
        Ok((status, body)) => {
            eprintln!("eragate pins {name}: {status}: {}", body.trim_end());
            ExitCode::FAILURE
        }
        Err(reason) => {
            eprintln!("eragate pins {name}: {reason}");
            ExitCode::FAILURE
        }
    }
}

/// `eragate pins seed`: the configuration loaded as `run` loads it, each pinned upstream
/// listed in process; the JSON summary on stdout. Exit 2 on a bad configuration, 1 when
/// existing pins drifted or a listing failed.
fn pins_seed(args: &SeedArgs, private: Result<(), String>) -> ExitCode {
    let source = args.config.display().to_string();
    let flags = UpstreamArgs {
        config: Some(args.config.clone()),
        stdio: None,
        http: None,
        sse: None,
        oauth_issuer: None,
        public_url: None,
        scopes: Vec::new(),
        auth_server: None,
        users: Vec::new(),
        log_format: None,
    };
    let config = match build_config(&flags) {
        Ok(config) => config,
        Err(error) => {
            report(&source, &error);
            return ExitCode::from(2);
        }
    };
    let _log_filter = init_tracing(&config.log);
    report_private(private);
    let runtime = match build_runtime(&config.runtime) {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("eragate pins seed: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(eragate::seed_pins(config, args.upstream.as_deref())) {
        Ok(seed) => {
            let text = serde_json::to_string_pretty(&seed.summary).unwrap_or_else(|_| seed.summary.to_string());
            println!("{text}");
            if seed.drifted {
                eprintln!(
                    "eragate pins seed: listings differ from the pins already written; nothing was overwritten (review with eragate pins diff, then approve or reset)"
                );
            }
            if seed.failed {
                eprintln!("eragate pins seed: some listings failed; see \"failed\" in the summary");
            }
            match seed.drifted || seed.failed {
                true => ExitCode::FAILURE,
                false => ExitCode::SUCCESS,
            }
        }
        Err(eragate::SeedError::Config(error)) => {
            report(&source, &error);
            ExitCode::from(2)
        }
        Err(eragate::SeedError::Failed(error)) => {
            eprintln!("eragate pins seed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn report(source: &str, error: &ConfigError) {
    eprintln!("{source}: {} problem(s)", error.issues.len());
    for issue in &error.issues {
        eprintln!("  {issue}");
    }
}

fn run(args: RunArgs, private: Result<(), String>) -> anyhow::Result<()> {
    let config = run_config(&args).map_err(|e| anyhow::anyhow!("invalid configuration:\n{e}"))?;
    let log_filter = init_tracing(&config.log);
    report_private(private);
    raise_file_limit();
    let runtime = build_runtime(&config.runtime)?;
    let listen = config.listen.address;
    let reloader = args.upstream.config.clone().map(|file| eragate::reload::Reloader {
        load: {
            let args = args.clone();
            Box::new(move || run_config(&args))
        },
        file: Some(file),
        poll: args.watch_config,
        log_filter: Some(log_filter),
    });
    runtime
        .block_on(eragate::run_reloading(
            config,
            reloader,
            shutdown_signal(),
            args.shutdown_grace,
        ))
        .with_context(|| format!("serving on {listen}"))
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE` 0): a process of the same
/// user, such as a stdio child, can then neither read its `/proc/<pid>/environ`
/// (`ERAGATE_SESSION_KEY`, token variables), `mem`, `maps` nor `fd`, nor attach
/// to it with ptrace; only a process with `CAP_SYS_PTRACE` (root) still can, and
/// no core dump is written. A child is dumpable again once it execs its program.
/// eragate reads none of its own `/proc` files for itself, and a process may
/// always read its own.
#[cfg(target_os = "linux")]
fn keep_memory_private() -> Result<(), String> {
    nix::sys::prctl::set_dumpable(false).map_err(|errno| format!("PR_SET_DUMPABLE: {errno}"))
}

#[cfg(not(target_os = "linux"))]
fn keep_memory_private() -> Result<(), String> {
    Err("not on Linux: no PR_SET_DUMPABLE".into())
}

/// Warns when [`keep_memory_private`] failed (after logging has started).
fn report_private(private: Result<(), String>) {
    if let Err(error) = private {
        tracing::warn!(%error, "could not make eragate's memory private: a child running as eragate's user can read its environment");
    }
}

/// Raises the soft limit on open files to the hard one, logging both figures:
/// a connection, a child's three pipes and every upstream socket each take a
/// descriptor, and the usual soft limit of 1,024 is reached by a few hundred
/// silent clients.
fn raise_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => tracing::info!(
                soft = hard,
                hard,
                was = soft,
                "open files limit raised to the hard limit"
            ),
            Err(error) => tracing::warn!(soft, hard, %error, "open files limit: cannot raise the soft limit"),
        },
        Ok((soft, hard)) => tracing::info!(soft, hard, "open files limit (the soft limit is the hard limit)"),
        Err(error) => tracing::warn!(%error, "open files limit unknown"),
    }
}

/// The runtime `[runtime]` asks for: one thread for everything, or a pool of workers
/// (tokio's default count, the CPUs eragate may use, unless `workers` says otherwise).
/// A pool of one worker is the one thread: a multi-thread runtime with a single worker
/// only adds its scheduler's bookkeeping (a clock read per task poll, its queue tuning)
/// and a hand-off between the worker and the thread that waits on it.
fn build_runtime(config: &RuntimeConfig) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = match (config.single_thread, worker_count(config)) {
        (true, _) | (false, 1) => tokio::runtime::Builder::new_current_thread(),
        (false, workers) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(workers);
            builder
        }
    };
    builder.enable_all().build().context("starting the runtime")
}

/// The workers a multi-thread runtime would have: `workers`, else `TOKIO_WORKER_THREADS`
/// (as tokio reads it), else the CPUs this process may run on (affinity mask, cgroup quota).
fn worker_count(config: &RuntimeConfig) -> usize {
    config
        .workers
        .or_else(|| {
            std::env::var("TOKIO_WORKER_THREADS")
                .ok()
                .and_then(|count| count.trim().parse().ok())
                .filter(|&count| count > 0)
        })
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// The configuration `eragate run` serves: the file, then the command line's
/// overrides, checked once they are all applied.
fn run_config(args: &RunArgs) -> Result<Config, ConfigError> {
    let mut config = unchecked_config(&args.upstream)?;
    if let Some(listen) = args.listen {
        // The built-in authorization server's issuer may follow the address, and the
        // resource side's issuer follows it.
        let issuer = |config: &Config| config.auth.server.as_ref().map(|s| s.issuer(&config.listen));
        let before = issuer(&config);
        config.listen.address = listen;
        if let (Some(before), Some(after), Some(oauth)) = (before, issuer(&config), config.auth.oauth.as_mut())
            && oauth.issuer == before
        {
            oauth.issuer = after;
        }
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let reload_interval = config.listen.tls.as_ref().map(|t| t.reload_interval);
        let mut tls = ListenTlsConfig::new(cert.clone(), key.clone());
        tls.reload_interval = reload_interval.unwrap_or(tls.reload_interval);
        config.listen.tls = Some(tls);
    }
    config.validate()?;
    Ok(config)
}

fn stdio(args: StdioArgs, private: Result<(), String>) -> anyhow::Result<()> {
    let config = build_config(&args.upstream).map_err(|e| anyhow::anyhow!("invalid configuration:\n{e}"))?;
    let _ = init_tracing(&config.log);
    report_private(private);
    raise_file_limit();
    let runtime = build_runtime(&config.runtime)?;
    runtime
        .block_on(eragate::run_stdio(config, args.upstream_name.as_deref()))
        .context("serving stdio")
}

/// The configuration of the file and `args`, checked.
fn build_config(args: &UpstreamArgs) -> Result<Config, ConfigError> {
    let config = unchecked_config(args)?;
    config.validate()?;
    Ok(config)
}

/// The configuration of the file (checked) with `args` applied (not checked yet).
fn unchecked_config(args: &UpstreamArgs) -> Result<Config, ConfigError> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let command_line_upstream = command_line_upstream(args)?;
    if config.sessions.key.is_none()
        && let Ok(text) = std::env::var("ERAGATE_SESSION_KEY")
    {
        let key = eragate::seal::SealKey::from_base64(&text).map_err(|e| ConfigError {
            issues: vec![eragate::config::ConfigIssue {
                path: "ERAGATE_SESSION_KEY".into(),
                message: e.to_string(),
            }],
        })?;
        config.sessions.key = Some(key);
    }
    if let Some(url) = &args.public_url {
        config.listen.public_url = Some(url.trim_end_matches('/').to_owned());
    }
    apply_auth_server_flags(&mut config, args)?;
    apply_oauth_flags(&mut config, args)?;
    if let Some(format) = args.log_format {
        config.log.format = format;
    }
    if let Some(upstream) = command_line_upstream {
        // The command line's upstream replaces whatever the file served at the same path.
        config.upstreams.retain(|u| u.path != upstream.path);
        config.upstreams.push(upstream);
    }
    Ok(config)
}

/// The upstream named by `--stdio`, `--http` or `--sse`, if any.
fn command_line_upstream(args: &UpstreamArgs) -> Result<Option<UpstreamConfig>, ConfigError> {
    let upstream = if let Some(line) = &args.stdio {
        let command = shell_words::split(line).map_err(|e| flag_error("--stdio", e.to_string()))?;
        Some(UpstreamConfig::with_transport(
            "stdio",
            Some(StdioConfig::from_command(command)),
            None,
            None,
        ))
    } else if let Some(url) = &args.http {
        let url = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| flag_error("--http", e.to_string()))?;
        Some(UpstreamConfig::with_transport(
            "http",
            None,
            Some(HttpConfig::single(url)),
            None,
        ))
    } else if let Some(url) = &args.sse {
        let url = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| flag_error("--sse", e.to_string()))?;
        Some(UpstreamConfig::with_transport(
            "sse",
            None,
            None,
            Some(SseConfig { url }),
        ))
    } else {
        None
    };
    Ok(upstream)
}

/// `--oauth-issuer` and `--scope` on top of the file's `[auth.oauth]` (with the
/// built-in authorization server, its issuer's).
fn apply_oauth_flags(config: &mut Config, args: &UpstreamArgs) -> Result<(), ConfigError> {
    if let Some(issuer) = &args.oauth_issuer {
        let oauth = config.auth.oauth.get_or_insert_with(|| OAuthConfig::for_issuer(issuer));
        oauth.issuer = issuer.clone();
    }
    if !args.scopes.is_empty() {
        if config.auth.oauth.is_none()
            && let Some(server) = &config.auth.server
        {
            config.auth.oauth = Some(OAuthConfig::for_issuer(&server.issuer(&config.listen)));
        }
        let Some(oauth) = config.auth.oauth.as_mut() else {
            return Err(flag_error(
                "--scope",
                "needs --oauth-issuer or --auth-server local (or [auth.oauth] or [auth.server])".into(),
            ));
        };
        for scope in &args.scopes {
            if !oauth.required_scopes.contains(scope) {
                oauth.required_scopes.push(scope.clone());
            }
            if !oauth.scopes_supported.is_empty() && !oauth.scopes_supported.contains(scope) {
                oauth.scopes_supported.push(scope.clone());
            }
        }
    }
    Ok(())
}

/// `--auth-server` and `--user` on top of the file's `[auth.server]`.
fn apply_auth_server_flags(config: &mut Config, args: &UpstreamArgs) -> Result<(), ConfigError> {
    if let Some(AuthServerFlag::Local) = args.auth_server {
        let server = config.auth.server.get_or_insert_with(AuthServerConfig::default);
        server.login = LoginSource::Local;
    }
    if args.users.is_empty() {
        return Ok(());
    }
    let Some(server) = config.auth.server.as_mut() else {
        return Err(flag_error(
            "--user",
            "needs --auth-server local (or [auth.server])".into(),
        ));
    };
    for user in &args.users {
        let Some((name, hash)) = user.split_once(':') else {
            return Err(flag_error("--user", format!("{user:?} is not NAME:ARGON2HASH")));
        };
        server.users.retain(|u| u.name != name);
        server.users.push(LocalUser {
            name: name.to_owned(),
            password_argon2: hash.to_owned(),
        });
    }
    Ok(())
}

/// `eragate hash-password`: the Argon2id PHC string of the line on stdin.
fn hash_password() -> ExitCode {
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line).is_err() {
        eprintln!("error: cannot read the password from stdin");
        return ExitCode::FAILURE;
    }
    let password = line.trim_end_matches(['\r', '\n']);
    match eragate::authz::hash_password(password) {
        Ok(hash) => {
            println!("{hash}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `check-config` starts the members of every `prefix_mode = "never"`
/// federation and lists their names: two members sharing one is an error
/// (`run` would refuse to start). Nothing is started for other configurations.
fn probe_federations(config: &Config) -> Option<ConfigError> {
    let never = Some(eragate::federate::names::PrefixMode::Never);
    if !config.upstreams.iter().any(|u| u.prefix_mode == never) {
        return None;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().ok()?;
    match runtime.block_on(eragate::federation_collisions(config.clone())) {
        Ok(issues) if issues.is_empty() => None,
        Ok(issues) => Some(ConfigError { issues }),
        Err(error) => Some(flag_error(
            "upstreams",
            format!("cannot start the federation's members: {error}"),
        )),
    }
}

/// `check-config` tries the authorization server once: unreachable is a warning
/// (`run` retries in the background), not an error.
fn probe_issuer(config: &Config) {
    if config.auth.oauth.is_none() || config.auth.server.is_some() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    let result = runtime.block_on(async {
        let auth = eragate::auth::Authenticator::from_config(config)?;
        let Some(oauth) = auth.oauth() else { return Ok(None) };
        Ok::<_, String>(Some((oauth.issuer().to_owned(), oauth.load_now().await)))
    });
    match result {
        Ok(Some((issuer, Ok(())))) => println!("auth.oauth.issuer: {issuer}: metadata and keys found"),
        Ok(Some((issuer, Err(error)))) => eprintln!(
            "warning: auth.oauth.issuer: {issuer} is not usable now ({error}); eragate run starts anyway and retries in the background"
        ),
        Ok(None) => {}
        Err(error) => eprintln!("warning: {error}"),
    }
}

fn flag_error(flag: &str, message: String) -> ConfigError {
    ConfigError {
        issues: vec![eragate::config::ConfigIssue {
            path: flag.into(),
            message,
        }],
    }
}

/// Logs to stderr as `log` says; what changes the filter afterwards (a reload of `[log] level`).
fn init_tracing(log: &LogConfig) -> eragate::reload::LogFilter {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(log.filter()).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    fn setter<L, S>(handle: tracing_subscriber::reload::Handle<L, S>) -> eragate::reload::LogFilter
    where
        L: From<EnvFilter> + Send + Sync + 'static,
        S: 'static,
    {
        Box::new(move |directives: &str| {
            let filter = EnvFilter::try_new(directives).map_err(|e| e.to_string())?;
            handle.reload(filter).map_err(|e| e.to_string())
        })
    }
    match log.format {
        LogFormat::Text => {
            let builder = builder.with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            setter(handle)
        }
        LogFormat::Json => {
            let builder = builder
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            setter(handle)
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        // Without signal handlers, run until killed.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
}
