//! The official MCP conformance suites' shared part (`tests/conformance.rs`,
//! `tests/conformance_eras.rs`): running a suite against eragate, asserting a set of runs, and
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

/// Asserts that the baseline at `path` holds only `scenario:check-id` entries under its
/// `server:` key, each under a one-line `# needs ... fixture ...` comment giving its reason.
#[track_caller]
pub fn check_baseline(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
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
