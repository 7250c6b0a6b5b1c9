//! The zero-config path: a 2026-07-28 client and a legacy client through
//! eragate in front of server-everything over stdio; and the same through each
//! shape of `[runtime]` (one thread for everything, one worker, four).

mod common;

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
    for runtime in ["single_thread = true", "workers = 1", "workers = 4"] {
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
    }
}
