//! Bad input and faults: origins, body limits, malformed JSON-RPC, media types,
//! upstreams that die, hang or get killed, shutdown, and garbage.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

/// eragate in front of the fixture over stdio, its children tagged with a tag unique to this
/// run of test `name` (extra `[upstreams.stdio]` keys in `stdio`); returns the tag too.
fn tagged_gateway(name: &str, stdio: &str) -> (String, Eragate) {
    let tag = unique_tag(&format!("faults_{name}"));
    let gateway = Eragate::start(&config(&tagged_fixture(&tag), "", "", stdio));
    (tag, gateway)
}

/// A full config: `[listen]` extras, one stdio upstream `fixture` with extra upstream and stdio keys.
fn config(command: &[String], listen: &str, upstream: &str, stdio: &str) -> String {
    format!("[listen]\n{listen}\n{}", stdio_upstream_toml(command, upstream, stdio))
}

/// A modern `tools/call hang` (id `id`) on a thread of its own.
fn hang_in_background(url: &str, id: u64) -> std::thread::JoinHandle<Reply> {
    let url = url.to_owned();
    std::thread::spawn(move || modern_call(&url, id, "hang", json!({})))
}

/// Runs `f`; returns what it returned and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let value = f();
    (value, started.elapsed())
}

/// Sends raw bytes (a whole HTTP request, or garbage) and returns what came back until EOF or timeout.
fn raw(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let _ = stream.write_all(bytes);
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[track_caller]
fn expect_rpc_error(reply: &Reply, status: u16, code: i64) -> Value {
    assert_eq!(reply.status, status, "{reply:?}");
    let message = reply.json();
    assert_eq!(message["error"]["code"], code, "{message}");
    message
}

/// A JSON-RPC error naming the upstream `fixture`, for request `id`.
#[track_caller]
fn expect_upstream_error(reply: &Reply, id: Value) -> Value {
    let message = reply
        .messages()
        .into_iter()
        .find(|m| m.get("id") == Some(&id))
        .unwrap_or_else(|| panic!("no answer for {id}: {reply:?}"));
    let error = message
        .get("error")
        .unwrap_or_else(|| panic!("expected an error: {message}"));
    assert!(error["code"].is_i64(), "{message}");
    assert!(
        error["message"].as_str().is_some_and(|m| m.contains("fixture")),
        "the error names the upstream: {message}"
    );
    assert_eq!(error["data"]["upstream"], "fixture", "{message}");
    message
}

fn healthy(gateway: &mut Eragate) {
    assert!(
        matches!(gateway.proc.child.try_wait(), Ok(None)),
        "eragate exited; log:\n{}",
        gateway.log()
    );
    let reply = send("GET", &format!("http://{}/healthz", gateway.addr), &[], None);
    assert_eq!(reply.status, 200, "{reply:?}");
}

#[test]
fn origins_are_checked_on_every_verb() {
    let command = legacy_stdio_command();
    let gateway = Eragate::start(&config(&command, "allowed_origins = [\"https://app.example\"]", "", ""));
    let url = gateway.url();
    let port = gateway.addr.port();
    let modern = |origin: &str| {
        let mut headers = modern_headers("tools/list", None);
        headers.push(("origin", origin));
        send("POST", &url, &headers, Some(&modern_body(1, "tools/list", json!({}))))
    };
    for bad in [
        "http://evil.example",
        "null",
        &format!("http://127.0.0.1:{}", port.wrapping_add(1)),
        &format!("https://127.0.0.1:{port}"),
    ] {
        assert_eq!(modern(bad).status, 403, "POST Origin {bad}");
        let get = send("GET", &url, &[("accept", "text/event-stream"), ("origin", bad)], None);
        assert_eq!(get.status, 403, "GET Origin {bad}: {get:?}");
        let delete = send("DELETE", &url, &[("origin", bad), ("mcp-session-id", "x")], None);
        assert_eq!(delete.status, 403, "DELETE Origin {bad}: {delete:?}");
        // A legacy initialize from a foreign page is refused too.
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}});
        let reply = send(
            "POST",
            &url,
            &[PLAIN[0], PLAIN[1], ("origin", bad)],
            Some(&init.to_string()),
        );
        assert_eq!(reply.status, 403, "initialize Origin {bad}: {reply:?}");
    }
    for good in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        "https://app.example".to_owned(),
    ] {
        let reply = modern(&good);
        assert_eq!(reply.status, 200, "Origin {good}: {reply:?}");
        assert_eq!(reply.json()["result"]["resultType"], "complete", "{reply:?}");
        // Allowed, so GET without a session gets the normal 405, not 403.
        assert_eq!(
            send("GET", &url, &[("accept", "text/event-stream"), ("origin", &good)], None).status,
            405
        );
    }
}

#[test]
fn malformed_requests_get_exact_errors() {
    let command = legacy_stdio_command();
    let mut gateway = Eragate::start(&config(&command, "max_body_bytes = 65536", "", ""));
    let url = gateway.url();

    // Over the body limit: 413, with Content-Length and chunked.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{{\"pad\":\"{}\"}}}}",
        "a".repeat(70_000)
    );
    let reply = send("POST", &url, &PLAIN, Some(&big));
    assert_eq!(reply.status, 413, "{:?}", (reply.status, &reply.body));
    let chunked = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n",
        gateway.addr,
        big.len()
    );
    let answer = raw(gateway.addr, chunked.as_bytes());
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "chunked body over the limit: {answer:?}"
    );
    // Just under the limit is fine (a sessionless legacy request: 400 for the missing session, not 413).
    let fits = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{{\"pad\":\"{}\"}}}}",
        "a".repeat(60_000)
    );
    assert_eq!(send("POST", &url, &PLAIN, Some(&fits)).status, 400);

    // Not JSON: 400 / -32700. JSON but not JSON-RPC: 400 / -32600. A batch: -32600.
    let m = expect_rpc_error(
        &send(
            "POST",
            &url,
            &PLAIN,
            Some("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": "),
        ),
        400,
        -32700,
    );
    assert_eq!(m["id"], Value::Null, "{m}");
    expect_rpc_error(&send("POST", &url, &PLAIN, Some("")), 400, -32700);
    for body in [
        json!({"hello": "world"}),
        json!(42),
        json!("tools/list"),
        json!({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": 7}),
        json!({"jsonrpc": "2.0", "id": {"nested": true}, "method": "tools/list"}),
    ] {
        expect_rpc_error(&send("POST", &url, &PLAIN, Some(&body.to_string())), 400, -32600);
    }
    for batch in [
        json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
        json!([]),
        json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}]),
    ] {
        let reply = send("POST", &url, &PLAIN, Some(&batch.to_string()));
        assert_eq!(reply.status, 400, "batch {batch}: {reply:?}");
        let message = reply.json();
        assert_eq!(message["error"]["code"], -32600, "batch {batch}: {message}");
    }

    // Wrong or missing Content-Type: 415.
    let ok_body = modern_body(2, "tools/list", json!({}));
    for content_type in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
        let mut headers: Vec<(&str, &str)> = modern_headers("tools/list", None)
            .into_iter()
            .filter(|(k, _)| *k != "content-type")
            .collect();
        if let Some(ct) = content_type {
            headers.push(("content-type", ct));
        }
        let reply = send("POST", &url, &headers, Some(&ok_body));
        assert_eq!(reply.status, 415, "Content-Type {content_type:?}: {reply:?}");
    }
    // application/json with a charset parameter is still JSON.
    let mut headers = modern_headers("tools/list", None);
    headers[0] = ("content-type", "application/json; charset=utf-8");
    assert_eq!(send("POST", &url, &headers, Some(&ok_body)).status, 200);

    healthy(&mut gateway);
}

#[test]
fn upstream_that_exits_at_once_fails_fast() {
    let peers = peers();
    let gateway = Eragate::stdio(&[peers.python(), "-c", "import sys; sys.exit(3)"], "");
    let url = gateway.url();
    for attempt in 0..2 {
        let (reply, elapsed) = timed(|| post_modern(&url, 10 + attempt, "tools/list", None, json!({})));
        println!(
            "modern request to a dead upstream answered in {elapsed:?}: {}",
            reply.body
        );
        assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
        expect_upstream_error(&reply, json!(10 + attempt));
    }
    let init = json!({"jsonrpc": "2.0", "id": 20, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}});
    let (reply, elapsed) = timed(|| send("POST", &url, &PLAIN, Some(&init.to_string())));
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    expect_upstream_error(&reply, json!(20));
    assert!(
        reply.header("mcp-session-id").is_none(),
        "no session for a failed initialize: {reply:?}"
    );
    let (reply, elapsed) = timed(|| post_modern(&url, 21, "server/discover", None, json!({})));
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    expect_upstream_error(&reply, json!(21));
}

#[test]
fn hung_upstream_times_out_after_request_timeout() {
    let command = legacy_stdio_command();
    let gateway = Eragate::start(&config(&command, "", "request_timeout = \"1s\"", ""));
    let url = gateway.url();
    // Warm the pooled session so the timing below is the call's alone.
    let reply = modern_call(&url, 1, "echo", json!({"text": "warm"}));
    assert_eq!(reply.json()["result"]["content"][0]["text"], "echo: warm", "{reply:?}");

    let (reply, elapsed) = timed(|| modern_call(&url, 2, "hang", json!({})));
    println!("modern hang answered after {elapsed:?}: {}", reply.body);
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4),
        "took {elapsed:?}"
    );
    expect_upstream_error(&reply, json!(2));

    // The session survives a timed-out call.
    let reply = modern_call(&url, 3, "echo", json!({"text": "still here"}));
    assert_eq!(
        reply.json()["result"]["content"][0]["text"],
        "echo: still here",
        "{reply:?}"
    );

    // A legacy client's hung call times out the same way.
    let (session, _) = legacy_initialize(&url, "2025-11-25");
    let (reply, elapsed) = timed(|| {
        let hang = json!({"name": "hang", "arguments": {}});
        legacy_request(&url, &session, "2025-11-25", 4, "tools/call", hang)
    });
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4),
        "took {elapsed:?}"
    );
    expect_upstream_error(&reply, json!(4));
}

#[test]
fn a_killed_child_fails_its_call_and_is_replaced() {
    let (tag, gateway) = tagged_gateway("kill", "spares = 0");
    let url = gateway.url();
    let reply = modern_call(&url, 1, "echo", json!({"text": "one"}));
    assert_eq!(reply.json()["result"]["content"][0]["text"], "echo: one", "{reply:?}");
    // An era probe may have used a child of its own; it is closed after the probe.
    let mut children = Vec::new();
    wait_until("a single child (spares = 0)", Duration::from_secs(10), || {
        children = pids_with(&tag);
        children.len() == 1
    });
    let describe = |pids: &[u32]| -> Vec<String> {
        pids.iter()
            .map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default())
            .collect()
    };
    assert_eq!(
        children.len(),
        1,
        "spares = 0: only the pooled child: {:?}; log:\n{}",
        describe(&children),
        gateway.log()
    );
    let victim = children[0];

    let call = hang_in_background(&url, 2);
    std::thread::sleep(Duration::from_millis(1000));
    assert!(!call.is_finished(), "hang answered early");
    signal(victim, Signal::SIGKILL);
    let (reply, elapsed) = timed(|| call.join().expect("caller"));
    println!(
        "call on a SIGKILLed child answered {elapsed:?} after the kill: {}",
        reply.body
    );
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    expect_upstream_error(&reply, json!(2));

    // The next request succeeds on a new child.
    let reply = modern_call(&url, 3, "echo", json!({"text": "two"}));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.json()["result"]["content"][0]["text"],
        "echo: two",
        "{reply:?}\nlog:\n{}",
        gateway.log()
    );
    let now = pids_with(&tag);
    assert!(
        !now.contains(&victim) && !now.is_empty(),
        "a new child replaced {victim}: {now:?}"
    );

    // A legacy session's child killed mid-call: that client gets an error quickly, and can start over.
    let before = pids_with(&tag);
    let (session, _) = legacy_initialize(&url, "2025-11-25");
    let mut dedicated = Vec::new();
    wait_until("the session's child", Duration::from_secs(5), || {
        dedicated = pids_with(&tag).into_iter().filter(|p| !before.contains(p)).collect();
        !dedicated.is_empty()
    });
    let (legacy_url, legacy_session) = (url.clone(), session.clone());
    let call = std::thread::spawn(move || {
        let hang = json!({"name": "hang", "arguments": {}});
        legacy_request(&legacy_url, &legacy_session, "2025-11-25", 5, "tools/call", hang)
    });
    std::thread::sleep(Duration::from_millis(1000));
    for pid in &dedicated {
        signal(*pid, Signal::SIGKILL);
    }
    let (reply, elapsed) = timed(|| call.join().expect("caller"));
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    expect_upstream_error(&reply, json!(5));
    let (fresh, _) = legacy_initialize(&url, "2025-11-25");
    let echo = json!({"name": "echo", "arguments": {"text": "three"}});
    let reply = legacy_request(&url, &fresh, "2025-11-25", 6, "tools/call", echo);
    let message = reply.messages().into_iter().find(|m| m["id"] == 6).expect("answer");
    assert_eq!(message["result"]["content"][0]["text"], "echo: three", "{message}");
}

#[test]
fn sigterm_stops_every_child() {
    let (tag, mut gateway) = tagged_gateway("term", "");
    let url = gateway.url();
    let reply = modern_call(&url, 1, "echo", json!({"text": "x"}));
    assert_eq!(reply.status, 200, "{reply:?}");
    let (_session, _) = legacy_initialize(&url, "2025-11-25");
    // pooled child + dedicated child + a spare
    wait_until("three children", Duration::from_secs(10), || pids_with(&tag).len() >= 3);
    assert!(process_alive_with(&tag));
    println!("children before SIGTERM: {:?}", pids_with(&tag));

    let (exited, elapsed) = timed(|| gateway.proc.terminate(Duration::from_secs(10)));
    println!("eragate exited {elapsed:?} after SIGTERM");
    assert!(
        exited,
        "eragate did not exit within the 10 s grace; log:\n{}",
        gateway.log()
    );
    let status = gateway.proc.child.try_wait().expect("wait").expect("exited");
    assert!(status.success(), "exit status {status:?}; log:\n{}", gateway.log());
    assert!(
        !process_alive_with(&tag),
        "children outlived eragate: {:?}",
        pids_with(&tag)
    );
}

#[test]
fn garbage_never_crashes_the_gateway() {
    let command = legacy_stdio_command();
    let mut gateway = Eragate::start(&config(&command, "max_body_bytes = 2000000", "", ""));
    let url = gateway.url();
    let addr = gateway.addr;

    // Pseudo-random bytes as a JSON body and as a raw connection.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8
            })
            .collect()
    };
    for size in [1, 17, 4096, 100_000] {
        let bytes = random(size);
        let request = [
            format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {size}\r\n\r\n").into_bytes(),
            bytes.clone(),
        ]
        .concat();
        let answer = raw(addr, &request);
        assert!(
            answer.starts_with("HTTP/1.1 400"),
            "random body of {size} bytes: {:?}",
            &answer[..answer.len().min(300)]
        );
        let _ = raw(addr, &bytes); // not even HTTP
    }
    healthy(&mut gateway);

    // Invalid UTF-8 inside a JSON string.
    let mut body = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"x\":\"".to_vec();
    body.extend_from_slice(&[0xff, 0xfe, 0xc3]);
    body.extend_from_slice(b"\"}}");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let answer = raw(addr, &[head.into_bytes(), body].concat());
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");

    // Deep nesting, alone and inside params of a modern request.
    let deep = "[".repeat(1_000_000);
    expect_rpc_error(&send("POST", &url, &PLAIN, Some(&deep)), 400, -32700);
    let nested = format!("{}{}", "[".repeat(50_000), "]".repeat(50_000));
    let body = modern_body(1, "tools/list", json!({})).replacen(
        "\"params\":{",
        &format!("\"params\":{{\"deep\":{nested},"),
        1,
    );
    let reply = send("POST", &url, &modern_headers("tools/list", None), Some(&body));
    assert!(
        reply.status == 400 || reply.status == 200,
        "{:?}",
        (reply.status, &reply.body[..reply.body.len().min(300)])
    );
    let objects = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    let reply = send(
        "POST",
        &url,
        &PLAIN,
        Some(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{objects}}}"
        )),
    );
    assert_eq!(reply.status, 400, "{:?}", &reply.body[..reply.body.len().min(300)]);
    healthy(&mut gateway);

    // Huge strings within the limit: a 1.5 MB argument is echoed back whole.
    let text = "é".repeat(750_000);
    let reply = modern_call(&url, 3, "echo", json!({"text": text}));
    assert_eq!(reply.status, 200, "{:?}", &reply.body[..reply.body.len().min(300)]);
    let message = reply.messages().into_iter().find(|m| m["id"] == 3).expect("answer");
    assert_eq!(
        message["result"]["content"][0]["text"].as_str().map(str::len),
        Some(6 + text.len()),
        "echo of a 1.5 MB string"
    );
    // A huge method name, id and header.
    let huge = "m".repeat(1_500_000);
    let reply = send(
        "POST",
        &url,
        &PLAIN,
        Some(&json!({"jsonrpc": "2.0", "id": 4, "method": huge}).to_string()),
    );
    assert!((400..500).contains(&reply.status), "huge method: {}", reply.status);
    let reply = send(
        "POST",
        &url,
        &PLAIN,
        Some(&json!({"jsonrpc": "2.0", "id": huge, "method": "tools/list"}).to_string()),
    );
    assert!((400..500).contains(&reply.status), "huge id: {}", reply.status);
    let long_header = "x".repeat(200_000);
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Name: {long_header}\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{{}}"
    );
    let answer = raw(addr, request.as_bytes());
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 4"),
        "{:?}",
        &answer[..answer.len().min(300)]
    );
    // Odd but valid JSON values in odd places.
    for body in [
        json!({"jsonrpc": "2.0", "id": 1e300, "method": "tools/list"}).to_string(),
        "{\"jsonrpc\":\"2.0\",\"id\":1e999,\"method\":\"tools/list\"}".to_owned(),
        json!({"jsonrpc": "2.0", "id": -1, "method": "tools/list", "params": null}).to_string(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1, 2]}).to_string(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "", "params": {"_meta": null}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": ["2026-07-28"]}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": []}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 1, "result": {}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}}).to_string(),
        "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}".to_owned(),
    ] {
        for headers in [PLAIN.to_vec(), modern_headers("tools/call", Some("x"))] {
            let reply = send("POST", &url, &headers, Some(&body));
            assert!(reply.status < 500, "{body}: {reply:?}");
        }
    }
    healthy(&mut gateway);
    // And it still serves real traffic.
    let reply = modern_call(&url, 9, "echo", json!({"text": "alive"}));
    assert_eq!(reply.json()["result"]["content"][0]["text"], "echo: alive", "{reply:?}");
}

#[test]
fn sigterm_with_work_in_flight_exits_within_the_grace() {
    // A legacy GET stream open and a modern call hanging: eragate drains for at most the
    // shutdown grace (10 s by default), answers the hung call with an error, stops every child.
    let (tag, mut gateway) = tagged_gateway("drain", "");
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, "2025-11-25");
    let stream = open_legacy_stream(&url, &session, "2025-11-25", Duration::from_secs(60));
    assert_eq!(stream.status().as_u16(), 200);
    let call = hang_in_background(&url, 2);
    std::thread::sleep(Duration::from_millis(1000));
    assert!(process_alive_with(&tag));

    let (exited, elapsed) = timed(|| gateway.proc.terminate(Duration::from_secs(15)));
    println!("with a GET stream and a hung call in flight, eragate exited {elapsed:?} after SIGTERM");
    assert!(
        exited && elapsed < Duration::from_secs(12),
        "exit took {elapsed:?} (grace 10 s); log:\n{}",
        gateway.log()
    );
    assert!(
        !process_alive_with(&tag),
        "children outlived eragate: {:?}",
        pids_with(&tag)
    );
    let reply = call.join().expect("caller");
    expect_upstream_error(&reply, json!(2));
    drop(stream);
}
