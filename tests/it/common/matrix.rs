//! The era matrix's shared part (`tests/it/eras/matrix.rs`, `tests/it/eras/matrix_eras.rs`): the client cells,
//! running each through a peer driver's `full` scenario, and checking its report against what
//! the upstream really serves. Failing cells are reported all at once, named
//! `<client cell>__<upstream>`, with eragate's log; `ERAGATE_MATRIX_CELL=<part of a cell name>`
//! runs only the matching cells.

use serde_json::{Value, json};

use super::{Eragate, py_client, ts_client};

pub const HANDSHAKE_REVISIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Which names the drivers use and what the upstream answers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The fixture surface of `legacy_server.py` (also served by `ts2_server.mjs`), with the
    /// upstream's `serverInfo.name`.
    Fixture(&'static str),
    Everything,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Fixture(_) => "fixture",
            Profile::Everything => "everything",
        }
    }
}

pub const PY_FIXTURE: Profile = Profile::Fixture("eragate-legacy-fixture");
pub const TS2_FIXTURE: Profile = Profile::Fixture("eragate-ts2-fixture");

/// One client cell: its name, which driver, its arguments (without the target) and the
/// revision it must end up on.
pub struct ClientCell {
    pub name: String,
    pub ts: bool,
    pub args: Vec<String>,
    pub expected_version: &'static str,
}

/// A Python SDK cell in `mode`, offering `offer` when given.
pub fn py_cell(name: &str, mode: &str, offer: Option<&str>, expected_version: &'static str) -> ClientCell {
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

/// A TypeScript SDK v1 cell offering `offer`.
pub fn ts_cell(name: &str, offer: &str, expected_version: &'static str) -> ClientCell {
    ClientCell {
        name: name.to_owned(),
        ts: true,
        args: vec!["--offer-version".to_owned(), offer.to_owned()],
        expected_version,
    }
}

/// The Python SDK in `2026-07-28` mode, in `auto` mode, and in `legacy` mode offering each
/// handshake revision; the TypeScript SDK v1 client offering each handshake revision, plus
/// `2024-10-07` (older than every revision eragate knows).
pub fn client_cells() -> Vec<ClientCell> {
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

/// Checks a matrix adds to [`check_full_report`]: `(profile, report, expected_version)` to
/// the problems found.
pub type ExtraChecks = fn(Profile, &Value, &str) -> Vec<String>;

/// Runs every cell with its target arguments (`--url …`, `--sse …` or `--stdio …`) and
/// panics with every failing cell and eragate's log.
pub fn run_cells(
    upstream: &str,
    cells: Vec<(ClientCell, Vec<String>)>,
    gateway_log: &dyn Fn() -> String,
    profile: Profile,
    extra_checks: ExtraChecks,
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
                let mut problems = check_full_report(profile, &report, cell.expected_version);
                problems.extend(extra_checks(profile, &report, cell.expected_version));
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

/// Every cell of `cells` over Streamable HTTP against `gateway`.
pub fn run_over_http(
    upstream: &str,
    gateway: &Eragate,
    cells: Vec<ClientCell>,
    profile: Profile,
    extra_checks: ExtraChecks,
) {
    let url = gateway.url();
    let cells = cells
        .into_iter()
        .map(|c| (c, vec!["--url".to_owned(), url.clone()]))
        .collect();
    run_cells(upstream, cells, &|| gateway.log(), profile, extra_checks);
}

/// Collects every difference between a `full` report and what the upstream really serves.
pub fn check_full_report(profile: Profile, report: &Value, expected_version: &str) -> Vec<String> {
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
            let mut expected = vec![
                (
                    "list_tools.names",
                    &r["list_tools"]["names"],
                    json!(["echo", "add", "slow_progress", "log_message", "hang", "fail", "météo"]),
                ),
                (
                    "call_echo",
                    &r["call_echo"],
                    json!({"tool": "echo", "text": "echo: hi", "is_error": false}),
                ),
                ("call_add.text", &r["call_add"]["text"], json!("5")),
                ("call_add.is_error", &r["call_add"]["is_error"], json!(false)),
            ];
            if has_structured {
                expected.push(("call_add.structured", &r["call_add"]["structured"], json!({"sum": 5})));
            }
            expected.extend([
                (
                    "call_meteo",
                    &r["call_meteo"],
                    json!({"tool": "météo", "text": "météo: Zürich", "is_error": false}),
                ),
                (
                    "list_resources",
                    &r["list_resources"],
                    json!({"uris": ["test://static/hello"], "names": ["hello"]}),
                ),
                (
                    "list_resource_templates",
                    &r["list_resource_templates"],
                    json!({"uri_templates": ["test://items/{id}"], "names": ["item"]}),
                ),
                (
                    "read_static",
                    &r["read_static"],
                    json!({"uri": "test://static/hello", "mime_type": "text/plain", "count": 1, "text": "hello world", "length": 11}),
                ),
                (
                    "read_template",
                    &r["read_template"],
                    json!({"uri": "test://items/42", "mime_type": "text/plain", "count": 1, "text": "item 42", "length": 7}),
                ),
                (
                    "list_prompts",
                    &r["list_prompts"],
                    json!({"names": ["greet"], "arguments": {"greet": ["name"]}}),
                ),
                (
                    "get_prompt",
                    &r["get_prompt"],
                    json!({"prompt": "greet", "text": "Hello, Ada!", "messages": 1}),
                ),
                (
                    "complete",
                    &r["complete"],
                    json!({"prompt": "greet", "argument": "name", "prefix": "a", "values": ["alice"]}),
                ),
            ]);
            expect_all(&mut problems, expected);
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
            let documents = [
                "architecture",
                "extension",
                "features",
                "how-it-works",
                "instructions",
                "startup",
                "structure",
            ];
            expect_all(
                &mut problems,
                vec![
                    (
                        "call_echo",
                        &r["call_echo"],
                        json!({"tool": "echo", "text": "Echo: hi", "is_error": false}),
                    ),
                    (
                        "call_add",
                        &r["call_add"],
                        json!({"tool": "get-sum", "text": "The sum of 2 and 3 is 5.", "is_error": false}),
                    ),
                    (
                        "list_resources.uris",
                        &r["list_resources"]["uris"],
                        json!(
                            documents
                                .iter()
                                .map(|d| format!("demo://resource/static/document/{d}.md"))
                                .collect::<Vec<_>>()
                        ),
                    ),
                    (
                        "list_resource_templates.uri_templates",
                        &r["list_resource_templates"]["uri_templates"],
                        json!([
                            "demo://resource/dynamic/text/{resourceId}",
                            "demo://resource/dynamic/blob/{resourceId}"
                        ]),
                    ),
                    (
                        "read_static.uri",
                        &r["read_static"]["uri"],
                        json!("demo://resource/static/document/features.md"),
                    ),
                    (
                        "read_static.mime_type",
                        &r["read_static"]["mime_type"],
                        json!("text/markdown"),
                    ),
                    ("read_static.count", &r["read_static"]["count"], json!(1)),
                ],
            );
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
            expect_all(
                &mut problems,
                vec![
                    (
                        "read_template.uri",
                        &r["read_template"]["uri"],
                        json!("demo://resource/dynamic/text/42"),
                    ),
                    (
                        "read_template.mime_type",
                        &r["read_template"]["mime_type"],
                        json!("text/plain"),
                    ),
                ],
            );
            if !r["read_template"]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Resource 42: This is a plaintext resource"))
            {
                problems.push(format!("read_template.text: {}", r["read_template"]["text"]));
            }
            expect_all(
                &mut problems,
                vec![
                    (
                        "list_prompts.names",
                        &r["list_prompts"]["names"],
                        json!(["simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"]),
                    ),
                    (
                        "get_prompt",
                        &r["get_prompt"],
                        json!({"prompt": "args-prompt", "text": "What's weather in Ada?", "messages": 1}),
                    ),
                    (
                        "complete",
                        &r["complete"],
                        json!({"prompt": "completable-prompt", "argument": "department", "prefix": "E", "values": ["Engineering"]}),
                    ),
                ],
            );
        }
    }
    problems
}

/// Records a problem unless `actual` is `expected`.
pub fn expect(problems: &mut Vec<String>, what: &str, actual: &Value, expected: Value) {
    if *actual != expected {
        problems.push(format!("{what}: expected {expected}, got {actual}"));
    }
}

/// [`expect`] for each `(what, actual, expected)`.
fn expect_all(problems: &mut Vec<String>, checks: Vec<(&str, &Value, Value)>) {
    for (what, actual, expected) in checks {
        expect(problems, what, actual, expected);
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
