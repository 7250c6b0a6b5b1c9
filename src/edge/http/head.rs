//! The headers a request on an MCP path is judged and routed by (the browser
//! checks, the credential, the media types, the MCP headers), read in one pass
//! over its head, and the checks of its media types.

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN};
use http::{HeaderMap, HeaderValue};

use crate::protocol::headers::{MCP_METHOD, MCP_NAME, MCP_PARAM_PREFIX, MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use crate::protocol::{Era, Revision};
use crate::translate::{HeaderField, RoutingHeaders};

/// GET and DELETE belong to legacy sessions; a modern client (or no session) gets 405.
/// A protocol version header that is not one value of a known revision counts as modern.
pub(super) fn is_modern_or_sessionless(routing: &RoutingHeaders<'_>, session_id: Option<&str>) -> bool {
    let modern_header = match routing {
        RoutingHeaders::Http { protocol_version, .. } => match protocol_version {
            HeaderField::Absent => false,
            HeaderField::One(v) => Revision::parse(v).is_none_or(|r| r.era() == Era::Modern),
            HeaderField::Malformed => true,
        },
        _ => false,
    };
    modern_header || session_id.is_none()
}

/// A header that may come more than once, as read: several values of a header
/// that must be one (`Origin`, `Authorization`) are never trusted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Repeated<'h> {
    Absent,
    One(&'h HeaderValue),
    Several,
}

impl<'h> Repeated<'h> {
    fn and(self, value: &'h HeaderValue) -> Repeated<'h> {
        match self {
            Repeated::Absent => Repeated::One(value),
            Repeated::One(_) | Repeated::Several => Repeated::Several,
        }
    }
}

/// The headers a request on an MCP path is judged and routed by, read in one
/// pass over its head rather than by a hashed lookup for each name.
pub(super) struct RequestHeaders<'h> {
    /// `Origin` (the browser checks).
    pub(super) origin: Repeated<'h>,
    /// `Host`'s first value (HTTP/1.1 allows one; hyper keeps what came).
    pub(super) host: Option<&'h HeaderValue>,
    /// `Authorization`.
    pub(super) authorization: Repeated<'h>,
    /// `Accept`.
    pub(super) accept: Repeated<'h>,
    /// `Content-Type`'s first value.
    pub(super) content_type: Option<&'h HeaderValue>,
    /// `traceparent`'s first value (W3C trace context).
    pub(super) traceparent: Option<&'h HeaderValue>,
    /// `Mcp-Session-Id` (its first value, when text).
    pub(super) session_id: Option<&'h str>,
    /// `Mcp-Protocol-Version`, `Mcp-Method` and `Mcp-Name`.
    pub(super) routing: RoutingHeaders<'h>,
    /// `Mcp-Param-*` headers, which an intermediary must forward unchanged.
    pub(super) forwarded: Vec<(String, String)>,
}

impl<'h> RequestHeaders<'h> {
    pub(super) fn read(headers: &'h HeaderMap) -> RequestHeaders<'h> {
        let (mut origin, mut authorization, mut accept) = (Repeated::Absent, Repeated::Absent, Repeated::Absent);
        let (mut host, mut content_type, mut traceparent) = (None, None, None);
        let mut session_id = None;
        let mut first_session_id = true;
        let (mut protocol_version, mut method, mut name) =
            (HeaderField::Absent, HeaderField::Absent, HeaderField::Absent);
        let mut forwarded = Vec::new();
        for (header, value) in headers {
            // Standard names compare as hyper parsed them (a tag, not text).
            if header == HOST {
                host = host.or(Some(value));
                continue;
            } else if header == ACCEPT {
                accept = accept.and(value);
                continue;
            } else if header == CONTENT_TYPE {
                content_type = content_type.or(Some(value));
                continue;
            } else if header == AUTHORIZATION {
                authorization = authorization.and(value);
                continue;
            } else if header == ORIGIN {
                origin = origin.and(value);
                continue;
            }
            let header = header.as_str();
            if header == "traceparent" {
                traceparent = traceparent.or(Some(value));
                continue;
            }
            // Names are lower case; every MCP header starts so.
            if !header.starts_with("mcp-") {
                continue;
            }
            match header {
                // The first value, as a lookup by name gives.
                MCP_SESSION_ID if std::mem::take(&mut first_session_id) => session_id = value.to_str().ok(),
                MCP_PROTOCOL_VERSION => protocol_version = with_value(protocol_version, value),
                MCP_METHOD => method = with_value(method, value),
                MCP_NAME => name = with_value(name, value),
                _ if header.starts_with(MCP_PARAM_PREFIX) => {
                    if let Ok(value) = value.to_str() {
                        forwarded.push((header.to_owned(), value.to_owned()));
                    }
                }
                _ => {}
            }
        }
        RequestHeaders {
            origin,
            host,
            authorization,
            accept,
            content_type,
            traceparent,
            session_id,
            routing: RoutingHeaders::Http {
                protocol_version,
                method,
                name,
            },
            forwarded,
        }
    }
}

/// `field` with one more value of its header: one value is `One` when it is
/// text, a second makes it `Malformed` (never trustworthy).
fn with_value<'h>(field: HeaderField<'h>, value: &'h HeaderValue) -> HeaderField<'h> {
    match field {
        HeaderField::Absent => value.to_str().map_or(HeaderField::Malformed, HeaderField::One),
        HeaderField::One(_) | HeaderField::Malformed => HeaderField::Malformed,
    }
}

/// Whether `Accept` admits `wanted` (exactly, by `type/*`, or by `*/*`).
pub(super) fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    accepts_all(headers, [wanted])
}

/// Whether a POST's `Accept` (as read, and the request's `headers`) admits
/// both JSON and SSE answers, as Streamable HTTP asks.
pub(super) fn accepts_json_and_sse(accept: Repeated<'_>, headers: &HeaderMap) -> bool {
    // The spelling the SDKs send, taken whole: no splitting, trimming or case folding.
    const USUAL: &[u8] = b"application/json, text/event-stream";
    match accept {
        Repeated::One(only) if only.as_bytes() == USUAL => true,
        Repeated::Absent => false,
        _ => accepts_all(headers, ["application/json", "text/event-stream"]),
    }
}

/// Whether `Accept` admits every one of `wanted`, read once for all of them.
fn accepts_all<const N: usize>(headers: &HeaderMap, wanted: [&str; N]) -> bool {
    let mut admitted = [false; N];
    let items = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','));
    for item in items {
        let media = item.split(';').next().unwrap_or("").trim();
        for (wanted, admitted) in wanted.iter().zip(admitted.iter_mut()) {
            let wanted_type = wanted.split('/').next().unwrap_or("");
            *admitted |= media.eq_ignore_ascii_case(wanted)
                || media == "*/*"
                || media
                    .strip_suffix("/*")
                    .is_some_and(|t| t.eq_ignore_ascii_case(wanted_type));
        }
        if admitted.iter().all(|a| *a) {
            return true;
        }
    }
    admitted.iter().all(|a| *a)
}

pub(super) fn content_type_is_json(content_type: Option<&HeaderValue>) -> bool {
    content_type
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .is_some_and(|media| media.eq_ignore_ascii_case("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn accept_matching() {
        let both = headers(&[("accept", "application/json, text/event-stream")]);
        assert!(accepts(&both, "application/json") && accepts(&both, "text/event-stream"));
        assert!(accepts(&headers(&[("accept", "*/*")]), "text/event-stream"));
        assert!(accepts(
            &headers(&[("accept", "application/*;q=0.9, text/*")]),
            "text/event-stream"
        ));
        assert!(!accepts(
            &headers(&[("accept", "application/json")]),
            "text/event-stream"
        ));
        assert!(!accepts(&HeaderMap::new(), "application/json"));
    }

    #[test]
    fn the_headers_a_request_is_judged_by_are_read_in_one_pass() {
        let map = headers(&[
            ("host", "127.0.0.1:8080"),
            ("accept", "application/json, text/event-stream"),
            ("content-type", "application/json"),
            ("authorization", "Bearer a"),
            ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            ("host", "second.example"),
        ]);
        let read = RequestHeaders::read(&map);
        assert_eq!(read.origin, Repeated::Absent);
        assert_eq!(
            read.host,
            Some(&HeaderValue::from_static("127.0.0.1:8080")),
            "the first Host"
        );
        assert_eq!(read.authorization, Repeated::One(&HeaderValue::from_static("Bearer a")));
        assert!(content_type_is_json(read.content_type));
        assert!(accepts_json_and_sse(read.accept, &map));
        assert!(read.traceparent.is_some());
        assert_eq!(read.session_id, None);

        // Two credentials, two origins, or Accept spread over values: as a lookup of all.
        let map = headers(&[
            ("authorization", "Bearer a"),
            ("authorization", "Bearer b"),
            ("origin", "http://localhost:8080"),
            ("origin", "http://evil.example"),
            ("accept", "application/json"),
            ("accept", "text/*"),
            ("content-type", "text/plain"),
        ]);
        let read = RequestHeaders::read(&map);
        assert_eq!(read.authorization, Repeated::Several);
        assert_eq!(read.origin, Repeated::Several);
        assert_eq!(read.accept, Repeated::Several);
        assert!(accepts_json_and_sse(read.accept, &map));
        assert!(!content_type_is_json(read.content_type));
        let only_json = headers(&[("accept", "application/json")]);
        assert!(!accepts_json_and_sse(
            RequestHeaders::read(&only_json).accept,
            &only_json
        ));
        assert!(!accepts_json_and_sse(Repeated::Absent, &HeaderMap::new()));
    }

    #[test]
    fn mcp_headers_are_read_in_one_pass() {
        let map = headers(&[
            ("content-type", "application/json"),
            ("mcp-method", "a"),
            ("mcp-session-id", "s-1"),
            ("mcp-method", "b"),
            ("mcp-name", "echo"),
            ("mcp-session-id", "s-2"),
            ("mcp-param-region", "eu"),
            ("mcp-params", "not a param header"),
            ("x-mcp-name", "other"),
        ]);
        let read = RequestHeaders::read(&map);
        // A repeated routing header is never trusted; the session id is the first.
        assert_eq!(read.session_id, Some("s-1"));
        assert_eq!(
            read.routing,
            RoutingHeaders::Http {
                protocol_version: HeaderField::Absent,
                method: HeaderField::Malformed,
                name: HeaderField::One("echo"),
            }
        );
        assert_eq!(read.forwarded, [("mcp-param-region".to_owned(), "eu".to_owned())]);
        let mut not_text = HeaderMap::new();
        not_text.insert("mcp-protocol-version", HeaderValue::from_bytes(b"\xff").unwrap());
        not_text.insert("mcp-session-id", HeaderValue::from_bytes(b"\xfe").unwrap());
        let read = RequestHeaders::read(&not_text);
        assert_eq!(read.session_id, None);
        assert!(matches!(
            read.routing,
            RoutingHeaders::Http {
                protocol_version: HeaderField::Malformed,
                ..
            }
        ));
        assert!(RequestHeaders::read(&HeaderMap::new()).forwarded.is_empty());
    }
}
