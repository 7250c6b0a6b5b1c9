//! Hot reload: on SIGHUP, or when the configuration file changes, the
//! configuration is loaded again and checked exactly as `check-config` checks
//! it. An invalid one is refused, its problems logged one per line, and the
//! running one kept. A valid one replaces the upstreams: an unchanged upstream
//! keeps its backend and warm sessions; a new or changed one gets a new backend
//! that takes every new request and session; a replaced or removed one drains
//! (its legacy sessions, streams and requests in flight finish on it) and is
//! closed once nothing uses it, or after `sessions.idle_timeout`.
//!
//! Besides `[[upstreams]]`, `[rate_limits]` is reloaded (a new gate: counts
//! start afresh) and so is `[limits]` but for `max_ended_sessions` (a set sized
//! at start): its bounds and `listen.max_body_bytes` apply to the next request,
//! its connection timeouts and caps to the next connection accepted, and its
//! quotas (`max_in_flight_per_principal`, `max_listens_per_principal`,
//! `max_listens`) at once (what is held above a lowered bound stays until it
//! ends). `[auth.oauth]` is reloaded (a new resource server: the
//! issuer, audience, keys, introspection and scopes of new requests; one in
//! flight finishes under the one that admitted it), and so are `[telemetry]`
//! (a new trace pipeline: spans of requests begun before end in the old one,
//! flushed once they have) and `[log]` but for `format` (the logger's shape is
//! built at start). `listen.sse_keep_alive` and `listen.stream_after` are read
//! for each answer and stream: a reload applies them to the next one (a stream
//! already open keeps its keep-alive interval). Requests in flight are not
//! disturbed. A reload that moves the listen address or turns the TLS listener
//! on or off is refused (the bound socket cannot change). The rest of `[listen]`, `[admin]`, `[sessions]`,
//! `[auth]` (static tokens and eragate's own `[auth.server]`, whose keys it
//! holds), `[runtime]`, `[log] format` (the process-wide logger is installed once) and
//! `limits.max_ended_sessions` (the session store's bound, fixed when it is
//! made) and every `[upstreams.pins]` (the pin books are made with the gateway) are read at start: a change to them is logged as needing a restart and
//! otherwise ignored (README, "Reload", says why each stays so).
//! A reload that would name a new secret variable (an upstream credential's
//! `value_env`...) is refused: children's environment filters are fixed at
//! start. SIGHUP also reloads the TLS certificate at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::config::{Config, ConfigError, LimitsConfig};
use crate::edge::tls::Certificates;
use crate::gateway::{Gateway, Reconfigurable};
use crate::router::Backend;

/// Builds the configuration again (the file and the command line's overrides).
pub(crate) type Loader = Box<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

/// Sets the log filter (`tracing` directives) of the running process.
pub type LogFilter = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// How and when to reload.
pub struct Reloader {
    /// Loads the configuration.
    pub load: Loader,
    /// The file to poll for changes (modification time and size), if any.
    pub file: Option<PathBuf>,
    /// How often to poll it; zero: only on SIGHUP.
    pub poll: Duration,
    /// Changes the log filter (`[log] level`), when the process's logger can.
    pub log_filter: Option<LogFilter>,
}

/// SIGHUP, caught from now on (before the listener is bound: a SIGHUP's
/// default action would end the process).
pub(crate) fn hangups() -> Option<Signal> {
    match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(error) => {
            tracing::warn!(%error, "no SIGHUP handler: the configuration reloads only when its file changes");
            None
        }
    }
}

/// Reloads on `hangup` and on file changes until the gateway closes.
pub(crate) fn spawn(
    gateway: Arc<Gateway>,
    reloader: Reloader,
    mut hangup: Option<Signal>,
    certificates: Option<Arc<Certificates>>,
) {
    tokio::spawn(async move {
        let poll = if reloader.poll.is_zero() {
            Duration::from_secs(3600)
        } else {
            reloader.poll
        };
        let mut ticker = tokio::time::interval(poll);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen = stamp(reloader.file.as_ref());
        // What the last applied reload asked for (the start's configuration at first).
        let mut running = gateway.reconfigurable().started().clone();
        loop {
            let hung_up = async {
                match hangup.as_mut() {
                    Some(hangup) => hangup.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = hung_up => {
                    tracing::info!("SIGHUP: reloading the configuration");
                    if let Some(certificates) = &certificates {
                        certificates.reload_logged(true);
                    }
                    seen = stamp(reloader.file.as_ref());
                }
                _ = ticker.tick(), if !reloader.poll.is_zero() => {
                    let now = stamp(reloader.file.as_ref());
                    if now == seen {
                        continue;
                    }
                    seen = now;
                    tracing::info!(file = ?reloader.file, "the configuration file changed: reloading");
                }
                () = gateway.reconfigurable().closing().cancelled() => return,
            }
            if let Some(applied) = apply(gateway.reconfigurable(), &running, (reloader.load)()) {
                if running.log.filter() != applied.log.filter()
                    && let Some(set) = &reloader.log_filter
                {
                    match set(&applied.log.filter()) {
                        Ok(()) => tracing::info!(level = applied.log.filter(), "[log] level reloaded"),
                        Err(error) => tracing::error!(%error, "[log] level not applied"),
                    }
                }
                running = applied;
            }
        }
    });
}

fn stamp(file: Option<&PathBuf>) -> Option<(Option<SystemTime>, u64)> {
    let metadata = std::fs::metadata(file?).ok()?;
    Some((metadata.modified().ok(), metadata.len()))
}

/// Applies `loaded` to `gateway`, which runs `running` (or refuses it),
/// logging what happened; the configuration now applied, if it was.
pub(crate) fn apply(
    gateway: Reconfigurable<'_>,
    running: &Config,
    loaded: Result<Config, ConfigError>,
) -> Option<Config> {
    let mut config = match loaded {
        Ok(config) => config,
        Err(error) => {
            for issue in &error.issues {
                tracing::error!("{issue}");
            }
            tracing::error!(
                problems = error.issues.len(),
                "configuration refused; still serving the previous one"
            );
            return None;
        }
    };
    if config.listen.public_url.is_none() {
        // The running one was completed from the bound address at start.
        config.listen.public_url.clone_from(&running.listen.public_url);
    }
    if let Some(why) = unbindable(running, &config) {
        tracing::error!("configuration refused: {why}; restart eragate to apply it; still serving the previous one");
        return None;
    }
    // Built before anything is swapped, so that a resource server or an exporter
    // that cannot be built refuses the whole configuration.
    if let Err(why) = apply_auth(gateway, running, &config) {
        tracing::error!("configuration refused: {why}; still serving the previous one");
        return None;
    }
    let protected = running.secret_env_names();
    let new_secrets: Vec<String> = config
        .secret_env_names()
        .into_iter()
        .filter(|name| !protected.contains(name))
        .collect();
    if !new_secrets.is_empty() {
        tracing::error!(
            variables = ?new_secrets,
            "configuration refused: it names secret variables the running one does not (restart eragate to use them); still serving the previous one"
        );
        return None;
    }
    for section in needing_restart(running, &config) {
        tracing::warn!(
            section,
            "[{section}] changed: it is read at start only; restart eragate to apply it"
        );
    }
    apply_policies(gateway, running, &config);
    let within = config.sessions.idle_timeout.0;
    match gateway.telemetry().reload(running, &config, within) {
        Ok(()) if running.telemetry != config.telemetry => tracing::info!("[telemetry] reloaded"),
        Ok(()) => {}
        Err(error) => tracing::error!(%error, "[telemetry] not reloaded: the running pipeline is kept"),
    }
    let reloaded = gateway.router().reload(&config.upstreams);
    for backend in &reloaded.started {
        gateway.start_backend(backend);
    }
    let started: Vec<&str> = reloaded.started.iter().map(Backend::name).collect();
    let retired: Vec<&str> = reloaded.retired.iter().map(Backend::name).collect();
    tracing::info!(kept = ?reloaded.kept, ?started, draining = ?retired, "configuration reloaded");
    let deadline = running.sessions.idle_timeout.0;
    for backend in reloaded.retired {
        tokio::spawn(drain(backend, deadline));
    }
    gateway.applied(config.clone());
    Some(config)
}

/// Why the listener cannot take `new` without a restart, if it cannot.
fn unbindable(running: &Config, new: &Config) -> Option<String> {
    if running.listen.address != new.listen.address {
        return Some(format!(
            "listen.address moved from {} to {} (the bound socket cannot change)",
            running.listen.address, new.listen.address
        ));
    }
    match (&running.listen.tls, &new.listen.tls) {
        (None, Some(_)) => Some("[listen.tls] turns TLS on (the listener is plain HTTP)".into()),
        (Some(_), None) => Some("[listen.tls] is gone (the listener serves TLS)".into()),
        _ => None,
    }
}

/// Swaps in a new OAuth resource server when `[auth.oauth]`, the public URL or
/// the upstream paths it protects changed (not for `[auth.server]`, whose keys
/// are eragate's own: read at start).
fn apply_auth(gateway: Reconfigurable<'_>, running: &Config, new: &Config) -> Result<(), String> {
    let paths = |config: &Config| config.upstreams.iter().map(|u| u.path.clone()).collect::<Vec<_>>();
    let changed = running.auth.oauth != new.auth.oauth
        || running.listen.public_url != new.listen.public_url
        || (new.auth.oauth.is_some() && paths(running) != paths(new));
    if !changed || running.auth.server.is_some() || new.auth.server.is_some() {
        return Ok(());
    }
    gateway.auth().reload_oauth(new)?;
    tracing::info!(
        issuer = new.auth.oauth.as_ref().map(|o| o.issuer.as_str()),
        "[auth.oauth] reloaded"
    );
    Ok(())
}

/// Swaps in `[rate_limits]` and the quota bounds of `[limits]` where they changed.
fn apply_policies(gateway: Reconfigurable<'_>, running: &Config, new: &Config) {
    if running.rate_limits != new.rate_limits {
        let gate = std::sync::Arc::new(crate::bridge::rate::RateGate::new(new));
        gate.spawn_forgetting();
        gateway.replace_rate_gate(gate);
        tracing::info!("[rate_limits] reloaded (counts start afresh)");
    }
    let limits = &new.limits;
    if running.limits.max_upstream_values != limits.max_upstream_values {
        crate::router::set_max_message_values(limits.max_upstream_values);
    }
    if running.limits.max_upstream_buffered_bytes != limits.max_upstream_buffered_bytes {
        crate::router::set_max_buffered_bytes(limits.max_upstream_buffered_bytes);
    }
    if running.limits != *limits || running.listen.max_body_bytes != new.listen.max_body_bytes {
        tracing::info!("[limits] reloaded");
    }
    let (was, now) = (&running.listen, &new.listen);
    if (was.sse_keep_alive, was.stream_after) != (now.sse_keep_alive, now.stream_after) {
        tracing::info!(
            sse_keep_alive = ?now.sse_keep_alive.0,
            stream_after = ?now.stream_after.0,
            "[listen] stream timing reloaded"
        );
    }
    if !same_quotas(&running.limits, limits) {
        gateway.set_quotas(limits);
        tracing::info!(
            max_in_flight_per_principal = limits.in_flight_per_principal(),
            max_listens_per_principal = limits.max_listens_per_principal,
            max_listens = limits.max_listens,
            "[limits] quotas reloaded"
        );
    }
}

fn same_quotas(a: &LimitsConfig, b: &LimitsConfig) -> bool {
    (
        a.max_in_flight_per_principal,
        a.max_listens_per_principal,
        a.max_listens,
    ) == (
        b.max_in_flight_per_principal,
        b.max_listens_per_principal,
        b.max_listens,
    )
}

/// The sections read at start only that differ.
fn needing_restart(running: &Config, new: &Config) -> Vec<&'static str> {
    // `max_body_bytes` is read per request, the stream timing per answer or stream.
    let mut listen = new.listen.clone();
    listen.max_body_bytes = running.listen.max_body_bytes;
    listen.sse_keep_alive = running.listen.sse_keep_alive;
    listen.stream_after = running.listen.stream_after;
    // Every key of `[limits]` is read per request or per connection but the size
    // of the ended-session set, made at start.
    let mut limits = running.limits.clone();
    limits.max_ended_sessions = new.limits.max_ended_sessions;
    // `[auth.oauth]` is reloaded (unless eragate is its own authorization server).
    let mut auth = new.auth.clone();
    if running.auth.server.is_none() && new.auth.server.is_none() {
        auth.oauth.clone_from(&running.auth.oauth);
    }
    // `[upstreams.pins]` is read at start: the pin books are made with the gateway.
    let pins = |config: &Config| -> Vec<(String, crate::config::PinsConfig)> {
        let unpinned = crate::config::PinsConfig::default();
        config
            .upstreams
            .iter()
            .filter(|u| u.pins != unpinned)
            .map(|u| (u.name.clone(), u.pins.clone()))
            .collect()
    };
    // `[log]` is reloaded but for its format (the logger is built at start).
    let changed = [
        ("upstreams.pins", pins(running) != pins(new)),
        ("listen", running.listen != listen),
        ("admin", running.admin != new.admin),
        ("sessions", running.sessions != new.sessions),
        ("auth", running.auth != auth),
        ("limits", running.limits != limits),
        ("log", running.log.format != new.log.format),
        ("runtime", running.runtime != new.runtime),
    ];
    changed
        .into_iter()
        .filter(|(_, differ)| *differ)
        .map(|(section, _)| section)
        .collect()
}

/// Closes a retired backend once nothing uses it (or at `deadline`).
async fn drain(backend: Backend, deadline: Duration) {
    let start = Instant::now();
    while !backend.is_unused() && start.elapsed() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tracing::info!(upstream = backend.name(), "drained upstream closed");
    backend.close_all();
}
