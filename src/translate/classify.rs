//! Classifies every inbound message by era and, for 2026-07-28 requests,
//! validates the envelope and routing headers in the order the SDKs use:
//! envelope (-32602), header/body agreement (-32020), version (-32022),
//! method (-32601).

use serde_json::json;

use crate::protocol::envelope::{self, Envelope};
use crate::protocol::headers;
use crate::protocol::lazy_json::ParamsView;
use crate::protocol::method::MethodClass;
use crate::protocol::{ErrorCode, ErrorObject, ModernMethod, Revision};

/// One routing header as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderField<'a> {
    /// Not sent.
    Absent,
    /// Sent once, as this (visible ASCII) text.
    One(&'a str),
    /// Sent more than once, or not valid text: never trustworthy.
    Malformed,
}

/// The routing headers of one HTTP request; stdio has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoutingHeaders<'a> {
    /// Streamable HTTP: headers must mirror the body.
    Http {
        /// `MCP-Protocol-Version`
        protocol_version: HeaderField<'a>,
        /// `Mcp-Method`
        method: HeaderField<'a>,
        /// `Mcp-Name`
        name: HeaderField<'a>,
    },
    /// stdio (and other header-less transports): everything is in `_meta`.
    None,
}

/// The verdict on one inbound request or notification.
#[derive(Clone, Debug, PartialEq)]
pub enum Classification {
    /// Handshake era: served through a client session.
    Legacy,
    /// A valid 2026-07-28 request.
    Modern(ModernRequest),
    /// A 2026-07-28 notification (only `notifications/cancelled` means anything).
    ModernNotification,
    /// A modern message eragate must refuse before dispatch.
    Rejected(ErrorObject),
}

/// A validated 2026-07-28 request.
#[derive(Clone, Debug, PartialEq)]
pub struct ModernRequest {
    /// What is asked.
    pub method: ModernMethod,
    /// Its envelope.
    pub envelope: Envelope,
}

/// Classifies a request (`is_request`) or notification by method and params.
///
/// A legacy `initialize` carries no era signal and so is legacy; an
/// `initialize` that carries a modern envelope is a 2026-07-28 client calling a
/// removed method and gets 404/-32601 like any other.
pub fn classify<P: ParamsView>(
    method: &str,
    params: Option<&P>,
    is_request: bool,
    headers: RoutingHeaders<'_>,
) -> Classification {
    if !looks_modern(params, headers) {
        return Classification::Legacy;
    }
    if !is_request {
        return Classification::ModernNotification;
    }
    match validate(method, params, headers) {
        Ok(request) => Classification::Modern(request),
        Err(error) => Classification::Rejected(error),
    }
}

/// The era signals: an envelope version in the body, or a version header that
/// does not name a handshake revision. The header's value, not its presence, decides.
fn looks_modern<P: ParamsView>(params: Option<&P>, headers: RoutingHeaders<'_>) -> bool {
    if envelope::claims_version(params) {
        return true;
    }
    match headers {
        RoutingHeaders::Http { protocol_version, .. } => match protocol_version {
            HeaderField::Absent => false,
            HeaderField::One(v) => Revision::parse(v).is_none_or(|r| r.era() == crate::protocol::Era::Modern),
            HeaderField::Malformed => true,
        },
        RoutingHeaders::None => false,
    }
}

fn validate<P: ParamsView>(
    method: &str,
    params: Option<&P>,
    headers: RoutingHeaders<'_>,
) -> Result<ModernRequest, ErrorObject> {
    let envelope = Envelope::parse(params).map_err(|e| ErrorObject::new(ErrorCode::INVALID_PARAMS, e.to_string()))?;
    let class = ModernMethod::classify(method);
    if let RoutingHeaders::Http {
        protocol_version,
        method: method_header,
        name,
    } = headers
    {
        check_header("MCP-Protocol-Version", protocol_version, &envelope.protocol_version)?;
        check_header("Mcp-Method", method_header, method)?;
        if let MethodClass::Modern(m) = class
            && let Some(key) = m.name_param()
        {
            // Read alone: params kept as text are not built for it.
            match params.and_then(|p| p.str_member(key)) {
                Some(body) => check_name(name, key, &body)?,
                // A tasks method without a string `taskId` is invalid params, which
                // its handler answers (-32602), as for an unknown task.
                None if m.is_tasks() => {}
                None => check_name(name, key, "")?,
            }
        }
    }
    let version_supported =
        Revision::parse(&envelope.protocol_version).is_some_and(|r| r.era() == crate::protocol::Era::Modern);
    if !version_supported {
        return Err(
            ErrorObject::new(ErrorCode::UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version").with_data(
                json!({
                    "supported": Revision::modern_strings(),
                    "requested": envelope.protocol_version,
                }),
            ),
        );
    }
    match class {
        MethodClass::Modern(method) => Ok(ModernRequest { method, envelope }),
        MethodClass::Removed | MethodClass::Unknown => Err(ErrorObject::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )),
    }
}

fn check_header(name: &str, field: HeaderField<'_>, body: &str) -> Result<(), ErrorObject> {
    match field {
        HeaderField::One(value) if value == body => Ok(()),
        HeaderField::One(value) => Err(mismatch(format!(
            "{name} header '{value}' does not match the body value '{body}'"
        ))),
        HeaderField::Absent => Err(mismatch(format!("{name} header is required"))),
        HeaderField::Malformed => Err(mismatch(format!("{name} header is repeated or malformed"))),
    }
}

fn check_name(field: HeaderField<'_>, key: &str, body: &str) -> Result<(), ErrorObject> {
    let value = match field {
        HeaderField::One(value) => value,
        HeaderField::Absent => return Err(mismatch("Mcp-Name header is required".into())),
        HeaderField::Malformed => {
            return Err(mismatch("Mcp-Name header is repeated or malformed".into()));
        }
    };
    let decoded = headers::decode_value(value).map_err(|e| mismatch(format!("Mcp-Name header: {e}")))?;
    if decoded == body {
        Ok(())
    } else {
        Err(mismatch(format!(
            "Mcp-Name header '{decoded}' does not match params.{key} '{body}'"
        )))
    }
}

fn mismatch(message: String) -> ErrorObject {
    ErrorObject::new(ErrorCode::HEADER_MISMATCH, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::envelope::{CLIENT_CAPABILITIES, PROTOCOL_VERSION};
    use serde_json::Value;

    fn http<'a>(version: Option<&'a str>, method: Option<&'a str>, name: Option<&'a str>) -> RoutingHeaders<'a> {
        let field = |v: Option<&'a str>| v.map_or(HeaderField::Absent, HeaderField::One);
        RoutingHeaders::Http {
            protocol_version: field(version),
            method: field(method),
            name: field(name),
        }
    }

    fn modern_params(version: &str, extra: Value) -> Value {
        let mut params = json!({"_meta": {PROTOCOL_VERSION: version, CLIENT_CAPABILITIES: {}}});
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        params
    }

    fn code(c: &Classification) -> Option<i64> {
        match c {
            Classification::Rejected(e) => Some(e.code.0),
            _ => None,
        }
    }

    #[test]
    fn era_signals() {
        let legacy_header = http(Some("2025-06-18"), None, None);
        let bare = json!({});
        assert_eq!(
            classify("tools/list", Some(&bare), true, legacy_header),
            Classification::Legacy
        );
        assert_eq!(
            classify::<Value>("tools/list", None, true, http(None, None, None)),
            Classification::Legacy
        );
        assert_eq!(
            classify::<Value>("tools/list", None, true, RoutingHeaders::None),
            Classification::Legacy
        );
        // A plain initialize is legacy; one carrying a modern envelope is a modern
        // client calling a removed method (the alpha conformance suite wants 404/-32601).
        let enveloped = modern_params("2026-07-28", json!({}));
        let handshake =
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}});
        assert_eq!(
            classify("initialize", Some(&handshake), true, http(None, None, None)),
            Classification::Legacy
        );
        assert_eq!(
            classify(
                "initialize",
                Some(&handshake),
                true,
                http(Some("2025-06-18"), None, None)
            ),
            Classification::Legacy
        );
        assert_eq!(
            code(&classify(
                "initialize",
                Some(&enveloped),
                true,
                http(Some("2026-07-28"), Some("initialize"), None)
            )),
            Some(-32601)
        );
        // A modern header without an envelope is modern, and fails on the envelope.
        assert_eq!(
            code(&classify(
                "tools/list",
                Some(&bare),
                true,
                http(Some("2026-07-28"), Some("tools/list"), None)
            )),
            Some(-32602)
        );
        // An unknown header value is not a legacy revision: modern.
        assert_eq!(
            code(&classify::<Value>(
                "tools/list",
                None,
                true,
                http(Some("2030-01-01"), None, None)
            )),
            Some(-32602)
        );
        // A body envelope is modern even on stdio.
        assert!(matches!(
            classify("tools/list", Some(&enveloped), true, RoutingHeaders::None),
            Classification::Modern(_)
        ));
        assert_eq!(
            classify("notifications/cancelled", Some(&enveloped), false, RoutingHeaders::None),
            Classification::ModernNotification
        );
    }

    #[test]
    fn validation_order_table() {
        let v = "2026-07-28";
        let call = modern_params(v, json!({"name": "météo"}));
        let cases: Vec<(&str, Value, RoutingHeaders, Option<i64>)> = vec![
            (
                "tools/list",
                modern_params(v, json!({})),
                http(Some(v), Some("tools/list"), None),
                None,
            ),
            (
                "tools/call",
                call.clone(),
                http(Some(v), Some("tools/call"), Some("=?base64?bcOpdMOpbw==?=")),
                None,
            ),
            (
                "tools/call",
                call.clone(),
                http(Some(v), Some("tools/call"), Some("other")),
                Some(-32020),
            ),
            (
                "tools/call",
                call.clone(),
                http(Some(v), Some("tools/call"), None),
                Some(-32020),
            ),
            (
                "tools/call",
                call.clone(),
                http(Some(v), Some("tools/call"), Some("=?base64?!?=")),
                Some(-32020),
            ),
            (
                "tools/list",
                modern_params(v, json!({})),
                http(Some(v), None, None),
                Some(-32020),
            ),
            (
                "tools/list",
                modern_params(v, json!({})),
                http(Some(v), Some("prompts/list"), None),
                Some(-32020),
            ),
            (
                "tools/list",
                modern_params(v, json!({})),
                http(Some("2025-06-18"), Some("tools/list"), None),
                Some(-32020),
            ),
            (
                "tools/list",
                modern_params(v, json!({})),
                http(None, Some("tools/list"), None),
                Some(-32020),
            ),
            (
                "tools/list",
                modern_params("2027-03-01", json!({})),
                http(Some("2027-03-01"), Some("tools/list"), None),
                Some(-32022),
            ),
            (
                "widgets/list",
                modern_params(v, json!({})),
                http(Some(v), Some("widgets/list"), None),
                Some(-32601),
            ),
            (
                "ping",
                modern_params(v, json!({})),
                http(Some(v), Some("ping"), None),
                Some(-32601),
            ),
            (
                "logging/setLevel",
                modern_params(v, json!({})),
                RoutingHeaders::None,
                Some(-32601),
            ),
            (
                "resources/read",
                modern_params(v, json!({"uri": "file:///a b"})),
                http(Some(v), Some("resources/read"), Some("file:///a b")),
                None,
            ),
            (
                "prompts/get",
                modern_params(v, json!({"name": "p"})),
                http(Some(v), Some("prompts/get"), Some("p")),
                None,
            ),
        ];
        for (method, params, headers, expected) in cases {
            let verdict = classify(method, Some(&params), true, headers);
            assert_eq!(code(&verdict), expected, "{method} {headers:?} -> {verdict:?}");
        }
    }

    #[test]
    fn unsupported_version_names_both_sides() {
        let params = modern_params("2027-03-01", json!({}));
        let Classification::Rejected(error) = classify("tools/list", Some(&params), true, RoutingHeaders::None) else {
            panic!("expected a rejection");
        };
        assert_eq!(
            error.data,
            Some(json!({"supported": ["2026-07-28"], "requested": "2027-03-01"}))
        );
    }

    /// A routing header must mirror a name the body has; a tools/call without one is still
    /// refused on the header, while a tasks method without a string `taskId` is left to its
    /// handler's -32602.
    #[test]
    fn a_name_missing_from_the_body() {
        let untitled = modern_params("2026-07-28", json!({"arguments": {}}));
        let named = http(Some("2026-07-28"), Some("tools/call"), Some("echo"));
        assert_eq!(
            code(&classify("tools/call", Some(&untitled), true, named)),
            Some(-32020)
        );
        let malformed = modern_params("2026-07-28", json!({"taskId": 7}));
        let bare = http(Some("2026-07-28"), Some("tasks/get"), None);
        assert!(matches!(
            classify("tasks/get", Some(&malformed), true, bare),
            Classification::Modern(_)
        ));
        let task = modern_params("2026-07-28", json!({"taskId": "t1"}));
        assert_eq!(code(&classify("tasks/get", Some(&task), true, bare)), Some(-32020));
    }
}
