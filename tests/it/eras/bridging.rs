//! What eragate translates between the eras, checked on the wire and with the real SDKs:
//!
//! - resource not found both ways: a legacy upstream's -32002 reaches a modern client as
//!   -32602 with `data.uri`; a modern upstream's -32602 with `data.uri` reaches a legacy
//!   client as -32002 (other -32602s, such as an unknown tool, stay -32602);
//! - content a legacy client's revision cannot carry (audio before 2025-03-26, resource_link
//!   before 2025-06-18, non-object structuredContent) is downgraded, and modern-only result
//!   members (resultType, ttlMs, cacheScope) are removed; a modern client gets it all unchanged;
//! - JSON-RPC batches: a 2025-03-26 session's batch is answered as one batch (HTTP and the
//!   stdio front end), a 2025-06-18 session's batch gets -32600;
//! - `logging/setLevel` by a legacy client over a modern upstream: log notifications at or
//!   above the level only.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

use common::matrix::HANDSHAKE_REVISIONS;

fn join_args<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<&'a str> {
    a.iter().chain(b).copied().collect()
}

/// An upstream a check runs against.
enum Upstream {
    /// `legacy_server.py http` with these arguments.
    Http(&'static [&'static str]),
    /// A stdio command.
    Stdio(Vec<String>),
    /// The TypeScript SDK v2 fixture over HTTP.
    Ts2Http,
}

impl Upstream {
    /// Starts the upstream (unless it is a stdio one) and eragate in front of it.
    fn start(self) -> (Option<ListeningServer>, Eragate) {
        let upstream = match self {
            Upstream::Http(args) => {
                let LegacyHttpServer { proc, url } = LegacyHttpServer::start(args);
                ListeningServer { proc, url }
            }
            Upstream::Ts2Http => ts2_http_server(),
            Upstream::Stdio(command) => return (None, Eragate::stdio(&as_strs(&command), "")),
        };
        let gateway = Eragate::http(&upstream.url, "");
        (Some(upstream), gateway)
    }
}

/// Runs `check` against eragate in front of each named upstream in turn, then panics with
/// every problem and each eragate's log.
fn check_each(upstreams: Vec<(&str, Upstream)>, check: impl Fn(&str, &Eragate, &mut Vec<String>)) {
    let mut problems = Vec::new();
    let mut logs = Vec::new();
    for (name, upstream) in upstreams {
        let (upstream, gateway) = upstream.start();
        check(name, &gateway, &mut problems);
        logs.push((name, gateway.log()));
        drop(gateway);
        drop(upstream);
    }
    assert_no_problems(&problems, &logs);
}

/// Checks a driver's `errors` report: the unknown resource with `code` and `data.uri`, the
/// unknown tool still -32602, the failing tool an isError result.
fn check_errors_report(problems: &mut Vec<String>, cell: &str, report: &Result<Value, String>, code: i64) {
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            problems.push(format!("{cell}: driver failed: {e}"));
            return;
        }
    };
    let r = &report["results"];
    let unknown = &r["read_unknown_resource"]["error"];
    if unknown["code"] != json!(code) || unknown["data"]["uri"] != json!("test://nope") {
        problems.push(format!(
            "{cell}: unknown resource: expected code {code} with data.uri test://nope, got {}",
            r["read_unknown_resource"]
        ));
    }
    if r["call_unknown_tool"]["error"]["code"] != json!(-32602) {
        problems.push(format!(
            "{cell}: unknown tool: expected -32602, got {}",
            r["call_unknown_tool"]
        ));
    }
    if r["call_fail"] != json!({"text": "failure requested", "is_error": true}) {
        problems.push(format!("{cell}: fail tool: {}", r["call_fail"]));
    }
}

/// Whether the response to `id` is an error `code` with `data.uri` `test://nope`.
fn is_not_found(reply: &Reply, id: u64, code: i64) -> bool {
    let error = &answer(reply, id)["error"];
    error["code"] == json!(code) && error["data"]["uri"] == json!("test://nope")
}

/// Runs the drivers' `errors` scenario in every era against `gateway`: modern clients must see
/// -32602, legacy clients -32002, whatever the upstream's era.
fn check_resource_not_found(upstream: &str, gateway: &Eragate, problems: &mut Vec<String>) {
    let url = gateway.url();
    let common = ["--url", url.as_str(), "--scenario", "errors", "--timeout", "20"];
    let modern = py_client(&join_args(&["--mode", "2026-07-28"], &common));
    check_errors_report(problems, &format!("modern_py_client__{upstream}"), &modern, -32602);
    let auto = py_client(&join_args(&["--mode", "auto"], &common));
    check_errors_report(problems, &format!("auto_py_client__{upstream}"), &auto, -32602);
    for version in ["2024-11-05", "2025-11-25"] {
        let legacy = py_client(&join_args(&["--mode", "legacy", "--offer-version", version], &common));
        check_errors_report(
            problems,
            &format!("legacy_{version}_py_client__{upstream}"),
            &legacy,
            -32002,
        );
    }
    let ts = ts_client(&join_args(&["--offer-version", "2025-06-18"], &common));
    check_errors_report(
        problems,
        &format!("legacy_2025-06-18_ts_client__{upstream}"),
        &ts,
        -32002,
    );

    // The same on the wire, with the exact shape.
    let reply = post_modern(
        &url,
        7,
        "resources/read",
        Some("test://nope"),
        json!({"uri": "test://nope"}),
    );
    if !is_not_found(&reply, 7, -32602) {
        problems.push(format!(
            "raw modern resources/read test://nope on {upstream}: {} {}",
            reply.status, reply.body
        ));
    }
    let (session, _) = legacy_initialize(&url, "2025-03-26");
    let nope = json!({"uri": "test://nope"});
    let reply = legacy_request(&url, &session, "2025-03-26", 8, "resources/read", nope);
    if !is_not_found(&reply, 8, -32002) {
        problems.push(format!(
            "raw legacy 2025-03-26 resources/read test://nope on {upstream}: {} {}",
            reply.status, reply.body
        ));
    }
}

#[test]
fn resource_not_found_is_mapped_for_each_era() {
    check_each(
        vec![
            // Legacy upstreams answer -32002 (all four handshake revisions).
            ("legacy_http_upstream", Upstream::Http(&[])),
            ("legacy_stdio_upstream", Upstream::Stdio(legacy_stdio_command())),
            // Modern upstreams answer -32602 with data.uri (2026-07-28).
            ("dual_era_http_upstream", Upstream::Http(&["--dual-era"])),
            ("dual_era_stdio_upstream", Upstream::Stdio(dual_era_stdio_command(&[]))),
            ("ts2_http_upstream", Upstream::Ts2Http),
        ],
        check_resource_not_found,
    );
}

// --- content downgrade ---------------------------------------------------------------------

/// What a client of `version` must receive for `rich_content` (text, audio, resource_link).
fn check_rich_content(problems: &mut Vec<String>, what: &str, result: &Value, version: &str) {
    let content = result["content"].as_array().cloned().unwrap_or_default();
    if content.len() != 3 {
        problems.push(format!("{what}: expected 3 content items, got {result}"));
        return;
    }
    if content[0] != json!({"type": "text", "text": "rich"}) {
        problems.push(format!("{what}: content[0]: {}", content[0]));
    }
    let audio = json!({"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"});
    if version >= "2025-03-26" {
        if content[1] != audio {
            problems.push(format!(
                "{what}: content[1] should be the audio unchanged: {}",
                content[1]
            ));
        }
    } else if content[1]["type"] != json!("text")
        || !content[1]["text"].as_str().is_some_and(|t| t.contains("audio/wav"))
    {
        problems.push(format!(
            "{what}: content[1] should be a text naming audio/wav (no audio before 2025-03-26): {}",
            content[1]
        ));
    }
    if version >= "2025-06-18" {
        if content[2]["type"] != json!("resource_link")
            || content[2]["uri"] != json!("test://static/hello")
            || content[2]["name"] != json!("hello")
        {
            problems.push(format!(
                "{what}: content[2] should be the resource_link unchanged: {}",
                content[2]
            ));
        }
    } else if content[2]["type"] != json!("text")
        || !content[2]["text"]
            .as_str()
            .is_some_and(|t| t.contains("test://static/hello"))
    {
        problems.push(format!(
            "{what}: content[2] should be a text naming the link's URI (no resource_link before 2025-06-18): {}",
            content[2]
        ));
    }
}

fn check_no_modern_members(problems: &mut Vec<String>, what: &str, result: &Value) {
    for member in ["resultType", "ttlMs", "cacheScope"] {
        if result.get(member).is_some() {
            problems.push(format!(
                "{what}: modern-only member {member} reached a legacy client: {result}"
            ));
        }
    }
}

fn check_downgrades(upstream: &str, gateway: &Eragate, problems: &mut Vec<String>) {
    let url = gateway.url();
    for version in HANDSHAKE_REVISIONS {
        let cell = format!("legacy {version} client__{upstream}");
        let (session, _) = legacy_initialize(&url, version);
        let call = |id, method, params| answer(&legacy_request(&url, &session, version, id, method, params), id);

        let rich = call(1, "tools/call", json!({"name": "rich_content", "arguments": {}}));
        check_rich_content(problems, &format!("{cell}: rich_content"), &rich["result"], version);
        check_no_modern_members(problems, &format!("{cell}: tools/call"), &rich["result"]);

        let list = call(2, "tools/call", json!({"name": "structured_list", "arguments": {}}));
        if list["result"].get("structuredContent").is_some() {
            problems.push(format!(
                "{cell}: a non-object structuredContent reached a legacy client: {list}"
            ));
        }
        if list["result"]["content"] != json!([{"type": "text", "text": "[1, 2, 3]"}]) {
            problems.push(format!("{cell}: structured_list content: {list}"));
        }
        // An object structuredContent stays (it is valid from 2025-06-18 and harmless before).
        let add = call(3, "tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}}));
        if version >= "2025-06-18" && add["result"]["structuredContent"] != json!({"sum": 5}) {
            problems.push(format!("{cell}: add lost its structuredContent: {add}"));
        }
        for (id, method, params) in [
            (4, "tools/list", json!({})),
            (5, "resources/list", json!({})),
            (6, "resources/read", json!({"uri": "test://static/hello"})),
            (7, "prompts/list", json!({})),
        ] {
            let response = call(id, method, params);
            if response.get("result").is_none() {
                problems.push(format!("{cell}: {method} failed: {response}"));
            }
            check_no_modern_members(problems, &format!("{cell}: {method}"), &response["result"]);
        }
    }

    // A modern client gets the upstream's content unchanged.
    let rich = answer(&modern_call(&url, 10, "rich_content", json!({})), 10);
    check_rich_content(
        problems,
        &format!("modern client__{upstream}: rich_content"),
        &rich["result"],
        "2026-07-28",
    );
    if rich["result"]["resultType"] != json!("complete") {
        problems.push(format!("modern client__{upstream}: resultType missing: {rich}"));
    }
    let list = answer(&modern_call(&url, 11, "structured_list", json!({})), 11);
    if list["result"]["structuredContent"] != json!([1, 2, 3]) {
        problems.push(format!(
            "modern client__{upstream}: the non-object structuredContent must pass unchanged: {list}"
        ));
    }
}

#[test]
fn content_is_downgraded_for_older_legacy_clients_of_a_modern_upstream() {
    check_each(
        vec![
            (
                "dual_era_http_upstream",
                Upstream::Http(&["--dual-era", "--rich-content"]),
            ),
            (
                "dual_era_stdio_upstream",
                Upstream::Stdio(dual_era_stdio_command(&["--rich-content"])),
            ),
        ],
        check_downgrades,
    );
}

// --- batches -------------------------------------------------------------------------------

/// A batch of two requests and a notification, and what each answer must hold.
fn batch_body() -> String {
    json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "one"}}},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "id": "two", "method": "resources/read", "params": {"uri": "test://items/2"}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    ])
    .to_string()
}

fn check_batch_answer(problems: &mut Vec<String>, what: &str, answer: &Value) {
    let Some(items) = answer.as_array() else {
        problems.push(format!("{what}: expected one batch (a JSON array), got {answer}"));
        return;
    };
    if items.len() != 3 {
        problems.push(format!(
            "{what}: expected 3 responses (none for the notification), got {answer}"
        ));
    }
    let by_id = |id: Value| items.iter().find(|m| m["id"] == id).cloned().unwrap_or(Value::Null);
    if by_id(json!(1))["result"]["content"] != json!([{"type": "text", "text": "echo: one"}]) {
        problems.push(format!("{what}: id 1 (tools/call echo): {answer}"));
    }
    if by_id(json!("two"))["result"]["contents"][0]["text"] != json!("item 2") {
        problems.push(format!("{what}: id \"two\" (resources/read): {answer}"));
    }
    if by_id(json!(3))["result"] != json!({}) {
        problems.push(format!("{what}: id 3 (ping): {answer}"));
    }
}

fn check_batch_refused(problems: &mut Vec<String>, what: &str, status: u16, answer: &Value) {
    // One error for the whole batch: -32600, id null (nothing of it was served).
    let error = if answer.is_array() {
        answer[0].clone()
    } else {
        answer.clone()
    };
    if error["error"]["code"] != json!(-32600)
        || !error["id"].is_null()
        || answer.as_array().is_some_and(|a| a.len() != 1)
    {
        problems.push(format!(
            "{what}: expected one -32600 error with id null, got {status} {answer}"
        ));
    }
}

fn check_http_batches(upstream: &str, gateway: &Eragate, problems: &mut Vec<String>) {
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, "2025-03-26");
    let reply = send(
        "POST",
        &url,
        &legacy_headers(&session, "2025-03-26"),
        Some(&batch_body()),
    );
    let batch: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
    if reply.status != 200 || !reply.content_type_is("application/json") {
        problems.push(format!(
            "{upstream}: 2025-03-26 batch: expected 200 application/json, got {} {:?}",
            reply.status,
            reply.header("content-type")
        ));
    }
    check_batch_answer(problems, &format!("{upstream}: 2025-03-26 batch"), &batch);
    // The session still works afterwards.
    let after = answer(
        &legacy_request(
            &url,
            &session,
            "2025-03-26",
            9,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "after"}}),
        ),
        9,
    );
    if after["result"]["content"][0]["text"] != json!("echo: after") {
        problems.push(format!("{upstream}: 2025-03-26 session after the batch: {after}"));
    }

    for version in ["2025-06-18", "2025-11-25"] {
        let (session, _) = legacy_initialize(&url, version);
        let reply = send("POST", &url, &legacy_headers(&session, version), Some(&batch_body()));
        let batch: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
        check_batch_refused(problems, &format!("{upstream}: {version} batch"), reply.status, &batch);
    }
}

/// A line-oriented stdio client for `eragate stdio`.
struct StdioClient {
    _proc: Proc,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl StdioClient {
    fn start(args: &[&str]) -> StdioClient {
        let mut command = Command::new(env!("CARGO_BIN_EXE_eragate"));
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut proc = Proc::spawn("eragate stdio", &mut command);
        let stdin = proc.child.stdin.take().expect("stdin");
        let stdout = proc.child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        StdioClient {
            _proc: proc,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &str) {
        writeln!(self.stdin, "{message}").expect("write to eragate stdio");
        self.stdin.flush().expect("flush");
    }

    /// The next line that is not a notification, as JSON.
    fn answer(&self) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .expect("an answer from eragate stdio within 20 s");
            let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if value.is_array() || value.get("id").is_some() {
                return value;
            }
        }
    }

    fn initialize(&mut self, version: &str) -> Value {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "eragate-tests", "version": "0"}}})
            .to_string(),
        );
        let answer = self.answer();
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        answer
    }
}

fn check_stdio_batches(upstream: &str, args: &[&str], problems: &mut Vec<String>) {
    let mut client = StdioClient::start(args);
    let init = client.initialize("2025-03-26");
    if init["result"]["protocolVersion"] != json!("2025-03-26") {
        problems.push(format!("stdio front end ({upstream}): initialize 2025-03-26: {init}"));
    }
    client.send(&batch_body());
    check_batch_answer(
        problems,
        &format!("stdio front end ({upstream}): 2025-03-26 batch"),
        &client.answer(),
    );
    drop(client);

    let mut client = StdioClient::start(args);
    client.initialize("2025-06-18");
    client.send(&batch_body());
    let answer = client.answer();
    check_batch_refused(
        problems,
        &format!("stdio front end ({upstream}): 2025-06-18 batch"),
        0,
        &answer,
    );
    drop(client);
}

#[test]
fn batches_are_served_for_2025_03_26_and_refused_otherwise() {
    let mut problems = Vec::new();
    let mut logs = Vec::new();
    {
        let upstream = LegacyHttpServer::start(&["--dual-era"]);
        let gateway = Eragate::http(&upstream.url, "");
        check_http_batches("dual_era_http_upstream", &gateway, &mut problems);
        check_stdio_batches(
            "dual_era_http_upstream",
            &["stdio", "--http", &upstream.url],
            &mut problems,
        );
        logs.push(("dual_era_http_upstream", gateway.log()));
    }
    {
        let upstream = LegacyHttpServer::start(&[]);
        let gateway = Eragate::http(&upstream.url, "");
        check_http_batches("legacy_http_upstream", &gateway, &mut problems);
        let command = legacy_stdio_command()
            .iter()
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ");
        check_stdio_batches("legacy_stdio_upstream", &["stdio", "--stdio", &command], &mut problems);
        logs.push(("legacy_http_upstream", gateway.log()));
    }
    assert_no_problems(&problems, &logs);
}

// --- logging/setLevel over a modern upstream ---------------------------------------------

fn check_logging(upstream: &str, gateway: &Eragate, problems: &mut Vec<String>) {
    let url = gateway.url();
    // The drivers: setLevel warning, then log_message at info and at error.
    let args = ["--url", url.as_str(), "--scenario", "logging", "--timeout", "20"];
    let reports = [
        ("legacy_py_client", py_client(&join_args(&["--mode", "legacy"], &args))),
        (
            "legacy_2025_03_26_py_client",
            py_client(&join_args(
                &["--mode", "legacy", "--offer-version", "2025-03-26"],
                &args,
            )),
        ),
        ("legacy_ts_client", ts_client(&args)),
    ];
    for (cell, report) in reports {
        match report {
            Err(e) => problems.push(format!("{cell}__{upstream}: driver failed: {e}")),
            Ok(report) => {
                let received: Vec<Value> = report["results"]["logging"]["received"]
                    .as_array()
                    .map(|r| r.iter().map(|m| m["level"].clone()).collect())
                    .unwrap_or_default();
                if received != vec![json!("error")]
                    || report["results"]["logging"]["call_error"] != json!("logged error")
                {
                    problems.push(format!(
                        "{cell}__{upstream}: after setLevel warning only the error message may arrive: {}",
                        report["results"]["logging"]
                    ));
                }
            }
        }
    }

    // On the wire: setLevel error; critical arrives on the call's stream, warning does not.
    let (session, _) = legacy_initialize(&url, "2025-11-25");
    let set = answer(
        &legacy_request(
            &url,
            &session,
            "2025-11-25",
            1,
            "logging/setLevel",
            json!({"level": "error"}),
        ),
        1,
    );
    if set["result"] != json!({}) {
        problems.push(format!("raw__{upstream}: logging/setLevel: {set}"));
    }
    for (id, level, delivered) in [
        (2, "critical", true),
        (3, "warning", false),
        (4, "error", true),
        (5, "debug", false),
    ] {
        let reply = legacy_request(
            &url,
            &session,
            "2025-11-25",
            id,
            "tools/call",
            json!({"name": "log_message", "arguments": {"level": level, "message": format!("at {level}")}}),
        );
        let logs = reply.notifications("notifications/message");
        let ok = if delivered {
            logs.len() == 1
                && logs[0]["params"]["level"] == json!(level)
                && logs[0]["params"]["data"] == json!(format!("at {level}"))
        } else {
            logs.is_empty()
        };
        if !ok || answer(&reply, id).get("result").is_none() {
            problems.push(format!(
                "raw__{upstream}: setLevel error, log_message {level}: delivered expected {delivered}; got {reply:?}"
            ));
        }
    }
}

#[test]
fn logging_set_level_of_a_legacy_client_filters_a_modern_upstreams_messages() {
    check_each(
        vec![
            ("dual_era_http_upstream", Upstream::Http(&["--dual-era"])),
            ("dual_era_stdio_upstream", Upstream::Stdio(dual_era_stdio_command(&[]))),
            ("ts2_http_upstream", Upstream::Ts2Http),
        ],
        check_logging,
    );
}

/// A legacy Python SDK client calls `regional` (its `region` argument is annotated
/// `x-mcp-header: Region`) on a modern HTTP upstream that enforces the header.
const REGIONAL_CLIENT: &str = r#"
import asyncio, json, sys
import mcp

async def main(url):
    out = {}
    async with mcp.Client(url, mode="legacy") as client:
        for region in ["eu-west", "Zürich", " padded "]:
            r = await client.call_tool("regional", {"region": region, "text": "hi"})
            out[region] = {"text": r.content[0].text, "is_error": bool(r.is_error)}
    print(json.dumps(out))

asyncio.run(main(sys.argv[1]))
"#;

#[test]
fn a_legacy_clients_call_carries_the_mcp_param_headers_a_modern_upstream_requires() {
    let upstream = TracedUpstream::start_with(&["--dual-era", "--param-headers"]);

    // The upstream enforces the annotation: a modern call without the header is refused.
    let direct = modern_call(&upstream.url, 1, "regional", json!({"region": "eu-west"}));
    assert_eq!(
        direct.status, 400,
        "the fixture must enforce Mcp-Param-Region: {direct:?}"
    );
    assert_eq!(direct.json()["error"]["code"], -32020, "{direct:?}");

    let gateway = Eragate::http(&upstream.url, "era = \"modern\"");
    let output = Command::new(peers().python())
        .args(["-c", REGIONAL_CLIENT, &gateway.url()])
        .output()
        .expect("python");
    assert!(
        output.status.success(),
        "{}\n{}\neragate log:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        gateway.log()
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("json report");
    for region in ["eu-west", "Zürich", " padded "] {
        assert_eq!(report[region]["text"], format!("regional: {region} hi"), "{report:#}");
        assert_eq!(report[region]["is_error"], false, "{report:#}");
    }

    // What eragate sent: the mirrored header, sentinel-encoded where the value is not header-safe.
    let calls = upstream.posted("tools/call");
    let mirrored: Vec<&str> = calls
        .iter()
        .filter_map(|(headers, _)| headers["mcp-param-region"].as_str())
        .collect();
    assert_eq!(
        mirrored,
        ["eu-west", "=?base64?WsO8cmljaA==?=", "=?base64?IHBhZGRlZCA=?="],
        "{}",
        upstream.raw()
    );

    // The listing is kept (for the upstream's ttlMs): more calls read no tools/list.
    let listed = upstream.posted_bodies("tools/list").len();
    let (session, _) = legacy_initialize(&gateway.url(), "2025-06-18");
    for id in 1..=3 {
        let reply = legacy_request(
            &gateway.url(),
            &session,
            "2025-06-18",
            id,
            "tools/call",
            json!({"name": "regional", "arguments": {"region": "ap-1"}}),
        );
        assert_eq!(tool_text(&answer(&reply, id)["result"]), "regional: ap-1 ", "{reply:?}");
    }
    assert_eq!(upstream.posted_bodies("tools/list").len(), listed, "{}", upstream.raw());
}
