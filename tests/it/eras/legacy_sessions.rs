//! Handshake-era clients over raw HTTP through eragate, in front of the
//! legacy-only fixture over stdio: version negotiation, the session lifecycle,
//! per-session logging levels, and legacy error codes.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

fn stdio_gateway() -> Eragate {
    Eragate::stdio(&as_strs(&legacy_stdio_command()), "")
}

/// A legacy `tools/call` on `session`, which must answer 200.
fn call_tool(url: &str, session: &str, version: &str, id: u64, name: &str, arguments: Value) -> Reply {
    let reply = legacy_request(
        url,
        session,
        version,
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    );
    assert_eq!(reply.status, 200, "tools/call {name}: {reply:?}");
    reply
}

/// The text of the tool result answering `id`.
fn text_of(reply: &Reply, id: u64) -> String {
    tool_text(&answer(reply, id)["result"]).to_owned()
}

#[test]
fn initialize_negotiation_table() {
    let gateway = stdio_gateway();
    let url = gateway.url();
    let table: [(Option<&str>, &str); 7] = [
        (Some("2024-11-05"), "2024-11-05"),
        (Some("2025-03-26"), "2025-03-26"),
        (Some("2025-06-18"), "2025-06-18"),
        (Some("2025-11-25"), "2025-11-25"),
        (Some("2024-10-07"), "2024-11-05"),
        (Some("2026-07-28"), "2025-11-25"),
        (None, "2025-11-25"),
    ];
    let mut sessions = Vec::new();
    for (offered, expected) in table {
        let mut params = json!({"capabilities": {}, "clientInfo": {"name": "eragate-tests", "version": "0"}});
        if let Some(offered) = offered {
            params["protocolVersion"] = json!(offered);
        }
        let reply = send("POST", &url, &PLAIN, Some(&request_body(1, "initialize", params)));
        assert_eq!(reply.status, 200, "offer {offered:?}: {reply:?}");
        let session = reply
            .header("mcp-session-id")
            .unwrap_or_else(|| panic!("no Mcp-Session-Id for {offered:?}: {reply:?}"))
            .to_owned();
        assert!(
            !session.is_empty() && session.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "visible ASCII session id: {session:?}"
        );
        let message = answer(&reply, 1);
        let result = &message["result"];
        assert_eq!(result["protocolVersion"], expected, "offer {offered:?}: {result}");
        assert_eq!(result["serverInfo"]["name"], "eragate-legacy-fixture", "{result}");
        assert!(result["capabilities"]["tools"].is_object(), "{result}");
        assert!(
            result.get("resultType").is_none(),
            "no modern decoration for a legacy client: {result}"
        );
        // The session works at the negotiated revision.
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
        assert_eq!(
            send("POST", &url, &legacy_headers(&session, expected), Some(&initialized)).status,
            202
        );
        let reply = call_tool(&url, &session, expected, 2, "echo", json!({"text": expected}));
        assert_eq!(text_of(&reply, 2), format!("echo: {expected}"));
        sessions.push((session, expected));
    }
    let distinct: std::collections::BTreeSet<&String> = sessions.iter().map(|(s, _)| s).collect();
    assert_eq!(distinct.len(), sessions.len(), "every initialize mints its own session");
    for (session, version) in &sessions {
        assert_eq!(
            send("DELETE", &url, &legacy_headers(session, version), None).status,
            200
        );
    }
}

#[test]
fn session_lifecycle() {
    let gateway = stdio_gateway();
    let url = gateway.url();
    let v = "2025-11-25";

    // initialize, then notifications/initialized → 202 with no body.
    let reply = send(
        "POST",
        &url,
        &PLAIN,
        Some(&request_body(
            0,
            "initialize",
            json!({"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        )),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let session = reply.header("mcp-session-id").expect("Mcp-Session-Id").to_owned();
    let ack = send(
        "POST",
        &url,
        &legacy_headers(&session, v),
        Some(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string()),
    );
    assert_eq!(ack.status, 202, "{ack:?}");
    assert!(ack.body.is_empty(), "{ack:?}");

    // ping is answered with an empty result.
    let reply = legacy_request(&url, &session, v, 1, "ping", json!({}));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(answer(&reply, 1)["result"], json!({}), "{reply:?}");

    // Requests on the session reach the upstream, undecorated.
    let reply = legacy_request(&url, &session, v, 2, "tools/list", json!({}));
    let result = answer(&reply, 2)["result"].clone();
    assert!(result["tools"].as_array().is_some_and(|t| t.len() >= 7), "{result}");
    assert!(
        result.get("resultType").is_none() && result.get("ttlMs").is_none(),
        "{result}"
    );
    let reply = call_tool(&url, &session, v, 3, "météo", json!({"city": "Zürich"}));
    assert_eq!(text_of(&reply, 3), "météo: Zürich");

    // A resource that does not exist stays -32002 for a legacy client, data.uri kept.
    let reply = legacy_request(&url, &session, v, 4, "resources/read", json!({"uri": "test://nope/1"}));
    assert_eq!(reply.status, 200, "{reply:?}");
    let message = answer(&reply, 4);
    assert_eq!(message["error"]["code"], -32002, "{message}");
    assert_eq!(message["error"]["data"]["uri"], "test://nope/1", "{message}");

    // The GET stream opens for a live session.
    let stream = open_legacy_stream(&url, &session, v, Duration::from_secs(10));
    assert_eq!(stream.status().as_u16(), 200, "{stream:?}");
    assert!(
        stream
            .headers()
            .get("content-type")
            .and_then(|c| c.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream")),
        "{stream:?}"
    );
    drop(stream);

    // An unknown session: 404. No session at all: 400.
    let reply = legacy_request(&url, "not-a-session", v, 5, "tools/list", json!({}));
    assert_eq!(reply.status, 404, "{reply:?}");
    let reply = send("POST", &url, &PLAIN, Some(&request_body(6, "tools/list", json!({}))));
    assert_eq!(reply.status, 400, "{reply:?}");
    let reply = send(
        "GET",
        &url,
        &[
            ("accept", "text/event-stream"),
            ("mcp-session-id", "not-a-session"),
            ("mcp-protocol-version", v),
        ],
        None,
    );
    assert_eq!(reply.status, 404, "GET with an unknown session: {reply:?}");

    // DELETE ends it; afterwards the session is unknown (404), and so is a second DELETE.
    let reply = send("DELETE", &url, &legacy_headers(&session, v), None);
    assert!(reply.status == 200 || reply.status == 204, "{reply:?}");
    let reply = legacy_request(&url, &session, v, 7, "tools/list", json!({}));
    assert_eq!(reply.status, 404, "after DELETE: {reply:?}");
    assert_eq!(send("DELETE", &url, &legacy_headers(&session, v), None).status, 404);
}

/// Calls `log_message` at `level`; returns the tool's text and the notifications/message
/// the client received (on the POST's SSE stream).
fn log_at(url: &str, session: &str, id: u64, level: &str) -> (String, Vec<Value>) {
    let reply = call_tool(
        url,
        session,
        "2025-11-25",
        id,
        "log_message",
        json!({"level": level, "message": format!("msg {id}")}),
    );
    (text_of(&reply, id), reply.notifications("notifications/message"))
}

fn set_level(url: &str, session: &str, id: u64, level: &str) {
    let reply = legacy_request(
        url,
        session,
        "2025-11-25",
        id,
        "logging/setLevel",
        json!({"level": level}),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(answer(&reply, id)["result"], json!({}), "{reply:?}");
}

#[test]
fn logging_levels_belong_to_each_session() {
    let gateway = stdio_gateway();
    let url = gateway.url();
    let (a, _) = legacy_initialize(&url, "2025-11-25");
    let (b, _) = legacy_initialize(&url, "2025-11-25");
    assert_ne!(a, b);

    set_level(&url, &a, 1, "warning");
    // A's level does not leak to B: B still receives info.
    let (text, logs) = log_at(&url, &b, 2, "info");
    assert_eq!(text, "logged info");
    assert_eq!(logs.len(), 1, "B gets its info message: {logs:?}");
    assert_eq!(
        (&logs[0]["params"]["level"], &logs[0]["params"]["data"]),
        (&json!("info"), &json!("msg 2")),
        "{logs:?}"
    );

    set_level(&url, &b, 3, "debug");
    // B's setLevel does not lower A's: below warning is still suppressed for A.
    let (text, logs) = log_at(&url, &a, 4, "info");
    assert_eq!(text, "suppressed info");
    assert!(logs.is_empty(), "nothing below warning for A: {logs:?}");
    // At and above the level, A gets the message.
    for (id, level) in [(5, "warning"), (6, "error")] {
        let (text, logs) = log_at(&url, &a, id, level);
        assert_eq!(text, format!("logged {level}"));
        assert_eq!(logs.len(), 1, "{level}: {logs:?}");
        assert_eq!(logs[0]["params"]["level"], level, "{logs:?}");
        assert_eq!(logs[0]["params"]["logger"], "eragate-legacy-fixture", "{logs:?}");
    }
    let (text, logs) = log_at(&url, &b, 7, "debug");
    assert_eq!(text, "logged debug");
    assert_eq!(logs.len(), 1, "{logs:?}");

    // A raises its level further; B is unaffected.
    set_level(&url, &a, 8, "critical");
    assert_eq!(log_at(&url, &a, 9, "error").0, "suppressed error");
    assert_eq!(log_at(&url, &b, 10, "error").0, "logged error");

    for session in [&a, &b] {
        assert_eq!(
            send("DELETE", &url, &legacy_headers(session, "2025-11-25"), None).status,
            200
        );
    }
}

#[test]
fn sessions_through_an_http_upstream() {
    let upstream = LegacyHttpServer::start(&[]);
    let gateway = Eragate::http(&upstream.url, "");
    let url = gateway.url();
    let (a, result_a) = legacy_initialize(&url, "2025-06-18");
    let (b, result_b) = legacy_initialize(&url, "2025-11-25");
    assert_eq!(
        (&result_a["protocolVersion"], &result_b["protocolVersion"]),
        (&json!("2025-06-18"), &json!("2025-11-25"))
    );
    assert_eq!(result_a["serverInfo"]["name"], "eragate-legacy-fixture", "{result_a}");

    // Per-session log levels on the upstream's own HTTP sessions.
    let reply = legacy_request(&url, &a, "2025-06-18", 1, "logging/setLevel", json!({"level": "error"}));
    assert_eq!(answer(&reply, 1)["result"], json!({}), "{reply:?}");
    let reply = call_tool(&url, &a, "2025-06-18", 2, "log_message", json!({"level": "warning"}));
    assert_eq!(text_of(&reply, 2), "suppressed warning");
    assert!(reply.notifications("notifications/message").is_empty(), "{reply:?}");
    let reply = call_tool(
        &url,
        &a,
        "2025-06-18",
        3,
        "log_message",
        json!({"level": "critical", "message": "boom"}),
    );
    assert_eq!(text_of(&reply, 3), "logged critical");
    let logs = reply.notifications("notifications/message");
    assert_eq!(logs.len(), 1, "{reply:?}");
    assert_eq!(
        (&logs[0]["params"]["level"], &logs[0]["params"]["data"]),
        (&json!("critical"), &json!("boom")),
        "{logs:?}"
    );
    let (text, logs) = log_at(&url, &b, 4, "info");
    assert_eq!(text, "logged info", "B is not affected by A's level");
    assert_eq!(logs.len(), 1, "{logs:?}");

    // A legacy client's own progressToken comes back on its progress notifications.
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "slow_progress", "arguments": {"steps": 2}, "_meta": {"progressToken": 4242}}});
    let reply = send("POST", &url, &legacy_headers(&b, "2025-11-25"), Some(&body.to_string()));
    let progress = reply.notifications("notifications/progress");
    assert_eq!(progress.len(), 2, "{:?}", reply.messages());
    assert!(
        progress.iter().all(|p| p["params"]["progressToken"] == 4242),
        "{progress:?}"
    );
    assert_eq!(text_of(&reply, 5), "done");

    // Resource not found stays -32002.
    let gone = json!({"uri": "test://gone"});
    let reply = legacy_request(&url, &b, "2025-11-25", 6, "resources/read", gone);
    let message = answer(&reply, 6);
    assert_eq!(
        (&message["error"]["code"], &message["error"]["data"]["uri"]),
        (&json!(-32002), &json!("test://gone")),
        "{message}"
    );

    // Ending A leaves B alone.
    assert_eq!(
        send("DELETE", &url, &legacy_headers(&a, "2025-06-18"), None).status,
        200
    );
    let reply = legacy_request(&url, &a, "2025-06-18", 7, "tools/list", json!({}));
    assert_eq!(reply.status, 404, "a request on a DELETEd session: {reply:?}");
    let reply = call_tool(&url, &b, "2025-11-25", 8, "echo", json!({"text": "b"}));
    assert_eq!(text_of(&reply, 8), "echo: b");
}

/// A legacy Streamable HTTP upstream (the Python SDK) answers the era probe's
/// `server/discover` with an error whose `id` is `null`, on the POST that carried it: that
/// error is the probe's answer (the era is learned as legacy), not a stray response.
#[test]
fn a_null_id_error_answers_the_probe_of_a_legacy_http_upstream() {
    let upstream = LegacyHttpServer::start(&[]);
    let gateway = Eragate::http(&upstream.url, "");
    wait_until("the era to be learned", Duration::from_secs(20), || {
        gateway.log().contains("learned the upstream's era")
    });
    let log = without_colours(&gateway.log());
    let learned = log
        .lines()
        .find(|line| line.contains("learned the upstream's era"))
        .unwrap_or_default();
    assert!(learned.contains("era=Legacy"), "{learned}\n{log}");
    assert!(!log.contains("never sent"), "a warning at start:\n{log}");
}

/// `text` without its ANSI colour sequences (`ESC [ … m`), so fields read as `key=value`.
fn without_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            plain.push(c);
        }
    }
    plain
}

/// A dedicated upstream session opens its GET stream only when its client opens one: an idle
/// legacy client holds no upstream connection, and an attached one still gets what the
/// upstream sends outside any request.
#[test]
fn a_dedicated_sessions_upstream_stream_opens_with_the_clients() {
    // Counted at a traced upstream: no GET while the client has none, one once it opens its own.
    let upstream = TracedUpstream::start();
    let gateway = Eragate::http(&upstream.url, "");
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, "2025-06-18");
    let reply = call_tool(&url, &session, "2025-06-18", 1, "echo", json!({"text": "idle"}));
    assert_eq!(text_of(&reply, 1), "echo: idle");
    // The client's own upstream session (the warm pooled one has a GET stream of its own).
    let dedicated = upstream
        .posted("tools/call")
        .first()
        .and_then(|(headers, _)| headers["mcp-session-id"].as_str().map(str::to_owned))
        .expect("the call's upstream session id");
    let gets = |u: &TracedUpstream| {
        u.requests()
            .into_iter()
            .filter(|r| r.method == "GET" && r.headers["mcp-session-id"] == dedicated.as_str())
            .count()
    };
    assert_eq!(
        gets(&upstream),
        0,
        "an idle client's session opened a GET:\n{}",
        upstream.raw()
    );
    let _stream = open_legacy_stream(&url, &session, "2025-06-18", Duration::from_secs(10));
    upstream.wait_for("the session's GET stream", Duration::from_secs(10), |u| gets(u) == 1);

    // Delivered: server-everything's resource updates reach the client's GET stream.
    let everything = everything_server("streamableHttp");
    let gateway = Eragate::http(&everything.url, "");
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, "2025-06-18");
    let uri = "demo://resource/static/document/features.md";
    let subscribed = legacy_request(
        &url,
        &session,
        "2025-06-18",
        1,
        "resources/subscribe",
        json!({"uri": uri}),
    );
    assert!(answer(&subscribed, 1).get("result").is_some(), "{subscribed:?}");
    let stream = open_legacy_stream(&url, &session, "2025-06-18", Duration::from_secs(30));
    assert_eq!(stream.status().as_u16(), 200);
    let toggled = call_tool(&url, &session, "2025-06-18", 2, "toggle-subscriber-updates", json!({}));
    assert!(answer(&toggled, 2).get("result").is_some(), "{toggled:?}");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stream));
    let update = lines
        .by_ref()
        .map_while(Result::ok)
        .filter_map(|line| line.strip_prefix("data:").map(|d| d.trim().to_owned()))
        .filter_map(|data| serde_json::from_str::<Value>(&data).ok())
        .find(|m| m["method"] == "notifications/resources/updated");
    let update = update.unwrap_or_else(|| panic!("no resources/updated on the GET stream; log:\n{}", gateway.log()));
    assert_eq!(update["params"]["uri"], uri, "{update}");
}

/// A legacy client's `notifications/cancelled` toward a legacy upstream: the upstream gets it
/// (with its own id), eragate stops waiting at once (the admission slot is free again, long
/// before `request_timeout`), and the client gets no answer for the request it gave up on.
#[test]
fn a_cancelled_request_frees_its_slot_and_gets_no_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let events = dir.path().join("events.jsonl");
    let mut command = legacy_stdio_command();
    command.extend(["--events".to_owned(), events.display().to_string()]);
    let admin = format!("127.0.0.1:{}", free_port());
    let gateway = Eragate::start(&format!(
        "[admin]\naddress = \"{admin}\"\n{}",
        stdio_upstream_toml(&command, "request_timeout = \"60s\"", "")
    ));
    wait_until("the admin listener", Duration::from_secs(10), || {
        std::net::TcpStream::connect(&admin).is_ok()
    });
    let in_flight =
        || send("GET", &format!("http://{admin}/pools"), &[], None).json()["upstreams"][0]["in_flight"].clone();
    let seen = |event: &str| recorded_events(&events, event);
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, "2025-06-18");

    let hang = {
        let (url, session) = (url.clone(), session.clone());
        let arguments = json!({"name": "hang", "arguments": {}});
        std::thread::spawn(move || legacy_request(&url, &session, "2025-06-18", 7, "tools/call", arguments))
    };
    wait_until("hang to start upstream", Duration::from_secs(10), || {
        !seen("started").is_empty()
    });
    assert_eq!(in_flight(), 1);
    let ack = cancel_request_7(&url, &session, "2025-06-18");
    assert_eq!(ack.status, 202, "{ack:?}");

    // Freed now, not at the 60 s request_timeout.
    assert!(
        poll_until(Duration::from_secs(5), || in_flight() == 0),
        "the slot stayed taken"
    );
    let reply = hang.join().expect("hang thread");
    // 202 with no body (cancelled before the answer turned into a stream), or a stream that ends
    // without a response.
    let answered = !reply.body.trim().is_empty() && reply.messages().iter().any(|m| m.get("id").is_some());
    assert!(!answered, "a cancelled request gets no answer: {reply:?}");
    wait_until("the upstream to see the cancellation", Duration::from_secs(10), || {
        !seen("cancelled").is_empty()
    });
    assert_eq!(
        seen("cancelled")[0]["id"],
        seen("started")[0]["id"],
        "the upstream's own id"
    );

    // The session goes on.
    let reply = call_tool(&url, &session, "2025-06-18", 8, "echo", json!({"text": "after"}));
    assert_eq!(text_of(&reply, 8), "echo: after");
}

/// Three `tools/call`s with the same JSON-RPC id in flight at once on one
/// session (the spec forbids it; load tools and retries do it): each is
/// answered on its own POST with its own result, none with `202` and no body.
/// The two slow calls start first, so the quick one finishes while they run.
fn reused_ids_are_each_answered(gateway: &Eragate) {
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, "2025-11-25");
    let calls = [
        ("slow_progress", json!({"steps": 8}), "done"),
        ("slow_progress", json!({"steps": 4}), "done"),
        ("echo", json!({"text": "quick"}), "echo: quick"),
    ];
    let answers = std::thread::scope(|scope| {
        let handles: Vec<_> = calls
            .iter()
            .enumerate()
            .map(|(i, (tool, arguments, _))| {
                let (url, session) = (&url, &session);
                scope.spawn(move || {
                    std::thread::sleep(Duration::from_millis(60 * i as u64));
                    let params = json!({"name": tool, "arguments": arguments});
                    legacy_request(url, session, "2025-11-25", 1, "tools/call", params)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("caller"))
            .collect::<Vec<_>>()
    });
    for ((tool, _, expected), reply) in calls.iter().zip(&answers) {
        assert_eq!(reply.status, 200, "{tool}: {reply:?}\n{}", gateway.log());
        assert_eq!(text_of(reply, 1), *expected, "{tool}: {reply:?}");
    }
    // The session goes on, and the reused id is free again.
    let reply = call_tool(&url, &session, "2025-11-25", 1, "echo", json!({"text": "after"}));
    assert_eq!(text_of(&reply, 1), "echo: after");
}

#[test]
fn a_reused_request_id_is_answered_each_time_over_a_stdio_upstream() {
    reused_ids_are_each_answered(&stdio_gateway());
}

#[test]
fn a_reused_request_id_is_answered_each_time_over_an_http_upstream() {
    let upstream = LegacyHttpServer::start(&[]);
    reused_ids_are_each_answered(&Eragate::http(&upstream.url, ""));
}
