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

mod common;

use common::*;
use serde_json::{Value, json};

const HANDSHAKE_REVISIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Which names the drivers use and what the upstream answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Profile {
    Fixture,
    Everything,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Fixture => "fixture",
            Profile::Everything => "everything",
        }
    }
}

/// One client cell: its name, which driver, its arguments and the revision it must end up on.
struct ClientCell {
    name: String,
    ts: bool,
    args: Vec<String>,
    expected_version: &'static str,
}

fn client_cells() -> Vec<ClientCell> {
    let mut cells = vec![
        ClientCell {
            name: "modern_py_client".into(),
            ts: false,
            args: vec!["--mode".into(), "2026-07-28".into()],
            expected_version: "2026-07-28",
        },
        ClientCell {
            name: "auto_py_client".into(),
            ts: false,
            args: vec!["--mode".into(), "auto".into()],
            expected_version: "2026-07-28",
        },
    ];
    for version in HANDSHAKE_REVISIONS {
        cells.push(ClientCell {
            name: format!("legacy_{}_py_client", version.replace('-', "_")),
            ts: false,
            args: vec![
                "--mode".into(),
                "legacy".into(),
                "--offer-version".into(),
                version.into(),
            ],
            expected_version: version,
        });
    }
    for version in HANDSHAKE_REVISIONS {
        cells.push(ClientCell {
            name: format!("legacy_{}_ts_client", version.replace('-', "_")),
            ts: true,
            args: vec!["--offer-version".into(), version.into()],
            expected_version: version,
        });
    }
    // Older than every known revision: eragate must answer with the oldest it speaks.
    cells.push(ClientCell {
        name: "legacy_2024_10_07_ts_client".into(),
        ts: true,
        args: vec!["--offer-version".into(), "2024-10-07".into()],
        expected_version: "2024-11-05",
    });
    cells
}

/// Runs every client cell against `gateway` and panics with every failing cell.
fn run_matrix(upstream: &str, gateway: &Eragate, profile: Profile) {
    let url = gateway.url();
    let mut failures = Vec::new();
    // `ERAGATE_MATRIX_CELL=legacy_2025_03_26` runs only the cells whose name contains it.
    let only = std::env::var("ERAGATE_MATRIX_CELL").unwrap_or_default();
    let cells: Vec<ClientCell> = client_cells()
        .into_iter()
        .filter(|c| format!("{}__{upstream}", c.name).contains(&only))
        .collect();
    for cell in &cells {
        let cell_name = format!("{}__{upstream}", cell.name);
        let mut args: Vec<&str> = cell.args.iter().map(String::as_str).collect();
        args.extend([
            "--url",
            &url,
            "--scenario",
            "full",
            "--profile",
            profile.name(),
            "--timeout",
            "20",
        ]);
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
        gateway.log()
    );
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
        Profile::Fixture => {
            check_server_info(&mut problems, report, modern, "eragate-legacy-fixture");
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
                "list_prompts.arguments.args-prompt",
                &r["list_prompts"]["arguments"]["args-prompt"],
                json!(["city", "state"]),
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
            if r.get("call_meteo").is_some() {
                problems.push("call_meteo: the everything profile has no such step".into());
            }
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
    // The capabilities came with it (initialize or server/discover): the upstream's features.
    for feature in ["tools", "resources", "prompts"] {
        if !report["capabilities"][feature].is_object() {
            problems.push(format!("capabilities.{feature} missing: {}", report["capabilities"]));
        }
    }
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn all_clients__stdio_upstream() {
    let command = legacy_stdio_command();
    let gateway = Eragate::stdio(&as_strs(&command), "");
    run_matrix("stdio_upstream", &gateway, Profile::Fixture);
}

#[test]
fn all_clients__http_upstream() {
    let upstream = LegacyHttpServer::start(&[]);
    let gateway = Eragate::http(&upstream.url, "");
    run_matrix("http_upstream", &gateway, Profile::Fixture);
    drop(gateway);
    drop(upstream);
}

#[test]
fn all_clients__everything_stdio_upstream() {
    let command = everything_stdio_command();
    let gateway = Eragate::stdio(&as_strs(&command), "");
    run_matrix("everything_stdio_upstream", &gateway, Profile::Everything);
}
