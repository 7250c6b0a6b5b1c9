//! Bearer-token authentication (`[[auth.tokens]]`), with real peers:
//! - no token, a wrong token or another scheme → 401 with an RFC 6750 challenge, health
//!   endpoints stay open; the Python and TypeScript SDK clients with a token get through;
//! - a legacy session (Streamable HTTP and HTTP+SSE) belongs to the principal that opened it:
//!   another principal using its id finds nothing (404), the owner goes on;
//! - pooled upstream sessions are never shared across principals (counted `initialize`s);
//! - a `requestState` retried by another principal is refused and the call stays for its owner;
//! - the upstream never sees a client's `Authorization` header.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::Duration;

use common::tokens::*;
use common::*;
use serde_json::{Value, json};

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// `headers` plus `Authorization: Bearer <token>`.
fn with_token<'a>(headers: &[(&'a str, &'a str)], authorization: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut headers = headers.to_vec();
    headers.push(("authorization", authorization));
    headers
}

/// A legacy `initialize` + `notifications/initialized` as `token`; the session id.
fn initialize_as(url: &str, token: &str) -> String {
    let authorization = bearer(token);
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "auth-test", "version": "0"}}});
    let reply = send(
        "POST",
        url,
        &with_token(&PLAIN, &authorization),
        Some(&body.to_string()),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let session = reply.header("mcp-session-id").expect("session id").to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let headers = with_token(&legacy_headers(&session, "2025-06-18"), &authorization);
    assert_eq!(send("POST", url, &headers, Some(&initialized)).status, 202);
    session
}

/// A `tools/call echo` on `session` as `token`.
fn echo_on_session(url: &str, session: &str, token: &str, id: u64, text: &str) -> Reply {
    let authorization = bearer(token);
    let headers = with_token(&legacy_headers(session, "2025-06-18"), &authorization);
    let body = request_body(id, "tools/call", json!({"name": "echo", "arguments": {"text": text}}));
    send("POST", url, &headers, Some(&body))
}

/// A modern `tools/call` as `token` with `capabilities` and extra params.
fn modern_as(url: &str, token: &str, id: u64, tool: &str, params: Value, capabilities: Value) -> Value {
    let mut params = params;
    params["name"] = json!(tool);
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": capabilities});
    let authorization = bearer(token);
    let headers = with_token(&modern_headers("tools/call", Some(tool)), &authorization);
    let reply = send("POST", url, &headers, Some(&modern_body(id, "tools/call", params)));
    assert_eq!(reply.status, 200, "{reply:?}");
    answer(&reply, id)
}

#[test]
fn requests_without_a_valid_token_get_401_and_a_challenge() {
    let gateway = Eragate::start(&format!(
        "{}\n{}",
        auth_toml(),
        stdio_upstream_toml(&legacy_stdio_command(), "", "")
    ));
    let url = gateway.url();
    let body = modern_body(1, "tools/list", json!({}));
    let cases: [(Option<&str>, &str); 4] = [
        (None, r#"Bearer realm="eragate""#),
        (
            Some("Bearer not-a-token"),
            r#"Bearer realm="eragate", error="invalid_token""#,
        ),
        (
            Some("Basic YWxpY2U6eA=="),
            r#"Bearer realm="eragate", error="invalid_token""#,
        ),
        (Some("Bearer "), r#"Bearer realm="eragate", error="invalid_token""#),
    ];
    for (authorization, challenge) in cases {
        let mut headers = modern_headers("tools/list", None);
        if let Some(authorization) = authorization {
            headers.push(("authorization", authorization));
        }
        let reply = send("POST", &url, &headers, Some(&body));
        assert_eq!(reply.status, 401, "{authorization:?}: {reply:?}");
        assert_eq!(reply.header("www-authenticate"), Some(challenge), "{reply:?}");
        let error = &reply.json()["error"];
        assert_eq!(error["code"], -32600, "{reply:?}");
        assert!(
            error["message"].as_str().unwrap_or("").starts_with("Unauthorized"),
            "{reply:?}"
        );
        // GET and DELETE too, before anything else is looked at.
        let get = send("GET", &url, &[("accept", "text/event-stream")], None);
        assert_eq!(get.status, 401, "{get:?}");
    }
    // Health endpoints are for load balancers: no token.
    assert_eq!(
        send("GET", &format!("http://{}/healthz", gateway.addr), &[], None).status,
        200
    );

    // A valid token (scheme in any case) gets through.
    let authorization = "bEaReR ".to_owned() + ALICE;
    let reply = send(
        "POST",
        &url,
        &with_token(&modern_headers("tools/list", None), &authorization),
        Some(&body),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(answer(&reply, 1)["result"]["tools"].is_array(), "{reply:?}");
}

#[test]
fn sdk_clients_with_a_token_get_through_and_without_one_do_not() {
    let gateway = Eragate::start(&format!(
        "{}\n{}",
        auth_toml(),
        stdio_upstream_toml(&legacy_stdio_command(), "", "")
    ));
    let url = gateway.url();
    let header = format!("Authorization: Bearer {ALICE}");
    for mode in ["2026-07-28", "legacy"] {
        let report = py_client(&[
            "--mode",
            mode,
            "--url",
            &url,
            "--scenario",
            "tools",
            "--header",
            &header,
        ])
        .unwrap_or_else(|e| panic!("python {mode}: {e}"));
        assert_eq!(report["results"]["call_echo"]["text"], "echo: hi", "{report:#}");
    }
    let report = ts_client(&["--url", &url, "--scenario", "tools", "--header", &header]).expect("typescript");
    assert_eq!(report["results"]["call_echo"]["text"], "echo: hi", "{report:#}");
    for mode in ["2026-07-28", "legacy"] {
        let refused = py_client(&["--mode", mode, "--url", &url, "--scenario", "tools"]);
        let error = refused.expect_err("a client without a token must be refused");
        assert!(
            error.contains("401") || error.to_lowercase().contains("unauthorized"),
            "{mode}: {error}"
        );
    }
    let refused = ts_client(&[
        "--url",
        &url,
        "--scenario",
        "tools",
        "--header",
        "Authorization: Bearer wrong",
    ]);
    assert!(refused.is_err(), "a wrong token must be refused: {refused:?}");
}

#[test]
fn sessions_and_pooled_upstream_sessions_belong_to_one_principal() {
    let upstream = TracedUpstream::start();
    let gateway = Eragate::start(&format!(
        "{}\n{}",
        auth_toml(),
        remote_upstream_toml("http", &upstream.url, "")
    ));
    let url = gateway.url();

    // Alice's legacy session: hers only. Bob holding its id finds nothing, for any method.
    let session = initialize_as(&url, ALICE);
    let reply = echo_on_session(&url, &session, ALICE, 1, "mine");
    assert_eq!(
        answer(&reply, 1)["result"]["content"][0]["text"],
        "echo: mine",
        "{reply:?}"
    );
    let stolen = echo_on_session(&url, &session, BOB, 2, "stolen");
    assert_eq!(stolen.status, 404, "{stolen:?}");
    let bob = bearer(BOB);
    let get = send(
        "GET",
        &url,
        &with_token(
            &[
                ("accept", "text/event-stream"),
                ("mcp-session-id", &session),
                ("mcp-protocol-version", "2025-06-18"),
            ],
            &bob,
        ),
        None,
    );
    assert_eq!(get.status, 404, "{get:?}");
    let delete = send(
        "DELETE",
        &url,
        &with_token(
            &[("mcp-session-id", &session), ("mcp-protocol-version", "2025-06-18")],
            &bob,
        ),
        None,
    );
    assert_eq!(delete.status, 404, "{delete:?}");
    // Still alive for alice.
    let reply = echo_on_session(&url, &session, ALICE, 3, "still mine");
    assert_eq!(
        answer(&reply, 3)["result"]["content"][0]["text"],
        "echo: still mine",
        "{reply:?}"
    );

    // Modern calls: one warm upstream session per principal, reused, never shared.
    let before = upstream.posted_bodies("initialize").len();
    for (i, token) in [ALICE, BOB, ALICE, BOB, ALICE].into_iter().enumerate() {
        let answer = modern_as(
            &url,
            token,
            10 + i as u64,
            "echo",
            json!({"arguments": {"text": "x"}}),
            json!({}),
        );
        assert_eq!(answer["result"]["content"][0]["text"], "echo: x", "{answer:#}");
    }
    let opened = upstream.posted_bodies("initialize").len() - before;
    assert_eq!(
        opened,
        2,
        "one pooled session for alice, one for bob:\n{}",
        upstream.raw()
    );

    // No client token ever reaches the upstream.
    let requests = upstream.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        assert!(
            request.headers.get("authorization").is_none(),
            "a client's Authorization header reached the upstream: {request:?}"
        );
    }
}

#[test]
fn an_http_sse_stream_takes_posts_only_from_its_principal() {
    let gateway = Eragate::start(&format!(
        "{}\n{}",
        auth_toml(),
        stdio_upstream_toml(&legacy_stdio_command(), "", "")
    ));
    let sse_url = format!("http://{}/mcp/sse", gateway.addr);
    let stream = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
        .get(&sse_url)
        .header("accept", "text/event-stream")
        .header("authorization", bearer(ALICE))
        .send()
        .expect("GET /sse");
    assert_eq!(stream.status(), 200);
    let mut lines = BufReader::new(stream).lines();
    let endpoint = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("data: ").map(str::to_owned))
        .expect("endpoint event");
    let messages_url = format!("http://{}{}", gateway.addr, endpoint);
    let ping = request_body(1, "ping", json!({}));
    let bob = bearer(BOB);
    let refused = send("POST", &messages_url, &with_token(&PLAIN, &bob), Some(&ping));
    assert_eq!(refused.status, 404, "{refused:?}");
    let anonymous = send("POST", &messages_url, &PLAIN, Some(&ping));
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    let alice = bearer(ALICE);
    let accepted = send("POST", &messages_url, &with_token(&PLAIN, &alice), Some(&ping));
    assert_eq!(accepted.status, 202, "{accepted:?}");
    // Only alice's ping is answered on the stream.
    let answered = lines
        .map_while(Result::ok)
        .filter_map(|line| line.strip_prefix("data: ").map(str::to_owned))
        .find_map(|data| {
            serde_json::from_str::<Value>(&data)
                .ok()
                .filter(|m| m.get("id").is_some())
        })
        .expect("an answer on the stream");
    assert_eq!(answered["id"], 1, "{answered}");
    assert!(answered.get("result").is_some(), "{answered}");
}

#[test]
fn a_request_state_retried_by_another_principal_is_refused() {
    let admin = format!("127.0.0.1:{}", free_port());
    let mut command = legacy_stdio_command();
    command.push("--mrtr".into());
    let gateway = Eragate::start(&format!(
        "[admin]\naddress = \"{admin}\"\n{}\n{}",
        auth_toml(),
        stdio_upstream_toml(&command, "", "")
    ));
    wait_until("the admin listener", Duration::from_secs(10), || {
        std::net::TcpStream::connect(&admin).is_ok()
    });
    let suspended = || send("GET", &format!("http://{admin}/pools"), &[], None).json()["suspended_calls"].clone();
    let url = gateway.url();
    let sampling = json!({"sampling": {}});
    let arguments = json!({"arguments": {"prompt": "hi"}});

    let first = modern_as(&url, ALICE, 1, "ask_sampling", arguments.clone(), sampling.clone());
    assert_eq!(first["result"]["resultType"], "input_required", "{first:#}");
    let state = first["result"]["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned();
    let key = first["result"]["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .expect("an input request");
    let responses = json!({key: {"role": "assistant", "content": {"type": "text", "text": "X"}, "model": "m"}});
    let mut retry = arguments.clone();
    retry["inputResponses"] = responses;
    retry["requestState"] = json!(state);
    assert_eq!(suspended(), 1);

    // Bob replays alice's state: refused, and alice's call is still waiting for her.
    let stolen = modern_as(&url, BOB, 2, "ask_sampling", retry.clone(), sampling.clone());
    assert_eq!(stolen["error"]["code"], -32602, "{stolen:#}");
    let message = stolen["error"]["message"].as_str().unwrap_or("");
    assert!(message.starts_with("requestState "), "{stolen:#}");
    assert_eq!(suspended(), 1);

    let done = modern_as(&url, ALICE, 3, "ask_sampling", retry, sampling);
    assert_eq!(done["result"]["content"][0]["text"], "sampled: X", "{done:#}");
    assert!(
        poll_until(Duration::from_secs(5), || suspended() == 0),
        "a suspended call leaked"
    );
}

/// `eragate check-config` on `[auth]` TOML plus one upstream: whether it passed, and what it said.
fn check_config(auth: &str, env: &[(&str, Option<&str>)]) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("auth.toml");
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    std::fs::write(&path, format!("{auth}\n{upstream}")).expect("write");
    let mut command = Command::new(env!("CARGO_BIN_EXE_eragate"));
    command.arg("check-config").arg(&path);
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let output = command.output().expect("check-config");
    let text = String::from_utf8_lossy(&output.stderr).to_string() + &String::from_utf8_lossy(&output.stdout);
    (output.status.success(), text)
}

#[test]
fn check_config_reports_token_mistakes_with_their_keys() {
    const VAR: &str = "ERAGATE_TEST_AUTH_TOKEN_VARIABLE";
    let by_env = format!("[[auth.tokens]]\nprincipal = \"ci\"\nenv = \"{VAR}\"\n");
    let cases: [(String, Option<&str>, Option<&str>); 5] = [
        (by_env.clone(), Some("a-token"), None),
        (by_env, None, Some("auth.tokens[0].env: environment variable")),
        (
            "[[auth.tokens]]\nprincipal = \"bad\"\nsha256 = \"abc\"\n".into(),
            None,
            Some("auth.tokens[0]: sha256 must be 64 hex digits"),
        ),
        (
            format!(
                "[[auth.tokens]]\nprincipal = \"both\"\nsha256 = \"{}\"\nenv = \"X\"\n",
                hex_digest("t")
            ),
            None,
            Some("exactly one of"),
        ),
        (
            format!("[[auth.tokens]]\nprincipal = \"\"\nsha256 = \"{}\"\n", hex_digest("t")),
            None,
            Some("principal must not be empty"),
        ),
    ];
    for (auth, value, complaint) in cases {
        let (passed, text) = check_config(&auth, &[(VAR, value)]);
        match complaint {
            None => assert!(passed, "{auth}: {text}"),
            Some(complaint) => {
                assert!(!passed, "{auth}: {text}");
                assert!(text.contains(complaint), "{auth}: expected {complaint:?} in {text}");
            }
        }
    }
}
