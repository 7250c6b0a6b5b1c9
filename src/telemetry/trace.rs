//! Traces: one OpenTelemetry span per client request and one per upstream
//! call, exported as OTLP over HTTP/protobuf. The request span's parent is the
//! client's W3C trace context (`params._meta.traceparent` of 2026-07-28, or the
//! `traceparent` header); an upstream call's parent is the request span,
//! carried to it in a task-local while the request is dispatched, and its
//! context goes on to the upstream (the header toward HTTP, `_meta` toward a
//! 2026-07-28 upstream). Off unless `[telemetry] otlp_endpoint` is set; then a
//! request outside the sample costs one random draw and no span.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use opentelemetry::trace::{
    SpanContext, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue, SpanId};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};

use crate::config::TelemetryConfig;

tokio::task_local! {
    /// The request span of the request being dispatched on this task, with the tracer of its calls.
    static REQUEST: Traced;
    /// The `traceparent` header of the HTTP request being dispatched on this task.
    static HEADER: String;
}

/// Runs `future` (an HTTP request's dispatch) with the client's `traceparent` header.
/// Only for a traced gateway: a request's future is several KiB, and each wrapper it
/// is moved into copies it (callgrind: 13,000 instructions per call for this one when
/// it wrapped every request), so untraced requests are awaited as they are.
pub fn with_header<F: Future>(traceparent: String, future: F) -> impl Future<Output = F::Output> {
    HEADER.scope(traceparent, future)
}

/// The client's `traceparent` header, when the edge found one (see [`with_header`]).
pub fn header() -> Option<String> {
    HEADER.try_with(String::clone).ok()
}

/// A traced request: its span's context and the pipeline its upstream calls use
/// (held until the request ends, so a reload's new pipeline does not take its spans).
#[derive(Clone)]
pub struct Traced {
    context: Context,
    tracing: Arc<Tracing>,
}

/// The OpenTelemetry pipeline of one gateway.
pub struct Tracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl Tracing {
    /// The pipeline `config` asks for, or `None` without `otlp_endpoint`.
    /// Must run inside the tokio runtime (the batch processor is a task of it).
    pub fn from_config(config: &TelemetryConfig) -> Result<Option<Tracing>, String> {
        let Some(endpoint) = &config.otlp_endpoint else {
            return Ok(None);
        };
        let endpoint: http::Uri = endpoint.parse().map_err(|e| format!("telemetry.otlp_endpoint: {e}"))?;
        let timeout = std::time::Duration::from_secs(10);
        let client = opentelemetry_http::hyper::HyperClient::with_default_connector(timeout, None);
        let exporter = super::otlp::OtlpExporter::new(client, endpoint, timeout);
        let processor = BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
        let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(config.sample_ratio)));
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(sampler)
            .with_resource(
                Resource::builder()
                    .with_service_name(config.service_name.clone())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("eragate");
        Ok(Some(Tracing { provider, tracer }))
    }

    /// Starts the span of a client request for `method`, child of `traceparent` when valid.
    pub fn request_span(self: &Arc<Self>, method: &'static str, traceparent: Option<&str>) -> Traced {
        let parent = traceparent
            .and_then(parse_traceparent)
            .map_or_else(Context::new, |remote| Context::new().with_remote_span_context(remote));
        let span = self
            .tracer
            .span_builder(Cow::Borrowed(method))
            .with_kind(SpanKind::Server)
            .start_with_context(&self.tracer, &parent);
        Traced {
            context: parent.with_span(span),
            tracing: self.clone(),
        }
    }

    /// A pipeline a reload replaced: flushed and stopped once no request holds it
    /// (their spans end in it), or after `within`.
    pub async fn retire(retired: Arc<Tracing>, within: std::time::Duration) {
        let start = std::time::Instant::now();
        while Arc::strong_count(&retired) > 1 && start.elapsed() < within {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        retired.shutdown(std::time::Duration::from_secs(5)).await;
    }

    /// Sends what is buffered and stops the exporter (shutdown), waiting at most `within`.
    pub async fn shutdown(&self, within: std::time::Duration) {
        let provider = self.provider.clone();
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown());
        let _ = tokio::time::timeout(within, flushed).await;
    }
}

impl Traced {
    /// Whether the span is recorded (sampled).
    pub fn is_recording(&self) -> bool {
        self.context.span().is_recording()
    }

    /// Sets the attributes known when the request ends, its status, and ends the span.
    pub fn end(self, attributes: Vec<KeyValue>, ok: bool) {
        let span = self.context.span();
        span.set_attributes(attributes);
        span.set_status(if ok {
            Status::Ok
        } else {
            Status::error("request failed")
        });
        span.end();
    }
}

/// Runs `future` (a request's dispatch) with `request` as the parent of the upstream
/// calls it makes; untraced requests are awaited as they are (see [`with_header`]).
pub fn in_request<F: Future>(request: Traced, future: F) -> impl Future<Output = F::Output> {
    REQUEST.scope(request, future)
}

/// The span of one upstream call, started inside a traced request's dispatch; ends when dropped.
pub struct UpstreamSpan {
    context: Context,
    /// The call's trace context, for the upstream (W3C `traceparent`).
    pub traceparent: String,
}

impl UpstreamSpan {
    /// The call ended: `ok` or not.
    pub fn finish(&self, ok: bool) {
        let span = self.context.span();
        span.set_attribute(KeyValue::new("eragate.outcome", if ok { "ok" } else { "error" }));
        span.set_status(if ok {
            Status::Ok
        } else {
            Status::error("upstream call failed")
        });
    }
}

impl Drop for UpstreamSpan {
    fn drop(&mut self) {
        self.context.span().end();
    }
}

/// Where an upstream call goes, for its span.
pub struct CallTarget<'a> {
    /// The upstream's configured name.
    pub upstream: &'a str,
    /// The member (its URL, or the transport's name).
    pub member: String,
    /// `pooled` or `dedicated`.
    pub session: &'static str,
    /// The revision spoken with the upstream, if known.
    pub revision: Option<&'static str>,
}

/// Starts the span of an upstream call of `method` when the current request is
/// traced and sampled; `target` is built only then.
pub fn upstream_call<'a>(method: &str, target: impl FnOnce() -> CallTarget<'a>) -> Option<UpstreamSpan> {
    let parent = REQUEST.try_with(Traced::clone).ok()?;
    if !parent.is_recording() {
        return None;
    }
    let target = target();
    let mut attributes = vec![
        KeyValue::new("mcp.method.name", method.to_owned()),
        KeyValue::new("eragate.upstream", target.upstream.to_owned()),
        KeyValue::new("eragate.member", target.member),
        KeyValue::new("eragate.session_kind", target.session),
    ];
    if let Some(revision) = target.revision {
        attributes.push(KeyValue::new("eragate.upstream_revision", revision));
    }
    let tracer = &parent.tracing.tracer;
    let span = tracer
        .span_builder(format!("upstream {method}"))
        .with_kind(SpanKind::Client)
        .with_attributes(attributes)
        .start_with_context(tracer, &parent.context);
    let context = parent.context.with_span(span);
    let traceparent = format_traceparent(&context.span().span_context().clone());
    Some(UpstreamSpan { context, traceparent })
}

/// A W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`) as a remote span context.
pub fn parse_traceparent(text: &str) -> Option<SpanContext> {
    let mut parts = text.trim().split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version == "ff" || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok().filter(|id| *id != TraceId::INVALID)?;
    let span_id = SpanId::from_hex(span).ok().filter(|id| *id != SpanId::INVALID)?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags & 1),
        true,
        TraceState::default(),
    ))
}

/// The W3C `traceparent` of `context` (written without `format!`: it is made for every traced upstream call).
pub fn format_traceparent(context: &SpanContext) -> String {
    fn hex(bytes: &[u8], text: &mut String) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        for byte in bytes {
            text.push(char::from(DIGITS[usize::from(byte >> 4)]));
            text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
        }
    }
    let mut text = String::with_capacity(55);
    text.push_str("00-");
    hex(&context.trace_id().to_bytes(), &mut text);
    text.push('-');
    hex(&context.span_id().to_bytes(), &mut text);
    text.push('-');
    hex(&[context.trace_flags().to_u8()], &mut text);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents() {
        let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(valid).expect("valid");
        assert!(context.is_sampled() && context.is_remote());
        assert_eq!(format_traceparent(&context), valid);
        let unsampled = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").expect("valid");
        assert!(!unsampled.is_sampled());
        let refused = [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473z-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
        ];
        for text in refused {
            assert!(parse_traceparent(text).is_none(), "{text}");
        }
    }
}
