//! OTLP/HTTP trace export: the spans eragate records ([`SpanRecord`]), written straight to
//! protobuf (`ExportTraceServiceRequest`) and posted to the collector.
//!
//! A span is a fixed record: ids, times, a status and a short list of attributes whose keys
//! are `&'static str` and whose values are static, shared (`Arc<str>`) or numbers, so ending
//! a span copies no text and allocates nothing per attribute. This writer encodes the records
//! straight into one buffer, the resource once, rather than building `opentelemetry-proto`'s
//! owned message tree per span (bench/NOTES.md, "Traces"); the unit tests decode its output
//! with `opentelemetry-proto`.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, BytesMut};
use opentelemetry_http::HttpClient;

use super::otel_env::TraceSettings;

/// Protobuf wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

/// Span flags (`opentelemetry.proto.trace.v1.SpanFlags`): whether the parent's remoteness is known, and is it.
const CONTEXT_HAS_IS_REMOTE: u32 = 0x100;
const CONTEXT_IS_REMOTE: u32 = 0x200;

/// The instrumentation scope of every span.
const SCOPE: &str = "eragate";

/// Text in a span: most is static (method names, labels), some shared with the gateway
/// (an upstream's name), some the span's own (a tool name): short, it is kept inline.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Text {
    /// A label known at compile time.
    Static(&'static str),
    /// Shared with what the span describes.
    Shared(Arc<str>),
    /// The span's own, short: kept in the span (see [`Text::own`]).
    Inline(InlineText),
    /// The span's own.
    Owned(String),
}

impl Text {
    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Text::Static(text) => text,
            Text::Shared(text) => text,
            Text::Inline(text) => text.as_str(),
            Text::Owned(text) => text,
        }
    }

    /// `text` as the span's own: inline when short. A queued span then holds no
    /// allocation of its own (the export task frees nothing the request's thread
    /// allocated: such cross-thread frees cost glibc's malloc its thread caches).
    pub(crate) fn own(text: &str) -> Text {
        InlineText::new(text).map_or_else(|| Text::Owned(text.to_owned()), Text::Inline)
    }
}

/// Most bytes of an [`InlineText`] (it makes [`Text`] no larger than a `String` does).
pub(crate) const INLINE_TEXT: usize = 30;

/// A short text kept inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InlineText {
    len: u8,
    bytes: [u8; INLINE_TEXT],
}

impl InlineText {
    /// `text`, when it has at most [`INLINE_TEXT`] bytes.
    pub(crate) fn new(text: &str) -> Option<InlineText> {
        let mut bytes = [0u8; INLINE_TEXT];
        bytes.get_mut(..text.len())?.copy_from_slice(text.as_bytes());
        Some(InlineText {
            len: text.len() as u8,
            bytes,
        })
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        // Copied whole from a `str`: valid UTF-8.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AttributeValue {
    /// `string_value`.
    Text(Text),
    /// `int_value`.
    Int(i64),
}

impl Default for AttributeValue {
    fn default() -> Self {
        AttributeValue::Int(0)
    }
}

/// Most attributes a span holds.
pub(crate) const MAX_ATTRIBUTES: usize = 8;

/// A span's attributes, kept inline (a span allocates nothing for them); past
/// [`MAX_ATTRIBUTES`] one is dropped.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Attributes {
    len: usize,
    items: [(&'static str, AttributeValue); MAX_ATTRIBUTES],
}

impl Attributes {
    /// Adds one attribute (`key`, `value`).
    pub(crate) fn push(&mut self, attribute: (&'static str, AttributeValue)) {
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = attribute;
            self.len += 1;
        }
    }

    /// The attributes, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(&'static str, AttributeValue)> {
        self.items.iter().take(self.len)
    }
}

impl Extend<(&'static str, AttributeValue)> for Attributes {
    fn extend<I: IntoIterator<Item = (&'static str, AttributeValue)>>(&mut self, items: I) {
        for attribute in items {
            self.push(attribute);
        }
    }
}

impl From<Vec<(&'static str, AttributeValue)>> for Attributes {
    fn from(items: Vec<(&'static str, AttributeValue)>) -> Self {
        let mut attributes = Attributes::default();
        attributes.extend(items);
        attributes
    }
}

/// `SpanKind` (trace.proto): eragate makes server spans (requests) and client spans (upstream calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A client's request.
    Server = 2,
    /// A call to an upstream.
    Client = 3,
}

/// `Status` (trace.proto).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpanStatus {
    /// Not set.
    Unset,
    /// Succeeded.
    Ok,
    /// Failed, with a description.
    Error(&'static str),
}

/// One ended span, as it is queued for export.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SpanRecord {
    /// The trace's id.
    pub(crate) trace_id: [u8; 16],
    /// This span's id.
    pub(crate) span_id: [u8; 8],
    /// The parent span's id, and whether it is remote (the client's), if there is one.
    pub(crate) parent: Option<([u8; 8], bool)>,
    /// W3C trace flags (bit 0: sampled).
    pub(crate) flags: u8,
    /// Server or client.
    pub(crate) kind: Kind,
    /// The name is `name_prefix` followed by `name` (`upstream ` + `tools/call`).
    pub(crate) name_prefix: &'static str,
    /// See `name_prefix`.
    pub(crate) name: Text,
    /// Start, in nanoseconds since the Unix epoch.
    pub(crate) start_unix_nanos: u64,
    /// End, in nanoseconds since the Unix epoch.
    pub(crate) end_unix_nanos: u64,
    /// How it ended.
    pub(crate) status: SpanStatus,
    /// Its attributes, in order.
    pub(crate) attributes: Attributes,
}

/// Nanoseconds since the Unix epoch, now.
pub(crate) fn now_unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
}

/// A protobuf writer over one buffer; nested messages are written in place and their length
/// put in front when they end.
#[derive(Default)]
struct Writer {
    buf: BytesMut,
}

impl Writer {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.put_u8((value as u8) | 0x80);
            value >>= 7;
        }
        self.buf.put_u8(value as u8);
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
    /// for `oneof` values and `status`). Its length is put in front once known: a one-byte
    /// placeholder is reserved, which fits every message under 128 bytes (an attribute, a
    /// status); a longer one moves its body along.
    fn message(&mut self, field: u32, body: impl FnOnce(&mut Writer)) {
        self.tag(field, LEN);
        let at = self.buf.len();
        self.buf.put_u8(0);
        body(self);
        let len = self.buf.len() - at - 1;
        if len < 0x80 {
            self.buf[at] = len as u8;
            return;
        }
        let mut prefix = [0u8; 10];
        let mut used = 0;
        let mut value = len as u64;
        while value >= 0x80 {
            prefix[used] = (value as u8) | 0x80;
            value >>= 7;
            used += 1;
        }
        prefix[used] = value as u8;
        // Move the body along by the extra length bytes, then write them in front of it.
        let end = self.buf.len();
        self.buf.resize(end + used, 0);
        self.buf.copy_within(at + 1..end, at + 1 + used);
        self.buf[at..=at + used].copy_from_slice(&prefix[..=used]);
    }

    /// A string `AnyValue` (an empty string still says "string": the field is in a oneof).
    fn string_value(&mut self, text: &str) {
        self.tag(1, LEN);
        self.varint(text.len() as u64);
        self.buf.extend_from_slice(text.as_bytes());
    }

    /// `KeyValue { key = 1; value = 2 (AnyValue: string 1, int 3) }`, its lengths
    /// worked out before it is written (it is the most frequent message).
    fn attribute(&mut self, field: u32, key: &str, value: &AttributeValue) {
        let any_len = match value {
            AttributeValue::Text(text) => {
                let len = text.as_str().len();
                1 + varint_len(len as u64) + len
            }
            AttributeValue::Int(number) => 1 + varint_len(*number as u64),
        };
        let key_len = if key.is_empty() {
            0
        } else {
            1 + varint_len(key.len() as u64) + key.len()
        };
        let len = key_len + 1 + varint_len(any_len as u64) + any_len;
        if field < 16 && len < 0x80 && !key.is_empty() {
            // The usual attribute: every tag and length is one byte, so it is written in
            // a few slices rather than a byte at a time.
            self.buf.reserve(2 + len);
            let head = [
                (field << 3 | LEN) as u8,
                len as u8,
                (1 << 3 | LEN) as u8,
                key.len() as u8,
            ];
            self.buf.extend_from_slice(&head);
            self.buf.extend_from_slice(key.as_bytes());
            match value {
                AttributeValue::Text(text) => {
                    let text = text.as_str();
                    let head = [
                        (2 << 3 | LEN) as u8,
                        any_len as u8,
                        (1 << 3 | LEN) as u8,
                        text.len() as u8,
                    ];
                    self.buf.extend_from_slice(&head);
                    self.buf.extend_from_slice(text.as_bytes());
                }
                AttributeValue::Int(number) => {
                    self.buf
                        .extend_from_slice(&[(2 << 3 | LEN) as u8, any_len as u8, (3 << 3 | VARINT) as u8]);
                    self.varint(*number as u64);
                }
            }
            return;
        }
        self.tag(field, LEN);
        self.varint(len as u64);
        self.string(1, key);
        self.tag(2, LEN);
        self.varint(any_len as u64);
        match value {
            AttributeValue::Text(text) => self.string_value(text.as_str()),
            AttributeValue::Int(number) => {
                self.tag(3, VARINT);
                self.varint(*number as u64);
            }
        }
    }
}

/// How many bytes `value` takes as a varint.
fn varint_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// `Span` (opentelemetry/proto/trace/v1/trace.proto).
fn span(w: &mut Writer, span: &SpanRecord) {
    w.bytes(1, &span.trace_id);
    w.bytes(2, &span.span_id);
    if let Some((parent, _)) = &span.parent {
        w.bytes(4, parent);
    }
    // The name, written from its two parts.
    w.tag(5, LEN);
    let name = span.name.as_str();
    w.varint((span.name_prefix.len() + name.len()) as u64);
    w.buf.extend_from_slice(span.name_prefix.as_bytes());
    w.buf.extend_from_slice(name.as_bytes());
    w.uint(6, span.kind as u64);
    w.fixed64(7, span.start_unix_nanos);
    w.fixed64(8, span.end_unix_nanos);
    for (key, value) in span.attributes.iter() {
        w.attribute(9, key, value);
    }
    w.message(15, |w| match span.status {
        SpanStatus::Unset => {}
        SpanStatus::Ok => w.uint(3, 1),
        SpanStatus::Error(description) => {
            w.string(2, description);
            w.uint(3, 2);
        }
    });
    let remote = match span.parent {
        Some((_, true)) => CONTEXT_IS_REMOTE,
        _ => 0,
    };
    w.fixed32(16, u32::from(span.flags) | CONTEXT_HAS_IS_REMOTE | remote);
}

/// The encoded `Resource` message of a service, made once per pipeline.
fn encoded_resource(service_name: &str, attributes: &[(String, String)]) -> Vec<u8> {
    let mut w = Writer::default();
    let own = [
        ("service.name", service_name),
        ("telemetry.sdk.language", "rust"),
        ("telemetry.sdk.name", "eragate"),
    ];
    let others = attributes
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .filter(|(k, _)| !own.iter().any(|(o, _)| o == k));
    for (key, value) in own.into_iter().chain(others) {
        w.attribute(1, key, &AttributeValue::Text(Text::own(value)));
    }
    w.buf.to_vec()
}

/// `ExportTraceServiceRequest` for `spans`: one resource, one scope.
#[cfg(test)]
fn export_request(resource: &[u8], spans: &[SpanRecord]) -> Vec<u8> {
    encode_request(BytesMut::new(), resource, spans).to_vec()
}

/// `ExportTraceServiceRequest` for `spans` written into `buf` (emptied first; its
/// room is reused when nothing else holds it).
fn encode_request(mut buf: BytesMut, resource: &[u8], spans: &[SpanRecord]) -> BytesMut {
    buf.clear();
    buf.reserve(128 + spans.len() * 360);
    let mut w = Writer { buf };
    w.message(1, |w| {
        w.message(1, |w| w.buf.extend_from_slice(resource));
        w.message(2, |w| {
            w.message(1, |w| w.string(1, SCOPE));
            for data in spans {
                w.message(2, |w| span(w, data));
            }
        });
    });
    w.buf
}

/// Posts batches of spans to an OTLP/HTTP endpoint as `application/x-protobuf`.
#[derive(Debug)]
pub(crate) struct OtlpExporter<C> {
    client: C,
    endpoint: http::Uri,
    resource: Vec<u8>,
    /// Headers every export carries (`OTEL_EXPORTER_OTLP_HEADERS`).
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    timeout: Duration,
    /// The buffer batches are encoded into: its room is taken back once the last
    /// batch's body is dropped, so a batch does not allocate (and free) a large buffer.
    body: BytesMut,
}

impl<C: HttpClient> OtlpExporter<C> {
    /// An exporter posting spans to `endpoint` (e.g.
    /// `http://127.0.0.1:4318/v1/traces`) through `client`, with the resource and
    /// headers of `settings`; `Err` names a header that cannot be sent.
    pub(crate) fn new(
        client: C,
        endpoint: http::Uri,
        settings: &TraceSettings,
        timeout: Duration,
    ) -> Result<Self, String> {
        let headers = settings
            .headers
            .iter()
            .map(|(name, value)| {
                let header = http::HeaderName::try_from(name.as_str())
                    .ok()
                    .zip(http::HeaderValue::try_from(value).ok());
                header.ok_or_else(|| format!("OTEL_EXPORTER_OTLP_HEADERS: {name:?} is not a valid header"))
            })
            .collect::<Result<_, _>>()?;
        Ok(OtlpExporter {
            client,
            endpoint,
            resource: encoded_resource(&settings.service_name, &settings.resource),
            headers,
            timeout,
            body: BytesMut::new(),
        })
    }

    /// Posts `batch`; `Err` says why the receiver did not take it.
    pub(crate) async fn export(&mut self, batch: &[SpanRecord]) -> Result<(), String> {
        let mut body = encode_request(std::mem::take(&mut self.body), &self.resource, batch);
        let encoded = body.split().freeze();
        self.body = body;
        let mut request = http::Request::post(&self.endpoint)
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(encoded)
            .map_err(|e| e.to_string())?;
        for (name, value) in &self.headers {
            request.headers_mut().append(name.clone(), value.clone());
        }
        let response = tokio::time::timeout(self.timeout, self.client.send_bytes(request))
            .await
            .map_err(|_| format!("no answer within {:?}", self.timeout))?
            .map_err(|e| e.to_string())?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("the OTLP receiver answered {}", response.status()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use opentelemetry_proto::tonic::trace::v1::Span;
    use prost::Message;

    const TRACE: [u8; 16] = [
        0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36,
    ];

    fn record(name: Text, parent: Option<([u8; 8], bool)>, status: SpanStatus) -> SpanRecord {
        SpanRecord {
            trace_id: TRACE,
            span_id: [0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7],
            parent,
            flags: 1,
            kind: Kind::Server,
            name_prefix: "",
            name,
            start_unix_nanos: 1_764_000_000_123_456_789,
            end_unix_nanos: 1_764_000_000_123_491_789,
            status,
            attributes: Attributes::from(vec![
                ("mcp.method.name", AttributeValue::Text(Text::Static("tools/call"))),
                (
                    "eragate.upstream",
                    AttributeValue::Text(Text::Shared(Arc::from("fixture"))),
                ),
                ("empty", AttributeValue::Text(Text::Static(""))),
                ("http.response.status_code", AttributeValue::Int(200)),
                ("rpc.jsonrpc.error_code", AttributeValue::Int(-32602)),
            ]),
        }
    }

    fn decoded(spans: &[SpanRecord], service: &str) -> (ExportTraceServiceRequest, Vec<Span>) {
        let encoded = export_request(&encoded_resource(service, &[]), spans);
        let request = ExportTraceServiceRequest::decode(encoded.as_slice()).expect("decodes as OTLP");
        let spans = request.resource_spans[0].scope_spans[0].spans.clone();
        (request, spans)
    }

    #[test]
    fn spans_decode_with_opentelemetry_proto() {
        let remote_parent = Some(([0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31], true));
        let mut upstream = record(
            Text::Owned("tools/call".into()),
            Some(([1; 8], false)),
            SpanStatus::Error("upstream call failed"),
        );
        upstream.kind = Kind::Client;
        upstream.name_prefix = "upstream ";
        let spans = [
            record(Text::Static("tools/call"), remote_parent, SpanStatus::Ok),
            upstream,
            record(Text::Static("ping"), None, SpanStatus::Unset),
        ];
        let (request, decoded) = decoded(&spans, "eragate-test");
        let resource = request.resource_spans[0].resource.as_ref().expect("resource");
        assert_eq!(resource.attributes[0].key, "service.name");
        assert_eq!(
            resource.attributes[0].value.as_ref().and_then(|v| v.value.clone()),
            Some(Any::StringValue("eragate-test".into()))
        );
        assert_eq!(
            request.resource_spans[0].scope_spans[0]
                .scope
                .as_ref()
                .map(|s| s.name.as_str()),
            Some("eragate")
        );
        // (name, kind, parent, flags, status code, status message)
        let expected = [
            ("tools/call", 2, spans[0].parent.map(|p| p.0.to_vec()), 0x301, 1, ""),
            (
                "upstream tools/call",
                3,
                Some(vec![1; 8]),
                0x101,
                2,
                "upstream call failed",
            ),
            ("ping", 2, None, 0x101, 0, ""),
        ];
        for (span, (name, kind, parent, flags, code, message)) in decoded.iter().zip(expected) {
            assert_eq!(span.name, name);
            assert_eq!(span.kind, kind, "{name}");
            assert_eq!(span.trace_id, TRACE.to_vec(), "{name}");
            assert_eq!(
                span.span_id,
                vec![0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7],
                "{name}"
            );
            assert_eq!(span.parent_span_id, parent.unwrap_or_default(), "{name}");
            assert_eq!(span.flags, flags, "{name}");
            assert_eq!(span.start_time_unix_nano, 1_764_000_000_123_456_789, "{name}");
            assert_eq!(span.end_time_unix_nano, 1_764_000_000_123_491_789, "{name}");
            let status = span.status.as_ref().expect("status");
            assert_eq!((status.code, status.message.as_str()), (code, message), "{name}");
            let attributes: Vec<(String, Option<Any>)> = span
                .attributes
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.as_ref().and_then(|v| v.value.clone())))
                .collect();
            assert_eq!(
                attributes,
                vec![
                    ("mcp.method.name".into(), Some(Any::StringValue("tools/call".into()))),
                    ("eragate.upstream".into(), Some(Any::StringValue("fixture".into()))),
                    ("empty".into(), Some(Any::StringValue(String::new()))),
                    ("http.response.status_code".into(), Some(Any::IntValue(200))),
                    ("rpc.jsonrpc.error_code".into(), Some(Any::IntValue(-32602))),
                ],
                "{name}"
            );
        }
    }

    #[test]
    fn short_text_is_kept_inline() {
        let long = "x".repeat(INLINE_TEXT + 1);
        let at_bound = "é".repeat(INLINE_TEXT / 2);
        // (text, kept inline)
        let cases = [
            ("", true),
            ("echo", true),
            (at_bound.as_str(), true),
            (long.as_str(), false),
        ];
        for (text, inline) in cases {
            let own = Text::own(text);
            assert_eq!(own.as_str(), text);
            assert_eq!(matches!(own, Text::Inline(_)), inline, "{text}");
        }
        assert!(
            std::mem::size_of::<Text>() <= 32,
            "a Text is no larger than with a String"
        );
    }

    #[test]
    fn varint_lengths() {
        for (value, len) in [
            (0, 1),
            (1, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            (u64::MAX, 10),
        ] {
            let mut w = Writer::default();
            w.varint(value);
            assert_eq!((varint_len(value), w.buf.len()), (len, len), "{value}");
        }
    }

    #[test]
    fn a_reused_buffer_encodes_each_batch_afresh() {
        let resource = encoded_resource("eragate-test", &[]);
        let batches = [
            vec![
                record(Text::Static("tools/call"), None, SpanStatus::Ok),
                record(Text::Static("ping"), Some(([1; 8], false)), SpanStatus::Unset),
            ],
            vec![record(
                Text::Owned("tools/list".into()),
                None,
                SpanStatus::Error("failed"),
            )],
            Vec::new(),
        ];
        // As the exporter does: encode, split the body off, drop it once sent, encode again.
        let mut buf = BytesMut::new();
        for spans in &batches {
            let mut encoded = encode_request(std::mem::take(&mut buf), &resource, spans);
            let body = encoded.split().freeze();
            buf = encoded;
            assert_eq!(&body[..], export_request(&resource, spans).as_slice());
            let request = ExportTraceServiceRequest::decode(&body[..]).expect("decodes as OTLP");
            assert_eq!(request.resource_spans[0].scope_spans[0].spans.len(), spans.len());
        }
    }

    #[test]
    fn attributes_past_the_bound_are_dropped() {
        let mut attributes = Attributes::default();
        attributes.extend((0..MAX_ATTRIBUTES as i64 + 3).map(|n| ("n", AttributeValue::Int(n))));
        let kept: Vec<&AttributeValue> = attributes.iter().map(|(_, value)| value).collect();
        let expected: Vec<AttributeValue> = (0..MAX_ATTRIBUTES as i64).map(AttributeValue::Int).collect();
        assert_eq!(kept, expected.iter().collect::<Vec<_>>());
    }

    #[test]
    fn varints_and_nested_lengths_round_trip() {
        for len in [0_usize, 1, 100, 127, 128, 300, 16_383, 16_384, 70_000] {
            let text = "x".repeat(len);
            let mut long = record(Text::Owned(text.clone()), None, SpanStatus::Ok);
            long.attributes = Attributes::from(vec![("text", AttributeValue::Text(Text::Owned(text.clone())))]);
            let (_, decoded) = decoded(&[long.clone(), long], "s");
            assert_eq!(decoded.len(), 2, "length {len}");
            for span in decoded {
                assert_eq!(span.name, text, "length {len}");
                let value = span.attributes[0].value.as_ref().and_then(|v| v.value.clone());
                assert_eq!(value, Some(Any::StringValue(text.clone())), "length {len}");
            }
        }
    }
}
