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

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// Alpha scenarios that need no fixture tool.
const ALPHA_SCENARIOS: [&str; 8] = [
    "sep-2164-resource-not-found",
    "caching",
    "http-header-validation",
    "dns-rebinding-protection",
    "tools-list",
    "tools-call-error",
    "resources-list",
    "prompts-list",
];

/// Stable scenarios that need no fixture tool.
const STABLE_SCENARIOS: [&str; 7] = [
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-error",
    "resources-list",
    "prompts-list",
    "logging-set-level",
];

fn everything_gateway() -> Eragate {
    let command = everything_stdio_command();
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    Eragate::stdio(&command, "")
}

/// Runs one conformance suite (`CONFORMANCE_ALPHA_JS` or `CONFORMANCE_STABLE_JS`) with
/// `server --url URL` and `args`; returns whether it exited 0, and its output.
fn run_suite(suite: &str, url: &str, args: &[&str]) -> (bool, String) {
    let peers = peers();
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(peers.node22())
        .arg(peers.get(suite))
        .args(["server", "--url", url])
        .args(args)
        .arg("-o")
        .arg(dir.path())
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the {suite} conformance suite: {e}"));
    let text = format!(
        "$ {suite} server --url {url} {}\nexit: {}\n{}{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), strip_ansi(&text))
}

/// The suites colour their output; keep assertion messages readable.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn expected_failures_file() -> std::path::PathBuf {
    repo_root().join("tests/conformance/expected-failures.yaml")
}

#[test]
fn alpha_server_stateless_passes_with_only_the_fixture_tool_baseline() {
    let gateway = everything_gateway();
    let baseline = expected_failures_file();
    let (ok, output) = run_suite(
        "CONFORMANCE_ALPHA_JS",
        &gateway.url(),
        &[
            "--scenario",
            "server-stateless",
            "--expected-failures",
            baseline.to_str().expect("utf-8 path"),
        ],
    );
    assert!(
        ok,
        "server-stateless failed against eragate + server-everything:\n{output}\n\neragate log:\n{}",
        gateway.log()
    );
}

#[test]
fn alpha_scenarios_without_fixtures_pass() {
    let gateway = everything_gateway();
    let mut failures = Vec::new();
    for scenario in ALPHA_SCENARIOS {
        let (ok, output) = run_suite("CONFORMANCE_ALPHA_JS", &gateway.url(), &["--scenario", scenario]);
        if !ok {
            failures.push(output);
        }
    }
    assert!(
        failures.is_empty(),
        "{} alpha scenario(s) failed:\n{}\n\neragate log:\n{}",
        failures.len(),
        failures.join("\n----------------\n"),
        gateway.log()
    );
}

#[test]
fn stable_scenarios_pass_at_2025_06_18_and_2025_11_25() {
    let gateway = everything_gateway();
    let mut failures = Vec::new();
    for version in ["2025-06-18", "2025-11-25"] {
        for scenario in STABLE_SCENARIOS {
            let (ok, output) = run_suite(
                "CONFORMANCE_STABLE_JS",
                &gateway.url(),
                &["--scenario", scenario, "--spec-version", version],
            );
            if !ok {
                failures.push(output);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} stable scenario run(s) failed:\n{}\n\neragate log:\n{}",
        failures.len(),
        failures.join("\n----------------\n"),
        gateway.log()
    );
}

/// The baseline holds only `scenario:check-id` entries, each under a comment giving its reason.
#[test]
fn expected_failures_baseline_is_commented_per_check() {
    let path = expected_failures_file();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    check_baseline(&text, &path);
}

fn check_baseline(text: &str, path: &Path) {
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.iter().any(|l| l.trim_end() == "server:"),
        "{}: no `server:` key",
        path.display()
    );
    let mut entries = 0;
    for (i, line) in lines.iter().enumerate() {
        let Some(entry) = line.trim_start().strip_prefix("- ") else {
            continue;
        };
        entries += 1;
        let entry = entry.trim();
        let (scenario, check) = entry.split_once(':').unwrap_or_else(|| {
            panic!(
                "{}:{}: {entry:?} should name one check (`scenario:check-id`)",
                path.display(),
                i + 1
            )
        });
        assert!(
            !scenario.is_empty() && !check.is_empty() && !check.starts_with(' '),
            "{}:{}: {entry:?} is not `scenario:check-id`",
            path.display(),
            i + 1
        );
        let reason = i.checked_sub(1).map(|j| lines[j].trim_start()).unwrap_or_default();
        assert!(
            reason.starts_with('#') && reason.contains("fixture"),
            "{}:{}: {entry:?} needs a one-line `# needs ... fixture ...` reason above it",
            path.display(),
            i + 1
        );
    }
    assert!(entries > 0, "{}: no entries", path.display());
}
