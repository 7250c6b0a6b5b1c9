//! The era matrix beyond the core issue: every client era the real SDKs speak, through
//! eragate, in front of modern (dual-era) upstreams and old HTTP+SSE (2024-11-05) upstreams,
//! plus the client-side transports HTTP+SSE and stdio (`eragate stdio`).
//!
//! Client cells: the Python SDK in `2026-07-28` mode, in `auto` mode, and in `legacy` mode
//! offering each handshake revision; the TypeScript SDK v1 client offering each handshake
//! revision, plus `2024-10-07` (older than every revision eragate knows).
//! Upstream kinds: `legacy_server.py --dual-era` (the Python SDK's default dual-era server)
//! over Streamable HTTP and over stdio; the TypeScript SDK v2 server (`ts2_server.mjs`) over
//! Streamable HTTP and stdio; server-everything and `legacy_server.py` over HTTP+SSE.
//!
//! One eragate (and upstream) per upstream kind serves all of its cells; a test runs every
//! cell and reports all failing cells at once, named `<client cell>__<upstream>`, with
//! eragate's log. `ERAGATE_MATRIX_CELL=<part of a cell name>` runs only the matching cells.

#![allow(non_snake_case)] // test names are `<client cell>__<upstream>`

use crate::common;

use common::matrix::{self, ClientCell, PY_FIXTURE, Profile, TS2_FIXTURE, client_cells, py_cell, ts_cell};
use common::*;
use serde_json::{Value, json};

/// Runs `cells` with their target arguments, with this matrix's extra checks.
fn run_cells(
    upstream: &str,
    cells: Vec<(ClientCell, Vec<String>)>,
    gateway_log: &dyn Fn() -> String,
    profile: Profile,
) {
    matrix::run_cells(upstream, cells, gateway_log, profile, no_extensions_for_legacy_clients);
}

/// Every client cell over Streamable HTTP against `gateway`.
fn run_matrix(upstream: &str, gateway: &Eragate, profile: Profile) {
    matrix::run_over_http(
        upstream,
        gateway,
        client_cells(),
        profile,
        no_extensions_for_legacy_clients,
    );
}

/// Modern-only members never reach a legacy client's capabilities.
fn no_extensions_for_legacy_clients(_profile: Profile, report: &Value, expected_version: &str) -> Vec<String> {
    let modern = expected_version == "2026-07-28";
    let mut problems = Vec::new();
    if !modern && report["capabilities"].get("extensions").is_some() {
        problems.push(format!(
            "capabilities.extensions leaked to a legacy client: {}",
            report["capabilities"]
        ));
    }
    problems
}

/// A `[upstreams.stdio]` env table giving the TS v2 fixture its SDK.
fn ts2_env_toml() -> String {
    format!(
        "[upstreams.stdio.env]\nTS2_SERVER_DIR = {}\n",
        json!(peers().get("TS2_SERVER_DIR"))
    )
}

// --- modern (dual-era) upstreams --------------------------------------------------------

#[test]
fn all_clients__dual_era_http_upstream() {
    let upstream = LegacyHttpServer::start(&["--dual-era"]);
    let gateway = Eragate::http(&upstream.url, "");
    run_matrix("dual_era_http_upstream", &gateway, PY_FIXTURE);
}

#[test]
fn all_clients__dual_era_stdio_upstream() {
    let command = dual_era_stdio_command(&[]);
    let gateway = Eragate::stdio(&as_strs(&command), "");
    run_matrix("dual_era_stdio_upstream", &gateway, PY_FIXTURE);
}

#[test]
fn all_clients__ts2_http_upstream() {
    let upstream = ts2_http_server();
    let gateway = Eragate::http(&upstream.url, "");
    run_matrix("ts2_http_upstream", &gateway, TS2_FIXTURE);
}

#[test]
fn all_clients__ts2_stdio_upstream() {
    let gateway = Eragate::start(&stdio_upstream_toml(&ts2_stdio_command(), "", &ts2_env_toml()));
    run_matrix("ts2_stdio_upstream", &gateway, TS2_FIXTURE);
}

// --- HTTP+SSE (2024-11-05) upstreams ----------------------------------------------------

fn sse_gateway(url: &str) -> Eragate {
    Eragate::start(&remote_upstream_toml("sse", url, ""))
}

#[test]
fn all_clients__everything_sse_upstream() {
    let upstream = everything_server("sse");
    let gateway = sse_gateway(&upstream.url);
    run_matrix("everything_sse_upstream", &gateway, Profile::Everything);
}

#[test]
fn all_clients__legacy_sse_upstream() {
    let upstream = legacy_sse_server(&[]);
    let gateway = sse_gateway(&upstream.url);
    run_matrix("legacy_sse_upstream", &gateway, PY_FIXTURE);
}

// --- client-side transports: HTTP+SSE and stdio (`eragate stdio`) -------------------------

/// Both drivers over eragate's HTTP+SSE endpoints (`<path>/sse` and the `/sse` alias of the
/// upstream at `/mcp`), and over stdio through `eragate stdio --http <upstream>` and
/// `eragate stdio --stdio "<upstream command>"`, in each era the client speaks.
fn client_transport_cells(
    gateway: &Eragate,
    upstream_http: &str,
    upstream_stdio: &[String],
) -> Vec<(ClientCell, Vec<String>)> {
    let eragate = env!("CARGO_BIN_EXE_eragate");
    let sse_path = format!("http://{}/mcp/sse", gateway.addr);
    let sse_alias = format!("http://{}/sse", gateway.addr);
    let quoted: Vec<String> = upstream_stdio.iter().map(|a| format!("'{a}'")).collect();
    let via_http = format!("{eragate} stdio --http {upstream_http}");
    let via_stdio = format!("{eragate} stdio --stdio \"{}\"", quoted.join(" "));
    let sse = target("--sse");
    let mut cells = vec![
        // HTTP+SSE speaks 2024-11-05 framing; the SDK clients still negotiate their revision.
        (
            py_cell("sse_legacy_py_client", "legacy", None, "2025-11-25"),
            sse(&sse_path),
        ),
        (
            py_cell(
                "sse_legacy_2024_11_05_py_client",
                "legacy",
                Some("2024-11-05"),
                "2024-11-05",
            ),
            sse(&sse_alias),
        ),
        (
            ts_cell("sse_legacy_ts_client", "2025-11-25", "2025-11-25"),
            sse(&sse_alias),
        ),
        (
            ts_cell("sse_legacy_2024_11_05_ts_client", "2024-11-05", "2024-11-05"),
            sse(&sse_path),
        ),
    ];
    // stdio front end in front of the HTTP upstream, and in front of a stdio upstream.
    cells.extend(stdio_front_end_cells("http", &via_http, "2025-06-18", "2025-03-26"));
    cells.extend(stdio_front_end_cells("stdio", &via_stdio, "2024-11-05", "2025-11-25"));
    cells
}

/// `eragate stdio` as `--stdio <command>` for the cells `stdio_<name>_…`: the Python SDK in
/// `2026-07-28` and `auto` mode and in legacy mode offering `py_offer`, and the TypeScript SDK
/// offering `ts_offer`.
fn stdio_front_end_cells(
    name: &str,
    command: &str,
    py_offer: &'static str,
    ts_offer: &'static str,
) -> Vec<(ClientCell, Vec<String>)> {
    let cell = |kind: &str| format!("stdio_{name}_{kind}_client");
    [
        py_cell(&cell("modern_py"), "2026-07-28", None, "2026-07-28"),
        py_cell(&cell("auto_py"), "auto", None, "2026-07-28"),
        py_cell(&cell("legacy_py"), "legacy", Some(py_offer), py_offer),
        ts_cell(&cell("legacy_ts"), ts_offer, ts_offer),
    ]
    .into_iter()
    .map(|c| (c, vec!["--stdio".to_owned(), command.to_owned()]))
    .collect()
}

/// The target arguments `kind value` of a cell.
fn target(kind: &str) -> impl Fn(&str) -> Vec<String> + '_ {
    move |value| vec![kind.to_owned(), value.to_owned()]
}

#[test]
fn client_transports__legacy_upstream() {
    let upstream = LegacyHttpServer::start(&[]);
    let gateway = Eragate::http(&upstream.url, "");
    let cells = client_transport_cells(&gateway, &upstream.url, &legacy_stdio_command());
    run_cells("legacy_upstream", cells, &|| gateway.log(), PY_FIXTURE);
}

#[test]
fn client_transports__modern_upstream() {
    let upstream = LegacyHttpServer::start(&["--dual-era"]);
    let gateway = Eragate::http(&upstream.url, "");
    let cells = client_transport_cells(&gateway, &upstream.url, &dual_era_stdio_command(&[]));
    run_cells("modern_upstream", cells, &|| gateway.log(), PY_FIXTURE);
}

/// Old HTTP+SSE on both sides, and the stdio front end in front of an HTTP+SSE upstream
/// (`eragate stdio --sse URL`).
#[test]
fn client_transports__legacy_sse_upstream() {
    let upstream = legacy_sse_server(&[]);
    let gateway = sse_gateway(&upstream.url);
    let eragate = env!("CARGO_BIN_EXE_eragate");
    let via_sse = format!("{eragate} stdio --sse {}", upstream.url);
    let sse_path = format!("http://{}/mcp/sse", gateway.addr);
    let (sse, stdio) = (target("--sse"), target("--stdio"));
    let cells = vec![
        (
            py_cell("sse_legacy_py_client", "legacy", Some("2024-11-05"), "2024-11-05"),
            sse(&sse_path),
        ),
        (
            ts_cell("sse_legacy_ts_client", "2025-06-18", "2025-06-18"),
            sse(&sse_path),
        ),
        (
            py_cell("stdio_sse_modern_py_client", "2026-07-28", None, "2026-07-28"),
            stdio(&via_sse),
        ),
        (
            py_cell("stdio_sse_legacy_py_client", "legacy", Some("2025-03-26"), "2025-03-26"),
            stdio(&via_sse),
        ),
        (
            ts_cell("stdio_sse_legacy_ts_client", "2024-11-05", "2024-11-05"),
            stdio(&via_sse),
        ),
    ];
    run_cells("legacy_sse_upstream", cells, &|| gateway.log(), PY_FIXTURE);
}

/// `era` pinned in config instead of learned: a dual-era upstream served as a legacy one
/// (handshake upstream) and as a modern one (stateless upstream); every client era still works.
#[test]
fn pinned_era__dual_era_http_upstream() {
    let upstream = LegacyHttpServer::start(&["--dual-era"]);
    for era in ["legacy", "modern"] {
        let gateway = Eragate::http(&upstream.url, &format!("era = \"{era}\""));
        let cells = vec![
            py_cell("modern_py_client", "2026-07-28", None, "2026-07-28"),
            py_cell("auto_py_client", "auto", None, "2026-07-28"),
            py_cell(
                "legacy_2025_03_26_py_client",
                "legacy",
                Some("2025-03-26"),
                "2025-03-26",
            ),
            ts_cell("legacy_2024_11_05_ts_client", "2024-11-05", "2024-11-05"),
        ];
        matrix::run_over_http(
            &format!("dual_era_http_upstream_pinned_{era}"),
            &gateway,
            cells,
            PY_FIXTURE,
            no_extensions_for_legacy_clients,
        );
    }
}
