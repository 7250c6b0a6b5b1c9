//! The era matrix: every client era the real SDKs speak, through eragate, in front of every
//! legacy-only upstream kind, each cell running the drivers' `full` scenario and checking the
//! real content that comes back.
//!
//! Client cells: the Python SDK in `2026-07-28` mode, in `auto` mode, and in `legacy` mode
//! offering each handshake revision; the TypeScript SDK v1 client offering each handshake
//! revision, plus `2024-10-07` (older than every revision eragate knows).
//! Upstream kinds: `legacy_server.py` over stdio and over Streamable HTTP, and
//! server-everything over stdio.
//!
//! One eragate (and upstream) per upstream kind serves all of its cells; a test runs every
//! cell and reports all failing cells at once, named `<client cell>__<upstream>`, with
//! eragate's log. `ERAGATE_MATRIX_CELL=<part of a cell name>` runs only the matching cells.

#![allow(non_snake_case)] // test names are `<client cell>__<upstream>`

use crate::common;

use common::matrix::{self, Profile, client_cells, expect};
use common::*;
use serde_json::{Value, json};

/// Every client cell over Streamable HTTP against `gateway`, with this matrix's extra checks.
fn run_matrix(upstream: &str, gateway: &Eragate, profile: Profile) {
    matrix::run_over_http(upstream, gateway, client_cells(), profile, everything_extras);
}

/// server-everything's prompt arguments, and no fixture-only step in its reports.
fn everything_extras(profile: Profile, report: &Value, _expected_version: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if profile == Profile::Everything {
        let r = &report["results"];
        expect(
            &mut problems,
            "list_prompts.arguments.args-prompt",
            &r["list_prompts"]["arguments"]["args-prompt"],
            json!(["city", "state"]),
        );
        if r.get("call_meteo").is_some() {
            problems.push("call_meteo: the everything profile has no such step".into());
        }
    }
    problems
}

#[test]
fn all_clients__stdio_upstream() {
    let command = legacy_stdio_command();
    let gateway = Eragate::stdio(&as_strs(&command), "");
    run_matrix("stdio_upstream", &gateway, matrix::PY_FIXTURE);
}

#[test]
fn all_clients__http_upstream() {
    let upstream = LegacyHttpServer::start(&[]);
    let gateway = Eragate::http(&upstream.url, "");
    run_matrix("http_upstream", &gateway, matrix::PY_FIXTURE);
    drop(gateway);
    drop(upstream);
}

#[test]
fn all_clients__everything_stdio_upstream() {
    let command = everything_stdio_command();
    let gateway = Eragate::stdio(&as_strs(&command), "");
    run_matrix("everything_stdio_upstream", &gateway, Profile::Everything);
}
