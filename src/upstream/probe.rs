//! Learning an upstream's era, the pure part: the `server/discover` eragate
//! probes with, and the verdict on its outcome. Nothing here sends anything:
//! the probe runs in `pool/era.rs`.
//!
//! A `DiscoverResult` that lists a modern version, or a recognised 2026-07-28
//! error (-32020, -32021, -32022), means modern. Any other error, a timeout, or
//! an HTTP failure without a JSON-RPC answer means legacy: legacy servers answer
//! requests before `initialize` with -32601, -32602, a 400, or not at all.

use serde_json::{Value, json};

use super::error::UpstreamError;
use crate::protocol::envelope::{CLIENT_CAPABILITIES, CLIENT_INFO, PROTOCOL_VERSION};
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{Era, ErrorCode, Response, Revision};

/// The `server/discover` params eragate probes with.
pub(crate) fn discover_params(client_info: &Value) -> Value {
    json!({"_meta": {
        PROTOCOL_VERSION: Revision::LATEST.as_str(),
        CLIENT_CAPABILITIES: {},
        CLIENT_INFO: client_info,
    }})
}

/// The era a probe's outcome reveals: [`Era::Legacy`] (handshake revisions only:
/// eragate runs `initialize` and keeps sessions) or [`Era::Modern`] (2026-07-28,
/// possibly dual-era: stateless requests pass through).
pub(crate) fn verdict(outcome: &Result<Response, UpstreamError>) -> Era {
    let Ok(response) = outcome else {
        return Era::Legacy;
    };
    match &response.outcome {
        Outcome::Result(result) if lists_a_modern_version(result) => Era::Modern,
        Outcome::Error(error)
            if matches!(
                error.code,
                ErrorCode::HEADER_MISMATCH
                    | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
                    | ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            ) =>
        {
            Era::Modern
        }
        _ => Era::Legacy,
    }
}

fn lists_a_modern_version(result: &Value) -> bool {
    result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|versions| {
            versions
                .iter()
                .filter_map(Value::as_str)
                .filter_map(Revision::parse)
                .any(|r| r.era() == Era::Modern)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ErrorObject, Id};

    fn result(value: Value) -> Result<Response, UpstreamError> {
        Ok(Response::result(Id::number(1), value))
    }

    fn error(code: i64) -> Result<Response, UpstreamError> {
        Ok(Response::error(
            Some(Id::number(1)),
            ErrorObject::new(ErrorCode(code), "x"),
        ))
    }

    #[test]
    fn verdict_table() {
        let cases = [
            (
                result(json!({"supportedVersions": ["2026-07-28"], "capabilities": {}})),
                Era::Modern,
            ),
            (
                result(json!({"supportedVersions": ["2025-11-25", "2026-07-28"]})),
                Era::Modern,
            ),
            (result(json!({"supportedVersions": ["2025-11-25"]})), Era::Legacy),
            // server-everything answers discover on stdio with something that is no DiscoverResult.
            (result(json!({"content": []})), Era::Legacy),
            (error(-32022), Era::Modern),
            (error(-32020), Era::Modern),
            (error(-32021), Era::Modern),
            (error(-32601), Era::Legacy),
            (error(-32602), Era::Legacy),
            (error(-32000), Era::Legacy),
            (
                Err(UpstreamError::Timeout {
                    upstream: "u".into(),
                    after_ms: 1,
                }),
                Era::Legacy,
            ),
        ];
        for (outcome, era) in cases {
            assert_eq!(verdict(&outcome), era, "{outcome:?}");
        }
    }
}
