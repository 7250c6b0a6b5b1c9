//! The alpha conformance suite (`@modelcontextprotocol/conformance@0.2.0-alpha.*`) against
//! eragate in front of a modern upstream (`legacy_server.py --dual-era`, the Python SDK's
//! dual-era server) and in front of a legacy-only one (`legacy_server.py`), both over
//! Streamable HTTP, at two spec versions:
//!
//! - 2026-07-28: `server-stateless` and the scenarios that need no fixture tool;
//! - 2025-11-25: the handshake-era scenarios that need no fixture tool.
//!
//! Every run uses the target's baseline, `tests/conformance/expected-failures-<target>.yaml`,
//! which lists only checks that depend on the fixture (a suite fixture tool the upstream lacks,
//! or the upstream's own tool naming), each with its reason. The suite fails a run when a
//! baselined check passes, so a baseline cannot go stale; with a baseline, a WARNING counts as
//! a failure. A failing run puts the suite's own output in the assertion message.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// 2026-07-28 scenarios: `server-stateless` and those that need no fixture tool.
const MODERN_SCENARIOS: [&str; 9] = [
    "server-stateless",
    "sep-2164-resource-not-found",
    "caching",
    "http-header-validation",
    "dns-rebinding-protection",
    "tools-list",
    "tools-call-error",
    "resources-list",
    "prompts-list",
];

/// 2025-11-25 scenarios that need no fixture tool.
const HANDSHAKE_SCENARIOS: [&str; 7] = [
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-error",
    "resources-list",
    "prompts-list",
    "logging-set-level",
];

#[derive(Clone, Copy)]
enum Target {
    /// eragate in front of `legacy_server.py --dual-era` (answers 2026-07-28 itself).
    ModernUpstream,
    /// eragate in front of `legacy_server.py` (handshake revisions only).
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
            Target::ModernUpstream => LegacyHttpServer::start(&["--dual-era"]),
            Target::LegacyUpstream => LegacyHttpServer::start(&[]),
        };
        let gateway = Eragate::http(&upstream.url, "");
        (upstream, gateway)
    }
}

/// Runs the alpha suite with `server --url URL` and `args`; returns whether it exited 0, and
/// its output.
fn run_alpha(url: &str, args: &[&str]) -> (bool, String) {
    let peers = peers();
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(peers.node22())
        .arg(peers.get("CONFORMANCE_ALPHA_JS"))
        .args(["server", "--url", url])
        .args(args)
        .arg("-o")
        .arg(dir.path())
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run the alpha conformance suite: {e}"));
    let text = format!(
        "$ conformance server --url {url} {}\nexit: {}\n{}{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), strip_ansi(&text))
}

/// The suite colours its output; keep assertion messages readable.
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

/// Runs `scenarios` at `spec_version` against `target` with its baseline; panics with every
/// failing run.
fn run_target(target: Target, spec_version: &str, scenarios: &[&str]) {
    let (_upstream, gateway) = target.start();
    let baseline = target.baseline();
    let baseline = baseline.to_str().expect("utf-8 path");
    let mut failures = Vec::new();
    for scenario in scenarios {
        let (ok, output) = run_alpha(
            &gateway.url(),
            &[
                "--scenario",
                scenario,
                "--spec-version",
                spec_version,
                "--expected-failures",
                baseline,
            ],
        );
        if !ok {
            failures.push(output);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} alpha scenario run(s) at {spec_version} failed against eragate + {}:\n{}\n\neragate log:\n{}",
        failures.len(),
        scenarios.len(),
        target.name(),
        failures.join("\n----------------\n"),
        gateway.log()
    );
}

#[test]
fn alpha_2026_07_28_modern_upstream() {
    run_target(Target::ModernUpstream, "2026-07-28", &MODERN_SCENARIOS);
}

#[test]
fn alpha_2026_07_28_legacy_upstream() {
    run_target(Target::LegacyUpstream, "2026-07-28", &MODERN_SCENARIOS);
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
/// its fixture-dependent reason.
#[test]
fn baselines_list_only_commented_fixture_checks() {
    for target in [Target::ModernUpstream, Target::LegacyUpstream] {
        let path = target.baseline();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        check_baseline(&text, &path);
    }
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
