//! The zero-config path: a 2026-07-28 client and a legacy client through
//! eragate in front of server-everything over stdio; and the same through each
//! shape of `[runtime]` (one thread for everything, one worker, four).

use crate::common;

use common::*;

#[test]
fn modern_and_legacy_python_clients_reach_server_everything_over_stdio() {
    let gateway = Eragate::stdio(&as_strs(&everything_stdio_command()), "");
    for (mode, expected) in [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")] {
        let report = py_client(&["--mode", mode, "--url", &gateway.url(), "--profile", "everything"])
            .unwrap_or_else(|e| panic!("{e}\neragate log:\n{}", gateway.log()));
        assert_eq!(report["protocol_version"], expected, "{report}");
        assert_eq!(report["results"]["call_echo"]["text"], "Echo: hi", "{report}");
    }
}

#[test]
fn every_runtime_shape_serves_both_eras() {
    // (the shape, whether tokio's worker threads serve: one worker is the one thread)
    for (runtime, pool) in [
        ("single_thread = true", false),
        ("workers = 1", false),
        ("workers = 4", true),
    ] {
        let config = format!(
            "[runtime]\n{runtime}\n{}",
            stdio_upstream_toml(&everything_stdio_command(), "", "")
        );
        let gateway = Eragate::start(&config);
        for (mode, expected) in [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")] {
            let report = py_client(&["--mode", mode, "--url", &gateway.url(), "--profile", "everything"])
                .unwrap_or_else(|e| panic!("[runtime] {runtime}: {e}\neragate log:\n{}", gateway.log()));
            assert_eq!(report["protocol_version"], expected, "[runtime] {runtime}: {report}");
            assert_eq!(
                report["results"]["call_echo"]["text"], "Echo: hi",
                "[runtime] {runtime}: {report}"
            );
        }
        // tokio names its worker threads (and its blocking pool's) `tokio-rt-worker`.
        let threads = std::fs::read_dir(format!("/proc/{}/task", gateway.proc.pid())).expect("the process's threads");
        let workers = threads
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim() == "tokio-rt-worker")
            .count();
        match pool {
            true => assert!(workers >= 4, "[runtime] {runtime}: {workers} worker threads"),
            false => assert_eq!(workers, 0, "[runtime] {runtime}: served on one thread"),
        }
    }
}
