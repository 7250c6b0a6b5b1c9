//! The alpha conformance suite (`@modelcontextprotocol/conformance@0.2.0-alpha.*`) against
//! eragate in front of a modern upstream (`legacy_server.py --dual-era --conformance`, the Python
//! SDK's dual-era server) and in front of a legacy-only one (`legacy_server.py --conformance`),
//! both with the suite's fixture tools and both over Streamable HTTP, at two spec versions:
//!
//! - 2026-07-28: `server-stateless`, the scenarios that need no fixture tool, and the pending
//!   `http-custom-header-server-validation` (the fixture's `--param-headers` tool `regional`
//!   declares `x-mcp-header`; in front of the legacy upstream eragate checks the headers);
//! - 2025-11-25: the handshake-era scenarios that need no fixture tool.
//!
//! Every run uses the target's baseline, `tests/conformance/expected-failures-<target>.yaml`,
//! which lists only checks that depend on the fixture or that a legacy upstream cannot carry,
//! each with its reason (both are empty today: the `--conformance` fixture has every tool the
//! scenarios need). The suite fails a run when a baselined check passes, so a baseline cannot go
//! stale; with a baseline, a WARNING counts as a failure. A failing run puts the suite's own
//! output in the assertion message. (`tests/it/conformance/conformance_fixture.rs` runs every scored scenario
//! against the legacy-only fixture, over stdio too.)
//!
//! Both baselines are empty: with the fixture's `--conformance` tools every check passes,
//! including -32021 with HTTP 400 in front of the legacy upstream (eragate's answer) and in
//! front of the modern one (the upstream's answer, relayed with its status).

use crate::common;

use std::path::PathBuf;

use common::conformance::{self, assert_runs_pass, check_baseline_may_be_empty};
use common::*;

/// 2026-07-28 scenarios: `server-stateless`, those that need no fixture tool, and the pending
/// `Mcp-Param-*` checks (issue 34 item 8: before it, every reject case failed in front of the
/// legacy upstream, where nobody checked the headers).
fn modern_scenarios() -> Vec<&'static str> {
    let mut scenarios = vec!["server-stateless", conformance::CUSTOM_HEADER_SCENARIO];
    scenarios.extend(conformance::MODERN_SCENARIOS_WITHOUT_FIXTURES);
    scenarios
}

/// 2025-11-25 scenarios that need no fixture tool.
const HANDSHAKE_SCENARIOS: [&str; 7] = conformance::HANDSHAKE_SCENARIOS_WITHOUT_FIXTURES;

#[derive(Clone, Copy)]
enum Target {
    /// eragate in front of `legacy_server.py --dual-era --conformance` (answers 2026-07-28 itself).
    ModernUpstream,
    /// eragate in front of `legacy_server.py --conformance` (handshake revisions only).
    LegacyUpstream,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::ModernUpstream => "modern-upstream",
            Target::LegacyUpstream => "legacy-upstream",
        }
    }

    fn baseline(self) -> PathBuf {
        repo_root().join(format!("tests/conformance/expected-failures-{}.yaml", self.name()))
    }

    fn start(self) -> (LegacyHttpServer, Eragate) {
        let upstream = match self {
            Target::ModernUpstream => {
                LegacyHttpServer::start(&["--dual-era", "--conformance", conformance::PARAM_HEADER_TOOL])
            }
            Target::LegacyUpstream => LegacyHttpServer::start(&["--conformance", conformance::PARAM_HEADER_TOOL]),
        };
        let gateway = Eragate::http(&upstream.url, "");
        (upstream, gateway)
    }
}

/// Runs `scenarios` at `spec_version` against `target` with its baseline; panics with every
/// failing run.
fn run_target(target: Target, spec_version: &str, scenarios: &[&str]) {
    let (_upstream, gateway) = target.start();
    let baseline = target.baseline();
    let baseline = baseline.to_str().expect("utf-8 path");
    let runs: Vec<Vec<&str>> = scenarios
        .iter()
        .map(|scenario| {
            vec![
                "--scenario",
                scenario,
                "--spec-version",
                spec_version,
                "--expected-failures",
                baseline,
            ]
        })
        .collect();
    assert_runs_pass(
        "CONFORMANCE_ALPHA_JS",
        &gateway,
        &runs,
        &format!(
            "alpha scenario run(s) at {spec_version} against eragate + {}",
            target.name()
        ),
    );
}

#[test]
fn alpha_2026_07_28_modern_upstream() {
    run_target(Target::ModernUpstream, "2026-07-28", &modern_scenarios());
}

#[test]
fn alpha_2026_07_28_legacy_upstream() {
    run_target(Target::LegacyUpstream, "2026-07-28", &modern_scenarios());
}

#[test]
fn alpha_2025_11_25_modern_upstream() {
    run_target(Target::ModernUpstream, "2025-11-25", &HANDSHAKE_SCENARIOS);
}

#[test]
fn alpha_2025_11_25_legacy_upstream() {
    run_target(Target::LegacyUpstream, "2025-11-25", &HANDSHAKE_SCENARIOS);
}

/// Each baseline holds only `scenario:check-id` entries, each under a one-line comment giving
/// its fixture-dependent (or legacy-upstream) reason; they may be empty.
#[test]
fn baselines_list_only_commented_fixture_checks() {
    for target in [Target::ModernUpstream, Target::LegacyUpstream] {
        check_baseline_may_be_empty(&target.baseline());
    }
}
