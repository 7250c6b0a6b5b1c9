//! The official MCP conformance suites' shared part (`tests/it/conformance/everything.rs`,
//! `tests/it/conformance/conformance_eras.rs`, `tests/it/conformance/conformance_fixture.rs`): running a suite against eragate, asserting a set of runs, and
//! checking an expected-failures baseline file.

use std::path::Path;
use std::process::Command;

use super::{Eragate, peers};

/// 2026-07-28 (alpha suite) scenarios that need no fixture tool.
pub const MODERN_SCENARIOS_WITHOUT_FIXTURES: [&str; 8] = [
    "sep-2164-resource-not-found",
    "caching",
    "http-header-validation",
    "dns-rebinding-protection",
    "tools-list",
    "tools-call-error",
    "resources-list",
    "prompts-list",
];

/// The pending 2026-07-28 scenario eragate must pass all the same: `Mcp-Param-*` headers
/// checked against the body (SEP-2243), which eragate does for a legacy upstream.
pub const CUSTOM_HEADER_SCENARIO: &str = "http-custom-header-server-validation";

/// The fixture flag (`legacy_server.py`) adding a tool that declares `x-mcp-header`, which
/// [`CUSTOM_HEADER_SCENARIO`] needs.
pub const PARAM_HEADER_TOOL: &str = "--param-headers";

/// Handshake-era scenarios that need no fixture tool.
pub const HANDSHAKE_SCENARIOS_WITHOUT_FIXTURES: [&str; 7] = [
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-error",
    "resources-list",
    "prompts-list",
    "logging-set-level",
];

/// Runs one conformance suite (`CONFORMANCE_ALPHA_JS` or `CONFORMANCE_STABLE_JS`) with
/// `server --url URL` and `args`; returns whether it exited 0, and its output.
pub fn run_suite(suite: &str, url: &str, args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    run_suite_in(suite, url, args, dir.path())
}

/// [`run_suite`] with the suite's results (`server-<scenario>-<time>/checks.json`) kept in `dir`.
pub fn run_suite_in(suite: &str, url: &str, args: &[&str], dir: &Path) -> (bool, String) {
    let peers = peers();
    let output = Command::new(peers.node22())
        .arg(peers.get(suite))
        .args(["server", "--url", url])
        .args(args)
        .arg("-o")
        .arg(dir)
        .current_dir(dir)
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

/// Runs `suite` against `gateway` once per argument list in `runs`; panics with the suite's
/// output of every failing run and eragate's log (`what` names the runs in that message).
#[track_caller]
pub fn assert_runs_pass(suite: &str, gateway: &Eragate, runs: &[Vec<&str>], what: &str) {
    let url = gateway.url();
    let failures: Vec<String> = runs
        .iter()
        .filter_map(|args| {
            let (ok, output) = run_suite(suite, &url, args);
            (!ok).then_some(output)
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} {what} failed:\n{}\n\neragate log:\n{}",
        failures.len(),
        runs.len(),
        failures.join("\n----------------\n"),
        gateway.log()
    );
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

/// The server scenarios the alpha suite scores for `revision` (`list --server --requirements`):
/// what a `server --requirements <revision>` run must pass.
pub fn required_server_scenarios(revision: &str) -> Vec<String> {
    let peers = peers();
    let output = Command::new(peers.node22())
        .arg(peers.get("CONFORMANCE_ALPHA_JS"))
        .args(["list", "--server", "--requirements", revision])
        .env("NO_COLOR", "1")
        .output()
        .expect("cannot run the alpha suite's list");
    let text = strip_ansi(&String::from_utf8_lossy(&output.stdout));
    assert!(
        output.status.success(),
        "alpha list --requirements {revision} failed:\n{text}"
    );
    // "Server scenarios (...):" then "  - name" lines, up to the blank line.
    text.lines()
        .skip_while(|l| !l.starts_with("Server scenarios"))
        .skip(1)
        .map_while(|l| l.trim().strip_prefix("- "))
        .map(str::to_owned)
        .collect()
}

/// One scenario's checks from a results folder of [`run_suite_in`], by scenario name.
pub fn scenario_checks(dir: &Path) -> std::collections::BTreeMap<String, Vec<serde_json::Value>> {
    let mut out = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("results folder").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // server-<scenario>-<YYYY-MM-DDTHH-MM-SS-mmmZ>
        let Some(scenario) = name
            .strip_prefix("server-")
            .and_then(|rest| rest.len().checked_sub(25).map(|cut| &rest[..cut]))
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else {
            continue;
        };
        let checks: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
        out.insert(scenario.to_owned(), checks);
    }
    out
}

/// The checks of `checks` that are neither SUCCESS, INFO nor SKIPPED, one line each (id,
/// status, message, details cut to `room` characters).
pub fn failing_checks(scenario: &str, checks: &[serde_json::Value], room: usize) -> Vec<String> {
    checks
        .iter()
        .filter(|c| !matches!(c["status"].as_str(), Some("SUCCESS" | "INFO" | "SKIPPED")))
        .map(|c| {
            let details: String = c["details"].to_string().chars().take(room).collect();
            format!(
                "{scenario}:{} {}: {}\n    details: {details}",
                c["id"].as_str().unwrap_or("?"),
                c["status"].as_str().unwrap_or("?"),
                c["errorMessage"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// Asserts that the baseline at `path` holds only `scenario:check-id` entries under its
/// `server:` key, each under a one-line `# needs ... fixture ...` comment giving its reason,
/// and at least one entry.
#[track_caller]
pub fn check_baseline(path: &Path) {
    let entries = check_baseline_may_be_empty(path);
    assert!(entries > 0, "{}: no entries", path.display());
}

/// [`check_baseline`] for a baseline that may be empty (`server: []`, every check expected to
/// pass); returns the number of entries. A reason names the `fixture` or what a `legacy
/// upstream` cannot carry.
#[track_caller]
pub fn check_baseline_may_be_empty(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.trim_end() == "server:" || l.trim_end() == "server: []"),
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
            reason.starts_with('#') && (reason.contains("fixture") || reason.contains("legacy upstream")),
            "{}:{}: {entry:?} needs a one-line `# needs ... fixture ...` (or `# ... legacy upstream ...`) reason above it",
            path.display(),
            i + 1
        );
    }
    entries
}
