//! The legacy handshake on a fresh upstream session: `initialize`, then
//! `notifications/initialized`. It only runs the exchange and records what
//! was agreed; the session routes the answer like any other.

use std::sync::Arc;

use serde_json::Value;

use super::call::OnDrop;
use super::error::UpstreamError;
use super::session::UpstreamSession;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::{Id, Revision};

impl UpstreamSession {
    /// Runs the handshake: `initialize`, then `notifications/initialized`.
    ///
    /// `known` is an `InitializeResult` already held (the upstream's previous
    /// one): when the answer equals it, the session shares it instead of keeping
    /// a copy of its own (a parsed result is a few KiB, a session lives long).
    pub(crate) async fn initialize(
        self: &Arc<Self>,
        params: Value,
        known: Option<Arc<Value>>,
    ) -> Result<Arc<Value>, UpstreamError> {
        let call = self
            .call("initialize", Some(params.into()), Id::number(0), OnDrop::Detach)
            .await?;
        let response = call.response().await?;
        let result = match response.outcome {
            Outcome::Result(result) => result.into_value(),
            Outcome::Error(error) => {
                return Err(self.protocol_error(format!("initialize failed: {} ({})", error.message, error.code.0)));
            }
        };
        let revision = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .and_then(Revision::parse)
            .ok_or_else(|| {
                self.protocol_error(format!(
                    "initialize answered an unknown protocolVersion: {}",
                    result.get("protocolVersion").unwrap_or(&Value::Null)
                ))
            })?;
        self.resume(revision);
        let result = match known {
            Some(known) if *known == result => known,
            _ => Arc::new(result),
        };
        self.set_initialize_result(result.clone());
        self.notify("notifications/initialized", None).await?;
        Ok(result)
    }
}
