//! Traces: one span per client request and one per upstream call, exported as
//! OTLP over HTTP/protobuf. The request span's parent is the client's W3C trace
//! context (`params._meta.traceparent` of 2026-07-28, or the `traceparent`
//! header); an upstream call's parent is the request span, carried to it in a
//! task-local while the request is dispatched, and its context goes on to the
//! upstream (the header toward HTTP, `_meta` toward a 2026-07-28 upstream).
//! Off unless `[telemetry] otlp_endpoint` is set; then a request outside the
//! sample costs one random draw and no span.
//!
//! Spans are eragate's own, not an OpenTelemetry SDK's: a request span is one
//! shared record of ids and a start time, an upstream call's a light child of
//! it, and each becomes a fixed [`SpanRecord`] when it ends, pushed on a bounded
//! queue that one task drains every [`EXPORT_EVERY`] (or at [`BATCH`] spans) and
//! encodes straight to OTLP protobuf ([`super::otlp`]). The sampler is the
//! SDK's `ParentBased(TraceIdRatioBased)`: a client's sampled parent is followed,
//! its unsampled one too, and a new trace is sampled when its id falls under
//! the ratio. Why eragate's own spans and not the SDK's: bench/NOTES.md, "Traces".

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::otel_env::TraceSettings;
use super::otlp::{AttributeValue, Attributes, Kind, OtlpExporter, SpanRecord, SpanStatus, Text, now_unix_nanos};
use crate::config::TelemetryConfig;

/// How often queued spans are exported.
pub(crate) const EXPORT_EVERY: Duration = Duration::from_secs(2);
/// Queued spans that make the exporter send at once.
pub(crate) const BATCH: usize = 512;
/// Most spans queued; past it a span is dropped (and counted).
pub(crate) const QUEUE_BOUND: usize = 8192;

tokio::task_local! {
    /// The request span of the request being dispatched on this task.
    static REQUEST: Traced;
    /// The `traceparent` header of the HTTP request being dispatched on this task.
    static HEADER: String;
}

/// Runs `future` (an HTTP request's dispatch) with the client's `traceparent` header;
/// only a traced gateway calls it, because each wrapper copies the request's
/// several-KiB future, and untraced requests are awaited as they are.
pub(crate) fn with_header<F: Future>(traceparent: String, future: F) -> impl Future<Output = F::Output> {
    HEADER.scope(traceparent, future)
}

/// The client's `traceparent` header, when the edge found one (see [`with_header`]).
pub(crate) fn header() -> Option<String> {
    HEADER.try_with(String::clone).ok()
}

/// A W3C trace context: ids and flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TraceContext {
    /// The trace's id (never all zeros).
    pub(crate) trace_id: [u8; 16],
    /// The span's id (never all zeros).
    pub(crate) span_id: [u8; 8],
    /// Trace flags (bit 0: sampled).
    pub(crate) flags: u8,
}

impl TraceContext {
    /// Whether the sampled flag is set.
    pub(crate) fn is_sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

/// The spans waiting for the exporter.
struct Queue {
    spans: Mutex<Vec<SpanRecord>>,
    /// Wakes the exporter when a batch is full.
    full: Notify,
    /// Spans dropped because the queue was full.
    dropped: AtomicU64,
}

impl Queue {
    fn push(&self, span: SpanRecord) {
        let Ok(mut spans) = self.spans.lock() else { return };
        if spans.len() >= QUEUE_BOUND {
            drop(spans);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        spans.push(span);
        if spans.len() == BATCH {
            self.full.notify_one();
        }
    }

    /// What is queued, swapped with `spare` (emptied, its room kept): the two buffers
    /// take turns, so the queue neither grows again span by span nor allocates a
    /// new buffer (hundreds of KiB) for each batch.
    fn take(&self, spare: &mut Vec<SpanRecord>) {
        spare.clear();
        if let Ok(mut spans) = self.spans.lock() {
            std::mem::swap(&mut *spans, spare);
        }
    }
}

/// The trace pipeline of one gateway (a reload may make another): the sampler and the
/// queue its exporter task drains.
pub(crate) struct Tracing {
    /// A new trace is sampled when the top 63 bits of its id's low half fall under this.
    sample_bound: u64,
    /// Every trace sampled (`sample_ratio = 1.0`).
    sample_all: bool,
    /// A request under a client's trace is sampled as its parent was (a
    /// parent-based sampler); otherwise by the ratio, in the parent's trace.
    follow_parent: bool,
    queue: Arc<Queue>,
    /// Cancelled to flush the queue and stop the exporter.
    stop: tokio_util::sync::CancellationToken,
    /// The exporter's task, until it is awaited at shutdown.
    exporter: Mutex<Option<tokio::task::JoinHandle<()>>>,
    stopped: AtomicBool,
}

impl Tracing {
    /// The pipeline `config` asks for, or `None` without `otlp_endpoint`.
    /// Must run inside the tokio runtime (the exporter is a task of it).
    pub(crate) fn from_config(config: &TelemetryConfig) -> Result<Option<Tracing>, String> {
        let settings = TraceSettings::resolve(config, |name| std::env::var(name).ok());
        for warning in &settings.warnings {
            tracing::warn!("{warning}");
        }
        let Some(endpoint) = &settings.endpoint else {
            return Ok(None);
        };
        let endpoint: http::Uri = endpoint.parse().map_err(|e| format!("telemetry.otlp_endpoint: {e}"))?;
        let timeout = Duration::from_secs(10);
        let client = opentelemetry_http::hyper::HyperClient::with_default_connector(timeout, None);
        let exporter = OtlpExporter::new(client, endpoint, &settings, timeout)?;
        let queue = Arc::new(Queue {
            spans: Mutex::new(Vec::new()),
            full: Notify::new(),
            dropped: AtomicU64::new(0),
        });
        let stop = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(export(queue.clone(), exporter, stop.clone()));
        let ratio = settings.ratio;
        Ok(Some(Tracing {
            sample_bound: (ratio * (1u64 << 63) as f64) as u64,
            sample_all: ratio >= 1.0,
            follow_parent: settings.follow_parent,
            queue,
            stop,
            exporter: Mutex::new(Some(task)),
            stopped: AtomicBool::new(false),
        }))
    }

    /// Starts the span of a client request for `method`, child of `traceparent` when
    /// valid; `None` when the request is not sampled. `upstream` names the upstream.
    pub(crate) fn request_span(
        self: &Arc<Self>,
        method: &'static str,
        traceparent: Option<&str>,
        upstream: Arc<str>,
    ) -> Option<Traced> {
        let parent = traceparent.and_then(parse_traceparent);
        let trace_id = match &parent {
            Some(parent) if self.follow_parent && !parent.is_sampled() => return None,
            Some(parent) if self.follow_parent => parent.trace_id,
            Some(parent) if !self.samples(&parent.trace_id) => return None,
            Some(parent) => parent.trace_id,
            None => {
                let trace_id = new_trace_id();
                if !self.samples(&trace_id) {
                    return None;
                }
                trace_id
            }
        };
        Some(Traced(Arc::new(RequestSpan {
            context: TraceContext {
                trace_id,
                span_id: new_span_id(),
                flags: 1,
            },
            parent: parent.map(|p| p.span_id),
            method,
            upstream,
            start_unix_nanos: now_unix_nanos(),
            tracing: self.clone(),
        })))
    }

    /// `TraceIdRatioBased`: the low 64 bits of the id, shifted right once, under the bound.
    fn samples(&self, trace_id: &[u8; 16]) -> bool {
        if self.sample_all {
            return true;
        }
        let mut low = [0u8; 8];
        low.copy_from_slice(&trace_id[8..]);
        (u64::from_be_bytes(low) >> 1) < self.sample_bound
    }

    /// A pipeline a reload replaced: flushed and stopped once no request holds it
    /// (their spans end in it), or after `within`.
    pub(crate) async fn retire(retired: Arc<Tracing>, within: Duration) {
        let start = std::time::Instant::now();
        while Arc::strong_count(&retired) > 1 && start.elapsed() < within {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        retired.shutdown(Duration::from_secs(5)).await;
    }

    /// Sends what is queued and stops the exporter (shutdown), waiting at most `within`.
    pub(crate) async fn shutdown(&self, within: Duration) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        self.stop.cancel();
        let task = self.exporter.lock().ok().and_then(|mut task| task.take());
        if let Some(task) = task {
            let _ = tokio::time::timeout(within, task).await;
        }
        let dropped = self.queue.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(dropped, "spans dropped: the export queue was full");
        }
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        // A pipeline dropped without shutdown (a failed start) still stops its exporter.
        self.stop.cancel();
    }
}

/// Drains `queue` every [`EXPORT_EVERY`], or when a batch is full, until `stop`; then once more.
async fn export<C: opentelemetry_http::HttpClient + 'static>(
    queue: Arc<Queue>,
    mut exporter: OtlpExporter<C>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut batch = Vec::new();
    loop {
        let stopping = tokio::select! {
            () = tokio::time::sleep(EXPORT_EVERY) => false,
            () = queue.full.notified() => false,
            () = stop.cancelled() => true,
        };
        loop {
            queue.take(&mut batch);
            if batch.is_empty() {
                break;
            }
            if let Err(error) = exporter.export(&batch).await {
                tracing::warn!(%error, spans = batch.len(), "spans not exported");
            }
            if !stopping {
                break;
            }
        }
        if stopping {
            return;
        }
    }
}

/// A sampled request's span: its context, what it records, and the pipeline its
/// spans go to (held until the request ends, so a reload's new pipeline takes none
/// of them). Cheap to clone: upstream calls made for it share it.
#[derive(Clone)]
pub(crate) struct Traced(Arc<RequestSpan>);

struct RequestSpan {
    context: TraceContext,
    /// The client's span, if it sent a context.
    parent: Option<[u8; 8]>,
    method: &'static str,
    upstream: Arc<str>,
    start_unix_nanos: u64,
    tracing: Arc<Tracing>,
}

/// What a request span records when the request ends.
pub(crate) struct RequestEnd {
    /// The client's era label.
    pub(crate) era: &'static str,
    /// The client's revision label.
    pub(crate) revision: &'static str,
    /// The outcome label.
    pub(crate) outcome: &'static str,
    /// Whether it succeeded.
    pub(crate) ok: bool,
    /// The HTTP status the answer maps to.
    pub(crate) status: u16,
    /// The JSON-RPC error code, if the answer was an error.
    pub(crate) code: Option<i64>,
    /// The tool, prompt or resource asked for.
    pub(crate) target: Option<String>,
}

impl Traced {
    /// The request span's context.
    pub(crate) fn context(&self) -> TraceContext {
        self.0.context
    }

    /// Ends the span with what `end` says and queues it for export.
    pub(crate) fn end(self, end: RequestEnd) {
        let span = &self.0;
        let mut attributes = Attributes::default();
        attributes.extend([
            ("mcp.method.name", AttributeValue::Text(Text::Static(span.method))),
            ("eragate.era", AttributeValue::Text(Text::Static(end.era))),
            ("eragate.revision", AttributeValue::Text(Text::Static(end.revision))),
            (
                "eragate.upstream",
                AttributeValue::Text(Text::Shared(span.upstream.clone())),
            ),
            ("eragate.outcome", AttributeValue::Text(Text::Static(end.outcome))),
            ("http.response.status_code", AttributeValue::Int(i64::from(end.status))),
        ]);
        if let Some(code) = end.code {
            attributes.push(("rpc.jsonrpc.error_code", AttributeValue::Int(code)));
        }
        if let Some(target) = end.target {
            attributes.push(("eragate.target", AttributeValue::Text(Text::own(&target))));
        }
        span.tracing.queue.push(SpanRecord {
            trace_id: span.context.trace_id,
            span_id: span.context.span_id,
            parent: span.parent.map(|id| (id, true)),
            flags: span.context.flags,
            kind: Kind::Server,
            name_prefix: "",
            name: Text::Static(span.method),
            start_unix_nanos: span.start_unix_nanos,
            end_unix_nanos: now_unix_nanos(),
            status: if end.ok {
                SpanStatus::Ok
            } else {
                SpanStatus::Error("request failed")
            },
            attributes,
        });
    }
}

/// Runs `future` (a request's dispatch) with `request` as the parent of the upstream
/// calls it makes; untraced requests are awaited as they are (see [`with_header`]).
/// Give it the future pinned where it was built (`Pin<&mut F>`), so that it is not copied.
pub(crate) fn in_request<F: Future>(request: Traced, future: F) -> impl Future<Output = F::Output> {
    REQUEST.scope(request, future)
}

/// The span of one upstream call, started inside a traced request's dispatch; ends when dropped.
pub(crate) struct UpstreamSpan {
    request: Traced,
    span_id: [u8; 8],
    /// The request's own method (static) when the call is for the same one, as it mostly is.
    method: Text,
    start_unix_nanos: u64,
    target: OwnedTarget,
    /// 0: unknown, 1: ok, 2: failed.
    outcome: std::sync::atomic::AtomicU8,
    /// The call's trace context, for the upstream (W3C `traceparent`), kept inline.
    traceparent: [u8; TRACEPARENT_LEN],
}

impl UpstreamSpan {
    /// The call's trace context, for the upstream (W3C `traceparent`).
    pub(crate) fn traceparent(&self) -> &str {
        std::str::from_utf8(&self.traceparent).unwrap_or_default()
    }

    /// The call ended: `ok` or not.
    pub(crate) fn finish(&self, ok: bool) {
        self.outcome.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
    }
}

impl Drop for UpstreamSpan {
    fn drop(&mut self) {
        let (outcome, status) = match self.outcome.load(Ordering::Relaxed) {
            1 => (Some("ok"), SpanStatus::Ok),
            2 => (Some("error"), SpanStatus::Error("upstream call failed")),
            _ => (None, SpanStatus::Unset),
        };
        let upstream = std::mem::replace(&mut self.target.upstream, Text::Static(""));
        let member = std::mem::replace(&mut self.target.member, Text::Static(""));
        let mut attributes = Attributes::default();
        attributes.extend([
            ("mcp.method.name", AttributeValue::Text(self.method.clone())),
            ("eragate.upstream", AttributeValue::Text(upstream)),
            ("eragate.member", AttributeValue::Text(member)),
            (
                "eragate.session_kind",
                AttributeValue::Text(Text::Static(self.target.session)),
            ),
        ]);
        if let Some(revision) = self.target.revision {
            attributes.push((
                "eragate.upstream_revision",
                AttributeValue::Text(Text::Static(revision)),
            ));
        }
        if let Some(outcome) = outcome {
            attributes.push(("eragate.outcome", AttributeValue::Text(Text::Static(outcome))));
        }
        let request = &self.request.0;
        request.tracing.queue.push(SpanRecord {
            trace_id: request.context.trace_id,
            span_id: self.span_id,
            parent: Some((request.context.span_id, false)),
            flags: request.context.flags,
            kind: Kind::Client,
            name_prefix: "upstream ",
            name: std::mem::replace(&mut self.method, Text::Static("")),
            start_unix_nanos: self.start_unix_nanos,
            end_unix_nanos: now_unix_nanos(),
            status,
            attributes,
        });
    }
}

/// Where an upstream call goes, for its span.
pub(crate) struct CallTarget<'a> {
    /// The upstream's configured name.
    pub(crate) upstream: &'a str,
    /// The member (its URL, or the transport's name), as the session keeps it.
    pub(crate) member: Arc<str>,
    /// `pooled` or `dedicated`.
    pub(crate) session: &'static str,
    /// The revision spoken with the upstream, if known.
    pub(crate) revision: Option<&'static str>,
}

/// [`CallTarget`] as a span keeps it.
struct OwnedTarget {
    upstream: Text,
    member: Text,
    session: &'static str,
    revision: Option<&'static str>,
}

/// Starts the span of an upstream call of `method` when the current request is
/// traced (sampled); `target` is built only then.
pub(crate) fn upstream_call<'a>(method: &str, target: impl FnOnce() -> CallTarget<'a>) -> Option<UpstreamSpan> {
    let request = REQUEST.try_with(Traced::clone).ok()?;
    let target = target();
    let span_id = new_span_id();
    let traceparent = traceparent_bytes(&TraceContext {
        span_id,
        ..request.context()
    });
    Some(UpstreamSpan {
        span_id,
        method: if method == request.0.method {
            Text::Static(request.0.method)
        } else {
            Text::own(method)
        },
        start_unix_nanos: now_unix_nanos(),
        target: OwnedTarget {
            upstream: if *target.upstream == *request.0.upstream {
                Text::Shared(request.0.upstream.clone())
            } else {
                Text::own(target.upstream)
            },
            member: Text::Shared(target.member),
            session: target.session,
            revision: target.revision,
        },
        outcome: std::sync::atomic::AtomicU8::new(0),
        traceparent,
        request,
    })
}

fn new_trace_id() -> [u8; 16] {
    loop {
        let id: u128 = rand::random();
        if id != 0 {
            return id.to_be_bytes();
        }
    }
}

fn new_span_id() -> [u8; 8] {
    loop {
        let id: u64 = rand::random();
        if id != 0 {
            return id.to_be_bytes();
        }
    }
}

/// A W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), if valid.
pub(crate) fn parse_traceparent(text: &str) -> Option<TraceContext> {
    let mut parts = text.trim().split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version == "ff" || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    u8::from_str_radix(version, 16).ok()?;
    let mut trace_id = [0u8; 16];
    let mut span_id = [0u8; 8];
    let mut flag = [0u8; 1];
    unhex(trace, &mut trace_id)?;
    unhex(span, &mut span_id)?;
    unhex(flags, &mut flag)?;
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some(TraceContext {
        trace_id,
        span_id,
        flags: flag[0] & 1,
    })
}

/// `text` (2 hex digits a byte, either case) into `out`.
fn unhex(text: &str, out: &mut [u8]) -> Option<()> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    if bytes.len() != out.len() * 2 {
        return None;
    }
    for (byte, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(())
}

/// The length of a version-00 `traceparent`.
const TRACEPARENT_LEN: usize = 55;

/// The W3C `traceparent` of `context`.
#[cfg(test)]
pub(crate) fn format_traceparent(context: &TraceContext) -> String {
    // Hex digits and dashes: always ASCII.
    String::from_utf8(traceparent_bytes(context).to_vec()).unwrap_or_default()
}

/// The W3C `traceparent` of `context`, as ASCII bytes (written in place, without
/// `format!`: it is made for every traced upstream call).
fn traceparent_bytes(context: &TraceContext) -> [u8; TRACEPARENT_LEN] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = [b'-'; TRACEPARENT_LEN];
    text[..2].copy_from_slice(b"00");
    let hex = |bytes: &[u8], out: &mut [u8]| {
        for (byte, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
            pair[0] = DIGITS[usize::from(byte >> 4)];
            pair[1] = DIGITS[usize::from(byte & 0x0f)];
        }
    };
    hex(&context.trace_id, &mut text[3..35]);
    hex(&context.span_id, &mut text[36..52]);
    hex(&[context.flags], &mut text[53..55]);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents() {
        let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(valid).expect("valid");
        assert!(context.is_sampled());
        assert_eq!(format_traceparent(&context), valid);
        let upper = parse_traceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01").expect("valid");
        assert_eq!(upper, context);
        let unsampled = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").expect("valid");
        assert!(!unsampled.is_sampled());
        let future = parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-more").expect("valid");
        assert_eq!(future.flags, 1, "only the sampled flag is kept");
        let refused = [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473z-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
            "0z-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-+1",
        ];
        for text in refused {
            assert!(parse_traceparent(text).is_none(), "{text}");
        }
    }

    #[test]
    fn the_ratio_samples_by_trace_id() {
        let at = |ratio: f64| TelemetryConfig {
            otlp_endpoint: Some("http://127.0.0.1:9/v1/traces".into()),
            sample_ratio: Some(ratio),
            ..TelemetryConfig::default()
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let id = |low: u64| {
                let mut id = [0xab; 16];
                id[8..].copy_from_slice(&low.to_be_bytes());
                id
            };
            // (ratio, low half of the id, sampled)
            let cases = [
                (0.0, 0, false),
                (0.0, u64::MAX, false),
                (0.5, 0, true),
                (0.5, (1 << 63) - 2, true),
                (0.5, 1 << 63, false),
                (0.5, u64::MAX, false),
                (1.0, u64::MAX, true),
            ];
            for (ratio, low, sampled) in cases {
                let tracing = Tracing::from_config(&at(ratio)).expect("builds").expect("on");
                assert_eq!(tracing.samples(&id(low)), sampled, "{ratio} {low:x}");
                tracing.shutdown(Duration::from_secs(1)).await;
            }
        });
    }
}
