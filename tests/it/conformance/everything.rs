//! The official MCP conformance suites against eragate in front of server-everything (a real,
//! legacy-only upstream) over stdio.
//!
//! - alpha (`@modelcontextprotocol/conformance@0.2.0-alpha.*`, 2026-07-28): `server-stateless`
//!   with `tests/conformance/expected-failures.yaml` as its baseline (only checks that need a
//!   fixture tool server-everything lacks), and the scenarios that need no fixture.
//! - stable (`@modelcontextprotocol/conformance@0.1.*`): the handshake-era scenarios that need no
//!   fixture, at spec versions 2025-06-18 and 2025-11-25.
//!
//! A failing run puts the suite's own output in the assertion message.

use crate::common;

use common::conformance::{self, assert_runs_pass, check_baseline};
use common::*;

/// Alpha scenarios that need no fixture tool.
const ALPHA_SCENARIOS: [&str; 8] = conformance::MODERN_SCENARIOS_WITHOUT_FIXTURES;

/// Stable scenarios that need no fixture tool.
const STABLE_SCENARIOS: [&str; 7] = conformance::HANDSHAKE_SCENARIOS_WITHOUT_FIXTURES;

fn everything_gateway() -> Eragate {
    Eragate::stdio(&as_strs(&everything_stdio_command()), "")
}

fn expected_failures_file() -> std::path::PathBuf {
    repo_root().join("tests/conformance/expected-failures.yaml")
}

#[test]
fn alpha_server_stateless_passes_with_only_the_fixture_tool_baseline() {
    let gateway = everything_gateway();
    let baseline = expected_failures_file();
    let baseline = baseline.to_str().expect("utf-8 path");
    assert_runs_pass(
        "CONFORMANCE_ALPHA_JS",
        &gateway,
        &[vec!["--scenario", "server-stateless", "--expected-failures", baseline]],
        "server-stateless run(s) against eragate + server-everything",
    );
}

#[test]
fn alpha_scenarios_without_fixtures_pass() {
    let gateway = everything_gateway();
    let runs: Vec<Vec<&str>> = ALPHA_SCENARIOS.iter().map(|s| vec!["--scenario", s]).collect();
    assert_runs_pass("CONFORMANCE_ALPHA_JS", &gateway, &runs, "alpha scenario(s)");
}

#[test]
fn stable_scenarios_pass_at_2025_06_18_and_2025_11_25() {
    let gateway = everything_gateway();
    let runs: Vec<Vec<&str>> = ["2025-06-18", "2025-11-25"]
        .iter()
        .flat_map(|version| STABLE_SCENARIOS.map(|s| vec!["--scenario", s, "--spec-version", version]))
        .collect();
    assert_runs_pass("CONFORMANCE_STABLE_JS", &gateway, &runs, "stable scenario run(s)");
}

/// The baseline holds only `scenario:check-id` entries, each under a comment giving its reason.
#[test]
fn expected_failures_baseline_is_commented_per_check() {
    check_baseline(&expected_failures_file());
}
