//! Telemetry: what eragate tells operators about the requests it serves.
//! A request's [`Exchange`] record is opened when the bridge dispatches it and
//! closed when its response (or the client's departure) is known; closing it
//! counts the request (`metrics`), writes its access-log line, and marks the
//! upstream's last success. Handlers never branch on telemetry; they carry the
//! record. This room never changes what a client or an upstream sees.

pub(crate) mod labels;
pub(crate) mod metrics;
pub(crate) mod otel_env;
pub(crate) mod otlp;
pub(crate) mod trace;
pub(crate) mod upstream;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use arc_swap::ArcSwapOption;
use serde_json::Value;

pub use labels::{MethodLabel, Outcome};
use metrics::{Cell, Metrics};
pub use upstream::UpstreamStats;

use crate::config::{Config, LogFormat};
use crate::protocol::{Era, Revision};

/// The telemetry of one gateway: its metrics and what it logs. Everything but the
/// metrics follows a reload (`Telemetry::reload`).
pub struct Telemetry {
    metrics: Metrics,
    /// One `eragate::access` line per request (`[log] access`).
    access_log: AtomicBool,
    /// `server/discover` answers carry a live summary of the upstream (`[telemetry] live_discover`).
    live_discover: AtomicBool,
    /// Spans exported over OTLP (`[telemetry] otlp_endpoint`); a reload swaps the
    /// pipeline, and a request keeps the one it began under.
    tracing: ArcSwapOption<trace::Tracing>,
}

impl Telemetry {
    /// The telemetry `config` asks for. With traces, this must run inside the
    /// tokio runtime; it fails when the OTLP exporter cannot be built.
    pub fn new(config: &Config) -> Result<Telemetry, String> {
        Ok(Telemetry {
            metrics: Metrics::default(),
            access_log: AtomicBool::new(access_log(config)),
            live_discover: AtomicBool::new(config.telemetry.live_discover),
            tracing: ArcSwapOption::new(trace::Tracing::from_config(&config.telemetry)?.map(Arc::new)),
        })
    }

    /// Applies a reloaded `new` configuration where it differs from `running`: the
    /// access log, the live discover summary and, when `[telemetry]`'s trace keys
    /// changed, a new trace pipeline (sampling ratio, OTLP endpoint, service name).
    /// Requests already begun end their spans in the old pipeline, which is flushed
    /// and stopped once none holds it any more (or after `within`). Must run inside
    /// the tokio runtime.
    pub(crate) fn reload(&self, running: &Config, new: &Config, within: std::time::Duration) -> Result<(), String> {
        self.access_log.store(access_log(new), Ordering::Relaxed);
        self.live_discover.store(new.telemetry.live_discover, Ordering::Relaxed);
        let (mut old, mut fresh) = (running.telemetry.clone(), new.telemetry.clone());
        old.live_discover = false;
        fresh.live_discover = false;
        if old == fresh {
            return Ok(());
        }
        let tracing = trace::Tracing::from_config(&new.telemetry)?.map(Arc::new);
        if let Some(retired) = self.tracing.swap(tracing) {
            tokio::spawn(trace::Tracing::retire(retired, within));
        }
        Ok(())
    }

    /// Flushes the spans still buffered (shutdown).
    pub(crate) async fn shutdown(&self) {
        if let Some(tracing) = self.tracing.load_full() {
            tracing.shutdown(std::time::Duration::from_secs(5)).await;
        }
    }

    /// Opens the record of a request for `method` on the upstream counting into
    /// `upstream`; `traceparent` is the client's trace context, if it sent one.
    pub fn begin(
        self: &Arc<Self>,
        method: MethodLabel,
        upstream: &Arc<UpstreamStats>,
        traceparent: Option<&str>,
    ) -> Exchange {
        Exchange {
            trace: self
                .tracing
                .load()
                .as_ref()
                .and_then(|tracing| tracing.request_span(method.as_str(), traceparent, upstream.shared_name())),
            target: None,
            telemetry: self.clone(),
            started: Instant::now(),
            method,
            era: Era::Legacy,
            revision: None,
            upstream: upstream.clone(),
            session: None,
            end: None,
        }
    }

    /// Whether requests are traced (`[telemetry] otlp_endpoint`).
    pub(crate) fn is_tracing(&self) -> bool {
        self.tracing.load().is_some()
    }

    /// Whether `server/discover` answers carry the live summary.
    pub(crate) fn live_discover(&self) -> bool {
        self.live_discover.load(Ordering::Relaxed)
    }

    /// The client revisions seen so far, by era (for the status page).
    pub(crate) fn revisions(&self) -> Value {
        self.metrics.revisions_view()
    }

    /// Every metric in Prometheus text format; `pools` is the admin view of the upstreams.
    pub(crate) fn render(&self, pools: &Value) -> String {
        let mut out = String::with_capacity(16 * 1024);
        self.metrics.render(&mut out);
        upstream::render_pools(pools, &mut out);
        out
    }
}

/// Whether `config` asks for access-log lines.
fn access_log(config: &Config) -> bool {
    config.log.access.unwrap_or(config.log.format == LogFormat::Json)
}

/// One client request on its way through the gateway. Dropped without
/// [`Exchange::finish`] (the client left, the request's future was dropped),
/// it counts as [`Outcome::Cancelled`].
pub struct Exchange {
    telemetry: Arc<Telemetry>,
    started: Instant,
    method: MethodLabel,
    era: Era,
    revision: Option<Revision>,
    upstream: Arc<UpstreamStats>,
    /// The legacy client's session id (only its fingerprint is ever written).
    session: Option<Arc<str>>,
    end: Option<End>,
    /// The request's span, when it is traced (sampled).
    trace: Option<trace::Traced>,
    /// The tool, prompt or resource asked for (kept only for a recorded span).
    target: Option<String>,
}

/// How a request ended, as the client saw it.
#[derive(Clone, Copy, Debug)]
struct End {
    outcome: Outcome,
    /// The HTTP status the answer maps to.
    status: u16,
    /// The JSON-RPC error code, if the answer was an error.
    code: Option<i64>,
}

impl Exchange {
    /// Classification found the client's era and (when known) its revision.
    pub fn classified(&mut self, era: Era, revision: Option<Revision>) {
        self.era = era;
        if revision.is_some() {
            self.revision = revision;
        }
    }

    /// The legacy client session the request belongs to.
    pub(crate) fn in_session(&mut self, id: &Arc<str>, revision: Revision) {
        self.session = Some(id.clone());
        self.revision = Some(revision);
    }

    /// A legacy client negotiated `revision` (its `initialize` was answered).
    pub(crate) fn negotiated(&mut self, id: &Arc<str>, revision: Revision) {
        self.in_session(id, revision);
        self.count_revision();
    }

    /// Counts the client's revision (a modern request declares one each time).
    pub fn count_revision(&self) {
        let era = labels::era_index(self.era);
        self.telemetry
            .metrics
            .record_revision(era, labels::revision_index(self.revision));
    }

    /// The client's era as classified.
    pub(crate) fn era(&self) -> Era {
        self.era
    }

    /// The request's span, as the parent of the upstream calls made for it.
    pub(crate) fn trace(&self) -> Option<trace::Traced> {
        self.trace.clone()
    }

    /// The tool, prompt or resource the request names (recorded on its span only).
    pub fn names(&mut self, target: impl FnOnce() -> Option<String>) {
        if self.trace.is_some() {
            self.target = target();
        }
    }

    /// The request ended with `outcome`, answered with HTTP `status` and JSON-RPC error `code`.
    pub fn finish(mut self, outcome: Outcome, status: u16, code: Option<i64>) {
        self.end = Some(End { outcome, status, code });
    }

    fn close(&mut self, end: End) {
        let took = self.started.elapsed();
        let cell = Cell {
            era: labels::era_index(self.era),
            revision: labels::revision_index(self.revision),
            method: self.method.index(),
            outcome: end.outcome,
        };
        self.telemetry.metrics.record(cell, took);
        if end.outcome == Outcome::Ok {
            self.upstream.succeeded();
        }
        if self.telemetry.access_log.load(Ordering::Relaxed) {
            self.log(end, took);
        }
        if let Some(span) = self.trace.take() {
            self.end_span(span, end);
        }
    }

    fn end_span(&mut self, span: trace::Traced, end: End) {
        span.end(trace::RequestEnd {
            era: labels::ERAS[labels::era_index(self.era)],
            revision: labels::REVISIONS[labels::revision_index(self.revision)],
            outcome: end.outcome.as_str(),
            ok: matches!(end.outcome, Outcome::Ok | Outcome::Accepted),
            status: end.status,
            code: end.code,
            target: self.target.take(),
        });
    }

    fn log(&self, end: End, took: std::time::Duration) {
        let session = self.session.as_deref().map(crate::seal::fingerprint);
        tracing::info!(
            target: "eragate::access",
            method = self.method.as_str(),
            era = labels::ERAS[labels::era_index(self.era)],
            revision = labels::REVISIONS[labels::revision_index(self.revision)],
            upstream = self.upstream.name(),
            status = end.status,
            outcome = end.outcome.as_str(),
            code = end.code,
            duration_ms = took.as_secs_f64() * 1000.0,
            session = session.as_deref(),
            "request"
        );
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let end = self.end.take().unwrap_or(End {
            outcome: Outcome::Cancelled,
            status: 499,
            code: None,
        });
        self.close(end);
    }
}
