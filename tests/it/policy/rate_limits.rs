//! Issue 13, rate limits (`[rate_limits]`): the real binary in front of the
//! legacy fixture, driven by the Python SDK client and by raw HTTP where the
//! point is the status and headers:
//! - a tool limit refuses the SDK's calls past it with -32029 (2026-07-28 and
//!   handshake clients, HTTP and stdio), other tools go on;
//! - over HTTP the refusal is 429 with `Retry-After` and a JSON-RPC error body;
//! - one principal's limit is its own; an upstream's limit counts everyone;
//! - a limit `shared` through a real `redis-server` holds across two eragate
//!   processes, and while Redis is down `on_error` decides (closed: 429, open: through).

use crate::common;

use common::redis::RedisServer;
use common::tokens::*;
use common::*;
use serde_json::{Value, json};

/// The legacy fixture over stdio behind `extra` (tables of its own).
fn config(extra: &str) -> String {
    format!("{extra}\n{}", stdio_upstream_toml(&legacy_stdio_command(), "", ""))
}

/// A 2026-07-28 `tools/call` of `tool` over raw HTTP, as `token` (if any).
fn modern_call(gateway: &Eragate, id: u64, tool: &str, token: Option<&str>) -> Reply {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let mut headers = modern_headers("tools/call", Some(tool));
    if let Some(authorization) = &authorization {
        headers.push(("authorization", authorization));
    }
    let arguments = match tool {
        "add" => json!({"a": 1, "b": 2}),
        _ => json!({"text": "x"}),
    };
    let body = modern_body(id, "tools/call", json!({"name": tool, "arguments": arguments}));
    send("POST", &gateway.url(), &headers, Some(&body))
}

/// Checks a 429 refusal by `limit` for request `id`; returns its `Retry-After`.
#[track_caller]
fn expect_refused(reply: &Reply, id: u64, limit: &str, problems: &mut Vec<String>) -> Option<u64> {
    if reply.status != 429 {
        problems.push(format!(
            "request {id}: status {} (expected 429): {}",
            reply.status, reply.body
        ));
        return None;
    }
    let body: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
    let expected = (json!(id), json!(-32029), json!(limit));
    let actual = (
        body["id"].clone(),
        body["error"]["code"].clone(),
        body["error"]["data"]["limit"].clone(),
    );
    if actual != expected {
        problems.push(format!(
            "request {id}: body {body} (expected id, -32029, limit {limit})"
        ));
    }
    let retry_after = reply.header("retry-after").and_then(|v| v.parse::<u64>().ok());
    if retry_after.is_none_or(|secs| secs == 0 || secs > 60) {
        problems.push(format!(
            "request {id}: Retry-After {retry_after:?} (expected 1..=60 seconds)"
        ));
    }
    if body["error"]["data"]["retryAfter"].as_u64() != retry_after {
        problems.push(format!(
            "request {id}: data.retryAfter differs from Retry-After: {body}"
        ));
    }
    retry_after
}

/// The codes (or `ok`) of a `burst` scenario's five echo calls and its add call.
fn burst_outcomes(report: &Value) -> (Vec<String>, String) {
    let outcome = |step: &Value| match step["error"]["code"].as_i64() {
        Some(code) => format!("{code} {}", step["error"]["data"]["limit"].as_str().unwrap_or("?")),
        None if step["text"].is_string() => "ok".into(),
        None => format!("unexpected {step}"),
    };
    let burst = &report["results"]["burst"];
    let echoes = burst["echo"]
        .as_array()
        .map(|a| a.iter().map(outcome).collect())
        .unwrap_or_default();
    (echoes, outcome(&burst["add"]))
}

const REFUSED_BY_TOOL: &str = "-32029 tool";

#[test]
fn a_tool_limit_refuses_sdk_clients_past_it_and_http_gets_429_with_retry_after() {
    let limits = "[rate_limits]\ntools.echo = { requests = 2, per = \"1m\" }\n";
    let gateway = Eragate::start(&config(limits));
    let mut problems = Vec::new();
    let expected_echoes = ["ok", "ok", REFUSED_BY_TOOL, REFUSED_BY_TOOL, REFUSED_BY_TOOL];

    // A 2026-07-28 SDK client: two echoes pass, three are refused, add is not limited.
    match py_client(&["--mode", "2026-07-28", "--url", &gateway.url(), "--scenario", "burst"]) {
        Ok(report) => {
            let (echoes, add) = burst_outcomes(&report);
            if echoes != expected_echoes || add != "ok" {
                problems.push(format!("2026-07-28 SDK client: echoes {echoes:?}, add {add}"));
            }
        }
        Err(e) => problems.push(format!("2026-07-28 SDK client failed: {e}")),
    }
    // The bucket is spent: raw HTTP sees the status, the header and the JSON-RPC body.
    let reply = modern_call(&gateway, 41, "echo", None);
    expect_refused(&reply, 41, "tool", &mut problems);
    let reply = modern_call(&gateway, 42, "add", None);
    if reply.status != 200 {
        problems.push(format!("add after the echo limit: {} {}", reply.status, reply.body));
    }
    // A handshake client on the same (anonymous) principal is refused in band.
    match py_client(&["--mode", "legacy", "--url", &gateway.url(), "--scenario", "burst"]) {
        Ok(report) => {
            let (echoes, add) = burst_outcomes(&report);
            if echoes != [REFUSED_BY_TOOL; 5] || add != "ok" {
                problems.push(format!("legacy SDK client: echoes {echoes:?}, add {add}"));
            }
        }
        Err(e) => problems.push(format!("legacy SDK client failed: {e}")),
    }
    assert_no_problems(&problems, &[("gateway", gateway.log())]);
}

#[test]
fn a_stdio_client_gets_the_json_rpc_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("eragate.toml");
    let limits = "[rate_limits]\ntools.echo = { requests = 2, per = \"1m\" }\n";
    std::fs::write(&path, config(limits)).expect("config");
    let command = format!("{} stdio --config {}", env!("CARGO_BIN_EXE_eragate"), path.display());
    let report = py_client(&["--mode", "legacy", "--stdio", &command, "--scenario", "burst"])
        .unwrap_or_else(|e| panic!("stdio SDK client failed: {e}"));
    let (echoes, add) = burst_outcomes(&report);
    let expected = ["ok", "ok", REFUSED_BY_TOOL, REFUSED_BY_TOOL, REFUSED_BY_TOOL];
    assert_eq!((as_strs(&echoes), add.as_str()), (expected.to_vec(), "ok"), "{report}");
}

#[test]
fn a_principal_limit_is_its_own_and_an_upstream_limit_counts_everyone() {
    let limits = "[rate_limits]\nper_principal = { requests = 2, per = \"1m\" }\n";
    let gateway = Eragate::start(&config(&format!("{}\n{limits}", auth_toml())));
    let mut problems = Vec::new();
    for id in 1..=2 {
        let reply = modern_call(&gateway, id, "add", Some(ALICE));
        if reply.status != 200 {
            problems.push(format!("alice's call {id}: {} {}", reply.status, reply.body));
        }
    }
    expect_refused(
        &modern_call(&gateway, 3, "add", Some(ALICE)),
        3,
        "principal",
        &mut problems,
    );
    // Bob is not slowed down by alice, with the SDK client.
    let header = format!("Authorization: Bearer {BOB}");
    match py_client(&[
        "--mode",
        "2026-07-28",
        "--url",
        &gateway.url(),
        "--header",
        &header,
        "--scenario",
        "connect",
    ]) {
        Ok(_) => {}
        Err(e) => problems.push(format!("bob's SDK client failed: {e}")),
    }
    // Bob's discover and this call are his two; his third is refused.
    let reply = modern_call(&gateway, 4, "add", Some(BOB));
    if reply.status != 200 {
        problems.push(format!(
            "bob's first call after alice's limit: {} {}",
            reply.status, reply.body
        ));
    }
    expect_refused(
        &modern_call(&gateway, 5, "add", Some(BOB)),
        5,
        "principal",
        &mut problems,
    );
    drop(gateway);

    let limits = "[rate_limits]\nupstreams.fixture = { requests = 3, per = \"1m\" }\n";
    let gateway = Eragate::start(&config(&format!("{}\n{limits}", auth_toml())));
    for (id, token) in [(1, ALICE), (2, BOB), (3, ALICE)] {
        let reply = modern_call(&gateway, id, "add", Some(token));
        if reply.status != 200 {
            problems.push(format!("upstream limit, call {id}: {} {}", reply.status, reply.body));
        }
    }
    expect_refused(
        &modern_call(&gateway, 4, "add", Some(BOB)),
        4,
        "upstream",
        &mut problems,
    );
    assert_no_problems(&problems, &[("gateway", gateway.log())]);
}

#[test]
fn a_shared_limit_holds_across_two_replicas_and_redis_down_follows_on_error() {
    let redis = RedisServer::start();
    let shared = |on_error: &str| {
        config(&format!(
            "[rate_limits]\ntools.echo = {{ requests = 3, per = \"1m\", shared = true }}\n\
             [rate_limits.redis]\naddress = \"127.0.0.1:{}\"\non_error = \"{on_error}\"\n",
            redis.port
        ))
    };
    let first = Eragate::start(&shared("closed"));
    let second = Eragate::start(&shared("closed"));
    let open = Eragate::start(&shared("open"));
    let mut problems = Vec::new();
    // Three echoes pass between the two replicas; the fourth, on either, is refused.
    for (id, gateway) in [(1, &first), (2, &second), (3, &first)] {
        let reply = modern_call(gateway, id, "echo", None);
        if reply.status != 200 {
            problems.push(format!("shared call {id}: {} {}", reply.status, reply.body));
        }
    }
    expect_refused(&modern_call(&second, 4, "echo", None), 4, "tool", &mut problems);
    expect_refused(&modern_call(&open, 5, "echo", None), 5, "tool", &mut problems);
    // The SDK client sees the same on the other replica.
    match py_client(&["--mode", "2026-07-28", "--url", &first.url(), "--scenario", "burst"]) {
        Ok(report) => {
            let (echoes, add) = burst_outcomes(&report);
            if echoes != [REFUSED_BY_TOOL; 5] || add != "ok" {
                problems.push(format!("SDK client on the first replica: echoes {echoes:?}, add {add}"));
            }
        }
        Err(e) => problems.push(format!("SDK client failed: {e}")),
    }
    // Redis goes away: closed refuses, open lets through; both say so in the log.
    drop(redis);
    expect_refused(&modern_call(&first, 6, "echo", None), 6, "tool", &mut problems);
    let reply = modern_call(&open, 7, "echo", None);
    if reply.status != 200 {
        problems.push(format!(
            "on_error = open with redis down: {} {}",
            reply.status, reply.body
        ));
    }
    if !first.log().contains("refusing the request (on_error = closed)") {
        problems.push("the closed replica did not log the failed count".into());
    }
    if !open.log().contains("letting the request through (on_error = open)") {
        problems.push("the open replica did not log the failed count".into());
    }
    assert_no_problems(
        &problems,
        &[("first", first.log()), ("second", second.log()), ("open", open.log())],
    );
}
