//! The 2026-07-28 request envelope carried in `params._meta`: reading it,
//! checking it, and keeping its reserved keys away from legacy upstreams.

use serde_json::{Map, Value};

use super::lazy_json::{MetaMember, ParamsView};

/// `_meta` key: the protocol version of this request.
pub(crate) const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: the client's capabilities for this request.
pub(crate) const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: the client's self-reported identity.
pub(crate) const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: opt-in log level for this request.
pub(crate) const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta` key: the server's identity.
pub(crate) const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Notification `_meta` key: the listen request a notification belongs to.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// The reserved prefix that never reaches a legacy upstream.
pub const RESERVED_PREFIX: &str = "io.modelcontextprotocol/";

/// The validated envelope of one modern request.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    /// As sent; support is checked separately so the error can name it.
    pub protocol_version: String,
    /// The client's capabilities for this request (`{}` means none).
    pub(crate) client_capabilities: Value,
    /// Self-reported; never used for security decisions.
    pub(crate) client_info: Option<ClientInfo>,
    /// The level at which this request opted into `notifications/message`.
    pub(crate) log_level: Option<LogLevel>,
}

/// A client's self-reported identity as it was sent (JSON text), built into a
/// tree only where a handshake or a modern upstream's envelope carries it, since
/// most requests never look at it.
/// Two are equal when they hold the same JSON value, however each was spelled
/// (whitespace, member order): the text kept is the client's, or serde_json's
/// writing of a tree.
#[derive(Clone, Debug)]
pub(crate) struct ClientInfo(Box<str>);

impl PartialEq for ClientInfo {
    fn eq(&self, other: &ClientInfo) -> bool {
        self.0 == other.0 || self.value() == other.value()
    }
}

impl ClientInfo {
    /// The identity in `value`.
    pub(crate) fn of(value: &Value) -> ClientInfo {
        ClientInfo(value.to_string().into_boxed_str())
    }

    /// The identity `member` of an envelope holds (its text is checked JSON).
    fn of_member(member: MetaMember<'_>) -> ClientInfo {
        match member {
            MetaMember::Text(text) => ClientInfo(text.into()),
            MetaMember::Tree(value) => ClientInfo::of(value),
        }
    }

    /// The identity, built.
    pub(crate) fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or_default()
    }
}

/// Why an envelope is unusable; each maps to -32602.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// `params._meta` is absent or not an object.
    #[error("params._meta is missing (2026-07-28 requests carry their envelope there)")]
    MissingMeta,
    /// No protocol version.
    #[error("params._meta is missing io.modelcontextprotocol/protocolVersion")]
    MissingProtocolVersion,
    /// No client capabilities.
    #[error("params._meta is missing io.modelcontextprotocol/clientCapabilities")]
    MissingClientCapabilities,
    /// Capabilities are not an object.
    #[error("io.modelcontextprotocol/clientCapabilities must be an object")]
    InvalidClientCapabilities,
    /// A log level outside the syslog set.
    #[error("io.modelcontextprotocol/logLevel is not a valid logging level")]
    InvalidLogLevel,
}

/// Whether a message claims a version in its envelope: the era signal in the body.
pub fn claims_version<P: ParamsView>(params: Option<&P>) -> bool {
    params.and_then(|p| p.meta_member(PROTOCOL_VERSION)).is_some()
}

impl Envelope {
    /// Reads and checks the envelope of a request's params.
    /// Each member is read alone: params kept as text build only these.
    pub fn parse<P: ParamsView>(params: Option<&P>) -> Result<Envelope, EnvelopeError> {
        let params = params
            .filter(|p| p.has_meta_object())
            .ok_or(EnvelopeError::MissingMeta)?;
        let protocol_version = match params.meta_member(PROTOCOL_VERSION).and_then(MetaMember::as_str) {
            Some(version) => version.into_owned(),
            None => return Err(EnvelopeError::MissingProtocolVersion),
        };
        let client_capabilities = match params.meta_member(CLIENT_CAPABILITIES) {
            Some(member) if member.is_object() => member.to_value(),
            Some(_) => return Err(EnvelopeError::InvalidClientCapabilities),
            None => return Err(EnvelopeError::MissingClientCapabilities),
        };
        let log_level = match params.meta_member(LOG_LEVEL) {
            None => None,
            Some(member) => Some(
                member
                    .as_str()
                    .and_then(|level| LogLevel::parse(&level))
                    .ok_or(EnvelopeError::InvalidLogLevel)?,
            ),
        };
        Ok(Envelope {
            protocol_version,
            client_capabilities,
            client_info: params.meta_member(CLIENT_INFO).map(ClientInfo::of_member),
            log_level,
        })
    }

    /// Writes this envelope into a `_meta` object (for requests toward a modern upstream).
    pub fn insert_into(&self, meta: &mut Map<String, Value>) {
        meta.insert(PROTOCOL_VERSION.into(), Value::from(self.protocol_version.as_str()));
        meta.insert(CLIENT_CAPABILITIES.into(), self.client_capabilities.clone());
        if let Some(info) = &self.client_info {
            meta.insert(CLIENT_INFO.into(), info.value());
        }
        if let Some(level) = self.log_level {
            meta.insert(LOG_LEVEL.into(), Value::from(level.as_str()));
        }
    }
}

/// Removes every `io.modelcontextprotocol/*` key from `params._meta`, dropping
/// `_meta` when nothing else was in it. `progressToken` and trace keys stay.
pub fn strip_reserved(params: &mut Value) {
    let Some(object) = params.as_object_mut() else {
        return;
    };
    let now_empty = match object.get_mut("_meta").and_then(Value::as_object_mut) {
        Some(meta) => {
            meta.retain(|key, _| !key.starts_with(RESERVED_PREFIX));
            meta.is_empty()
        }
        None => false,
    };
    if now_empty {
        object.remove("_meta");
    }
}

/// The syslog severities MCP logging uses, least severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum LogLevel {
    /// debug
    Debug,
    /// info
    Info,
    /// notice
    Notice,
    /// warning
    Warning,
    /// error
    Error,
    /// critical
    Critical,
    /// alert
    Alert,
    /// emergency
    Emergency,
}

impl LogLevel {
    const NAMES: [(&'static str, LogLevel); 8] = [
        ("debug", LogLevel::Debug),
        ("info", LogLevel::Info),
        ("notice", LogLevel::Notice),
        ("warning", LogLevel::Warning),
        ("error", LogLevel::Error),
        ("critical", LogLevel::Critical),
        ("alert", LogLevel::Alert),
        ("emergency", LogLevel::Emergency),
    ];

    /// Parses a level name.
    pub(crate) fn parse(name: &str) -> Option<LogLevel> {
        LogLevel::NAMES.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
    }

    /// The wire name.
    pub(crate) fn as_str(self) -> &'static str {
        LogLevel::NAMES
            .iter()
            .find(|(_, l)| *l == self)
            .map_or("debug", |(n, _)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelope_table() {
        let ok = json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {},
            CLIENT_INFO: {"name": "c", "version": "1"}, LOG_LEVEL: "warning"}});
        let envelope = Envelope::parse(Some(&ok)).unwrap();
        assert_eq!(envelope.protocol_version, "2026-07-28");
        assert_eq!(envelope.log_level, Some(LogLevel::Warning));
        assert_eq!(
            envelope.client_info.map(|info| info.value()),
            Some(json!({"name": "c", "version": "1"}))
        );

        let cases = [
            (json!({}), EnvelopeError::MissingMeta),
            (json!({"_meta": 1}), EnvelopeError::MissingMeta),
            (
                json!({"_meta": {CLIENT_CAPABILITIES: {}}}),
                EnvelopeError::MissingProtocolVersion,
            ),
            (
                json!({"_meta": {PROTOCOL_VERSION: 2026}}),
                EnvelopeError::MissingProtocolVersion,
            ),
            (
                json!({"_meta": {PROTOCOL_VERSION: "2026-07-28"}}),
                EnvelopeError::MissingClientCapabilities,
            ),
            (
                json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: []}}),
                EnvelopeError::InvalidClientCapabilities,
            ),
            (
                json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}, LOG_LEVEL: "loud"}}),
                EnvelopeError::InvalidLogLevel,
            ),
        ];
        for (params, error) in cases {
            assert_eq!(Envelope::parse(Some(&params)), Err(error.clone()), "{params}");
        }
        assert_eq!(Envelope::parse::<Value>(None), Err(EnvelopeError::MissingMeta));
    }

    #[test]
    fn an_envelope_read_from_text_equals_the_one_read_from_its_tree() {
        // The client's spelling (spaces, member order) is kept as it came; a tree's
        // identity is serde_json's writing of it. The same value either way.
        let text = r#"{"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"version": "1", "name": "seed"}}}"#;
        let raw: Box<serde_json::value::RawValue> = serde_json::from_str(text).unwrap();
        let kept = crate::protocol::lazy_json::LazyJson::from_checked_text(&raw);
        let tree: Value = serde_json::from_str(text).unwrap();
        let from_text = Envelope::parse(Some(&kept)).unwrap();
        assert_eq!(from_text, Envelope::parse(Some(&tree)).unwrap());
        let other = json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {},
            CLIENT_INFO: {"name": "other", "version": "1"}}});
        assert_ne!(from_text, Envelope::parse(Some(&other)).unwrap());
    }

    #[test]
    fn strip_keeps_progress_and_trace_keys() {
        let mut params = json!({"name": "t", "_meta": {PROTOCOL_VERSION: "2026-07-28",
            CLIENT_CAPABILITIES: {}, "progressToken": "p-1", "traceparent": "00-ab", "vendor/x": 1}});
        strip_reserved(&mut params);
        assert_eq!(
            params,
            json!({"name": "t", "_meta": {"progressToken": "p-1", "traceparent": "00-ab", "vendor/x": 1}})
        );

        let mut only_envelope = json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}}});
        strip_reserved(&mut only_envelope);
        assert_eq!(only_envelope, json!({}));
    }

    #[test]
    fn log_levels_are_ordered() {
        assert!(LogLevel::Debug < LogLevel::Emergency);
        for (name, level) in LogLevel::NAMES {
            assert_eq!(LogLevel::parse(name), Some(level));
            assert_eq!(level.as_str(), name);
        }
    }
}
