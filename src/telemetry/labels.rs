//! The bounded label sets of eragate's metrics: every label value comes from
//! a fixed list here, so no client can grow a series count. Pure: names in,
//! small indexes out.

use crate::protocol::{Era, Revision};

/// The methods counted by name; anything else is counted as `other`.
pub(crate) const METHODS: [&str; 26] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    // A client's answer to a server→client request (sampling, elicitation, roots).
    "response",
    "other",
    // Kept last: not a method, the label of a message eragate could not name.
    "unknown",
];

/// How many method labels there are.
pub(crate) const METHOD_COUNT: usize = METHODS.len();

/// A method's label: an index into `METHODS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MethodLabel(pub(crate) u8);

impl MethodLabel {
    /// The label of a client's answer to a server→client request.
    pub(crate) const RESPONSE: MethodLabel = MethodLabel(23);
    const OTHER: MethodLabel = MethodLabel(24);

    /// The label of `method`: its own name when it is listed, else `other`.
    pub fn of(method: &str) -> MethodLabel {
        // Method names are short; the list is scanned rather than hashed.
        METHODS[..23]
            .iter()
            .position(|m| *m == method)
            .map_or(MethodLabel::OTHER, |i| MethodLabel(i as u8))
    }

    /// The label text.
    pub(crate) fn as_str(self) -> &'static str {
        METHODS[self.0 as usize]
    }

    /// Its index.
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

/// The label values of the `era` label.
pub(crate) const ERAS: [&str; 2] = ["legacy", "modern"];

/// The `era` label of `era`.
pub(crate) fn era_index(era: Era) -> usize {
    match era {
        Era::Legacy => 0,
        Era::Modern => 1,
    }
}

/// The label values of the `revision` label; the last is for a request whose
/// revision is not known (a legacy request without a session, a modern
/// request naming an unsupported revision).
pub(crate) const REVISIONS: [&str; 6] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
    "none",
];

/// The `revision` label of `revision`.
pub(crate) fn revision_index(revision: Option<Revision>) -> usize {
    match revision {
        Some(Revision::V2024_11_05) => 0,
        Some(Revision::V2025_03_26) => 1,
        Some(Revision::V2025_06_18) => 2,
        Some(Revision::V2025_11_25) => 3,
        Some(Revision::V2026_07_28) => 4,
        None => 5,
    }
}

/// How one client request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A result.
    Ok,
    /// A JSON-RPC error (from the upstream or from eragate).
    Error,
    /// Refused by eragate before it reached an upstream (malformed, not allowed).
    Rejected,
    /// The upstream was at capacity (503).
    Overloaded,
    /// A notification or a client's response, taken (202).
    Accepted,
    /// The client left (or the stream closed) before a response.
    Cancelled,
}

impl Outcome {
    /// Every outcome, in label order.
    pub(crate) const ALL: [Outcome; 6] = [
        Outcome::Ok,
        Outcome::Error,
        Outcome::Rejected,
        Outcome::Overloaded,
        Outcome::Accepted,
        Outcome::Cancelled,
    ];

    /// The label text.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Rejected => "rejected",
            Outcome::Overloaded => "overloaded",
            Outcome::Accepted => "accepted",
            Outcome::Cancelled => "cancelled",
        }
    }

    /// Its index in [`Outcome::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_labels() {
        let long = "x".repeat(10_000);
        let table = [
            ("initialize", "initialize"),
            ("tools/call", "tools/call"),
            ("server/discover", "server/discover"),
            ("notifications/roots/list_changed", "notifications/roots/list_changed"),
            ("tools/call2", "other"),
            ("", "other"),
            ("response", "other"),
            ("unknown", "other"),
            (long.as_str(), "other"),
        ];
        for (method, label) in table {
            assert_eq!(MethodLabel::of(method).as_str(), label, "{method}");
        }
        assert_eq!(MethodLabel::RESPONSE.as_str(), "response");
        assert_eq!(MethodLabel::OTHER.as_str(), "other");
    }

    #[test]
    fn every_revision_has_its_own_label() {
        for revision in Revision::LEGACY.iter().chain(&Revision::MODERN) {
            assert_eq!(REVISIONS[revision_index(Some(*revision))], revision.as_str());
        }
        assert_eq!(REVISIONS[revision_index(None)], "none");
    }

    #[test]
    fn outcome_indexes_follow_all() {
        for (i, outcome) in Outcome::ALL.iter().enumerate() {
            assert_eq!(outcome.index(), i);
        }
    }
}
