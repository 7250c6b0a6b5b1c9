//! Envelope classification: `classify` over a message's method and params
//! and the routing headers of one HTTP request (or none, as on stdio).
//!
//! Input: one flag byte (transport, and which headers are absent, sent once or
//! malformed), three header lines, then one JSON-RPC message. Properties:
//! - no era signal (no envelope version, no modern version header) is legacy;
//! - an accepted modern request names a modern revision in its envelope, and
//!   over HTTP its headers mirror the body (version, method, decoded name);
//! - a refusal carries one of the four codes of the validation order;
//! - an envelope that parses writes back into `_meta` and parses to itself;
//! - `strip_reserved` leaves no `io.modelcontextprotocol/` key in `_meta`.
#![no_main]

use eragate::protocol::envelope::{self, Envelope, RESERVED_PREFIX};
use eragate::protocol::headers::decode_value;
use eragate::protocol::method::named_param;
use eragate::protocol::{Era, Message, Revision};
use eragate::translate::classify::{Classification, HeaderField, RoutingHeaders, classify};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut parts = rest.splitn(4, |b| *b == b'\n');
    let (Some(version), Some(method), Some(name), Some(body)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return;
    };
    let (Ok(version), Ok(method_header), Ok(name)) = (
        std::str::from_utf8(version),
        std::str::from_utf8(method),
        std::str::from_utf8(name),
    ) else {
        return;
    };
    let Ok(message) = Message::parse(body) else {
        return;
    };
    let (method, params, is_request) = match &message {
        Message::Request(r) => (r.method.as_str(), r.params.as_ref(), true),
        Message::Notification(n) => (n.method.as_str(), n.params.as_ref(), false),
        Message::Response(_) => return,
    };
    let field = |shift: u8, value| match (flags >> shift) & 3 {
        0 => HeaderField::Absent,
        1 => HeaderField::Malformed,
        _ => HeaderField::One(value),
    };
    let headers = if flags & 0x80 == 0 {
        RoutingHeaders::None
    } else {
        RoutingHeaders::Http {
            protocol_version: field(0, version),
            method: field(2, method_header),
            name: field(4, name),
        }
    };
    // As the edge classifies: params kept as text, `_meta` read alone.
    let verdict = classify(method, params, is_request, headers);
    // The same params as a tree must get the same verdict.
    let params = params.map(|p| &**p);
    assert_eq!(classify(method, params, is_request, headers), verdict, "text and tree disagree");
    check_verdict(&verdict, method, params, is_request, headers);
    check_envelope(params);
});

fn check_verdict(
    verdict: &Classification,
    method: &str,
    params: Option<&Value>,
    is_request: bool,
    headers: RoutingHeaders<'_>,
) {
    let signalled = envelope::claims_version(params)
        || matches!(
            headers,
            RoutingHeaders::Http {
                protocol_version: HeaderField::Malformed,
                ..
            }
        )
        || matches!(headers, RoutingHeaders::Http { protocol_version: HeaderField::One(v), .. }
            if Revision::parse(v).is_none_or(|r| r.era() == Era::Modern));
    if !signalled {
        assert_eq!(verdict, &Classification::Legacy);
        return;
    }
    match verdict {
        Classification::Legacy => panic!("an era signal was classified legacy"),
        Classification::ModernNotification => assert!(!is_request),
        Classification::Rejected(error) => {
            assert!(is_request);
            assert!(
                matches!(error.code.0, -32602 | -32020 | -32022 | -32601),
                "code {}",
                error.code.0
            );
        }
        Classification::Modern(request) => {
            assert!(is_request);
            assert_eq!(request.method.as_str(), method);
            let revision = Revision::parse(&request.envelope.protocol_version);
            assert_eq!(revision.map(Revision::era), Some(Era::Modern));
            assert_eq!(Envelope::parse(params).as_ref(), Ok(&request.envelope));
            if let RoutingHeaders::Http {
                protocol_version,
                method: m,
                name,
            } = headers
            {
                assert_eq!(
                    protocol_version,
                    HeaderField::One(request.envelope.protocol_version.as_str())
                );
                assert_eq!(m, HeaderField::One(method));
                if let Some(key) = named_param(method) {
                    let body = params.and_then(|p| p.get(key)).and_then(Value::as_str).unwrap_or("");
                    let HeaderField::One(sent) = name else {
                        panic!("accepted without an Mcp-Name");
                    };
                    assert_eq!(decode_value(sent).as_deref(), Ok(body));
                }
            }
        }
    }
}

fn check_envelope(params: Option<&Value>) {
    if let Ok(parsed) = Envelope::parse(params) {
        let mut meta = serde_json::Map::new();
        parsed.insert_into(&mut meta);
        let rebuilt = serde_json::json!({ "_meta": meta });
        assert_eq!(Envelope::parse(Some(&rebuilt)), Ok(parsed));
    }
    if let Some(params) = params {
        let mut stripped = params.clone();
        envelope::strip_reserved(&mut stripped);
        if let Some(meta) = stripped.get("_meta").and_then(Value::as_object) {
            assert!(!meta.is_empty(), "an emptied _meta is dropped");
            assert!(meta.keys().all(|k| !k.starts_with(RESERVED_PREFIX)));
        }
        // Nothing outside `_meta` changes.
        let outside = |v: &Value| v.as_object().map(|o| o.iter().filter(|(k, _)| *k != "_meta").count());
        assert_eq!(outside(&stripped), outside(params));
    }
}
