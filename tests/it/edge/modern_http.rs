//! 2026-07-28 ("modern") rules through eragate in front of the legacy-only
//! fixture (`tests/peers/legacy_server.py`): exact requests, exact answers.
//!
//! Most tests use the fixture over stdio. The upstream-side assertions (what
//! reaches the legacy server: `_meta` keys, `notifications/cancelled`, how many
//! `initialize`s) use the fixture over Streamable HTTP with `--trace`, which logs
//! every HTTP request it receives.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

const MODERN: &str = "2026-07-28";

fn fixture_info() -> Value {
    json!({"name": "eragate-legacy-fixture", "version": "1.0.0"})
}

/// eragate in front of the fixture over stdio.
fn stdio_gateway(extra_upstream_toml: &str) -> Eragate {
    Eragate::stdio(&as_strs(&legacy_stdio_command()), extra_upstream_toml)
}

/// Asserts an HTTP status plus a JSON-RPC error with `code` for `id`; returns the error object.
#[track_caller]
fn expect_error(reply: &Reply, status: u16, code: i64, id: Value) -> Value {
    assert_eq!(reply.status, status, "status; reply: {reply:?}");
    let message = reply.json();
    assert_eq!(message["jsonrpc"], "2.0", "{message}");
    assert_eq!(message["id"], id, "id must be preserved: {message}");
    assert_eq!(message["error"]["code"], code, "code: {message}");
    assert!(message["error"]["message"].is_string(), "{message}");
    message["error"].clone()
}

/// Asserts a 200 with a complete modern result for `id`; returns the result.
#[track_caller]
fn expect_modern_result(reply: &Reply, id: Value) -> Value {
    assert_eq!(reply.status, 200, "{reply:?}");
    let message = answer(reply, id);
    let result = message
        .get("result")
        .unwrap_or_else(|| panic!("expected a result: {message}"))
        .clone();
    assert_eq!(
        result["resultType"], "complete",
        "every modern result has resultType: {result}"
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"],
        fixture_info(),
        "serverInfo in _meta: {result}"
    );
    result
}

/// A JSON-RPC request body with exactly this `_meta` (no envelope added).
fn raw_body(id: Value, method: &str, mut params: Value, meta: Option<Value>) -> String {
    if let Some(meta) = meta {
        params
            .as_object_mut()
            .expect("params object")
            .insert("_meta".into(), meta);
    }
    request_body(id, method, params)
}

/// POSTs a [`raw_body`] with `headers`.
fn post_raw(url: &str, headers: &[(&str, &str)], id: Value, method: &str, params: Value, meta: Option<Value>) -> Reply {
    send("POST", url, headers, Some(&raw_body(id, method, params, meta)))
}

/// POSTs `method` with empty params and exactly this `_meta`, with the modern headers.
fn list_with_meta(url: &str, method: &str, id: Value, meta: Option<Value>) -> Reply {
    post_raw(url, &modern_headers(method, None), id, method, json!({}), meta)
}

fn modern_with_id(url: &str, id: Value, method: &str, name: Option<&str>, params: Value) -> Reply {
    post_raw(
        url,
        &modern_headers(method, name),
        id,
        method,
        params,
        Some(modern_envelope()),
    )
}

/// The six requests whose results are cacheable (`ttlMs`, `cacheScope`), reading `uri`:
/// (method, Mcp-Name, params).
fn cacheable_requests(uri: &'static str) -> [(&'static str, Option<&'static str>, Value); 6] {
    [
        ("tools/list", None, json!({})),
        ("prompts/list", None, json!({})),
        ("resources/list", None, json!({})),
        ("resources/templates/list", None, json!({})),
        ("resources/read", Some(uri), json!({ "uri": uri })),
        ("server/discover", None, json!({})),
    ]
}

// --- the traced HTTP upstream (`common::TracedUpstream`) -----------------------------------

impl TracedUpstream {
    /// The upstream's ids of the `hang` calls it received, in order.
    fn hang_ids(&self) -> Vec<Value> {
        self.posted("tools/call")
            .into_iter()
            .filter(|(_, b)| b["params"]["name"] == "hang")
            .map(|(_, b)| b["id"].clone())
            .collect()
    }
}

/// Sends a modern `tools/call hang` (id `id`) as raw HTTP on a connection of its own (10 s
/// read timeout), which stays open.
fn send_raw_hang(gateway: &Eragate, id: u64) -> TcpStream {
    let body = modern_body(id, "tools/call", json!({"name": "hang", "arguments": {}}));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: hang\r\nContent-Length: {len}\r\n\r\n{body}",
        addr = gateway.addr,
        len = body.len()
    );
    let mut stream = TcpStream::connect(gateway.addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    stream.write_all(request.as_bytes()).expect("write");
    stream
}

// --- tests -------------------------------------------------------------------------------

#[test]
fn era_is_decided_per_request() {
    let gateway = stdio_gateway("");
    let url = gateway.url();

    // An envelope makes a request modern: no session needed, none minted.
    let reply = post_modern(&url, 1, "tools/list", None, json!({}));
    let result = expect_modern_result(&reply, json!(1));
    assert!(
        reply.header("mcp-session-id").is_none(),
        "a modern answer never mints a session: {reply:?}"
    );
    let names: Vec<&str> = result["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for expected in ["echo", "add", "slow_progress", "log_message", "hang", "fail", "météo"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }

    // A stale Mcp-Session-Id on a modern request is ignored (not 404).
    let mut headers = modern_headers("tools/list", None);
    headers.push(("mcp-session-id", "no-such-session"));
    let reply = send("POST", &url, &headers, Some(&modern_body(2, "tools/list", json!({}))));
    expect_modern_result(&reply, json!(2));

    // A legacy MCP-Protocol-Version and no envelope: the legacy path, which needs a session.
    let bare = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}).to_string();
    let legacy_header = [PLAIN[0], PLAIN[1], ("mcp-protocol-version", "2025-06-18")];
    let reply = send("POST", &url, &legacy_header, Some(&bare));
    let error = expect_error(&reply, 400, -32600, json!(3));
    assert!(
        error["message"].as_str().unwrap_or("").contains("Mcp-Session-Id"),
        "{error}"
    );
    // ... and on a session the very same request is served the legacy way (no modern decoration).
    let (session, _) = legacy_initialize(&url, "2025-06-18");
    let reply = send("POST", &url, &legacy_headers(&session, "2025-06-18"), Some(&bare));
    assert_eq!(reply.status, 200, "{reply:?}");
    let result = answer(&reply, 3)["result"].clone();
    assert!(result["tools"].as_array().is_some_and(|t| !t.is_empty()), "{result}");
    for key in ["resultType", "ttlMs", "cacheScope"] {
        assert!(result.get(key).is_none(), "a legacy client gets no {key}: {result}");
    }
    assert_eq!(
        send("DELETE", &url, &legacy_headers(&session, "2025-06-18"), None).status,
        200
    );

    // MCP-Protocol-Version 2026-07-28 without an envelope: 400 / -32602.
    let reply = list_with_meta(&url, "tools/list", json!(4), None);
    expect_error(&reply, 400, -32602, json!(4));
    let no_params = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).to_string();
    let reply = send("POST", &url, &modern_headers("tools/list", None), Some(&no_params));
    expect_error(&reply, 400, -32602, json!(5));
}

#[test]
fn envelope_headers_and_methods_are_validated_in_order() {
    let gateway = stdio_gateway("");
    let url = gateway.url();
    let h = |method: &'static str, name: Option<&'static str>| modern_headers(method, name);

    // Missing envelope keys: 400 / -32602.
    let missing_version = json!({"io.modelcontextprotocol/clientCapabilities": {}});
    let reply = list_with_meta(&url, "tools/list", json!(10), Some(missing_version));
    expect_error(&reply, 400, -32602, json!(10));
    let missing_caps = json!({"io.modelcontextprotocol/protocolVersion": MODERN});
    let reply = list_with_meta(&url, "prompts/list", json!("e-11"), Some(missing_caps));
    let error = expect_error(&reply, 400, -32602, json!("e-11"));
    assert!(
        error["message"].as_str().unwrap_or("").contains("clientCapabilities"),
        "{error}"
    );

    // MCP-Protocol-Version header differs from _meta: 400 / -32020 (before the version check).
    let mut meta = modern_envelope();
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2027-03-01");
    let reply = list_with_meta(&url, "tools/list", json!(12), Some(meta));
    expect_error(&reply, 400, -32020, json!(12));
    let mut headers = modern_headers("tools/list", None);
    headers[2] = ("mcp-protocol-version", "2025-11-25");
    let reply = send("POST", &url, &headers, Some(&modern_body(13, "tools/list", json!({}))));
    expect_error(&reply, 400, -32020, json!(13));
    // An envelope but no MCP-Protocol-Version header at all.
    let reply = send(
        "POST",
        &url,
        &headers[..2],
        Some(&modern_body(14, "tools/list", json!({}))),
    );
    expect_error(&reply, 400, -32020, json!(14));

    // Unsupported version (header and body agree): 400 / -32022 naming both sides.
    let mut meta = modern_envelope();
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2027-03-01");
    let mut headers = modern_headers("tools/list", None);
    headers[2] = ("mcp-protocol-version", "2027-03-01");
    let reply = post_raw(&url, &headers, json!(15), "tools/list", json!({}), Some(meta));
    let error = expect_error(&reply, 400, -32022, json!(15));
    assert_eq!(
        error["data"],
        json!({"supported": ["2026-07-28"], "requested": "2027-03-01"})
    );

    // Mcp-Method missing or different: 400 / -32020.
    let reply = send(
        "POST",
        &url,
        &h("tools/list", None)[..3],
        Some(&modern_body(16, "tools/list", json!({}))),
    );
    expect_error(&reply, 400, -32020, json!(16));
    let reply = send(
        "POST",
        &url,
        &h("prompts/list", None),
        Some(&modern_body(17, "tools/list", json!({}))),
    );
    expect_error(&reply, 400, -32020, json!(17));

    // Mcp-Name: required and checked (after sentinel decoding) for tools/call, prompts/get, resources/read.
    let meteo = json!({"name": "météo", "arguments": {"city": "Zürich"}});
    let echo = json!({"name": "echo", "arguments": {"text": "hi"}});
    let greet = json!({"name": "greet", "arguments": {"name": "Ada"}});
    let hello = json!({"uri": "test://static/hello"});
    let mismatches: Vec<(&str, Value, Option<&str>)> = vec![
        ("tools/call", meteo.clone(), Some("meteo")),
        ("tools/call", meteo.clone(), Some("=?base64?ZWNobw==?=")), // "echo"
        ("tools/call", meteo.clone(), Some("=?base64?!!!?=")),      // not base64
        ("tools/call", meteo.clone(), None),
        ("tools/call", echo.clone(), None),
        ("tools/call", echo.clone(), Some("add")),
        ("prompts/get", greet.clone(), None),
        ("prompts/get", greet.clone(), Some("other")),
        ("resources/read", hello.clone(), None),
        ("resources/read", hello.clone(), Some("test://static/other")),
    ];
    for (i, (method, params, name)) in mismatches.into_iter().enumerate() {
        let id = 100 + i as u64;
        let reply = send(
            "POST",
            &url,
            &modern_headers(method, name),
            Some(&modern_body(id, method, params.clone())),
        );
        assert_eq!(reply.status, 400, "{method} {params} Mcp-Name {name:?}: {reply:?}");
        expect_error(&reply, 400, -32020, json!(id));
    }
    let reply = post_modern(&url, 120, "tools/call", Some("=?base64?bcOpdMOpbw==?="), meteo);
    assert_eq!(tool_text(&expect_modern_result(&reply, json!(120))), "météo: Zürich");
    let reply = post_modern(&url, 121, "tools/call", Some("echo"), echo);
    assert_eq!(tool_text(&expect_modern_result(&reply, json!(121))), "echo: hi");
    let reply = post_modern(&url, 122, "prompts/get", Some("greet"), greet);
    let result = expect_modern_result(&reply, json!(122));
    assert_eq!(result["messages"][0]["content"]["text"], "Hello, Ada!", "{result}");
    let reply = post_modern(&url, 123, "resources/read", Some("test://static/hello"), hello);
    let result = expect_modern_result(&reply, json!(123));
    assert_eq!(result["contents"][0]["text"], "hello world", "{result}");

    // Methods removed in 2026-07-28, and unknown ones: 404 / -32601, the request id kept.
    let removed = [
        (
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}),
        ),
        ("ping", json!({})),
        ("logging/setLevel", json!({"level": "debug"})),
        ("resources/subscribe", json!({"uri": "test://static/hello"})),
        ("resources/unsubscribe", json!({"uri": "test://static/hello"})),
        ("widgets/list", json!({})),
    ];
    for (method, params) in removed {
        let id = json!(format!("rm-{method}"));
        let reply = modern_with_id(&url, id.clone(), method, None, params);
        expect_error(&reply, 404, -32601, id);
    }

    // A modern notification: 202, no body.
    for method in ["notifications/cancelled", "notifications/initialized"] {
        let body =
            json!({"jsonrpc": "2.0", "method": method, "params": {"requestId": 999, "_meta": modern_envelope()}})
                .to_string();
        let reply = send("POST", &url, &modern_headers(method, None), Some(&body));
        assert_eq!(reply.status, 202, "{method}: {reply:?}");
        assert!(reply.body.is_empty(), "{reply:?}");
    }

    // GET and DELETE are legacy session verbs: 405 + Allow: POST without a session or with a modern header.
    let cases: [(&str, Vec<(&str, &str)>); 4] = [
        ("GET", vec![("accept", "text/event-stream")]),
        (
            "GET",
            vec![
                ("accept", "text/event-stream"),
                ("mcp-protocol-version", MODERN),
                ("mcp-session-id", "abc"),
            ],
        ),
        ("DELETE", vec![]),
        (
            "DELETE",
            vec![("mcp-protocol-version", MODERN), ("mcp-session-id", "abc")],
        ),
    ];
    for (verb, headers) in cases {
        let reply = send(verb, &url, &headers, None);
        assert_eq!(reply.status, 405, "{verb} {headers:?}: {reply:?}");
        assert_eq!(reply.header("allow"), Some("POST"), "{verb} {headers:?}: {reply:?}");
    }

    // Accept must list text/event-stream (and application/json): 406.
    for accept in ["application/json", "text/event-stream"] {
        let mut headers = modern_headers("tools/list", None);
        headers[1] = ("accept", accept);
        let reply = send("POST", &url, &headers, Some(&modern_body(30, "tools/list", json!({}))));
        assert_eq!(reply.status, 406, "Accept: {accept}: {reply:?}");
    }
}

#[test]
fn discover_and_result_decoration() {
    let gateway = stdio_gateway("");
    let url = gateway.url();

    let check_discover = |result: &Value| {
        assert_eq!(result["resultType"], "complete", "{result}");
        assert_eq!(result["supportedVersions"], json!(["2026-07-28"]), "{result}");
        assert!(
            result["capabilities"]["tools"].is_object(),
            "capabilities from the upstream: {result}"
        );
        assert!(result["capabilities"].get("tasks").is_none(), "{result}");
        assert_eq!(
            result["_meta"]["io.modelcontextprotocol/serverInfo"],
            fixture_info(),
            "{result}"
        );
        assert_eq!(
            result["instructions"], "Legacy-only MCP test fixture for eragate.",
            "{result}"
        );
        assert_eq!(result["ttlMs"], 0, "{result}");
        assert_eq!(result["cacheScope"], "private", "{result}");
    };
    // With the envelope and headers.
    let reply = post_modern(&url, 1, "server/discover", None, json!({}));
    check_discover(&expect_modern_result(&reply, json!(1)));
    // A legacy-shaped probe: no _meta at all, no MCP headers.
    for body in [
        json!({"jsonrpc": "2.0", "id": "probe", "method": "server/discover"}),
        json!({"jsonrpc": "2.0", "id": "probe", "method": "server/discover", "params": {}}),
    ] {
        let reply = send("POST", &url, &PLAIN, Some(&body.to_string()));
        assert_eq!(reply.status, 200, "{body}: {reply:?}");
        check_discover(&answer(&reply, "probe")["result"]);
    }

    // The six cacheable results carry ttlMs/cacheScope; the others do not. eragate cannot
    // tell when this upstream's lists change (it announces nothing): 0. Without
    // authentication every caller gets the lists eragate saw: public; a read or discover,
    // which it does not compare, stays private.
    for (i, (method, name, params)) in cacheable_requests("test://items/42").into_iter().enumerate() {
        let id = 10 + i as u64;
        let result = expect_modern_result(&post_modern(&url, id, method, name, params), json!(id));
        let scope = if method.ends_with("/list") { "public" } else { "private" };
        assert_eq!(result["ttlMs"], 0, "{method}: {result}");
        assert_eq!(result["cacheScope"], scope, "{method}: {result}");
    }
    let not_cacheable: [(&str, Option<&str>, Value); 4] = [
        (
            "tools/call",
            Some("add"),
            json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
        ),
        ("tools/call", Some("fail"), json!({"name": "fail", "arguments": {}})),
        (
            "prompts/get",
            Some("greet"),
            json!({"name": "greet", "arguments": {"name": "Bo"}}),
        ),
        (
            "completion/complete",
            None,
            json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "a"}}),
        ),
    ];
    for (i, (method, name, params)) in not_cacheable.into_iter().enumerate() {
        let id = 20 + i as u64;
        let result = expect_modern_result(&post_modern(&url, id, method, name, params), json!(id));
        assert!(
            result.get("ttlMs").is_none() && result.get("cacheScope").is_none(),
            "{method} is not cacheable: {result}"
        );
        match id {
            20 => assert_eq!(
                (tool_text(&result), &result["structuredContent"]),
                ("5", &json!({"sum": 5})),
                "{result}"
            ),
            21 => assert_eq!(
                (tool_text(&result), &result["isError"]),
                ("failure requested", &json!(true)),
                "{result}"
            ),
            23 => assert_eq!(result["completion"]["values"], json!(["alice"]), "{result}"),
            _ => {}
        }
    }

    // Resource not found: the upstream says -32002; a modern client gets -32602 with data.uri kept.
    let reply = post_modern(
        &url,
        30,
        "resources/read",
        Some("test://nope/x"),
        json!({"uri": "test://nope/x"}),
    );
    assert!(reply.status == 200 || reply.status == 400, "{reply:?}");
    let message = answer(&reply, 30);
    assert_eq!(message["error"]["code"], -32602, "{message}");
    assert_eq!(message["error"]["data"]["uri"], "test://nope/x", "{message}");
    // An unknown tool is the upstream's -32602, relayed.
    let reply = modern_call(&url, 31, "nope", json!({}));
    assert_eq!(answer(&reply, 31)["error"]["code"], -32602, "{reply:?}");
}

#[test]
fn configured_cache_hints_are_applied() {
    // The operator vouches the upstream answers everyone alike, caps ttlMs at 5 s, and has
    // lists that cannot be announced re-listed hourly: lists get the cap; a read or a
    // discover, which eragate would not see change, 0.
    let gateway = stdio_gateway("[upstreams.cache]\nttl_ms = 5000\nscope = \"public\"\nrelist_interval = \"1h\"");
    let url = gateway.url();
    for (i, (method, name, params)) in cacheable_requests("test://static/hello").into_iter().enumerate() {
        let id = 1 + i as u64;
        let result = expect_modern_result(&post_modern(&url, id, method, name, params), json!(id));
        let ttl = if method.ends_with("/list") { 5000 } else { 0 };
        assert_eq!(
            (&result["ttlMs"], &result["cacheScope"]),
            (&json!(ttl), &json!("public")),
            "{method}: {result}"
        );
    }
    let reply = send(
        "POST",
        &url,
        &PLAIN,
        Some(&json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover"}).to_string()),
    );
    let result = answer(&reply, 9)["result"].clone();
    assert_eq!(
        (&result["ttlMs"], &result["cacheScope"]),
        (&json!(0), &json!("public")),
        "probe: {result}"
    );
    let result = expect_modern_result(&modern_call(&url, 10, "echo", json!({"text": "x"})), json!(10));
    assert!(
        result.get("ttlMs").is_none() && result.get("cacheScope").is_none(),
        "tools/call: {result}"
    );
}

#[test]
fn progress_and_log_level_stream_on_the_request() {
    let gateway = stdio_gateway("");
    let url = gateway.url();

    // progressToken "p-1": an SSE answer with the client's token on every progress, then the result.
    let params = json!({"name": "slow_progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "p-1"}});
    let reply = post_modern(&url, 1, "tools/call", Some("slow_progress"), params);
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(reply.content_type_is("text/event-stream"), "{reply:?}");
    assert_eq!(reply.header("x-accel-buffering"), Some("no"), "{reply:?}");
    let messages = reply.messages();
    let (last, notes) = messages.split_last().expect("messages");
    assert_eq!(notes.len(), 3, "three progress notifications: {messages:?}");
    for (i, note) in notes.iter().enumerate() {
        assert_eq!(note["method"], "notifications/progress", "{note}");
        assert_eq!(note["params"]["progressToken"], "p-1", "the client's own token: {note}");
        assert_eq!(note["params"]["progress"].as_f64(), Some((i + 1) as f64), "{note}");
        assert_eq!(note["params"]["total"].as_f64(), Some(3.0), "{note}");
        assert!(note.get("id").is_none(), "{note}");
    }
    assert_eq!(last["id"], 1, "the result ends the stream: {last}");
    assert_eq!(last["result"]["resultType"], "complete", "{last}");
    assert_eq!(tool_text(&last["result"]), "done");
    assert_eq!(
        last["result"]["_meta"]["io.modelcontextprotocol/serverInfo"],
        fixture_info(),
        "{last}"
    );

    // Without a progressToken: no progress, a plain JSON answer.
    let reply = modern_call(&url, 2, "slow_progress", json!({"steps": 2}));
    assert!(reply.content_type_is("application/json"), "{reply:?}");
    assert_eq!(tool_text(&expect_modern_result(&reply, json!(2))), "done");

    // logLevel opt-in: notifications/message only at or above the requested level, only when asked.
    let log_call = |id: u64, level: &str, opt_in: Option<&str>| {
        let mut meta = modern_envelope();
        if let Some(opt_in) = opt_in {
            meta["io.modelcontextprotocol/logLevel"] = json!(opt_in);
        }
        let params =
            json!({"name": "log_message", "arguments": {"level": level, "message": format!("m{id}")}, "_meta": meta});
        let reply = post_raw(
            &url,
            &modern_headers("tools/call", Some("log_message")),
            json!(id),
            "tools/call",
            params,
            None,
        );
        assert_eq!(reply.status, 200, "{reply:?}");
        let logs = reply.notifications("notifications/message");
        let result = answer(&reply, id)["result"].clone();
        assert_eq!(result["resultType"], "complete", "{result}");
        (logs, tool_text(&result).to_owned())
    };
    let (logs, text) = log_call(10, "error", Some("warning"));
    assert_eq!(text, "logged error");
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0]["params"]["level"], "error", "{logs:?}");
    assert_eq!(logs[0]["params"]["data"], "m10", "{logs:?}");
    let (logs, _) = log_call(11, "info", Some("warning"));
    assert!(logs.is_empty(), "below the opt-in level: {logs:?}");
    let (logs, _) = log_call(12, "emergency", None);
    assert!(logs.is_empty(), "no opt-in, no notifications/message: {logs:?}");
    // An invalid logLevel is an envelope error.
    let mut meta = modern_envelope();
    meta["io.modelcontextprotocol/logLevel"] = json!("loud");
    let reply = list_with_meta(&url, "tools/list", json!(13), Some(meta));
    expect_error(&reply, 400, -32602, json!(13));
}

#[test]
fn reserved_meta_keys_never_reach_the_upstream() {
    let upstream = TracedUpstream::start();
    let gateway = Eragate::http(&upstream.url, "");
    let url = gateway.url();
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let mut meta = modern_envelope();
    meta["io.modelcontextprotocol/logLevel"] = json!("debug");
    meta["progressToken"] = json!("tok-meta");
    meta["traceparent"] = json!(traceparent);
    meta["tracestate"] = json!("vendor=1");
    meta["com.example/tag"] = json!("keep-me");
    let params = json!({"name": "echo", "arguments": {"text": "meta-probe"}, "_meta": meta});
    let reply = post_raw(
        &url,
        &modern_headers("tools/call", Some("echo")),
        json!(1),
        "tools/call",
        params,
        None,
    );
    assert_eq!(tool_text(&expect_modern_result(&reply, json!(1))), "echo: meta-probe");

    let calls = upstream.posted("tools/call");
    let (headers, body) = calls
        .iter()
        .find(|(_, b)| b["params"]["arguments"]["text"] == "meta-probe")
        .unwrap_or_else(|| panic!("the call never reached the upstream; trace:\n{}", upstream.raw()));
    let upstream_meta = body["params"]["_meta"]
        .as_object()
        .unwrap_or_else(|| panic!("no _meta upstream: {body}"));
    let leaked: Vec<&String> = upstream_meta
        .keys()
        .filter(|k| k.starts_with("io.modelcontextprotocol/"))
        .collect();
    assert!(
        leaked.is_empty(),
        "reserved keys reached the legacy upstream: {leaked:?} in {body}"
    );
    assert!(
        upstream_meta.contains_key("progressToken"),
        "progressToken must reach the upstream: {body}"
    );
    assert_eq!(upstream_meta.get("traceparent"), Some(&json!(traceparent)), "{body}");
    assert_eq!(upstream_meta.get("tracestate"), Some(&json!("vendor=1")), "{body}");
    assert_eq!(upstream_meta.get("com.example/tag"), Some(&json!("keep-me")), "{body}");
    assert_eq!(
        headers["mcp-protocol-version"], "2025-11-25",
        "the upstream sees its own negotiated revision: {headers}"
    );
    // Nothing eragate relays carries a reserved key (its own `server/discover` era probe
    // is a modern request by design and is left out).
    for traced in upstream.requests() {
        if let Some(body) = &traced.body
            && body["method"] != "server/discover"
        {
            assert!(
                !body.to_string().contains("io.modelcontextprotocol/"),
                "reserved key upstream: {body}"
            );
        }
    }
    assert!(
        upstream
            .posted("initialize")
            .iter()
            .all(|(_, b)| b["params"]["protocolVersion"] == "2025-11-25"),
        "eragate handshakes at the newest legacy revision"
    );

    // Progress through an HTTP upstream (its notifications arrive on the upstream's POST stream).
    let params = json!({"name": "slow_progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "p-1"}});
    let reply = post_modern(&url, 2, "tools/call", Some("slow_progress"), params);
    assert!(reply.content_type_is("text/event-stream"), "{reply:?}");
    assert_eq!(reply.header("x-accel-buffering"), Some("no"), "{reply:?}");
    let messages = reply.messages();
    let progress = reply.notifications("notifications/progress");
    assert_eq!(progress.len(), 3, "{messages:?}");
    assert!(
        progress.iter().all(|p| p["params"]["progressToken"] == "p-1"),
        "{progress:?}"
    );
    assert_eq!(
        messages.last().map(|m| m["id"].clone()),
        Some(json!(2)),
        "the result comes last: {messages:?}"
    );
    assert_eq!(tool_text(&expect_modern_result(&reply, json!(2))), "done");
}

#[test]
fn closing_the_stream_cancels_the_upstream_request() {
    let upstream = TracedUpstream::start();
    let gateway = Eragate::start(&format!(
        "[listen]\nstream_after = \"100ms\"\nsse_keep_alive = \"100ms\"\n[[upstreams]]\nname = \"fixture\"\n[upstreams.http]\nurl = \"{}\"\n",
        upstream.url
    ));
    let mut stream = send_raw_hang(&gateway, 77);
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).expect("read the response head");
        assert_eq!(n, 1, "connection closed early: {}", String::from_utf8_lossy(&head));
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("content-type: text/event-stream"),
        "a silent call switches to SSE after stream_after: {head}"
    );
    upstream.wait_for("the hang call", Duration::from_secs(10), |u| !u.hang_ids().is_empty());
    let hang_id = upstream.hang_ids()[0].clone();

    // The client goes away mid-call.
    let _ = stream.shutdown(std::net::Shutdown::Both);
    drop(stream);
    let closed = Instant::now();
    upstream.wait_for("notifications/cancelled", Duration::from_secs(10), |u| {
        !u.posted("notifications/cancelled").is_empty()
    });
    let cancelled = upstream.posted("notifications/cancelled");
    println!(
        "notifications/cancelled reached the upstream {:?} after the client closed",
        closed.elapsed()
    );
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(
        cancelled[0].1["params"]["requestId"], hang_id,
        "cancels the upstream's id for the call: {cancelled:?}"
    );

    // The pooled session is still good.
    let reply = modern_call(&gateway.url(), 78, "echo", json!({"text": "after"}));
    assert_eq!(tool_text(&expect_modern_result(&reply, json!(78))), "echo: after");
}

/// The data of the last event of an SSE body; `None` when the body is not a stream.
fn last_sse_data(body: &str) -> Option<&str> {
    body.lines()
        .rev()
        .find_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
}

#[test]
fn a_thousand_modern_calls_share_one_upstream_initialize() {
    const TOTAL: u64 = 1000;
    const THREADS: u64 = 16;
    let upstream = TracedUpstream::start();
    let gateway = Eragate::http(&upstream.url, "");
    let url = gateway.url();
    let next = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let started = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (url, next, failures) = (url.clone(), next.clone(), failures.clone());
            std::thread::spawn(move || {
                let client = reqwest::blocking::Client::builder()
                    .timeout(Duration::from_secs(60))
                    .build()
                    .expect("client");
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= TOTAL {
                        return;
                    }
                    let text = format!("call-{i}-{}", "x".repeat((i % 7) as usize));
                    let body = modern_body(i, "tools/call", json!({"name": "echo", "arguments": {"text": text}}));
                    let request = client
                        .post(&url)
                        .headers(modern_header_map("tools/call", Some("echo")))
                        .body(body);
                    let outcome = request.send().and_then(|r| Ok((r.status().as_u16(), r.text()?)));
                    let problem = match outcome {
                        Err(e) => Some(format!("#{i}: {e}")),
                        // An answer slower than `stream_after` (a loaded machine) comes as SSE: its last event.
                        Ok((status, body)) => {
                            match serde_json::from_str::<Value>(last_sse_data(&body).unwrap_or(&body)) {
                                Ok(m)
                                    if status == 200
                                        && m["id"] == i
                                        && m["result"]["content"][0]["text"] == format!("echo: {text}")
                                        && m["result"]["resultType"] == "complete" =>
                                {
                                    None
                                }
                                _ => Some(format!("#{i}: {status} {body}")),
                            }
                        }
                    };
                    if let Some(problem) = problem {
                        failures.lock().unwrap().push(problem);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    let elapsed = started.elapsed();
    let failures = failures.lock().unwrap().clone();
    assert!(
        failures.is_empty(),
        "{} of {TOTAL} calls failed, e.g. {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    upstream.wait_for("all 1000 calls", Duration::from_secs(10), |u| {
        u.posted("tools/call").len() as u64 >= TOTAL
    });
    let initializes = upstream.posted("initialize").len();
    let calls = upstream.posted("tools/call").len();
    let sessions: std::collections::BTreeSet<String> = upstream
        .posted("tools/call")
        .iter()
        .filter_map(|(h, _)| h["mcp-session-id"].as_str().map(str::to_owned))
        .collect();
    println!(
        "1000 modern tools/call in {elapsed:?} ({THREADS} threads): upstream saw {initializes} initialize, {calls} tools/call, {} session id(s)",
        sessions.len()
    );
    assert_eq!(calls as u64, TOTAL, "every call reached the upstream exactly once");
    assert_eq!(initializes, 1, "one upstream handshake for all modern calls");
    assert_eq!(sessions.len(), 1, "one upstream session: {sessions:?}");
}

#[test]
fn closing_early_cancels_too_with_default_timing() {
    // Default listen settings (stream_after 2 s, keep-alive 15 s): a client leaving before the
    // JSON-or-SSE decision, or after SSE started, is noticed at once.
    let upstream = TracedUpstream::start();
    let gateway = Eragate::http(&upstream.url, "");
    for (i, wait_ms) in [(1u64, 0u64), (2, 2500)] {
        let stream = send_raw_hang(&gateway, i);
        let sent = Instant::now();
        upstream.wait_for("the hang call", Duration::from_secs(10), |u| {
            u.hang_ids().len() as u64 == i
        });
        if let Some(rest) = Duration::from_millis(wait_ms).checked_sub(sent.elapsed()) {
            std::thread::sleep(rest);
        }
        let hang_ids = upstream.hang_ids();
        assert_eq!(
            hang_ids.len() as u64,
            i,
            "the call reached the upstream; trace:\n{}",
            upstream.raw()
        );
        drop(stream);
        let closed = Instant::now();
        if i == 1 {
            assert!(
                closed - sent < Duration::from_millis(1900),
                "meant to close before stream_after (2 s): {:?}",
                closed - sent
            );
        }
        upstream.wait_for("notifications/cancelled", Duration::from_secs(3), |u| {
            u.posted("notifications/cancelled").len() as u64 == i
        });
        println!(
            "closed {:?} after sending: notifications/cancelled upstream {:?} later",
            closed - sent,
            closed.elapsed()
        );
        let cancelled = upstream.posted("notifications/cancelled");
        assert_eq!(
            cancelled.last().expect("cancelled").1["params"]["requestId"],
            hang_ids[i as usize - 1],
            "{cancelled:?}"
        );
    }
}
