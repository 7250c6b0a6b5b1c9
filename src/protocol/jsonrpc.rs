//! JSON-RPC 2.0 messages as MCP uses them: one request, notification or response
//! per frame (a batch only where a revision allows it).
//!
//! Only the envelope (`id`, `method`, `result`/`error`) is interpreted; `params`
//! and `result` stay the peer's text ([`LazyJson`]) so fields eragate does not own
//! pass through untouched, unknown ones included, and are built into trees only
//! where a stage looks inside.

use serde_json::{Map, Value};

use super::errors::{ErrorObject, Rejection};
use super::json_check;
use super::lazy_json::{LazyJson, plain_string, write_json_str};
use super::scan::{self, Bounds, ScanError};

/// A request id: a string or a number, kept exactly as the peer sent it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Id(IdRepr);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum IdRepr {
    Number(serde_json::Number),
    String(String),
}

impl Id {
    /// A numeric id, as eragate mints toward upstreams.
    pub(crate) fn number(n: u64) -> Id {
        Id(IdRepr::Number(n.into()))
    }

    /// A string id, as eragate mints for requests of its own on a client's behalf.
    pub(crate) fn text(text: String) -> Id {
        Id(IdRepr::String(text))
    }

    /// Reads an id from JSON; `null`, objects, arrays and booleans are not ids.
    pub(crate) fn from_value(value: &Value) -> Option<Id> {
        match value {
            Value::Number(n) => Some(Id(IdRepr::Number(n.clone()))),
            Value::String(s) => Some(Id(IdRepr::String(s.clone()))),
            _ => None,
        }
    }

    /// The JSON form.
    pub(crate) fn to_value(&self) -> Value {
        match &self.0 {
            IdRepr::Number(n) => Value::Number(n.clone()),
            IdRepr::String(s) => Value::String(s.clone()),
        }
    }

    /// The id as a `u64` when it is one (eragate's own upstream ids always are).
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match &self.0 {
            IdRepr::Number(n) => n.as_u64(),
            IdRepr::String(_) => None,
        }
    }
}

/// A JSON-RPC request: it expects exactly one response.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The caller's id.
    pub(crate) id: Id,
    /// The method name.
    pub method: String,
    /// Raw params; MCP always uses an object, JSON-RPC also allows an array.
    pub params: Option<LazyJson>,
}

/// A JSON-RPC notification: no id, no response.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// Raw params.
    pub params: Option<LazyJson>,
}

/// A JSON-RPC response: a result or an error for one id.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// The id of the request answered; `None` only for errors about unreadable requests.
    pub(crate) id: Option<Id>,
    /// What the request produced.
    pub outcome: Outcome,
}

/// The two ways a request ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The `result` member, raw.
    Result(LazyJson),
    /// The `error` member.
    Error(ErrorObject),
}

/// Any single JSON-RPC message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// Expects a response.
    Request(Request),
    /// Fire and forget.
    Notification(Notification),
    /// Answers a request.
    Response(Response),
}

/// One frame of input: a single message or (2025-03-26 only) a batch.
#[derive(Debug)]
pub enum Frame {
    /// One message.
    Single(Message),
    /// A JSON array of messages, each parsed on its own.
    Batch(Vec<Result<Message, FrameError>>),
}

/// Why a frame could not become a message. Maps to -32700 or -32600.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// Not JSON at all.
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON, but not a JSON-RPC 2.0 message; the id is kept when one was readable.
    #[error("invalid request: {reason}")]
    Invalid {
        /// The id of the offending message, when it had a usable one.
        id: Option<Id>,
        /// What was wrong, for the error message.
        reason: &'static str,
    },
    /// More JSON values, or batch items, than the bound; found by a scan before parsing.
    #[error("invalid request: {0}")]
    Oversized(ScanError),
}

impl FrameError {
    /// The refusal this frame earns.
    pub fn rejection(&self) -> Rejection {
        match self {
            FrameError::Oversized(ScanError::TooManyValues { limit }) => Rejection::TooManyValues { limit: *limit },
            FrameError::Oversized(ScanError::TooManyItems { limit }) => Rejection::BatchTooLarge { limit: *limit },
            _ => Rejection::Malformed {
                not_json: matches!(self, FrameError::Parse(_)),
                message: self.to_string(),
            },
        }
    }

    /// The id of the message, when it was readable.
    pub(crate) fn id(&self) -> Option<Id> {
        match self {
            FrameError::Parse(_) | FrameError::Oversized(_) => None,
            FrameError::Invalid { id, .. } => id.clone(),
        }
    }

    /// The JSON-RPC error answering this frame (in band, e.g. inside a batch).
    pub fn to_response(&self) -> Response {
        Response::error(self.id(), self.rejection().in_band())
    }
}

impl Frame {
    /// Parses one frame from bytes, unbounded (trusted or already bounded input).
    #[cfg(test)]
    pub(crate) fn parse(bytes: &[u8]) -> Result<Frame, FrameError> {
        Frame::parse_within(bytes, Bounds::default())
    }

    /// Parses one frame after a structural scan checked it within `bounds`:
    /// too many values or batch items are refused before anything is built.
    pub fn parse_within(bytes: &[u8], bounds: Bounds) -> Result<Frame, FrameError> {
        check(bytes, bounds)?;
        if let Some(message) = lean_parse(bytes) {
            return message.map(Frame::Single);
        }
        let value: Value = serde_json::from_slice(bytes).map_err(|e| FrameError::Parse(e.to_string()))?;
        match value {
            Value::Array(items) if items.is_empty() => Err(FrameError::Invalid {
                id: None,
                reason: "empty batch",
            }),
            Value::Array(items) => Ok(Frame::Batch(items.into_iter().map(Message::from_value).collect())),
            other => Message::from_value(other).map(Frame::Single),
        }
    }
}

impl Message {
    /// Parses one message from bytes (no batches), unbounded.
    pub fn parse(bytes: &[u8]) -> Result<Message, FrameError> {
        Message::parse_within(bytes, Bounds::default())
    }

    /// Parses one message after a structural scan checked it within `bounds`.
    pub fn parse_within(bytes: &[u8], bounds: Bounds) -> Result<Message, FrameError> {
        check(bytes, bounds)?;
        if let Some(message) = lean_parse(bytes) {
            return message;
        }
        let value: Value = serde_json::from_slice(bytes).map_err(|e| FrameError::Parse(e.to_string()))?;
        Message::from_value(value)
    }

    /// Interprets a JSON value as a message.
    pub fn from_value(value: Value) -> Result<Message, FrameError> {
        let Value::Object(mut object) = value else {
            return Err(invalid(None, "a JSON-RPC message must be an object"));
        };
        let raw_id = object.remove("id");
        let id = match &raw_id {
            None => None,
            Some(v) => match Id::from_value(v) {
                Some(id) => Some(id),
                None if v.is_null() => None,
                None => return Err(invalid(None, "id must be a string or a number")),
            },
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid(id, "jsonrpc must be \"2.0\""));
        }
        let params = object.remove("params").map(LazyJson::from);
        if matches!(&params, Some(p) if !p.is_object() && !p.is_array()) {
            return Err(invalid(id, "params must be an object or an array"));
        }
        if let Some(method) = object.remove("method") {
            let Value::String(method) = method else {
                return Err(invalid(id, "method must be a string"));
            };
            return Ok(match (id, raw_id) {
                (Some(id), _) => Message::Request(Request { id, method, params }),
                // `"id": null` on a request is not a notification; refuse it.
                (None, Some(_)) => return Err(invalid(None, "request id must not be null")),
                (None, None) => Message::Notification(Notification { method, params }),
            });
        }
        match (object.remove("result"), object.remove("error")) {
            (Some(result), None) => match id {
                Some(id) => Ok(Message::Response(Response::result(id, result))),
                None => Err(invalid(None, "a result needs an id")),
            },
            (None, Some(error)) => {
                let error =
                    ErrorObject::from_value(error).ok_or_else(|| invalid(id.clone(), "malformed error object"))?;
                Ok(Message::Response(Response {
                    id,
                    outcome: Outcome::Error(error),
                }))
            }
            _ => Err(invalid(id, "not a request, notification or response")),
        }
    }

    /// The JSON form.
    pub fn to_value(&self) -> Value {
        let mut object = Map::with_capacity(4);
        object.insert("jsonrpc".into(), Value::from("2.0"));
        match self {
            Message::Request(r) => {
                object.insert("id".into(), r.id.to_value());
                object.insert("method".into(), Value::from(r.method.as_str()));
                if let Some(params) = &r.params {
                    object.insert("params".into(), Value::clone(params));
                }
            }
            Message::Notification(n) => {
                object.insert("method".into(), Value::from(n.method.as_str()));
                if let Some(params) = &n.params {
                    object.insert("params".into(), Value::clone(params));
                }
            }
            Message::Response(r) => {
                object.insert("id".into(), r.id.as_ref().map_or(Value::Null, Id::to_value));
                match &r.outcome {
                    Outcome::Result(v) => object.insert("result".into(), Value::clone(v)),
                    Outcome::Error(e) => object.insert("error".into(), e.to_value()),
                };
            }
        }
        Value::Object(object)
    }

    /// Serialises to one line of JSON (no embedded newline, as stdio framing
    /// needs), straight from the message: params and results are not copied.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.written_len());
        self.write_to(&mut out);
        out
    }

    /// Several messages as one JSON array on one line (a batch's answer).
    pub fn array_to_bytes(messages: &[Message]) -> Vec<u8> {
        let size = messages.iter().map(|m| 1 + m.written_len()).sum::<usize>();
        let mut out = Vec::with_capacity(2 + size);
        out.push(b'[');
        for (at, message) in messages.iter().enumerate() {
            if at > 0 {
                out.push(b',');
            }
            message.write_to(&mut out);
        }
        out.push(b']');
        out
    }

    /// Writes the message as [`Serialize`](serde::Serialize) does (same members,
    /// same order, same bytes), by hand, so that a kept text is copied without
    /// being read again.
    pub(crate) fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#"{"jsonrpc":"2.0","#);
        match self {
            Message::Request(r) => {
                out.extend_from_slice(br#""id":"#);
                r.id.write_to(out);
                out.push(b',');
                write_method_and_params(out, &r.method, r.params.as_ref());
            }
            Message::Notification(n) => write_method_and_params(out, &n.method, n.params.as_ref()),
            Message::Response(r) => {
                out.extend_from_slice(br#""id":"#);
                match &r.id {
                    Some(id) => id.write_to(out),
                    None => out.extend_from_slice(b"null"),
                }
                match &r.outcome {
                    Outcome::Result(result) => {
                        out.extend_from_slice(br#","result":"#);
                        result.write_to(out);
                    }
                    Outcome::Error(error) => {
                        out.extend_from_slice(br#","error":"#);
                        // A tree of strings and numbers: writing to memory cannot fail.
                        let _ = serde_json::to_writer(&mut *out, error);
                    }
                }
            }
        }
        out.push(b'}');
    }

    /// About how many bytes [`Message::write_to`] writes: exactly enough for the
    /// usual message (an id, a method without escapes, params or a result kept as
    /// text), so that the buffer is allocated once.
    fn written_len(&self) -> usize {
        // `{"jsonrpc":"2.0",` `"id":` `,"method":""` `,"params":` `}`
        const FRAME: usize = 17 + 5 + 12 + 10 + 1;
        let id_len = |id: &Id| match &id.0 {
            IdRepr::Number(_) => 20,
            IdRepr::String(s) => s.len() + 2,
        };
        let text_len = |value: &LazyJson| value.text().map_or(64, str::len);
        FRAME
            + match self {
                Message::Request(r) => id_len(&r.id) + r.method.len() + r.params.as_ref().map_or(0, text_len),
                Message::Notification(n) => n.method.len() + n.params.as_ref().map_or(0, text_len),
                Message::Response(r) => {
                    r.id.as_ref().map_or(4, id_len)
                        + match &r.outcome {
                            Outcome::Result(result) => text_len(result),
                            Outcome::Error(error) => 64 + error.message.len(),
                        }
                }
            }
    }
}

impl serde::Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("jsonrpc", "2.0")?;
        match self {
            Message::Request(r) => {
                map.serialize_entry("id", &r.id)?;
                map.serialize_entry("method", &r.method)?;
                if let Some(params) = &r.params {
                    map.serialize_entry("params", params)?;
                }
            }
            Message::Notification(n) => {
                map.serialize_entry("method", &n.method)?;
                if let Some(params) = &n.params {
                    map.serialize_entry("params", params)?;
                }
            }
            Message::Response(r) => {
                map.serialize_entry("id", &r.id)?;
                match &r.outcome {
                    Outcome::Result(result) => map.serialize_entry("result", result)?,
                    Outcome::Error(error) => map.serialize_entry("error", error)?,
                }
            }
        }
        map.end()
    }
}

impl Id {
    /// Writes the id as JSON, as its `Serialize` does.
    fn write_to(&self, out: &mut Vec<u8>) {
        match &self.0 {
            IdRepr::Number(n) => match n.as_u64() {
                Some(n) => out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
                // Writing a number to memory cannot fail.
                None => {
                    let _ = serde_json::to_writer(&mut *out, n);
                }
            },
            IdRepr::String(s) => write_json_str(out, s),
        }
    }
}

/// Writes a request's or notification's `"method"` and, when given, `"params"` members.
fn write_method_and_params(out: &mut Vec<u8>, method: &str, params: Option<&LazyJson>) {
    out.extend_from_slice(br#""method":"#);
    write_json_str(out, method);
    if let Some(params) = params {
        out.extend_from_slice(br#","params":"#);
        params.write_to(out);
    }
}

impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            IdRepr::Number(n) => n.serialize(serializer),
            IdRepr::String(s) => serializer.serialize_str(s),
        }
    }
}

impl Request {
    /// `params` as an object, when it is one.
    pub(crate) fn params_object(&self) -> Option<&Map<String, Value>> {
        self.params.as_deref().and_then(Value::as_object)
    }

    /// A string member of `params`.
    pub(crate) fn param_str(&self, key: &str) -> Option<&str> {
        self.params_object()?.get(key)?.as_str()
    }
}

impl Response {
    /// A successful response.
    pub(crate) fn result(id: Id, result: impl Into<LazyJson>) -> Response {
        Response {
            id: Some(id),
            outcome: Outcome::Result(result.into()),
        }
    }

    /// A successful response for an id that may be absent (kept as it came).
    pub(crate) fn result_for(id: Option<Id>, result: impl Into<LazyJson>) -> Response {
        Response {
            id,
            outcome: Outcome::Result(result.into()),
        }
    }

    /// An error response.
    pub(crate) fn error(id: Option<Id>, error: ErrorObject) -> Response {
        Response {
            id,
            outcome: Outcome::Error(error),
        }
    }

    /// Wraps this response as a message.
    pub fn into_message(self) -> Message {
        Message::Response(self)
    }
}

/// The scan before a parse: a bound crossed is refused; anything else (malformed
/// or too deep) is left to serde_json, which names the mistake and stops where the
/// scan did, so its work is bounded too. A text too short to cross the bounds is
/// not scanned.
fn check(bytes: &[u8], bounds: Bounds) -> Result<(), FrameError> {
    if scan::within_by_length(bytes, bounds) {
        return Ok(());
    }
    match scan::scan(bytes, bounds) {
        Err(error @ (ScanError::TooManyValues { .. } | ScanError::TooManyItems { .. })) => {
            Err(FrameError::Oversized(error))
        }
        _ => Ok(()),
    }
}

/// The parse of one message object that keeps `params` and `result` as text: one
/// walk over the bytes checks the text and finds the envelope's members
/// ([`json_check::check_object`]); the rest is left unbuilt. `None` (not an
/// object, not JSON, or anything the walk leaves to serde_json) leaves the text
/// to the tree parse, which accepts or refuses it as before and names the mistake.
fn lean_parse(bytes: &[u8]) -> Option<Result<Message, FrameError>> {
    // Invalid UTF-8 is the tree parse's to name; checked once here, then read as `str`.
    let text = std::str::from_utf8(bytes).ok()?;
    let mut members = Members::default();
    let checked = json_check::check_object(text, |name, value| {
        let slot = match name {
            "jsonrpc" => &mut members.jsonrpc,
            "id" => &mut members.id,
            "method" => &mut members.method,
            "params" => &mut members.params,
            "result" => &mut members.result,
            "error" => &mut members.error,
            _ => return,
        };
        // The last of a repeated name, as a tree keeps.
        *slot = Some(value);
    })?;
    members.into_message(checked.line_breaks)
}

/// The members of a message object that JSON-RPC names, as checked text (the
/// last of a repeated name, as a tree keeps); others are skipped.
#[derive(Default)]
struct Members<'a> {
    jsonrpc: Option<&'a str>,
    id: Option<&'a str>,
    method: Option<&'a str>,
    params: Option<&'a str>,
    result: Option<&'a str>,
    error: Option<&'a str>,
}

/// What an `id` member holds.
enum IdMember {
    Id(Id),
    Null,
    Other,
}

impl<'a> Members<'a> {
    /// The message, checked as [`Message::from_value`] checks a tree (in the same
    /// order, with the same reasons). `None` only if a checked text does not
    /// read back, which the tree parse then reports.
    fn into_message(self, line_breaks: bool) -> Option<Result<Message, FrameError>> {
        let id = match self.id {
            None => None,
            Some(text) => match id_member(text)? {
                IdMember::Null => None,
                IdMember::Id(id) => Some(id),
                IdMember::Other => return Some(Err(invalid(None, "id must be a string or a number"))),
            },
        };
        let version_ok = match self.jsonrpc {
            Some("\"2.0\"") => true,
            Some(text) if text.starts_with('"') => serde_json::from_str::<String>(text).ok()? == "2.0",
            _ => false,
        };
        if !version_ok {
            return Some(Err(invalid(id, "jsonrpc must be \"2.0\"")));
        }
        if let Some(params) = self.params
            && !matches!(params.as_bytes().first(), Some(b'{' | b'['))
        {
            return Some(Err(invalid(id, "params must be an object or an array")));
        }
        let params = self.params.map(|text| LazyJson::from_text(text, line_breaks));
        if let Some(method) = self.method {
            if !method.starts_with('"') {
                return Some(Err(invalid(id, "method must be a string")));
            }
            let method = string_member(method)?;
            return Some(Ok(match (id, self.id) {
                (Some(id), _) => Message::Request(Request { id, method, params }),
                (None, Some(_)) => return Some(Err(invalid(None, "request id must not be null"))),
                (None, None) => Message::Notification(Notification { method, params }),
            }));
        }
        Some(match (self.result, self.error) {
            (Some(result), None) => match id {
                Some(id) => Ok(Message::Response(Response::result(
                    id,
                    LazyJson::from_text(result, line_breaks),
                ))),
                None => Err(invalid(None, "a result needs an id")),
            },
            (None, Some(error)) => {
                let error: Value = serde_json::from_str(error).ok()?;
                match ErrorObject::from_value(error) {
                    Some(error) => Ok(Message::Response(Response {
                        id,
                        outcome: Outcome::Error(error),
                    })),
                    None => Err(invalid(id, "malformed error object")),
                }
            }
            _ => Err(invalid(id, "not a request, notification or response")),
        })
    }
}

/// Reads an `id` member's text; `None` only if a checked text does not read back.
fn id_member(text: &str) -> Option<IdMember> {
    Some(match text.as_bytes().first() {
        Some(b'"') => IdMember::Id(Id(IdRepr::String(string_member(text)?))),
        Some(b'0'..=b'9') if text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit()) => {
            // A checked run of digits below 10^19 fits a u64: read without serde_json.
            let n = text.bytes().fold(0u64, |n, digit| n * 10 + u64::from(digit - b'0'));
            IdMember::Id(Id::number(n))
        }
        Some(b'-' | b'0'..=b'9') => IdMember::Id(Id(IdRepr::Number(serde_json::from_str(text).ok()?))),
        Some(b'n') => IdMember::Null,
        _ => IdMember::Other,
    })
}

/// A string member's checked text read as the string: the text between its
/// quotes when it has no escape, else as serde_json reads it.
fn string_member(text: &str) -> Option<String> {
    match plain_string(text) {
        Some(plain) => Some(plain.to_owned()),
        None => serde_json::from_str(text).ok(),
    }
}

fn invalid(id: Option<Id>, reason: &'static str) -> FrameError {
    FrameError::Invalid { id, reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;
    use serde_json::json;

    #[test]
    fn classifies_every_message_kind() {
        let cases = [
            (r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, "request"),
            (r#"{"jsonrpc":"2.0","id":"a","method":"x","params":{}}"#, "request"),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                "notification",
            ),
            (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, "response"),
            (
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
                "response",
            ),
        ];
        for (text, kind) in cases {
            let message = Message::parse(text.as_bytes()).unwrap();
            let got = match message {
                Message::Request(_) => "request",
                Message::Notification(_) => "notification",
                Message::Response(_) => "response",
            };
            assert_eq!(got, kind, "{text}");
        }
    }

    #[test]
    fn rejects_with_the_right_code() {
        let cases = [
            ("{", ErrorCode::PARSE_ERROR),
            ("", ErrorCode::PARSE_ERROR),
            ("42", ErrorCode::INVALID_REQUEST),
            (r#"{"id":1,"method":"x"}"#, ErrorCode::INVALID_REQUEST),
            (r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#, ErrorCode::INVALID_REQUEST),
            (r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#, ErrorCode::INVALID_REQUEST),
            (r#"{"jsonrpc":"2.0","id":1,"method":7}"#, ErrorCode::INVALID_REQUEST),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
                ErrorCode::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
                ErrorCode::INVALID_REQUEST,
            ),
            (r#"{"jsonrpc":"2.0","id":1}"#, ErrorCode::INVALID_REQUEST),
            ("[]", ErrorCode::INVALID_REQUEST),
        ];
        for (text, code) in cases {
            let error = Frame::parse(text.as_bytes()).unwrap_err();
            match error.to_response().outcome {
                Outcome::Error(e) => assert_eq!(e.code, code, "{text}"),
                Outcome::Result(_) => panic!("{text}"),
            }
        }
    }

    #[test]
    fn invalid_request_keeps_its_id() {
        let error = Frame::parse(br#"{"jsonrpc":"1.0","id":9,"method":"x"}"#).unwrap_err();
        assert_eq!(error.to_response().id, Some(Id::number(9)));
    }

    #[test]
    fn unknown_fields_in_params_survive_a_round_trip() {
        let text = json!({"jsonrpc":"2.0","id":"x-1","method":"tools/call",
            "params":{"name":"t","arguments":{"a":[1,2]},"vendor/extra":{"k":true}}});
        let message = Message::from_value(text.clone()).unwrap();
        assert_eq!(message.to_value(), text);
    }

    /// Found by the `jsonrpc` fuzz target: without serde_json's `float_roundtrip`,
    /// a number whose digits exceed f64's precision was parsed 1 ULP off, so a
    /// message eragate wrote out read back as a different number.
    #[test]
    fn numbers_survive_being_written_and_read_again() {
        let cases = [
            "125837469012345678901234567890",
            "1.2583746901234569e29",
            "0.30000000000000004",
            "-1.5e-3",
            "1e308",
            "2.2250738585072014e-308",
            "18446744073709551616",
        ];
        for number in cases {
            let text = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"n":{number}}}}}"#);
            let message = Message::parse(text.as_bytes()).unwrap();
            let again = Message::parse(&message.to_bytes()).unwrap();
            assert_eq!(again, message, "{number}");
        }
    }

    #[test]
    fn direct_serialisation_matches_the_value_form() {
        let messages = [
            json!({"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"t","arguments":{"a":[1,2.5,null]}}}),
            json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}),
            json!({"jsonrpc":"2.0","id":7,"result":{"content":[],"_meta":{"k":"v"}}}),
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m","data":{"d":1}}}),
            json!({"jsonrpc":"2.0","id":3,"method":"ping"}),
        ];
        for value in messages {
            let message = Message::from_value(value.clone()).unwrap();
            let reparsed: Value = serde_json::from_slice(&message.to_bytes()).unwrap();
            assert_eq!(reparsed, value);
            assert_eq!(reparsed, message.to_value());
        }
    }

    #[test]
    fn every_prefix_of_a_message_is_an_error_not_a_panic() {
        let text = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
        for end in 0..text.len() {
            assert!(Message::parse(&text[..end]).is_err());
        }
    }

    /// The tree parse, as every message was read before the lean one.
    fn tree_parse(text: &str) -> Result<Message, FrameError> {
        let value: Value = serde_json::from_str(text).map_err(|e| FrameError::Parse(e.to_string()))?;
        Message::from_value(value)
    }

    #[test]
    fn the_lean_parse_agrees_with_the_tree_parse() {
        let cases = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"b":1,"a":[1.50,"x"]}}}"#,
            r#"{"method":"t\u006fols/list","id":"a\"b","jsonrpc":"\u0032.0"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":-7,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":9999999999999999999,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":10000000000000000000,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":0,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1},"params":[2]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","vendor":{"k":[true,null]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[],"_meta":{"k":"v"}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m","data":{"d":1}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":"x"}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":"s"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
            r#"{"jsonrpc":2.0,"id":1,"method":"x"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
            r#"{"id":1,"method":"x"}"#,
            "{\n  \"jsonrpc\": \"2.0\",\r\n  \"id\": 1,\n  \"method\": \"x\",\n  \"params\": {\n    \"a\": [1,\n 2]\n  }\n}\n",
        ];
        for text in cases {
            let lean = lean_parse(text.as_bytes()).unwrap_or_else(|| panic!("{text}: left to the tree parse"));
            let tree = tree_parse(text);
            assert_eq!(lean, tree, "{text}");
            if let Ok(message) = lean {
                let bytes = message.to_bytes();
                assert_eq!(serde_json::to_vec(&message).unwrap(), bytes, "{text}: written by hand");
                assert!(!bytes.contains(&b'\n'), "{text}: spans lines");
                assert_eq!(
                    serde_json::from_slice::<Value>(&bytes).ok(),
                    Some(message.to_value()),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn what_a_tree_would_refuse_is_left_to_the_tree_parse() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"a":{}{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let cases = [
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":1e400}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","other":1e400}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"s":"\ud800"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x""#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x"} x"#,
            deep.as_str(),
            r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#,
            "42",
        ];
        for text in cases {
            assert!(lean_parse(text.as_bytes()).is_none(), "{text}");
        }
        for text in &cases[..6] {
            assert!(
                matches!(Message::parse(text.as_bytes()), Err(FrameError::Parse(_))),
                "{text}"
            );
        }
        // Invalid UTF-8, in a value the lean parse would skip or in one it keeps.
        for bytes in [
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"other\":\"\xff\"}"[..],
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"s\":\"\xc3\"}}"[..],
        ] {
            assert!(lean_parse(bytes).is_none());
            assert!(matches!(Message::parse(bytes), Err(FrameError::Parse(_))));
        }
    }

    #[test]
    fn messages_written_by_hand_are_what_serde_writes() {
        let ids = [
            "0",
            "9",
            "10",
            "1234567890",
            "18446744073709551615",
            "-7",
            "1.5",
            r#""s""#,
            r#""q\"\\\u0001é""#,
        ];
        for id in ids {
            let texts = [
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"a":[1,{{"b":null}}]}}}}"#),
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#),
                format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"no","data":{{"x":1}}}}}}"#),
                r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#.to_owned(),
                r#"{"jsonrpc":"2.0","method":"m\"1","params":[]}"#.to_owned(),
            ];
            for text in texts {
                let message = Message::parse(text.as_bytes()).unwrap();
                let bytes = message.to_bytes();
                // Allocated once: the buffer never grew past its first size (strings
                // with escapes may grow it).
                if !text.contains('\\') {
                    assert_eq!(bytes.capacity(), message.written_len(), "{text}");
                }
                assert_eq!(
                    String::from_utf8(bytes).unwrap(),
                    serde_json::to_string(&message).unwrap(),
                    "{text}"
                );
            }
        }
        // Trees written by hand too: a message built, not read.
        let built = Response::result(Id::number(3), json!({"z": 1, "a": "é\n"})).into_message();
        assert_eq!(built.to_bytes(), serde_json::to_vec(&built).unwrap());
        let two = [built.clone(), built.clone()];
        assert_eq!(Message::array_to_bytes(&two), serde_json::to_vec(&two).unwrap());
    }

    #[test]
    fn params_and_results_pass_through_byte_for_byte() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"z":1,"a":{"y":1.50,"x":-0}}}"#,
                r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"z":1,"a":{"y":1.50,"x":-0}}}"#,
            ),
            (
                r#"{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"h\u00e9"}],"zz":0}}"#,
                r#"{"jsonrpc":"2.0","id":"c-1","result":{"content":[{"type":"text","text":"h\u00e9"}],"zz":0}}"#,
            ),
        ];
        for (text, written) in cases {
            let message = match Message::parse(text.as_bytes()).unwrap() {
                Message::Request(r) => Message::Request(Request { id: Id::number(9), ..r }),
                Message::Response(r) => Message::Response(Response {
                    id: Some(Id::from_value(&Value::from("c-1")).unwrap()),
                    ..r
                }),
                Message::Notification(n) => Message::Notification(n),
            };
            assert_eq!(String::from_utf8(message.to_bytes()).unwrap(), written);
        }
    }

    #[test]
    fn batches_parse_each_member() {
        let frame = Frame::parse(br#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"bad":1}]"#).unwrap();
        match frame {
            Frame::Batch(items) => {
                assert!(items[0].is_ok());
                assert!(items[1].is_err());
            }
            Frame::Single(_) => panic!("expected a batch"),
        }
    }
}
