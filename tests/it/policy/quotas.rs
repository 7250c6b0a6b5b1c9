//! Issue 13, quotas between principals: the real binary in front of the legacy
//! fixture (`legacy_server.py`), two principals by bearer token.
//! - legacy client sessions with a stdio child each: one principal opening more
//!   sessions than there are children ends its own oldest, and another
//!   principal still gets children (before: 503 for everyone once one
//!   principal held `max_children`);
//! - pooled partitions: one principal's capability sets stay within its own
//!   quota instead of filling the upstream's table;
//! - calls suspended for a 2026-07-28 client's input: bounded per principal,
//!   and a retry that answers nothing cannot keep a call alive past
//!   `sessions.input_lifetime`;
//! - legacy sessions: bounded per principal (the principal's own oldest ends)
//!   and in all (the oldest of whoever holds the most ends);
//! - requests in flight: one principal past `limits.max_in_flight_per_principal`
//!   is refused (429, -32029) while another is served.

use crate::common;

use std::time::Duration;

use common::tokens::*;
use common::*;
use serde_json::{Value, json};

/// `[admin]` at `admin` and `[[auth.tokens]]` for alice and bob, then `extra`.
fn gateway(admin: &str, extra: &str) -> Eragate {
    Eragate::start(&format!("[admin]\naddress = \"{admin}\"\n\n{}{extra}", auth_toml()))
}

fn pools(admin: &str) -> Value {
    send("GET", &format!("http://{admin}/pools"), &[], None).json()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A legacy `initialize` (+ `notifications/initialized`) as `token`: the status and session id.
fn initialize_as(url: &str, token: &str) -> (u16, Option<String>, String) {
    let authorization = bearer(token);
    let mut headers = PLAIN.to_vec();
    headers.push(("authorization", &authorization));
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "quota-test", "version": "0"}}});
    let reply = send("POST", url, &headers, Some(&body.to_string()));
    let Some(session) = reply.header("mcp-session-id").map(str::to_owned) else {
        return (reply.status, None, reply.body);
    };
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let mut headers = legacy_headers(&session, "2025-06-18");
    headers.push(("authorization", &authorization));
    send("POST", url, &headers, Some(&initialized));
    (reply.status, Some(session), reply.body)
}

/// `echo` on a legacy session as `token`: the status and the echoed text (if any).
fn echo_on(url: &str, session: &str, token: &str) -> (u16, String) {
    let authorization = bearer(token);
    let mut headers = legacy_headers(session, "2025-06-18");
    headers.push(("authorization", &authorization));
    let body = request_body(1, "tools/call", json!({"name": "echo", "arguments": {"text": "q"}}));
    let reply = send("POST", url, &headers, Some(&body));
    let text = match reply.status {
        200 => answer(&reply, 1)["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        _ => reply.body.clone(),
    };
    (reply.status, text)
}

#[test]
fn one_principal_cannot_take_every_child_from_another() {
    let admin = format!("127.0.0.1:{}", free_port());
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "max_children = 4");
    let gateway = gateway(&admin, &upstream);
    let url = gateway.url();
    let mut problems = Vec::new();
    // Alice opens more sessions than there are children: her oldest give way to her newest.
    let mut alice = Vec::new();
    for i in 0..6 {
        match initialize_as(&url, ALICE) {
            (200, Some(session), _) => alice.push(session),
            (status, _, body) => problems.push(format!("alice's session {i}: {status} {body}")),
        }
    }
    // Bob still gets children of his own.
    let mut bob = Vec::new();
    for i in 0..2 {
        match initialize_as(&url, BOB) {
            (200, Some(session), _) => bob.push(session),
            (status, _, body) => problems.push(format!("bob's session {i}: {status} {body}")),
        }
    }
    for session in &bob {
        let (status, text) = echo_on(&url, session, BOB);
        if (status, text.as_str()) != (200, "echo: q") {
            problems.push(format!("bob's session: {status} {text}"));
        }
    }
    if let Some(newest) = alice.last() {
        let (status, text) = echo_on(&url, newest, ALICE);
        if (status, text.as_str()) != (200, "echo: q") {
            problems.push(format!("alice's newest session: {status} {text}"));
        }
    }
    if let Some(oldest) = alice.first() {
        let (status, _) = echo_on(&url, oldest, ALICE);
        if status != 404 {
            problems.push(format!(
                "alice's oldest session was not ended for her newer ones: {status}"
            ));
        }
    }
    assert_no_problems(&problems, &[("gateway", gateway.log())]);
    let _ = pools(&admin);
}

/// Legacy sessions past `sessions.max_sessions_per_principal`: the principal's own
/// least recently used ends; past `sessions.max_sessions`, the least recently used
/// of whoever holds the most. (The store counts sessions as they come and go, and
/// walks them only when a bound is reached.)
#[test]
fn sessions_are_bounded_per_principal_and_in_all() {
    let admin = format!("127.0.0.1:{}", free_port());
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let sessions = "\n[sessions]\nmax_sessions = 3\nmax_sessions_per_principal = 2\n";
    let gateway = gateway(&admin, &format!("{upstream}{sessions}"));
    let url = gateway.url();
    let mut problems = Vec::new();
    let open = |who: &str, token: &str, i: usize, problems: &mut Vec<String>| match initialize_as(&url, token) {
        (200, Some(session), _) => Some(session),
        (status, _, body) => {
            problems.push(format!("{who}'s session {i}: {status} {body}"));
            None
        }
    };
    // Alice's third session ends her first.
    let alice: Vec<_> = (0..3).map(|i| open("alice", ALICE, i, &mut problems)).collect();
    // Bob's first fits (3 in all); his second ends the least recently used of
    // alice's, who holds the most.
    let bob: Vec<_> = (0..2).map(|i| open("bob", BOB, i, &mut problems)).collect();
    // (whose, session, token, status expected of an echo on it)
    let expected = [
        ("alice's first", &alice[0], ALICE, 404),
        ("alice's second", &alice[1], ALICE, 404),
        ("alice's third", &alice[2], ALICE, 200),
        ("bob's first", &bob[0], BOB, 200),
        ("bob's second", &bob[1], BOB, 200),
    ];
    for (what, session, token, status) in expected {
        let Some(session) = session else { continue };
        let (got, text) = echo_on(&url, session, token);
        if got != status {
            problems.push(format!("{what}: {got} {text}, expected {status}"));
        }
    }
    // Ended sessions give their places back: alice may open another, which ends
    // nobody but whoever holds the most in all (bob, 2) and not her third.
    if open("alice", ALICE, 3, &mut problems).is_some() {
        let (got, _) = echo_on(&url, alice[2].as_deref().unwrap_or(""), ALICE);
        if got != 200 {
            problems.push(format!("alice's third after her fourth: {got}, expected 200"));
        }
    }
    assert_no_problems(&problems, &[("gateway", gateway.log())]);
}

/// The 2026-07-28 client capabilities of profile `n` (25 distinct ones toward a 2025-11-25
/// upstream, by defined members and flags only).
fn capabilities(n: usize) -> Value {
    let flags = |k: usize, a: &str, b: &str| match k {
        0 => None,
        1 => Some(json!({})),
        2 => Some(json!({a: {}})),
        3 => Some(json!({b: {}})),
        _ => Some(json!({a: {}, b: {}})),
    };
    let mut capabilities = serde_json::Map::new();
    if let Some(sampling) = flags(n % 5, "context", "tools") {
        capabilities.insert("sampling".into(), sampling);
    }
    if let Some(elicitation) = flags(n / 5 % 5, "form", "url") {
        capabilities.insert("elicitation".into(), elicitation);
    }
    Value::Object(capabilities)
}

/// A 2026-07-28 `tools/call echo` as `token` with `capabilities`: the status and text.
fn modern_echo(url: &str, id: u64, token: &str, capabilities: &Value) -> (u16, String) {
    let authorization = bearer(token);
    let mut headers = modern_headers("tools/call", Some("echo"));
    headers.push(("authorization", &authorization));
    let params = json!({"name": "echo", "arguments": {"text": "p"},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": capabilities}});
    let reply = send("POST", url, &headers, Some(&modern_body(id, "tools/call", params)));
    let text = match reply.status {
        200 => answer(&reply, id)["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        _ => reply.body.clone(),
    };
    (reply.status, text)
}

#[test]
fn one_principals_capability_sets_stay_within_its_own_partitions() {
    let admin = format!("127.0.0.1:{}", free_port());
    let gateway = gateway(&admin, &stdio_upstream_toml(&legacy_stdio_command(), "", ""));
    let url = gateway.url();
    let mut problems = Vec::new();
    let (status, text) = modern_echo(&url, 1, BOB, &capabilities(0));
    if (status, text.as_str()) != (200, "echo: p") {
        problems.push(format!("bob's first call: {status} {text}"));
    }
    // Alice uses 12 capability sets; her quota is 8 partitions (pool.max_partitions_per_principal).
    for n in 0..12 {
        let (status, text) = modern_echo(&url, 10 + n as u64, ALICE, &capabilities(n));
        if (status, text.as_str()) != (200, "echo: p") {
            problems.push(format!("alice's call with profile {n}: {status} {text}"));
        }
    }
    let partitions = pools(&admin)["upstreams"][0]["partitions"].as_u64().unwrap_or(0);
    // At most alice's 8, bob's one, and the warm-up's.
    if partitions > 10 {
        problems.push(format!(
            "{partitions} partitions: alice's were not bounded by her own quota"
        ));
    }
    let (status, text) = modern_echo(&url, 2, BOB, &capabilities(0));
    if (status, text.as_str()) != (200, "echo: p") {
        problems.push(format!("bob's call after alice's: {status} {text}"));
    }
    assert_no_problems(&problems, &[("gateway", gateway.log())]);
}

/// A 2026-07-28 `tools/call ask_elicitation` (the `--mrtr` fixture) as `token`, or its retry.
fn ask_elicitation(url: &str, id: u64, token: &str, retry: Option<&str>) -> Value {
    let authorization = bearer(token);
    let mut headers = modern_headers("tools/call", Some("ask_elicitation"));
    headers.push(("authorization", &authorization));
    let mut params = json!({"name": "ask_elicitation", "arguments": {},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}});
    if let Some(state) = retry {
        params["inputResponses"] = json!({});
        params["requestState"] = json!(state);
    }
    let reply = send("POST", url, &headers, Some(&modern_body(id, "tools/call", params)));
    answer(&reply, id)
}

fn request_state(answer: &Value) -> Option<String> {
    (answer["result"]["resultType"] == "input_required")
        .then(|| answer["result"]["requestState"].as_str().map(str::to_owned))
        .flatten()
}

/// Suspended calls hold a child each: the share of children is raised past the
/// suspended-call quota, so that the quota is what these tests meet.
fn mrtr_gateway(admin: &str, sessions: &str) -> Eragate {
    let mut command = legacy_stdio_command();
    command.push("--mrtr".into());
    let share = "[upstreams.pool]\nmax_children_per_principal = 24\n";
    gateway(
        admin,
        &format!("{sessions}\n{}", stdio_upstream_toml(&command, share, "")),
    )
}

#[test]
fn suspended_calls_are_bounded_per_principal() {
    let admin = format!("127.0.0.1:{}", free_port());
    let gateway = mrtr_gateway(&admin, "");
    let url = gateway.url();
    let mut problems = Vec::new();
    // The default quota is 20 suspended calls a principal.
    for id in 1..=20 {
        let answer = ask_elicitation(&url, id, ALICE, None);
        if request_state(&answer).is_none() {
            problems.push(format!("alice's call {id} was not suspended: {answer}"));
        }
    }
    let refused = ask_elicitation(&url, 21, ALICE, None);
    let message = refused["error"]["message"].as_str().unwrap_or("");
    if refused["error"]["code"] != -32603 || !message.contains("waiting for client input") {
        problems.push(format!("alice's 21st call: {refused}"));
    }
    let bobs = ask_elicitation(&url, 22, BOB, None);
    if request_state(&bobs).is_none() {
        problems.push(format!("bob's call was not suspended: {bobs}"));
    }
    let suspended = pools(&admin)["suspended_calls"].as_u64();
    if suspended != Some(21) {
        problems.push(format!(
            "suspended calls: {suspended:?} (expected alice's 20 and bob's one)"
        ));
    }
    assert_no_problems(&problems, &[("gateway", gateway.log())]);
}

#[test]
fn a_retry_that_answers_nothing_cannot_keep_a_call_alive() {
    let admin = format!("127.0.0.1:{}", free_port());
    let gateway = mrtr_gateway(&admin, "[sessions]\ninput_expiry = \"2s\"\ninput_lifetime = \"3s\"\n");
    let url = gateway.url();
    let first = ask_elicitation(&url, 1, ALICE, None);
    let mut state = request_state(&first).unwrap_or_else(|| panic!("not suspended: {first}"));
    // Each retry answers nothing and is asked again; before, each one renewed the expiry.
    let mut last = Value::Null;
    let ended = poll_until(Duration::from_secs(30), || {
        std::thread::sleep(Duration::from_millis(400));
        last = ask_elicitation(&url, 2, ALICE, Some(&state));
        match request_state(&last) {
            Some(next) => {
                state = next;
                false
            }
            None => true,
        }
    });
    assert!(
        ended,
        "the call was still asked again after 30 s: {last}\n{}",
        gateway.log()
    );
    assert_eq!(last["error"]["code"], -32602, "{last}");
    let message = last["error"]["message"].as_str().unwrap_or("");
    assert!(message.starts_with("requestState "), "{last}");
    wait_until("the expired call to be gone", Duration::from_secs(10), || {
        pools(&admin)["suspended_calls"] == 0
    });
}

/// A 2026-07-28 `subscriptions/listen` as `token`: the live response (its SSE body unread).
fn open_listen(url: &str, id: u64, token: &str) -> reqwest::blocking::Response {
    let authorization = bearer(token);
    send_listen(
        url,
        id,
        json!({"toolsListChanged": true}),
        &[("authorization", &authorization)],
        Duration::from_secs(60),
    )
}

#[test]
fn listens_are_bounded_per_principal_on_a_legacy_upstream() {
    let admin = format!("127.0.0.1:{}", free_port());
    let gateway = gateway(&admin, &stdio_upstream_toml(&legacy_stdio_command(), "", ""));
    let url = gateway.url();
    let mut problems = Vec::new();
    // The default quota is 16 listens a principal; they stay open while held here.
    let mut open = Vec::new();
    for id in 1..=16 {
        let response = open_listen(&url, id, ALICE);
        if response.status() != 200 {
            problems.push(format!("alice's listen {id}: {}", response.status()));
        }
        open.push(response);
    }
    let refused = open_listen(&url, 17, ALICE);
    let status = refused.status().as_u16();
    let body: Value = serde_json::from_str(&refused.text().unwrap_or_default()).unwrap_or(Value::Null);
    if status != 429 || body["error"]["code"] != -32029 || body["error"]["data"]["limit"] != "listens" {
        problems.push(format!("alice's 17th listen: {status} {body}"));
    }
    let bobs = open_listen(&url, 18, BOB);
    if bobs.status() != 200 {
        problems.push(format!("bob's listen: {}", bobs.status()));
    }
    // Closing one gives alice room again.
    open.pop();
    let again = poll_until(Duration::from_secs(10), || open_listen(&url, 19, ALICE).status() == 200);
    if !again {
        problems.push("alice got no room back after closing a listen".into());
    }
    assert_no_problems(&problems, &[("gateway", gateway.log())]);
}

#[test]
fn listens_on_a_modern_upstream_hold_no_admission_slot() {
    let upstream = LegacyHttpServer::start(&["--dual-era", "--subscriptions"]);
    let admin = format!("127.0.0.1:{}", free_port());
    let gateway = gateway(
        &admin,
        &remote_upstream_toml(
            "http",
            &upstream.url,
            "max_in_flight = 2\n[upstreams.pool]\nqueue_timeout = \"1s\"",
        ),
    );
    let url = gateway.url();
    let mut problems = Vec::new();
    let mut open = Vec::new();
    for id in 1..=3 {
        let response = open_listen(&url, id, ALICE);
        if response.status() != 200 {
            problems.push(format!("listen {id}: {}", response.status()));
        }
        open.push(response);
    }
    let (status, text) = modern_echo(&url, 9, BOB, &json!({}));
    if (status, text.as_str()) != (200, "echo: p") {
        problems.push(format!(
            "a call beside three listens with max_in_flight = 2: {status} {text}"
        ));
    }
    let in_flight = pools(&admin)["upstreams"][0]["in_flight"].as_u64();
    if in_flight != Some(0) {
        problems.push(format!("in flight with only listens open: {in_flight:?}"));
    }
    assert_no_problems(&problems, &[("gateway", gateway.log())]);
}

#[test]
fn a_legacy_clients_disconnect_cancels_its_call_upstream() {
    use std::io::Write;
    let events = tempfile::NamedTempFile::new().expect("events file");
    let events_path = events.path().display().to_string();
    let mut command = legacy_stdio_command();
    command.extend(["--events".to_owned(), events_path.clone()]);
    let admin = format!("127.0.0.1:{}", free_port());
    let gateway = gateway(&admin, &stdio_upstream_toml(&command, "", ""));
    let url = gateway.url();
    let (status, session, body) = initialize_as(&url, ALICE);
    let session = session.unwrap_or_else(|| panic!("initialize: {status} {body}"));
    let read_events = || std::fs::read_to_string(&events_path).unwrap_or_default();
    // `hang` never answers; the client goes away while it runs.
    let mut stream = std::net::TcpStream::connect(gateway.addr).expect("connect");
    let body = request_body(7, "tools/call", json!({"name": "hang", "arguments": {}}));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Authorization: Bearer {ALICE}\r\nMcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-06-18\r\n\
         Content-Length: {}\r\n\r\n{body}",
        gateway.addr,
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("write");
    wait_until("hang to start upstream", Duration::from_secs(30), || {
        read_events().contains("\"started\"")
    });
    drop(stream);
    let cancelled = poll_until(Duration::from_secs(20), || read_events().contains("\"cancelled\""));
    assert!(
        cancelled,
        "the upstream call outlived its client: events {}\n{}",
        read_events(),
        gateway.log()
    );
    // The session goes on.
    let (status, text) = echo_on(&url, &session, ALICE);
    assert_eq!((status, text.as_str()), (200, "echo: q"));
}

/// A 2026-07-28 `tools/call hang` as `token` on a raw connection: the call stays
/// in flight while the returned socket is open.
fn hang_in_flight(gateway: &Eragate, id: u64, token: &str) -> std::net::TcpStream {
    use std::io::Write;
    let body = modern_body(id, "tools/call", json!({"name": "hang", "arguments": {}}));
    let mut request = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n", gateway.addr);
    for (name, value) in modern_headers("tools/call", Some("hang")) {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "Authorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    let mut stream = std::net::TcpStream::connect(gateway.addr).expect("connect");
    stream.write_all(request.as_bytes()).expect("write");
    stream
}

#[test]
fn requests_in_flight_are_bounded_per_principal() {
    let events = tempfile::NamedTempFile::new().expect("events file");
    let events_path = events.path().display().to_string();
    let mut command = legacy_stdio_command();
    command.extend(["--events".to_owned(), events_path.clone()]);
    let admin = format!("127.0.0.1:{}", free_port());
    let limits = "[limits]\nmax_in_flight_per_principal = 2\n";
    let gateway = gateway(&admin, &format!("{limits}\n{}", stdio_upstream_toml(&command, "", "")));
    let url = gateway.url();
    let started = || {
        std::fs::read_to_string(&events_path)
            .unwrap_or_default()
            .matches("\"started\"")
            .count()
    };
    // Alice's two calls that never answer fill her quota.
    let first = hang_in_flight(&gateway, 1, ALICE);
    let _second = hang_in_flight(&gateway, 2, ALICE);
    wait_until("both hangs to start upstream", Duration::from_secs(30), || {
        started() == 2
    });
    let mut problems = Vec::new();
    let authorization = bearer(ALICE);
    let mut headers = modern_headers("tools/call", Some("echo"));
    headers.push(("authorization", &authorization));
    let params = json!({"name": "echo", "arguments": {"text": "p"}});
    let refused = send("POST", &url, &headers, Some(&modern_body(3, "tools/call", params)));
    let body: Value = serde_json::from_str(&refused.body).unwrap_or_default();
    if refused.status != 429
        || body["error"]["code"] != -32029
        || body["error"]["data"]["limit"] != "requests in flight"
        || body["error"]["data"]["max"] != 2
    {
        problems.push(format!(
            "alice's third call in flight: {} {}",
            refused.status, refused.body
        ));
    }
    // Bob is not held back by Alice's calls.
    let (status, text) = modern_echo(&url, 4, BOB, &json!({}));
    if (status, text.as_str()) != (200, "echo: p") {
        problems.push(format!("bob's call beside alice's two: {status} {text}"));
    }
    // A call that ends (its client goes away) gives its place back.
    drop(first);
    let again = poll_until(Duration::from_secs(20), || {
        modern_echo(&url, 5, ALICE, &json!({})).0 == 200
    });
    if !again {
        problems.push("alice got no place back after one of her calls ended".into());
    }
    assert_no_problems(&problems, &[("gateway", gateway.log())]);
}

/// A GET of the HTTP+SSE endpoint as `token`, kept open by the caller.
fn open_sse_stream(gateway: &Eragate, token: &str) -> reqwest::blocking::Response {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
        .get(format!("http://{}/mcp/sse", gateway.addr))
        .header("accept", "text/event-stream")
        .header("authorization", bearer(token))
        .send()
        .expect("GET /mcp/sse")
}

/// HTTP+SSE streams: a principal's share is bounded (before, 300 streams one
/// principal opened without posting made another's call hang), another
/// principal is still served on that transport by the Python SDK, and a
/// stream nobody posts to is closed (before, it stayed open for ever).
#[test]
fn http_sse_streams_are_a_bounded_share_and_close_when_unused() {
    let admin = format!("127.0.0.1:{}", free_port());
    let limits = "\n[limits]\nmax_sse_streams_per_principal = 3\nsse_first_post_timeout = \"2s\"\n";
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let gateway = gateway(&admin, &format!("{upstream}{limits}"));
    let mut problems = Vec::new();
    let mut alice: Vec<_> = (0..3).map(|_| open_sse_stream(&gateway, ALICE)).collect();
    let statuses: Vec<u16> = alice.iter().map(|s| s.status().as_u16()).collect();
    if statuses != [200, 200, 200] {
        problems.push(format!("alice's three streams: {statuses:?}"));
    }
    let fourth = open_sse_stream(&gateway, ALICE);
    let fourth_status = fourth.status().as_u16();
    let fourth_body = fourth.text().unwrap_or_default();
    if fourth_status != 429 || !fourth_body.contains("-32029") {
        problems.push(format!("alice's fourth stream: {fourth_status} {fourth_body}"));
    }
    // Bob, on the same transport, while alice holds her share.
    let sse_url = format!("http://{}/mcp/sse", gateway.addr);
    let authorization = format!("Authorization: {}", bearer(BOB));
    match py_client(&["--sse", &sse_url, "--header", &authorization, "--scenario", "tools"]) {
        Ok(summary) if summary["results"]["call_echo"]["text"] == json!("echo: hi") => {}
        Ok(summary) => problems.push(format!("bob over HTTP+SSE: {summary}")),
        Err(error) => problems.push(format!("bob over HTTP+SSE: {error}")),
    }
    // Nobody posts to alice's streams: each ends (its body reads to the end).
    let stream = alice.remove(0);
    match stream.text() {
        Ok(body) if body.contains("event: endpoint") => {}
        Ok(body) => problems.push(format!(
            "alice's unused stream ended without its endpoint event: {body}"
        )),
        Err(error) => problems.push(format!("alice's unused stream was not closed: {error}")),
    }
    // Her share came back with her streams.
    wait_until("alice's share given back", Duration::from_secs(10), || {
        open_sse_stream(&gateway, ALICE).status().as_u16() == 200
    });
    assert_no_problems(&problems, &[("eragate", gateway.log())]);
}

/// Issue 34, item 1: every upstream session a principal causes counts against one share
/// of the upstream's children (`pool.max_children_per_principal`). Alice floods 2026-07-28
/// calls that must each be alone on a child (they declare `elicitation`) to a tool that
/// never returns: she holds her share and no more, her other calls are refused with
/// 429/-32029, and bob's 2026-07-28 call and new legacy session are still served. Before
/// the share, alice's calls took every child and bob got 503 "at capacity".
#[test]
fn one_principal_cannot_take_every_child_with_calls_of_its_own() {
    let admin = format!("127.0.0.1:{}", free_port());
    let share = "[upstreams.pool]\nmax_children_per_principal = 3\n";
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), share, "max_children = 8");
    let gateway = gateway(&admin, &upstream);
    let url = gateway.url();
    let mut problems = Vec::new();
    let asks = json!({"elicitation": {}});
    // Alice's calls, each on a thread of its own: an admitted one reports its status as soon
    // as its answer starts (a stream, as it may ask for input), then hangs until eragate stops.
    let (done_tx, done) = std::sync::mpsc::channel();
    let floods = 10;
    for id in 0..floods {
        let (url, done_tx) = (url.clone(), done_tx.clone());
        let params = json!({"name": "hang", "arguments": {},
            "_meta": {"io.modelcontextprotocol/clientCapabilities": asks}});
        std::thread::spawn(move || {
            let client = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(300))
                .build()
                .expect("client");
            let mut request = client
                .post(&url)
                .header("authorization", bearer(ALICE))
                .body(modern_body(id, "tools/call", params));
            for (name, value) in modern_headers("tools/call", Some("hang")) {
                request = request.header(name, value);
            }
            let Ok(response) = request.send() else {
                let _ = done_tx.send(None);
                return;
            };
            let status = response.status().as_u16();
            let streamed = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            if status == 200 && streamed {
                let _ = done_tx.send(Some((status, "a stream".to_owned())));
                let _ = response.text();
            } else {
                let _ = done_tx.send(Some((status, response.text().unwrap_or_default())));
            }
        });
    }
    // Children start one at a time: wait until every call of alice's is refused or
    // streaming (held on a child). Without a share the calls past the children would
    // wait for one, and this would time out.
    let (mut refused, mut streaming) = (0u64, 0u64);
    let settled = poll_until(Duration::from_secs(120), || {
        while let Ok(answered) = done.try_recv() {
            match answered {
                Some((429, body)) if body.contains("-32029") && body.contains("max_children_per_principal") => {
                    refused += 1
                }
                Some((200, body)) if body == "a stream" => streaming += 1,
                other => problems.push(format!("alice's call: {other:?}")),
            }
        }
        refused + streaming + problems.len() as u64 == floods
    });
    if !settled || (refused, streaming) != (floods - 3, 3) {
        problems.push(format!(
            "{refused} of alice's {floods} calls refused and {streaming} streaming, expected {} and 3",
            floods - 3
        ));
    }
    // Bob is served: a call that must be alone on a child, and a legacy session of his own.
    let (status, text) = modern_echo(&url, 1, BOB, &asks);
    if (status, text.as_str()) != (200, "echo: p") {
        problems.push(format!("bob's 2026-07-28 call while alice floods: {status} {text}"));
    }
    match initialize_as(&url, BOB) {
        (200, Some(session), _) => {
            let (status, text) = echo_on(&url, &session, BOB);
            if (status, text.as_str()) != (200, "echo: q") {
                problems.push(format!("bob's legacy session while alice floods: {status} {text}"));
            }
        }
        (status, _, body) => problems.push(format!("bob's legacy initialize while alice floods: {status} {body}")),
    }
    assert_no_problems(&problems, &[("gateway", gateway.log())]);
}
