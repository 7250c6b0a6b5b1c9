//! JSON-RPC error codes of every revision and the one place where an error
//! becomes an HTTP status.
//!
//! Handlers never pick codes or statuses themselves: they build an [`ErrorObject`]
//! from a constant here and ask [`http_status`] how to send it.

use serde_json::{Map, Value};

/// A JSON-RPC error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i64);

impl ErrorCode {
    /// Not JSON.
    pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// Not a valid JSON-RPC object (or a batch where none is allowed).
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    /// Unknown, removed or unadvertised method.
    pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    /// Invalid params; in 2026-07-28 also a missing envelope and resource-not-found.
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    /// Internal error.
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
    /// Legacy resource-not-found (retired in 2026-07-28).
    pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(-32002);
    /// 2025-11-25 URL elicitation required (retired in 2026-07-28).
    pub const URL_ELICITATION_REQUIRED: ErrorCode = ErrorCode(-32042);
    /// 2026-07-28: a routing header does not match the body.
    pub const HEADER_MISMATCH: ErrorCode = ErrorCode(-32020);
    /// 2026-07-28: the request lacks a client capability the server needs.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: ErrorCode = ErrorCode(-32021);
    /// 2026-07-28: the envelope names a version the server does not speak.
    pub const UNSUPPORTED_PROTOCOL_VERSION: ErrorCode = ErrorCode(-32022);
}

/// The `error` member of a JSON-RPC response.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorObject {
    /// The code.
    pub code: ErrorCode,
    /// Human-readable text; not a contract.
    pub message: String,
    /// Structured detail, passed through untouched.
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error without data.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Adds `data`.
    pub fn with_data(mut self, data: Value) -> ErrorObject {
        self.data = Some(data);
        self
    }

    /// Reads an error object; `None` when `code` or `message` is missing or mistyped.
    pub fn from_value(value: Value) -> Option<ErrorObject> {
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
    pub fn to_value(&self) -> Value {
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

/// Who produced an error: it decides the HTTP status under 2026-07-28.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorOrigin {
    /// eragate rejected the request before dispatch (envelope, headers, method).
    Gateway,
    /// A handler (eragate's own or an upstream's) answered with an error.
    Handler,
}

/// The HTTP status for an error sent to a client.
///
/// The gateway's own pre-dispatch rejections use the spec's table (400 for
/// malformed input, envelope and header problems, 404 for unknown methods);
/// errors produced by handlers travel in-band with 200, as the spec recommends
/// for intermediaries relaying an upstream's answer.
pub fn http_status(code: ErrorCode, origin: ErrorOrigin) -> u16 {
    if origin == ErrorOrigin::Handler {
        return 200;
    }
    match code {
        ErrorCode::METHOD_NOT_FOUND => 404,
        ErrorCode::PARSE_ERROR
        | ErrorCode::INVALID_REQUEST
        | ErrorCode::INVALID_PARAMS
        | ErrorCode::HEADER_MISMATCH
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::UNSUPPORTED_PROTOCOL_VERSION => 400,
        _ => 200,
    }
}

/// The HTTP status of a JSON answer whose error a handler produced (eragate's
/// bridge or an upstream), for a client of `era`.
///
/// In band with 200, except a 2026-07-28 client's `-32021`: the revision ties
/// a missing client capability to 400 whoever detects it (the TypeScript SDK's
/// server does the same), and a handshake-era client expects every error in band.
pub fn handler_error_status(code: ErrorCode, era: crate::protocol::Era) -> u16 {
    match (era, code) {
        (crate::protocol::Era::Modern, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY) => 400,
        _ => 200,
    }
}

impl ErrorObject {
    /// `-32021`: the request needs `required` (a `ClientCapabilities` object, e.g.
    /// `{"sampling": {}}`), which the client did not declare.
    pub fn missing_client_capability(required: Value, message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, message)
            .with_data(serde_json::json!({ "requiredCapabilities": required }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gateway_rejections_follow_the_spec_table() {
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
            assert_eq!(http_status(code, ErrorOrigin::Gateway), status, "{code:?}");
            assert_eq!(http_status(code, ErrorOrigin::Handler), 200, "{code:?}");
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
            assert_eq!(handler_error_status(code, era), status, "{code:?} {era:?}");
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
