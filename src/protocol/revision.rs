//! The five MCP revisions, the era each belongs to, and how a legacy
//! `initialize` is answered.
//!
//! Revisions are an enumerated set, not dates: an unknown string never becomes a
//! revision, it only influences negotiation.

use std::fmt;

/// One published MCP revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Revision {
    /// The first revision: stdio and HTTP+SSE.
    V2024_11_05,
    /// Streamable HTTP, OAuth, JSON-RPC batches.
    V2025_03_26,
    /// Structured tool output, elicitation, `MCP-Protocol-Version` header.
    V2025_06_18,
    /// URL elicitation, tasks, icons: the last handshake revision.
    V2025_11_25,
    /// The stateless revision: per-request envelope, `server/discover`.
    V2026_07_28,
}

/// Which of the two protocol generations a revision (or a request) belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Era {
    /// `initialize`, sessions, server→client requests.
    Legacy,
    /// Every request carries its own `_meta` envelope; no sessions.
    Modern,
}

impl Revision {
    /// The handshake revisions, oldest first.
    pub(crate) const LEGACY: [Revision; 4] = [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
    ];
    /// The stateless revisions eragate serves.
    pub(crate) const MODERN: [Revision; 1] = [Revision::V2026_07_28];
    /// The newest handshake revision, offered to legacy upstreams.
    pub(crate) const LATEST_LEGACY: Revision = Revision::V2025_11_25;
    /// The newest revision of all.
    pub(crate) const LATEST: Revision = Revision::V2026_07_28;

    /// Parses an exact revision string; anything else is `None`.
    pub fn parse(text: &str) -> Option<Revision> {
        Some(match text {
            "2024-11-05" => Revision::V2024_11_05,
            "2025-03-26" => Revision::V2025_03_26,
            "2025-06-18" => Revision::V2025_06_18,
            "2025-11-25" => Revision::V2025_11_25,
            "2026-07-28" => Revision::V2026_07_28,
            _ => return None,
        })
    }

    /// The wire spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    /// The era this revision belongs to.
    pub fn era(self) -> Era {
        match self {
            Revision::V2026_07_28 => Era::Modern,
            _ => Era::Legacy,
        }
    }

    /// The supported modern versions, as `-32022` data and `supportedVersions` list them.
    pub(crate) fn modern_strings() -> Vec<&'static str> {
        Revision::MODERN.iter().map(|r| r.as_str()).collect()
    }

    /// Answers a legacy `initialize`: the newest handshake revision at or below the
    /// one requested; 2024-11-05 for anything older; the newest handshake revision
    /// when none (or something that is not a date) is requested.
    pub(crate) fn negotiate_legacy(requested: Option<&str>) -> Revision {
        let Some(requested) = requested else {
            return Revision::LATEST_LEGACY;
        };
        if let Some(exact) = Revision::parse(requested) {
            return match exact.era() {
                Era::Legacy => exact,
                Era::Modern => Revision::LATEST_LEGACY,
            };
        }
        if !looks_like_date(requested) {
            return Revision::LATEST_LEGACY;
        }
        // ISO dates order lexicographically.
        Revision::LEGACY
            .iter()
            .rev()
            .find(|r| r.as_str() <= requested)
            .copied()
            .unwrap_or(Revision::V2024_11_05)
    }

    /// Whether this revision defines JSON-RPC batches (only 2025-03-26 does).
    pub(crate) fn allows_batches(self) -> bool {
        self == Revision::V2025_03_26
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn looks_like_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_table() {
        let cases: &[(Option<&str>, Revision)] = &[
            (None, Revision::V2025_11_25),
            (Some("2024-11-05"), Revision::V2024_11_05),
            (Some("2025-03-26"), Revision::V2025_03_26),
            (Some("2025-06-18"), Revision::V2025_06_18),
            (Some("2025-11-25"), Revision::V2025_11_25),
            // The TypeScript SDK v1 still offers this pre-release revision.
            (Some("2024-10-07"), Revision::V2024_11_05),
            (Some("2023-01-01"), Revision::V2024_11_05),
            (Some("2025-05-01"), Revision::V2025_03_26),
            (Some("2025-12-31"), Revision::V2025_11_25),
            (Some("2026-07-28"), Revision::V2025_11_25),
            (Some("2027-03-01"), Revision::V2025_11_25),
            (Some("draft"), Revision::V2025_11_25),
            (Some(""), Revision::V2025_11_25),
        ];
        for (requested, expected) in cases {
            assert_eq!(Revision::negotiate_legacy(*requested), *expected, "{requested:?}");
        }
    }

    #[test]
    fn parse_round_trips_and_eras() {
        for rev in Revision::LEGACY.iter().chain(Revision::MODERN.iter()) {
            assert_eq!(Revision::parse(rev.as_str()), Some(*rev));
        }
        assert_eq!(Revision::V2026_07_28.era(), Era::Modern);
        assert!(Revision::LEGACY.iter().all(|r| r.era() == Era::Legacy));
        assert_eq!(Revision::parse("2025-11-26"), None);
        assert!(Revision::V2025_03_26.allows_batches());
        assert!(!Revision::V2025_06_18.allows_batches());
    }
}
