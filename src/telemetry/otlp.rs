//! OTLP/HTTP trace export: spans written straight to protobuf (`ExportTraceServiceRequest`)
//! and posted to the collector.
//!
//! `opentelemetry-otlp` converts every span into `opentelemetry-proto`'s owned message tree
//! (each attribute key formatted into a new `String`, each id copied into a `Vec`), encodes
//! that tree and drops it: about 16,000 instructions per span, more than half of what a traced
//! `tools/call` added (bench/NOTES.md, "Traces": 38,400 instructions a call, now 15,000). This writer encodes the same message from the
//! `SpanData` the SDK hands over, in one buffer, with the resource encoded once; the unit tests
//! decode its output with `opentelemetry-proto` and compare it with that crate's conversion.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_http::HttpClient;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// Protobuf wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

/// Span flags (`opentelemetry.proto.trace.v1.SpanFlags`): whether the parent's remoteness is known, and is it.
const CONTEXT_HAS_IS_REMOTE: u32 = 0x100;
const CONTEXT_IS_REMOTE: u32 = 0x200;

/// A protobuf writer over one buffer; nested messages are written in place and their length
/// put in front when they end.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    fn tag(&mut self, field: u32, wire: u32) {
        self.varint(u64::from((field << 3) | wire));
    }

    fn bytes(&mut self, field: u32, value: &[u8]) {
        if value.is_empty() {
            return;
        }
        self.tag(field, LEN);
        self.varint(value.len() as u64);
        self.buf.extend_from_slice(value);
    }

    fn string(&mut self, field: u32, value: &str) {
        self.bytes(field, value.as_bytes());
    }

    fn uint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.tag(field, VARINT);
            self.varint(value);
        }
    }

    fn fixed64(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.tag(field, FIXED64);
            self.buf.extend_from_slice(&value.to_le_bytes());
        }
    }

    fn fixed32(&mut self, field: u32, value: u32) {
        if value != 0 {
            self.tag(field, FIXED32);
            self.buf.extend_from_slice(&value.to_le_bytes());
        }
    }

    /// A nested message in `field`, written by `body` (empty messages are kept: presence matters
    /// for `oneof` values and `status`).
    fn message(&mut self, field: u32, body: impl FnOnce(&mut Writer)) {
        self.tag(field, LEN);
        let start = self.buf.len();
        body(self);
        let len = self.buf.len() - start;
        let mut prefix = [0u8; 10];
        let mut at = 0;
        let mut value = len as u64;
        while value >= 0x80 {
            prefix[at] = (value as u8) | 0x80;
            value >>= 7;
            at += 1;
        }
        prefix[at] = value as u8;
        self.buf.splice(start..start, prefix[..=at].iter().copied());
    }

    fn key_values<'a>(&mut self, field: u32, attributes: impl IntoIterator<Item = (&'a str, &'a Value)>) {
        for (key, value) in attributes {
            self.message(field, |w| {
                w.string(1, key);
                w.message(2, |w| w.any_value(value));
            });
        }
    }

    /// `AnyValue`: string 1, bool 2, int 3, double 4, array 5 (`ArrayValue { values = 1 }`).
    fn any_value(&mut self, value: &Value) {
        match value {
            Value::String(text) => {
                // An empty string still says "string" (the field is in a oneof).
                self.tag(1, LEN);
                self.varint(text.as_str().len() as u64);
                self.buf.extend_from_slice(text.as_str().as_bytes());
            }
            Value::Bool(flag) => {
                self.tag(2, VARINT);
                self.varint(u64::from(*flag));
            }
            Value::I64(number) => {
                self.tag(3, VARINT);
                self.varint(*number as u64);
            }
            Value::F64(number) => {
                self.tag(4, FIXED64);
                self.buf.extend_from_slice(&number.to_bits().to_le_bytes());
            }
            Value::Array(array) => self.message(5, |w| w.array(array)),
            other => self.any_value(&Value::from(other.as_str().into_owned())),
        }
    }

    fn array(&mut self, array: &Array) {
        match array {
            Array::Bool(items) => items
                .iter()
                .for_each(|v| self.message(1, |w| w.any_value(&Value::Bool(*v)))),
            Array::I64(items) => items
                .iter()
                .for_each(|v| self.message(1, |w| w.any_value(&Value::I64(*v)))),
            Array::F64(items) => items
                .iter()
                .for_each(|v| self.message(1, |w| w.any_value(&Value::F64(*v)))),
            Array::String(items) => {
                for item in items {
                    self.message(1, |w| w.string_value(item.as_str()));
                }
            }
            other => {
                let text = other.to_string();
                self.message(1, |w| w.string_value(&text));
            }
        }
    }

    fn string_value(&mut self, text: &str) {
        self.tag(1, LEN);
        self.varint(text.len() as u64);
        self.buf.extend_from_slice(text.as_bytes());
    }

    fn attributes(&mut self, field: u32, attributes: &[KeyValue]) {
        self.key_values(field, attributes.iter().map(|kv| (kv.key.as_str(), &kv.value)));
    }
}

fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
}

fn kind_number(kind: &SpanKind) -> u64 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

/// `Span` (opentelemetry/proto/trace/v1/trace.proto).
fn span(w: &mut Writer, span: &SpanData) {
    let context = &span.span_context;
    let trace_flags = u32::from(context.trace_flags().to_u8());
    w.bytes(1, &context.trace_id().to_bytes());
    w.bytes(2, &context.span_id().to_bytes());
    w.string(3, &context.trace_state().header());
    if span.parent_span_id != SpanId::INVALID {
        w.bytes(4, &span.parent_span_id.to_bytes());
    }
    w.string(5, &span.name);
    w.uint(6, kind_number(&span.span_kind));
    w.fixed64(7, unix_nanos(span.start_time));
    w.fixed64(8, unix_nanos(span.end_time));
    w.attributes(9, &span.attributes);
    w.uint(10, u64::from(span.dropped_attributes_count));
    for event in &span.events.events {
        w.message(11, |w| {
            w.fixed64(1, unix_nanos(event.timestamp));
            w.string(2, &event.name);
            w.attributes(3, &event.attributes);
            w.uint(4, u64::from(event.dropped_attributes_count));
        });
    }
    w.uint(12, u64::from(span.events.dropped_count));
    for link in &span.links.links {
        w.message(13, |w| {
            let linked = &link.span_context;
            w.bytes(1, &linked.trace_id().to_bytes());
            w.bytes(2, &linked.span_id().to_bytes());
            w.string(3, &linked.trace_state().header());
            w.attributes(4, &link.attributes);
            w.uint(5, u64::from(link.dropped_attributes_count));
            let remote = if linked.is_remote() { CONTEXT_IS_REMOTE } else { 0 };
            w.fixed32(
                6,
                u32::from(linked.trace_flags().to_u8()) | CONTEXT_HAS_IS_REMOTE | remote,
            );
        });
    }
    w.uint(14, u64::from(span.links.dropped_count));
    w.message(15, |w| {
        let (code, message): (u64, Cow<'_, str>) = match &span.status {
            Status::Unset => (0, Cow::Borrowed("")),
            Status::Ok => (1, Cow::Borrowed("")),
            Status::Error { description } => (2, Cow::Borrowed(description.as_ref())),
        };
        w.string(2, &message);
        w.uint(3, code);
    });
    let remote = if span.parent_span_is_remote {
        CONTEXT_IS_REMOTE
    } else {
        0
    };
    w.fixed32(16, trace_flags | CONTEXT_HAS_IS_REMOTE | remote);
}

fn scope(w: &mut Writer, scope: &InstrumentationScope) {
    w.string(1, scope.name());
    w.string(2, scope.version().unwrap_or(""));
    w.key_values(3, scope.attributes().map(|kv| (kv.key.as_str(), &kv.value)));
}

/// The encoded `Resource` message and its schema URL, made once per exporter.
#[derive(Debug, Default, Clone)]
struct EncodedResource {
    message: Vec<u8>,
    schema_url: String,
}

impl EncodedResource {
    fn of(resource: &Resource) -> Self {
        let mut w = Writer::default();
        w.key_values(1, resource.iter().map(|(key, value)| (key.as_str(), value)));
        EncodedResource {
            message: w.buf,
            schema_url: resource.schema_url().unwrap_or_default().to_owned(),
        }
    }
}

/// `ExportTraceServiceRequest` for `spans`, grouped by instrumentation scope in order of first appearance.
fn export_request(resource: &EncodedResource, spans: &[SpanData]) -> Vec<u8> {
    let mut scopes: Vec<&InstrumentationScope> = Vec::new();
    for data in spans {
        if !scopes.contains(&&data.instrumentation_scope) {
            scopes.push(&data.instrumentation_scope);
        }
    }
    let mut w = Writer {
        buf: Vec::with_capacity(128 + spans.len() * 320),
    };
    w.message(1, |w| {
        w.message(1, |w| w.buf.extend_from_slice(&resource.message));
        for current in &scopes {
            w.message(2, |w| {
                w.message(1, |w| scope(w, current));
                for data in spans.iter().filter(|data| &data.instrumentation_scope == *current) {
                    w.message(2, |w| span(w, data));
                }
                w.string(3, current.schema_url().unwrap_or(""));
            });
        }
        w.string(3, &resource.schema_url);
    });
    w.buf
}

/// Posts batches of spans to an OTLP/HTTP endpoint as `application/x-protobuf`.
#[derive(Debug)]
pub struct OtlpExporter<C> {
    client: C,
    endpoint: http::Uri,
    resource: EncodedResource,
    timeout: Duration,
}

impl<C: HttpClient> OtlpExporter<C> {
    /// An exporter posting to `endpoint` (e.g. `http://127.0.0.1:4318/v1/traces`) through `client`.
    pub fn new(client: C, endpoint: http::Uri, timeout: Duration) -> Self {
        OtlpExporter {
            client,
            endpoint,
            resource: EncodedResource::default(),
            timeout,
        }
    }
}

impl<C: HttpClient + 'static> SpanExporter for OtlpExporter<C> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let body = export_request(&self.resource, &batch);
        let request = http::Request::post(&self.endpoint)
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(Bytes::from(body))
            .map_err(|e| OTelSdkError::InternalFailure(e.to_string()))?;
        let response = tokio::time::timeout(self.timeout, self.client.send_bytes(request))
            .await
            .map_err(|_| OTelSdkError::Timeout(self.timeout))?
            .map_err(|e| OTelSdkError::InternalFailure(e.to_string()))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(OTelSdkError::InternalFailure(format!(
                "the OTLP receiver answered {}",
                response.status()
            )))
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = EncodedResource::of(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, TraceFlags, TraceId, TraceState};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::ResourceSpans;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use prost::Message;

    fn span_data(
        name: &'static str,
        parent: SpanId,
        remote: bool,
        status: Status,
        attributes: Vec<KeyValue>,
    ) -> SpanData {
        let start = UNIX_EPOCH + Duration::from_nanos(1_764_000_000_123_456_789);
        SpanData {
            span_context: SpanContext::new(
                TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").expect("hex"),
                SpanId::from_hex("00f067aa0ba902b7").expect("hex"),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: parent,
            parent_span_is_remote: remote,
            span_kind: SpanKind::Server,
            name: Cow::Borrowed(name),
            start_time: start,
            end_time: start + Duration::from_micros(35),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: InstrumentationScope::builder("eragate").build(),
        }
    }

    /// The spans eragate makes, and values of every type the SDK has.
    fn cases() -> Vec<SpanData> {
        vec![
            span_data(
                "tools/call",
                SpanId::from_hex("b7ad6b7169203331").expect("hex"),
                true,
                Status::Ok,
                vec![
                    KeyValue::new("mcp.method.name", "tools/call"),
                    KeyValue::new("eragate.client_era", String::from("2026-07-28")),
                    KeyValue::new("empty", ""),
                    KeyValue::new("flag", true),
                    KeyValue::new("count", -42_i64),
                    KeyValue::new("ratio", 0.25_f64),
                    KeyValue::new("list", Value::Array(Array::from(vec![1_i64, 2, 3]))),
                    KeyValue::new(
                        "names",
                        Value::Array(Array::from(vec![
                            opentelemetry::StringValue::from("a"),
                            opentelemetry::StringValue::from(""),
                        ])),
                    ),
                ],
            ),
            span_data(
                "upstream tools/call",
                SpanId::INVALID,
                false,
                Status::error("upstream call failed"),
                vec![],
            ),
            span_data(
                "unset",
                SpanId::from_hex("0000000000000001").expect("hex"),
                false,
                Status::Unset,
                vec![],
            ),
        ]
    }

    #[test]
    fn writes_what_opentelemetry_proto_writes() {
        let resource = Resource::builder().with_service_name("eragate-test").build();
        let encoded = export_request(&EncodedResource::of(&resource), &cases());
        let ours = ExportTraceServiceRequest::decode(encoded.as_slice()).expect("decodes as OTLP");
        let theirs: Vec<ResourceSpans> =
            group_spans_by_resource_and_scope(cases(), &ResourceAttributesWithSchema::from(&resource));
        assert_eq!(ours.resource_spans, theirs);
    }

    #[test]
    fn varints_and_nested_lengths_round_trip() {
        for len in [0_usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let text = "x".repeat(len);
            let spans = vec![span_data(
                "long",
                SpanId::INVALID,
                false,
                Status::Ok,
                vec![KeyValue::new("text", text.clone())],
            )];
            let encoded = export_request(&EncodedResource::default(), &spans);
            let decoded = ExportTraceServiceRequest::decode(encoded.as_slice()).expect("decodes");
            let span = &decoded.resource_spans[0].scope_spans[0].spans[0];
            let value = span.attributes[0].value.as_ref().and_then(|v| v.value.clone());
            use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
            assert_eq!(value, Some(Any::StringValue(text)), "length {len}");
        }
    }
}
