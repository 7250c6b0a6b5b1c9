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

mod common;

use common::*;
use serde_json::{Value, json};

const HANDSHAKE_REVISIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Which names the drivers use and what the upstream answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Profile {
    /// The fixture surface of `legacy_server.py` (also served by `ts2_server.mjs`), with the
    /// upstream's `serverInfo.name`.
    Fixture(&'static str),
    Everything,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Fixture(_) => "fixture",
            Profile::Everything => "everything",
        }
    }
}

const PY_FIXTURE: Profile = Profile::Fixture("eragate-legacy-fixture");
const TS2_FIXTURE: Profile = Profile::Fixture("eragate-ts2-fixture");

/// One client cell: its name, which driver, its arguments (without the target) and the
/// revision it must end up on.
struct ClientCell {
    name: String,
    ts: bool,
    args: Vec<String>,
    expected_version: &'static str,
}

fn py_cell(name: &str, mode: &str, offer: Option<&str>, expected_version: &'static str) -> ClientCell {
    let mut args = vec!["--mode".to_owned(), mode.to_owned()];
    if let Some(version) = offer {
        args.extend(["--offer-version".to_owned(), version.to_owned()]);
    }
    ClientCell {
        name: name.to_owned(),
        ts: false,
        args,
        expected_version,
    }
}

fn ts_cell(name: &str, offer: &str, expected_version: &'static str) -> ClientCell {
    ClientCell {
        name: name.to_owned(),
        ts: true,
        args: vec!["--offer-version".to_owned(), offer.to_owned()],
        expected_version,
    }
}

fn client_cells() -> Vec<ClientCell> {
    let mut cells = vec![
        py_cell("modern_py_client", "2026-07-28", None, "2026-07-28"),
        py_cell("auto_py_client", "auto", None, "2026-07-28"),
    ];
    for version in HANDSHAKE_REVISIONS {
        let name = format!("legacy_{}_py_client", version.replace('-', "_"));
        cells.push(py_cell(&name, "legacy", Some(version), version));
    }
    for version in HANDSHAKE_REVISIONS {
        cells.push(ts_cell(
            &format!("legacy_{}_ts_client", version.replace('-', "_")),
            version,
            version,
        ));
    }
    // Older than every known revision: eragate must answer with the oldest it speaks.
    cells.push(ts_cell("legacy_2024_10_07_ts_client", "2024-10-07", "2024-11-05"));
    cells
}

/// Runs every cell with its target arguments (`--url …`, `--sse …` or `--stdio …`) and
/// panics with every failing cell and eragate's log.
fn run_cells(
    upstream: &str,
    cells: Vec<(ClientCell, Vec<String>)>,
    gateway_log: &dyn Fn() -> String,
    profile: Profile,
) {
    let mut failures = Vec::new();
    // `ERAGATE_MATRIX_CELL=legacy_2025_03_26` runs only the cells whose name contains it.
    let only = std::env::var("ERAGATE_MATRIX_CELL").unwrap_or_default();
    let cells: Vec<_> = cells
        .into_iter()
        .filter(|(c, _)| format!("{}__{upstream}", c.name).contains(&only))
        .collect();
    for (cell, target) in &cells {
        let cell_name = format!("{}__{upstream}", cell.name);
        let mut args: Vec<&str> = cell.args.iter().map(String::as_str).collect();
        args.extend(target.iter().map(String::as_str));
        args.extend(["--scenario", "full", "--profile", profile.name(), "--timeout", "20"]);
        let report = if cell.ts { ts_client(&args) } else { py_client(&args) };
        match report {
            Err(e) => failures.push(format!("{cell_name}: driver failed: {e}")),
            Ok(report) => {
                let problems = check_full_report(profile, &report, cell.expected_version);
                if !problems.is_empty() {
                    failures.push(format!(
                        "{cell_name}:\n    {}\n    report: {report}",
                        problems.join("\n    ")
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cells failed:\n{}\n\neragate log:\n{}",
        failures.len(),
        cells.len(),
        failures.join("\n"),
        gateway_log()
    );
}

/// Every client cell over Streamable HTTP against `gateway`.
fn run_matrix(upstream: &str, gateway: &Eragate, profile: Profile) {
    let url = gateway.url();
    let cells = client_cells()
        .into_iter()
        .map(|c| (c, vec!["--url".to_owned(), url.clone()]))
        .collect();
    run_cells(upstream, cells, &|| gateway.log(), profile);
}

/// Collects every difference between a `full` report and what the upstream really serves.
fn check_full_report(profile: Profile, report: &Value, expected_version: &str) -> Vec<String> {
    let mut problems = Vec::new();
    expect(
        &mut problems,
        "protocol_version",
        &report["protocol_version"],
        json!(expected_version),
    );
    let r = &report["results"];
    let modern = expected_version == "2026-07-28";
    // structuredContent exists from 2025-06-18 on (and in 2026-07-28).
    let has_structured = modern || expected_version >= "2025-06-18";
    match profile {
        Profile::Fixture(server_name) => {
            check_server_info(&mut problems, report, modern, server_name);
            expect(
                &mut problems,
                "list_tools.names",
                &r["list_tools"]["names"],
                json!(["echo", "add", "slow_progress", "log_message", "hang", "fail", "météo"]),
            );
            expect(
                &mut problems,
                "call_echo",
                &r["call_echo"],
                json!({"tool": "echo", "text": "echo: hi", "is_error": false}),
            );
            expect(&mut problems, "call_add.text", &r["call_add"]["text"], json!("5"));
            expect(
                &mut problems,
                "call_add.is_error",
                &r["call_add"]["is_error"],
                json!(false),
            );
            if has_structured {
                expect(
                    &mut problems,
                    "call_add.structured",
                    &r["call_add"]["structured"],
                    json!({"sum": 5}),
                );
            }
            expect(
                &mut problems,
                "call_meteo",
                &r["call_meteo"],
                json!({"tool": "météo", "text": "météo: Zürich", "is_error": false}),
            );
            expect(
                &mut problems,
                "list_resources",
                &r["list_resources"],
                json!({"uris": ["test://static/hello"], "names": ["hello"]}),
            );
            expect(
                &mut problems,
                "list_resource_templates",
                &r["list_resource_templates"],
                json!({"uri_templates": ["test://items/{id}"], "names": ["item"]}),
            );
            expect(
                &mut problems,
                "read_static",
                &r["read_static"],
                json!({"uri": "test://static/hello", "mime_type": "text/plain", "count": 1, "text": "hello world", "length": 11}),
            );
            expect(
                &mut problems,
                "read_template",
                &r["read_template"],
                json!({"uri": "test://items/42", "mime_type": "text/plain", "count": 1, "text": "item 42", "length": 7}),
            );
            expect(
                &mut problems,
                "list_prompts",
                &r["list_prompts"],
                json!({"names": ["greet"], "arguments": {"greet": ["name"]}}),
            );
            expect(
                &mut problems,
                "get_prompt",
                &r["get_prompt"],
                json!({"prompt": "greet", "text": "Hello, Ada!", "messages": 1}),
            );
            expect(
                &mut problems,
                "complete",
                &r["complete"],
                json!({"prompt": "greet", "argument": "name", "prefix": "a", "values": ["alice"]}),
            );
        }
        Profile::Everything => {
            check_server_info(&mut problems, report, modern, "mcp-servers/everything");
            // 13 tools for a client without sampling/elicitation/roots capabilities.
            expect(&mut problems, "list_tools.count", &r["list_tools"]["count"], json!(13));
            let names = r["list_tools"]["names"].as_array().cloned().unwrap_or_default();
            for tool in ["echo", "get-sum", "trigger-long-running-operation"] {
                if !names.contains(&json!(tool)) {
                    problems.push(format!("list_tools.names: {tool} missing from {names:?}"));
                }
            }
            expect(
                &mut problems,
                "call_echo",
                &r["call_echo"],
                json!({"tool": "echo", "text": "Echo: hi", "is_error": false}),
            );
            expect(
                &mut problems,
                "call_add",
                &r["call_add"],
                json!({"tool": "get-sum", "text": "The sum of 2 and 3 is 5.", "is_error": false}),
            );
            let documents = [
                "architecture",
                "extension",
                "features",
                "how-it-works",
                "instructions",
                "startup",
                "structure",
            ];
            expect(
                &mut problems,
                "list_resources.uris",
                &r["list_resources"]["uris"],
                json!(
                    documents
                        .iter()
                        .map(|d| format!("demo://resource/static/document/{d}.md"))
                        .collect::<Vec<_>>()
                ),
            );
            expect(
                &mut problems,
                "list_resource_templates.uri_templates",
                &r["list_resource_templates"]["uri_templates"],
                json!([
                    "demo://resource/dynamic/text/{resourceId}",
                    "demo://resource/dynamic/blob/{resourceId}"
                ]),
            );
            expect(
                &mut problems,
                "read_static.uri",
                &r["read_static"]["uri"],
                json!("demo://resource/static/document/features.md"),
            );
            expect(
                &mut problems,
                "read_static.mime_type",
                &r["read_static"]["mime_type"],
                json!("text/markdown"),
            );
            expect(&mut problems, "read_static.count", &r["read_static"]["count"], json!(1));
            if !r["read_static"]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("# Everything Server - Features"))
            {
                problems.push(format!(
                    "read_static.text: not the features document: {}",
                    r["read_static"]["text"]
                ));
            }
            if r["read_static"]["length"].as_u64().is_none_or(|n| n <= 1000) {
                problems.push(format!(
                    "read_static.length: the whole document should arrive: {}",
                    r["read_static"]["length"]
                ));
            }
            expect(
                &mut problems,
                "read_template.uri",
                &r["read_template"]["uri"],
                json!("demo://resource/dynamic/text/42"),
            );
            expect(
                &mut problems,
                "read_template.mime_type",
                &r["read_template"]["mime_type"],
                json!("text/plain"),
            );
            if !r["read_template"]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Resource 42: This is a plaintext resource"))
            {
                problems.push(format!("read_template.text: {}", r["read_template"]["text"]));
            }
            expect(
                &mut problems,
                "list_prompts.names",
                &r["list_prompts"]["names"],
                json!(["simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"]),
            );
            expect(
                &mut problems,
                "get_prompt",
                &r["get_prompt"],
                json!({"prompt": "args-prompt", "text": "What's weather in Ada?", "messages": 1}),
            );
            expect(
                &mut problems,
                "complete",
                &r["complete"],
                json!({"prompt": "completable-prompt", "argument": "department", "prefix": "E", "values": ["Engineering"]}),
            );
        }
    }
    problems
}

fn expect(problems: &mut Vec<String>, what: &str, actual: &Value, expected: Value) {
    if *actual != expected {
        problems.push(format!("{what}: expected {expected}, got {actual}"));
    }
}

/// Legacy clients learn the upstream's serverInfo from `initialize`; `auto` from
/// `server/discover`; the pinned 2026-07-28 client connects without asking (null).
fn check_server_info(problems: &mut Vec<String>, report: &Value, modern: bool, name: &str) {
    let info = &report["server_info"];
    if info.is_null() && modern {
        return;
    }
    expect(problems, "server_info.name", &info["name"], json!(name));
    for feature in ["tools", "resources", "prompts"] {
        if !report["capabilities"][feature].is_object() {
            problems.push(format!("capabilities.{feature} missing: {}", report["capabilities"]));
        }
    }
    // Modern-only members never reach a legacy client's capabilities.
    if !modern && report["capabilities"].get("extensions").is_some() {
        problems.push(format!(
            "capabilities.extensions leaked to a legacy client: {}",
            report["capabilities"]
        ));
    }
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn dual_era_stdio_command() -> Vec<String> {
    let mut command = legacy_stdio_command();
    command.push("--dual-era".to_owned());
    command
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
    let command = dual_era_stdio_command();
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
    let command = serde_json::to_string(&ts2_stdio_command()).expect("json");
    let gateway = Eragate::start(&format!(
        "[[upstreams]]\nname = \"fixture\"\n[upstreams.stdio]\ncommand = {command}\nkill_grace = \"200ms\"\n{}",
        ts2_env_toml()
    ));
    run_matrix("ts2_stdio_upstream", &gateway, TS2_FIXTURE);
}

// --- HTTP+SSE (2024-11-05) upstreams ----------------------------------------------------

fn sse_gateway(url: &str) -> Eragate {
    Eragate::start(&format!(
        "[[upstreams]]\nname = \"fixture\"\n[upstreams.sse]\nurl = \"{url}\"\n"
    ))
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
    let target = |kind: &str, value: &str| vec![kind.to_owned(), value.to_owned()];
    vec![
        // HTTP+SSE speaks 2024-11-05 framing; the SDK clients still negotiate their revision.
        (
            py_cell("sse_legacy_py_client", "legacy", None, "2025-11-25"),
            target("--sse", &sse_path),
        ),
        (
            py_cell(
                "sse_legacy_2024_11_05_py_client",
                "legacy",
                Some("2024-11-05"),
                "2024-11-05",
            ),
            target("--sse", &sse_alias),
        ),
        (
            ts_cell("sse_legacy_ts_client", "2025-11-25", "2025-11-25"),
            target("--sse", &sse_alias),
        ),
        (
            ts_cell("sse_legacy_2024_11_05_ts_client", "2024-11-05", "2024-11-05"),
            target("--sse", &sse_path),
        ),
        // stdio front end in front of the HTTP upstream.
        (
            py_cell("stdio_http_modern_py_client", "2026-07-28", None, "2026-07-28"),
            target("--stdio", &via_http),
        ),
        (
            py_cell("stdio_http_auto_py_client", "auto", None, "2026-07-28"),
            target("--stdio", &via_http),
        ),
        (
            py_cell(
                "stdio_http_legacy_py_client",
                "legacy",
                Some("2025-06-18"),
                "2025-06-18",
            ),
            target("--stdio", &via_http),
        ),
        (
            ts_cell("stdio_http_legacy_ts_client", "2025-03-26", "2025-03-26"),
            target("--stdio", &via_http),
        ),
        // stdio front end in front of a stdio upstream.
        (
            py_cell("stdio_stdio_modern_py_client", "2026-07-28", None, "2026-07-28"),
            target("--stdio", &via_stdio),
        ),
        (
            py_cell("stdio_stdio_auto_py_client", "auto", None, "2026-07-28"),
            target("--stdio", &via_stdio),
        ),
        (
            py_cell(
                "stdio_stdio_legacy_py_client",
                "legacy",
                Some("2024-11-05"),
                "2024-11-05",
            ),
            target("--stdio", &via_stdio),
        ),
        (
            ts_cell("stdio_stdio_legacy_ts_client", "2025-11-25", "2025-11-25"),
            target("--stdio", &via_stdio),
        ),
    ]
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
    let cells = client_transport_cells(&gateway, &upstream.url, &dual_era_stdio_command());
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
    let target = |kind: &str, value: &str| vec![kind.to_owned(), value.to_owned()];
    let cells = vec![
        (
            py_cell("sse_legacy_py_client", "legacy", Some("2024-11-05"), "2024-11-05"),
            target("--sse", &sse_path),
        ),
        (
            ts_cell("sse_legacy_ts_client", "2025-06-18", "2025-06-18"),
            target("--sse", &sse_path),
        ),
        (
            py_cell("stdio_sse_modern_py_client", "2026-07-28", None, "2026-07-28"),
            target("--stdio", &via_sse),
        ),
        (
            py_cell("stdio_sse_legacy_py_client", "legacy", Some("2025-03-26"), "2025-03-26"),
            target("--stdio", &via_sse),
        ),
        (
            ts_cell("stdio_sse_legacy_ts_client", "2024-11-05", "2024-11-05"),
            target("--stdio", &via_sse),
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
        let url = gateway.url();
        let cells = [
            py_cell("modern_py_client", "2026-07-28", None, "2026-07-28"),
            py_cell("auto_py_client", "auto", None, "2026-07-28"),
            py_cell(
                "legacy_2025_03_26_py_client",
                "legacy",
                Some("2025-03-26"),
                "2025-03-26",
            ),
            ts_cell("legacy_2024_11_05_ts_client", "2024-11-05", "2024-11-05"),
        ]
        .into_iter()
        .map(|c| (c, vec!["--url".to_owned(), url.clone()]))
        .collect();
        run_cells(
            &format!("dual_era_http_upstream_pinned_{era}"),
            cells,
            &|| gateway.log(),
            PY_FIXTURE,
        );
    }
}
