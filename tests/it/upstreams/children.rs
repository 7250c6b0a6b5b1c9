//! stdio children protected from eragate and eragate from them: the
//! environment they inherit, dying with a SIGKILLed eragate, and a bounded stderr.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;
use nix::sys::signal::Signal;
use serde_json::json;

/// `sh -c SCRIPT` where the script ends by running the legacy fixture over stdio.
fn sh_then_fixture(script: &str) -> Vec<String> {
    let peers = peers();
    let fixture = format!("exec '{}' '{}' stdio", peers.python(), peers.script("legacy_server.py"));
    vec!["/bin/sh".into(), "-c".into(), format!("{script}; {fixture}")]
}

/// Process ids written one per line to `file`.
fn pids_in(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Whether `pid` is a live process (not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.split(") ").nth(1).is_some_and(|rest| !rest.starts_with('Z')))
}

/// Whether `pid` has become `sleep` (its shell exec'd it).
fn runs_sleep(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
}

/// The peak resident set of `pid` in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn stdio_children_inherit_no_eragate_secrets_only_the_allowlist() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dump = dir.path().join("env.txt");
    let command = sh_then_fixture(&format!("env > '{}'", dump.display()));
    let config = format!(
        "[[auth.tokens]]\nprincipal = \"ci\"\nenv = \"CI_TOKEN\"\n{}",
        stdio_upstream_toml(
            &command,
            "",
            "inherit_env = [\"PATH\", \"HOME\", \"CI_*\"]\nenv = { CONFIGURED = \"yes\" }",
        )
    );
    let env = [
        ("ERAGATE_SESSION_KEY", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="),
        ("CI_TOKEN", "secret-token"),
        ("CI_REGION", "eu"),
        ("UNLISTED_VARIABLE", "x"),
    ];
    let gateway = Eragate::start_with_env(&config, &[], &env);
    wait_until("the child's environment dump", Duration::from_secs(20), || {
        std::fs::read_to_string(&dump).is_ok_and(|t| t.contains("CONFIGURED="))
    });
    let text = std::fs::read_to_string(&dump).expect("dump");
    let names: Vec<&str> = text.lines().filter_map(|l| l.split_once('=').map(|(n, _)| n)).collect();
    for secret in ["ERAGATE_SESSION_KEY", "CI_TOKEN", "UNLISTED_VARIABLE", "ERAGATE_LOG"] {
        assert!(!names.contains(&secret), "{secret} reached the child: {names:?}");
    }
    for wanted in ["PATH", "CI_REGION", "CONFIGURED"] {
        assert!(names.contains(&wanted), "{wanted} missing in the child: {names:?}");
    }
    // The child still works as an upstream.
    let body = modern_body(2, "tools/call", json!({"name": "echo", "arguments": {"text": "hi"}}));
    let mut headers = modern_headers("tools/call", Some("echo"));
    headers.push(("authorization", "Bearer secret-token"));
    let reply = send("POST", &gateway.url(), &headers, Some(&body));
    let result = reply.json().get("result").cloned();
    let reply = result.unwrap_or_else(|| panic!("no result; log:\n{}", gateway.log()));
    assert_eq!(tool_text(&reply), "echo: hi");
}

#[test]
fn a_sigkilled_eragate_takes_children_that_ignore_stdin_eof_along() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pids = dir.path().join("pids");
    // Never answers, never reads stdin: only a signal ends it.
    let script = format!("echo $$ >> '{}'; exec sleep 600", pids.display());
    let command = ["/bin/sh".to_owned(), "-c".to_owned(), script];
    // No spares: the one child is the warm session's, so none is starting when eragate dies.
    let config = stdio_upstream_toml(&command, "handshake_timeout = \"120s\"", "spares = 0");
    let mut gateway = Eragate::start(&config);
    // Past `setpriv` (which sets the signal before it runs the command): the child is `sleep`.
    wait_until("a child running sleep", Duration::from_secs(20), || {
        let children = pids_in(&pids);
        !children.is_empty() && children.iter().all(|pid| runs_sleep(*pid))
    });
    signal(gateway.proc.pid(), Signal::SIGKILL);
    let _ = gateway.proc.child.wait();
    let gone = poll_until(Duration::from_secs(20), || {
        pids_in(&pids).iter().all(|pid| !alive(*pid))
    });
    let survivors: Vec<u32> = pids_in(&pids).into_iter().filter(|pid| alive(*pid)).collect();
    for pid in &survivors {
        signal(*pid, Signal::SIGKILL); // do not leave them behind
    }
    assert!(gone, "children outlived a SIGKILLed eragate: {survivors:?}");
}

#[test]
fn a_huge_stderr_line_is_truncated_in_the_log_and_never_buffered() {
    const LINE: u64 = 96 * 1024 * 1024;
    let script = format!("head -c {LINE} /dev/zero | tr '\\0' x >&2; echo >&2; echo stderr-done >&2");
    let config = stdio_upstream_toml(&sh_then_fixture(&script), "", "spares = 1");
    let gateway = Eragate::start(&config);
    wait_until("the end of the child's stderr", Duration::from_secs(60), || {
        gateway.log().contains("stderr-done")
    });
    let peak_mib = peak_rss_kib(gateway.proc.pid()) / 1024;
    let log = gateway.log();
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 64 * 1024, "a {longest}-byte log line");
    assert!(log.contains("[truncated]"), "no truncation marker");
    assert!(
        peak_mib < 64,
        "eragate's peak RSS was {peak_mib} MiB after a {LINE}-byte stderr line"
    );
}
