//! JSON-RPC error codes of every revision and the one place where an error
//! becomes an HTTP status.
//!
//! Handlers never pick codes or statuses themselves: a refusal before dispatch
//! is a [`Rejection`], whose variant decides both; an error a handler produced
//! is sent with [`handler_error_status`].

use http::StatusCode;
use serde_json::{Map, Value};

/// A JSON-RPC error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i64);

impl ErrorCode {
    /// Not JSON.
    pub(crate) const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// Not a valid JSON-RPC object (or a batch where none is allowed).
    pub(crate) const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    /// Unknown, removed or unadvertised method.
    pub(crate) const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    /// Invalid params; in 2026-07-28 also a missing envelope and resource-not-found.
    pub(crate) const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    /// Internal error.
    pub(crate) const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
    /// Legacy resource-not-found (retired in 2026-07-28).
    pub(crate) const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(-32002);
    /// 2025-11-25 URL elicitation required (retired in 2026-07-28).
    pub(crate) const URL_ELICITATION_REQUIRED: ErrorCode = ErrorCode(-32042);
    /// 2026-07-28: a routing header does not match the body.
    pub(crate) const HEADER_MISMATCH: ErrorCode = ErrorCode(-32020);
    /// 2026-07-28: the request lacks a client capability the server needs.
    pub(crate) const MISSING_REQUIRED_CLIENT_CAPABILITY: ErrorCode = ErrorCode(-32021);
    /// 2026-07-28: the envelope names a version the server does not speak.
    pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: ErrorCode = ErrorCode(-32022);
    /// eragate's own (implementation-defined server error range): a
    /// `[rate_limits]` limit or a quota refused the request; `data` says which
    /// (and, for a rate, when to retry).
    pub(crate) const RATE_LIMITED: ErrorCode = ErrorCode(-32029);
}

/// The `error` member of a JSON-RPC response.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorObject {
    /// The code.
    pub code: ErrorCode,
    /// Human-readable text; not a contract.
    pub(crate) message: String,
    /// Structured detail, passed through untouched.
    pub(crate) data: Option<Value>,
}

impl ErrorObject {
    /// An error without data.
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Adds `data`.
    pub(crate) fn with_data(mut self, data: Value) -> ErrorObject {
        self.data = Some(data);
        self
    }

    /// Reads an error object; `None` when `code` or `message` is missing or mistyped.
    pub(crate) fn from_value(value: Value) -> Option<ErrorObject> {
        let Value::Object(mut object) = value else {
            return None;
        };
        let code = object.get("code")?.as_i64()?;
        let message = match object.remove("message") {
            Some(Value::String(s)) => s,
            _ => return None,
        };
        Some(ErrorObject {
            code: ErrorCode(code),
            message,
            data: object.remove("data"),
        })
    }

    /// The JSON form.
    pub(crate) fn to_value(&self) -> Value {
        let mut object = Map::with_capacity(3);
        object.insert("code".into(), Value::from(self.code.0));
        object.insert("message".into(), Value::from(self.message.as_str()));
        if let Some(data) = &self.data {
            object.insert("data".into(), data.clone());
        }
        Value::Object(object)
    }
}

impl serde::Serialize for ErrorObject {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("code", &self.code.0)?;
        map.serialize_entry("message", &self.message)?;
        if let Some(data) = &self.data {
            map.serialize_entry("data", data)?;
        }
        map.end()
    }
}

/// Why eragate refused a client's HTTP request or message before dispatching it.
///
/// The variant decides everything the client sees: the HTTP status and, for
/// refusals answered in JSON-RPC, the code. Handlers name the refusal; they
/// never pick a code or a status. The message text is not a contract.
#[derive(Clone, Debug, PartialEq)]
pub enum Rejection {
    /// No MCP endpoint is served at the path (plain text, 404).
    NoEndpoint,
    /// An HTTP method the endpoint does not take (plain text, 405 with `Allow: POST`).
    MethodNotAllowed,
    /// A cross-origin browser request from an origin not allowed (403).
    OriginNotAllowed,
    /// A request without `Origin` whose `Host` this listener does not serve (421):
    /// DNS rebinding defence.
    HostNotAllowed,
    /// A valid token without a scope the resource requires (403).
    InsufficientScope {
        /// What is missing.
        reason: &'static str,
        /// The step-up challenge naming the scopes to ask for, sent as `WWW-Authenticate`.
        challenge: Option<Box<str>>,
    },
    /// The authorization server could not be reached to check a token (503).
    AuthorizationUnavailable,
    /// No usable credential (401; the edge adds the challenge).
    Unauthenticated {
        /// What was wrong with the credential.
        reason: &'static str,
    },
    /// A POST whose `Accept` lacks `application/json` or `text/event-stream` (406).
    NotAcceptable,
    /// A GET whose `Accept` lacks `text/event-stream` (plain text, 406).
    StreamNotAcceptable,
    /// A POST whose body is not `application/json` (415).
    UnsupportedMediaType,
    /// A body over `listen.max_body_bytes` (413).
    BodyTooLarge {
        /// The configured bound.
        limit: usize,
    },
    /// The body could not be read (plain text, 400).
    BodyUnreadable(String),
    /// The body did not arrive within `limits.body_read_timeout` (plain text, 408).
    BodyTimeout,
    /// Not JSON (400, -32700), or JSON but not a JSON-RPC message (400, -32600).
    Malformed {
        /// Whether the body was not JSON at all.
        not_json: bool,
        /// What was wrong.
        message: String,
    },
    /// A JSON-RPC batch where none is allowed (400, -32600).
    BatchNotAllowed {
        /// Where batches are allowed, if anywhere.
        reason: &'static str,
    },
    /// A batch of more messages than `limits.max_batch_items` (400, -32600).
    BatchTooLarge {
        /// The configured bound.
        limit: usize,
    },
    /// A body of more JSON values than `limits.max_request_values` (413, -32600).
    TooManyValues {
        /// The configured bound.
        limit: usize,
    },
    /// `initialize` inside a batch (400, -32600).
    InitializeInBatch,
    /// A legacy request without `Mcp-Session-Id` (400, -32600).
    SessionRequired,
    /// An `Mcp-Session-Id` eragate does not know, or that belongs to someone else (404, -32600).
    SessionNotFound,
    /// A GET or DELETE naming a session eragate does not know (plain text, 404).
    StreamSessionNotFound,
    /// A second GET stream for a session that has one (plain text, 409).
    StreamAlreadyOpen,
    /// An HTTP+SSE message POST without `session_id` (plain text, 400).
    ConnectionIdRequired,
    /// An HTTP+SSE message POST for a stream that is not open (plain text, 404).
    ConnectionNotFound,
    /// A JSON-RPC response to a request eragate never relayed (400, -32600).
    ResponseToUnknownRequest,
    /// Past a `[rate_limits]` limit (429 with `Retry-After`, -32029).
    RateLimited {
        /// Which limit: `principal`, `tool` or `upstream`.
        limit: &'static str,
        /// Seconds until the request would pass (`Retry-After`).
        retry_after_secs: u64,
    },
    /// A per-principal quota of things held open is reached (429, -32029, no `Retry-After`).
    QuotaExceeded {
        /// What: `listens`, `requests in flight`.
        what: &'static str,
        /// The configured bound.
        limit: usize,
    },
    /// A connection past `limits.max_connections_per_ip` (503 with `Retry-After`, -32029);
    /// the connection is closed after the answer.
    TooManyConnections {
        /// The configured bound.
        limit: usize,
    },
    /// The classification refused the message: a 2026-07-28 envelope, header or
    /// version problem, or a method unknown to that revision; the error is the
    /// classifier's, the status the spec's table for its code.
    Classified(ErrorObject),
}

impl Rejection {
    /// The HTTP status.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Rejection::NoEndpoint
            | Rejection::SessionNotFound
            | Rejection::StreamSessionNotFound
            | Rejection::ConnectionNotFound => StatusCode::NOT_FOUND,
            Rejection::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Rejection::OriginNotAllowed | Rejection::InsufficientScope { .. } => StatusCode::FORBIDDEN,
            Rejection::AuthorizationUnavailable | Rejection::TooManyConnections { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Rejection::Unauthenticated { .. } => StatusCode::UNAUTHORIZED,
            Rejection::NotAcceptable | Rejection::StreamNotAcceptable => StatusCode::NOT_ACCEPTABLE,
            Rejection::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Rejection::BodyTooLarge { .. } | Rejection::TooManyValues { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Rejection::HostNotAllowed => StatusCode::MISDIRECTED_REQUEST,
            Rejection::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Rejection::StreamAlreadyOpen => StatusCode::CONFLICT,
            Rejection::RateLimited { .. } | Rejection::QuotaExceeded { .. } => StatusCode::TOO_MANY_REQUESTS,
            Rejection::BodyUnreadable(_)
            | Rejection::BatchNotAllowed { .. }
            | Rejection::BatchTooLarge { .. }
            | Rejection::InitializeInBatch
            | Rejection::SessionRequired
            | Rejection::ConnectionIdRequired
            | Rejection::ResponseToUnknownRequest => StatusCode::BAD_REQUEST,
            Rejection::Malformed { .. } => StatusCode::BAD_REQUEST,
            Rejection::Classified(error) => rejection_status(error.code),
        }
    }

    /// The JSON-RPC error answering the refusal; `None` for refusals answered
    /// in plain text (they happen before, or outside, any JSON-RPC exchange).
    pub(crate) fn error(&self) -> Option<ErrorObject> {
        let invalid = |message: String| Some(ErrorObject::new(ErrorCode::INVALID_REQUEST, message));
        match self {
            Rejection::OriginNotAllowed => invalid("Forbidden: Origin not allowed".into()),
            Rejection::HostNotAllowed => invalid("Misdirected Request: this Host is not served here".into()),
            Rejection::Unauthenticated { reason } | Rejection::InsufficientScope { reason, .. } => {
                invalid((*reason).into())
            }
            Rejection::AuthorizationUnavailable => {
                invalid("Service Unavailable: the authorization server cannot be reached".into())
            }
            Rejection::NotAcceptable => {
                invalid("Not Acceptable: Accept must list application/json and text/event-stream".into())
            }
            Rejection::UnsupportedMediaType => {
                invalid("Unsupported Media Type: Content-Type must be application/json".into())
            }
            Rejection::BodyTooLarge { limit } => invalid(format!("Payload Too Large: the body exceeds {limit} bytes")),
            Rejection::Malformed { not_json, message } => {
                let code = match not_json {
                    true => ErrorCode::PARSE_ERROR,
                    false => ErrorCode::INVALID_REQUEST,
                };
                Some(ErrorObject::new(code, message.clone()))
            }
            Rejection::BatchNotAllowed { reason } => invalid((*reason).into()),
            Rejection::BatchTooLarge { limit } => {
                invalid(format!("invalid request: a batch may hold at most {limit} messages"))
            }
            Rejection::TooManyValues { limit } => invalid(format!(
                "Payload Too Large: the body holds more than {limit} JSON values"
            )),
            Rejection::InitializeInBatch => invalid("initialize must not be part of a batch".into()),
            Rejection::SessionRequired => {
                invalid("Bad Request: Mcp-Session-Id header is required (send initialize first)".into())
            }
            Rejection::SessionNotFound => invalid("Session not found: initialize a new session".into()),
            Rejection::ResponseToUnknownRequest => invalid("response to an unknown request".into()),
            Rejection::RateLimited {
                limit,
                retry_after_secs,
            } => Some(
                ErrorObject::new(
                    ErrorCode::RATE_LIMITED,
                    format!("Too Many Requests: the {limit} rate limit is reached; retry in {retry_after_secs} s"),
                )
                .with_data(serde_json::json!({"limit": limit, "retryAfter": retry_after_secs})),
            ),
            Rejection::QuotaExceeded { what, limit } => Some(
                ErrorObject::new(
                    ErrorCode::RATE_LIMITED,
                    format!("Too Many Requests: at most {limit} open {what}; close one first"),
                )
                .with_data(serde_json::json!({"limit": what, "max": limit})),
            ),
            Rejection::TooManyConnections { limit } => Some(
                ErrorObject::new(
                    ErrorCode::RATE_LIMITED,
                    format!("Service Unavailable: at most {limit} connections from one address; retry later"),
                )
                .with_data(serde_json::json!({"limit": "connections_per_ip", "max": limit, "retryAfter": CONNECTION_RETRY_SECS})),
            ),
            Rejection::Classified(error) => Some(error.clone()),
            Rejection::NoEndpoint
            | Rejection::MethodNotAllowed
            | Rejection::StreamNotAcceptable
            | Rejection::BodyUnreadable(_)
            | Rejection::BodyTimeout
            | Rejection::StreamSessionNotFound
            | Rejection::StreamAlreadyOpen
            | Rejection::ConnectionIdRequired
            | Rejection::ConnectionNotFound => None,
        }
    }

    /// The refusal as a JSON-RPC error on a channel that has no HTTP status
    /// (stdio, an HTTP+SSE stream): its error, or its text as an invalid request.
    pub(crate) fn in_band(&self) -> ErrorObject {
        self.error()
            .unwrap_or_else(|| ErrorObject::new(ErrorCode::INVALID_REQUEST, self.text()))
    }

    /// The `WWW-Authenticate` challenge a refusal carries, if any.
    pub(crate) fn challenge(&self) -> Option<&str> {
        match self {
            Rejection::InsufficientScope { challenge, .. } => challenge.as_deref(),
            _ => None,
        }
    }

    /// The `Retry-After` value, in seconds, for a refusal that has one.
    pub(crate) fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Rejection::RateLimited { retry_after_secs, .. } => Some(*retry_after_secs),
            Rejection::TooManyConnections { .. } => Some(CONNECTION_RETRY_SECS),
            _ => None,
        }
    }

    /// The text of a plain-text refusal (see [`Rejection::error`]).
    pub(crate) fn text(&self) -> String {
        match self {
            Rejection::NoEndpoint => "no MCP endpoint at this path".into(),
            Rejection::MethodNotAllowed => "Method Not Allowed".into(),
            Rejection::StreamNotAcceptable => "Not Acceptable: GET needs Accept: text/event-stream".into(),
            Rejection::BodyUnreadable(why) => format!("could not read the body: {why}"),
            Rejection::BodyTimeout => "Request Timeout: the body did not arrive in time".into(),
            Rejection::StreamSessionNotFound => "Session not found".into(),
            Rejection::StreamAlreadyOpen => "a stream is already open for this session".into(),
            Rejection::ConnectionIdRequired => "session_id is required".into(),
            Rejection::ConnectionNotFound => "Could not find session".into(),
            other => other.error().map(|e| e.message).unwrap_or_default(),
        }
    }
}

/// The `Retry-After` of a connection refused at the per-IP cap: a slot is
/// usually given back within a second (a request ends, an idle socket times out).
const CONNECTION_RETRY_SECS: u64 = 1;

/// The status of a pre-dispatch JSON-RPC rejection, by the spec's table: 400
/// for malformed input, envelope and header problems, 404 for unknown methods.
fn rejection_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        ErrorCode::PARSE_ERROR
        | ErrorCode::INVALID_REQUEST
        | ErrorCode::INVALID_PARAMS
        | ErrorCode::HEADER_MISMATCH
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// The HTTP status of a JSON answer whose error a handler produced (eragate's
/// bridge or an upstream), for a client of `era`.
///
/// In band with 200, except a 2026-07-28 client's `-32021` and `-32020`: the
/// revision ties a missing client capability, and a header that does not
/// mirror the body (a modern upstream's `Mcp-Param-*` check, relayed), to 400
/// whoever detects it (the TypeScript SDK's server does the same for `-32021`);
/// a handshake-era client expects every error in band.
pub(crate) fn handler_error_status(code: ErrorCode, era: crate::protocol::Era) -> StatusCode {
    match (era, code) {
        (crate::protocol::Era::Modern, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY | ErrorCode::HEADER_MISMATCH) => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    }
}

impl ErrorObject {
    /// `-32602`: the request's params are wrong (a handler's judgement, in band).
    pub(crate) fn invalid_params(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::INVALID_PARAMS, message)
    }

    /// `-32603`: eragate could not complete the request.
    pub(crate) fn internal(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::INTERNAL_ERROR, message)
    }

    /// `-32021`: the request needs `required` (a `ClientCapabilities` object, e.g.
    /// `{"sampling": {}}`), which the client did not declare.
    pub(crate) fn missing_client_capability(required: Value, message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, message)
            .with_data(serde_json::json!({ "requiredCapabilities": required }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classified_rejections_follow_the_spec_table() {
        let table = [
            (ErrorCode::PARSE_ERROR, 400),
            (ErrorCode::INVALID_REQUEST, 400),
            (ErrorCode::METHOD_NOT_FOUND, 404),
            (ErrorCode::INVALID_PARAMS, 400),
            (ErrorCode::HEADER_MISMATCH, 400),
            (ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, 400),
            (ErrorCode::UNSUPPORTED_PROTOCOL_VERSION, 400),
            (ErrorCode::INTERNAL_ERROR, 200),
        ];
        for (code, status) in table {
            let rejection = Rejection::Classified(ErrorObject::new(code, "m"));
            assert_eq!(rejection.status().as_u16(), status, "{code:?}");
            assert_eq!(rejection.error().map(|e| e.code), Some(code));
        }
    }

    #[test]
    fn every_rejection_has_a_status_and_one_body() {
        let table = [
            (Rejection::NoEndpoint, 404, None),
            (Rejection::MethodNotAllowed, 405, None),
            (Rejection::OriginNotAllowed, 403, Some(-32600)),
            (Rejection::Unauthenticated { reason: "r" }, 401, Some(-32600)),
            (
                Rejection::InsufficientScope {
                    reason: "r",
                    challenge: None,
                },
                403,
                Some(-32600),
            ),
            (Rejection::AuthorizationUnavailable, 503, Some(-32600)),
            (Rejection::NotAcceptable, 406, Some(-32600)),
            (Rejection::StreamNotAcceptable, 406, None),
            (Rejection::UnsupportedMediaType, 415, Some(-32600)),
            (Rejection::BodyTooLarge { limit: 9 }, 413, Some(-32600)),
            (Rejection::BodyUnreadable("eof".into()), 400, None),
            (Rejection::BodyTimeout, 408, None),
            (
                Rejection::Malformed {
                    not_json: true,
                    message: "x".into(),
                },
                400,
                Some(-32700),
            ),
            (
                Rejection::Malformed {
                    not_json: false,
                    message: "x".into(),
                },
                400,
                Some(-32600),
            ),
            (Rejection::BatchNotAllowed { reason: "r" }, 400, Some(-32600)),
            (Rejection::InitializeInBatch, 400, Some(-32600)),
            (Rejection::BatchTooLarge { limit: 2 }, 400, Some(-32600)),
            (Rejection::TooManyValues { limit: 2 }, 413, Some(-32600)),
            (Rejection::HostNotAllowed, 421, Some(-32600)),
            (Rejection::SessionRequired, 400, Some(-32600)),
            (Rejection::SessionNotFound, 404, Some(-32600)),
            (Rejection::StreamSessionNotFound, 404, None),
            (Rejection::StreamAlreadyOpen, 409, None),
            (Rejection::ConnectionIdRequired, 400, None),
            (Rejection::ConnectionNotFound, 404, None),
            (Rejection::ResponseToUnknownRequest, 400, Some(-32600)),
            (
                Rejection::RateLimited {
                    limit: "tool",
                    retry_after_secs: 3,
                },
                429,
                Some(-32029),
            ),
            (Rejection::TooManyConnections { limit: 4 }, 503, Some(-32029)),
            (
                Rejection::QuotaExceeded {
                    what: "listens",
                    limit: 16,
                },
                429,
                Some(-32029),
            ),
        ];
        for (rejection, status, code) in table {
            assert_eq!(rejection.status().as_u16(), status, "{rejection:?}");
            assert_eq!(rejection.error().map(|e| e.code.0), code, "{rejection:?}");
            assert!(!rejection.text().is_empty(), "{rejection:?}");
        }
    }

    #[test]
    fn handler_errors_travel_in_band_but_a_missing_capability() {
        use crate::protocol::Era;
        let table = [
            (ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, Era::Modern, 400),
            (ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, Era::Legacy, 200),
            (ErrorCode::INVALID_PARAMS, Era::Modern, 200),
            (ErrorCode::METHOD_NOT_FOUND, Era::Modern, 200),
            (ErrorCode::INTERNAL_ERROR, Era::Legacy, 200),
        ];
        for (code, era, status) in table {
            assert_eq!(handler_error_status(code, era).as_u16(), status, "{code:?} {era:?}");
        }
        let error = ErrorObject::missing_client_capability(json!({"sampling": {}}), "needs sampling");
        assert_eq!(
            error.to_value(),
            json!({"code": -32021, "message": "needs sampling", "data": {"requiredCapabilities": {"sampling": {}}}})
        );
    }

    #[test]
    fn error_objects_keep_data_untouched() {
        let value = json!({"code": -32002, "message": "Resource not found", "data": {"uri": "x://y", "extra": [1]}});
        let error = ErrorObject::from_value(value.clone()).unwrap();
        assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND);
        assert_eq!(error.to_value(), value);
        assert!(ErrorObject::from_value(json!({"code": "x", "message": "m"})).is_none());
        assert!(ErrorObject::from_value(json!({"code": 1})).is_none());
    }
}
