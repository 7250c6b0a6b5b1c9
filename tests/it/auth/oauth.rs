//! eragate as an OAuth 2.1 protected resource in front of an upstream that knows nothing of
//! OAuth, with real parts: the authorization server is oidc-provider 9.13.3
//! (`tests/peers/oidc_provider.mjs`: resource indicators, JWT access tokens, open dynamic
//! registration, auto-approved login and consent), the client is the Python SDK's
//! `OAuthClientProvider`, the upstream the legacy fixture.
//! - the SDK completes discovery (PRM → AS metadata) → registration → authorization code +
//!   PKCE → token → `tools/call`, as a 2026-07-28 client and as a 2025-11-25 client, through
//!   a legacy stdio upstream; through a Streamable HTTP upstream the upstream's trace shows
//!   no `Authorization` header and no trace of the client's token;
//! - the protected resource metadata at the path URL and the root URL;
//! - a 2025-03-26 client, which knows no PRM, finds the authorization server's metadata at
//!   the MCP origin (`/.well-known/oauth-authorization-server`, served verbatim), gets a
//!   token from the endpoint it names and opens a session;
//! - the principal is `iss` + `sub`: another subject cannot use a session;
//! - a JWKS rotation (the provider restarted with a new key) is picked up without restart;
//! - opaque tokens (the provider with `--format opaque`) are introspected (RFC 7662), once
//!   per token, and refused for another audience, unknown, or short of the required scope.

use crate::common;
use crate::common::oauth;

use common::*;
use oauth::*;
use serde_json::{Value, json};

fn py_oauth_client(url: &str, mode: &str) -> Value {
    let peers = peers();
    run_driver(
        peers.python(),
        &peers.script("py_oauth_client.py"),
        &["--url", url, "--mode", mode],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// What the SDK did, checked step by step.
fn assert_full_flow(report: &Value, url: &str, issuer: &str) {
    assert_eq!(report["text"], "echo: hello through oauth", "{report}");
    let requests: Vec<&str> = report["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let origin = url.trim_end_matches("/mcp");
    for expected in [
        format!("GET {origin}/.well-known/oauth-protected-resource/mcp"),
        format!("GET {issuer}/.well-known/oauth-authorization-server"),
        format!("POST {issuer}/reg"),
        format!("POST {issuer}/token"),
    ] {
        assert!(
            requests.contains(&expected.as_str()),
            "{expected} missing from {requests:?}"
        );
    }
    assert_eq!(
        report["scope"], "mcp:read",
        "the challenge's scope was asked for: {report}"
    );
    let (_, claims, _) = split_jwt(report["access_token"].as_str().expect("token"));
    assert_eq!(claims["aud"], json!(url), "{claims}");
    assert_eq!(claims["iss"], json!(issuer), "{claims}");
}

#[test]
fn python_sdk_2026_07_28_client_completes_the_flow_to_a_legacy_stdio_upstream() {
    let idp = Idp::start();
    let gateway = gateway_for(&idp.issuer, "");
    let report = py_oauth_client(&gateway.url(), "2026-07-28");
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    assert_full_flow(&report, &gateway.url(), &idp.issuer);
}

#[test]
fn python_sdk_2025_11_25_client_completes_the_flow_to_a_legacy_stdio_upstream() {
    let idp = Idp::start();
    let gateway = gateway_for(&idp.issuer, "");
    let report = py_oauth_client(&gateway.url(), "legacy");
    assert_eq!(report["protocol_version"], "2025-11-25", "{report}");
    assert_full_flow(&report, &gateway.url(), &idp.issuer);
}

#[test]
fn the_upstream_never_sees_the_clients_token() {
    let idp = Idp::start();
    let upstream = TracedUpstream::start();
    let upstream_toml = remote_upstream_toml("http", &upstream.url, "");
    let gateway = Eragate::start(&format!("{}\n{upstream_toml}", oauth_toml(&idp.issuer, "")));
    let report = py_oauth_client(&gateway.url(), "2026-07-28");
    assert_full_flow(&report, &gateway.url(), &idp.issuer);
    let token = report["access_token"].as_str().expect("token");
    let (_, _, signature) = split_jwt(token);
    let trace = upstream.raw();
    assert!(trace.contains("echo"), "the call reached the upstream: {trace}");
    assert!(!trace.to_ascii_lowercase().contains("authorization"), "{trace}");
    assert!(!trace.contains(&signature), "{trace}");
}

/// The same flows in front of a modern (2026-07-28) HTTP server, the TypeScript SDK v2
/// fixture, which records the headers of every request it receives: a 2026-07-28 client's
/// requests go through as they are, a 2025-11-25 client's are translated, and neither
/// carries the client's token or any `Authorization` to the upstream.
#[test]
fn python_sdk_clients_of_both_eras_complete_the_flow_to_a_modern_http_upstream() {
    let idp = Idp::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("headers.jsonl");
    let trace_arg = trace.display().to_string();
    let upstream = ts2_http_server_with(&["--trace", &trace_arg]);
    let upstream_toml = remote_upstream_toml("http", &upstream.url, "");
    let gateway = Eragate::start(&format!("{}\n{upstream_toml}", oauth_toml(&idp.issuer, "")));
    let mut signatures = Vec::new();
    for (mode, negotiated) in [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")] {
        let report = py_oauth_client(&gateway.url(), mode);
        assert_eq!(report["protocol_version"], negotiated, "{report}");
        assert_full_flow(&report, &gateway.url(), &idp.issuer);
        let token = report["access_token"].as_str().expect("token");
        signatures.push(split_jwt(token).2);
    }
    let log = gateway.log();
    assert!(
        log.contains("learned the upstream's era") && log.contains("Modern"),
        "{log}"
    );
    let seen = std::fs::read_to_string(&trace).expect("the upstream's trace");
    let requests: Vec<Value> = seen.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(requests.len() >= 2, "{seen}");
    for request in &requests {
        let headers = request["headers"].as_object().expect("headers");
        assert!(!headers.contains_key("authorization"), "{request}");
    }
    for signature in &signatures {
        assert!(
            !seen.contains(signature.as_str()),
            "a client's token reached the upstream"
        );
    }
}

#[test]
fn protected_resource_metadata_at_the_path_and_the_root() {
    let idp = Idp::start();
    let gateway = gateway_for(
        &idp.issuer,
        "resource_name = \"Fixture tools\"\nresource_documentation = \"https://example.com/docs\"",
    );
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let reply = send("GET", &format!("http://{}{path}", gateway.addr), &[], None);
        assert_eq!(reply.status, 200, "{path}: {reply:?}");
        assert!(reply.content_type_is("application/json"), "{reply:?}");
        assert_eq!(
            reply.json(),
            json!({
                "resource": gateway.url(),
                "authorization_servers": [idp.issuer],
                "scopes_supported": ["mcp:read", "mcp:write"],
                "bearer_methods_supported": ["header"],
                "resource_name": "Fixture tools",
                "resource_documentation": "https://example.com/docs",
            }),
            "{path}"
        );
    }
    let unknown = send(
        "GET",
        &format!("http://{}/.well-known/oauth-protected-resource/other", gateway.addr),
        &[],
        None,
    );
    assert_eq!(unknown.status, 404);
    // Health stays open; the MCP path does not.
    assert_eq!(
        send("GET", &format!("http://{}/healthz", gateway.addr), &[], None).status,
        200
    );
}

#[test]
fn a_2025_03_26_client_finds_the_authorization_server_at_the_mcp_origin() {
    let idp = Idp::start();
    let gateway = gateway_for(&idp.issuer, "");
    let url = gateway.url();
    // The metadata is served once the issuer's was loaded at start.
    let metadata_url = format!("http://{}/.well-known/oauth-authorization-server", gateway.addr);
    let mut reply = send("GET", &metadata_url, &[], None);
    wait_until(
        "the issuer's metadata is loaded",
        std::time::Duration::from_secs(10),
        || {
            reply = send("GET", &metadata_url, &[], None);
            reply.status == 200
        },
    );
    let served = reply.json();
    let original = send(
        "GET",
        &format!("{}/.well-known/oauth-authorization-server", idp.issuer),
        &[],
        None,
    )
    .json();
    assert_eq!(served, original, "served verbatim");
    assert_eq!(served["issuer"], json!(idp.issuer));
    assert_eq!(served["token_endpoint"], json!(format!("{}/token", idp.issuer)));

    // With a token from the endpoint it names, the 2025-03-26 handshake and a call work.
    let token = idp.token("tester", &url, "mcp:read");
    let authorization = format!("Bearer {token}");
    let mut headers = PLAIN.to_vec();
    headers.push(("authorization", &authorization));
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}});
    let reply = send("POST", &url, &headers, Some(&init.to_string()));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(answer(&reply, 0)["result"]["protocolVersion"], "2025-03-26");
}

#[test]
fn the_principal_is_issuer_and_subject() {
    let idp = Idp::start();
    let gateway = gateway_for(&idp.issuer, "");
    let url = gateway.url();
    let tester = format!("Bearer {}", idp.token("tester", &url, "mcp:read"));
    let other = format!("Bearer {}", idp.token("other", &url, "mcp:read"));
    let mut headers = PLAIN.to_vec();
    headers.push(("authorization", &tester));
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "p", "version": "0"}}});
    let reply = send("POST", &url, &headers, Some(&init.to_string()));
    assert_eq!(reply.status, 200, "{reply:?}");
    let session = reply.header("mcp-session-id").expect("session").to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let call = request_body(1, "tools/call", json!({"name": "echo", "arguments": {"text": "mine"}}));
    let as_whom = |authorization: &str, body: &str| {
        let mut headers = legacy_headers(&session, "2025-06-18");
        headers.push(("authorization", authorization));
        send("POST", &url, &headers, Some(body))
    };
    assert_eq!(as_whom(&tester, &initialized).status, 202);
    assert_eq!(as_whom(&other, &call).status, 404, "another subject finds no session");
    let reply = as_whom(&tester, &call);
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(tool_text(&answer(&reply, 1)["result"]), "echo: mine");
}

#[test]
fn a_jwks_rotation_is_picked_up_without_restart() {
    let port = free_port();
    let idp = Idp::start_on(port);
    let gateway = gateway_for(&idp.issuer, "");
    let url = gateway.url();
    let before = idp.token("tester", &url, "mcp:read");
    assert_eq!(call_as(&url, &before, "before").status, 200);

    // The provider restarts on the same issuer with a new signing key.
    let issuer = idp.issuer.clone();
    drop(idp);
    let idp = Idp::start_on(port);
    assert_eq!(idp.issuer, issuer);
    let after = idp.token("tester", &url, "mcp:read");
    assert_ne!(split_jwt(&before).0["kid"], split_jwt(&after).0["kid"]);
    let reply = call_as(&url, &after, "after");
    assert_eq!(reply.status, 200, "{reply:?}\n{}", gateway.log());
    assert!(gateway.log().contains("refetched the JWKS"), "{}", gateway.log());
    // The retired key is gone with the old set.
    assert_eq!(call_as(&url, &before, "retired").status, 401);
}

#[test]
fn opaque_tokens_are_introspected_and_the_answers_cached() {
    let idp = Idp::start_with(0, &["--format", "opaque"]);
    let gateway = gateway_for(
        &idp.issuer,
        "[auth.oauth.introspection]\nclient_id = \"tester\"\nclient_secret = \"tester-secret\"",
    );
    let url = gateway.url();
    let token = idp.token("other", &url, "mcp:read");
    assert_eq!(token.split('.').count(), 1, "opaque: {token}");
    for i in 0..3 {
        let reply = call_as(&url, &token, &format!("opaque {i}"));
        assert_eq!(reply.status, 200, "{reply:?}\n{}", gateway.log());
    }
    assert_eq!(
        gateway.log().matches("introspected a token").count(),
        1,
        "{}",
        gateway.log()
    );

    let elsewhere = idp.token("other", "http://127.0.0.1:1/mcp", "mcp:read");
    let narrow = idp.token("other", &url, "mcp:write");
    let cases = [
        ("unknown", "never-issued", 401, "invalid_token"),
        ("another audience", elsewhere.as_str(), 401, "invalid_token"),
        ("missing scope", narrow.as_str(), 403, "insufficient_scope"),
    ];
    for (case, token, status, error) in cases {
        let reply = call_as(&url, token, case);
        assert_eq!(reply.status, status, "{case}: {reply:?}");
        assert_eq!(challenge(&reply).1.as_deref(), Some(error), "{case}");
    }
}

/// `scopes_for` on the `add` tool: `mcp:write` on top of the required `mcp:read`.
const ADD_NEEDS_WRITE: &str = "[auth.oauth.scopes_for]\n\"tools/call:add\" = [\"mcp:write\"]";

#[test]
fn scopes_per_tool_answer_403_with_the_scope_to_step_up_to() {
    let idp = Idp::start();
    let gateway = gateway_for(&idp.issuer, ADD_NEEDS_WRITE);
    let url = gateway.url();
    let metadata = format!("http://{}/.well-known/oauth-protected-resource/mcp", gateway.addr);
    let read = idp.token("tester", &url, "mcp:read");
    let both = idp.token("tester", &url, "mcp:read mcp:write");
    let add = |token: &str| {
        let authorization = format!("Bearer {token}");
        let mut headers = modern_headers("tools/call", Some("add"));
        headers.push(("authorization", &authorization));
        let body = modern_body(2, "tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}}));
        send("POST", &url, &headers, Some(&body))
    };
    assert_eq!(call_as(&url, &read, "any tool").status, 200, "echo has no extra rule");
    let reply = add(&read);
    assert_eq!(reply.status, 403, "{reply:?}");
    assert_eq!(challenge(&reply), (Some(metadata), Some("insufficient_scope".into())));
    assert!(
        reply
            .header("www-authenticate")
            .unwrap_or_default()
            .contains(r#"scope="mcp:write""#),
        "{reply:?}"
    );
    let reply = add(&both);
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(tool_text(&answer(&reply, 2)["result"]), "5");
}

#[test]
fn python_sdk_steps_up_on_insufficient_scope() {
    let idp = Idp::start();
    let gateway = gateway_for(&idp.issuer, ADD_NEEDS_WRITE);
    let peers = peers();
    let report = run_driver(
        peers.python(),
        &peers.script("py_oauth_client.py"),
        &[
            "--url",
            &gateway.url(),
            "--tool",
            "add",
            "--arguments",
            r#"{"a": 20, "b": 22}"#,
        ],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", gateway.log()));
    assert_eq!(report["text"], "42", "{report}");
    assert_eq!(report["authorizations"], 2, "authorized, then stepped up: {report}");
    let scope = report["scope"].as_str().unwrap_or_default();
    assert!(scope.contains("mcp:read") && scope.contains("mcp:write"), "{report}");
}

/// Names of the tools in the `tools/list` answer `id` of `reply`.
fn listed_tools(reply: &Reply, id: u64) -> (Vec<String>, Value) {
    let result = answer(reply, id)["result"].clone();
    let names = result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {result}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect();
    (names, result)
}

#[test]
fn tools_list_shows_only_the_tools_the_token_may_call() {
    let idp = Idp::start();
    // An exact rule and a prefix rule; the upstream's pages are configured public, so that
    // a private scope can only come from the per-caller list.
    let rules =
        "[auth.oauth.scopes_for]\n\"tools/call:add\" = [\"mcp:write\"]\n\"tools/call:slow_*\" = [\"mcp:write\"]";
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "[upstreams.cache]\nscope = \"public\"", "");
    let gateway = Eragate::start(&format!("{}\n{upstream}", oauth_toml(&idp.issuer, rules)));
    let url = gateway.url();
    let reader = format!("Bearer {}", idp.token("tester", &url, "mcp:read"));
    let writer = format!("Bearer {}", idp.token("tester", &url, "mcp:read mcp:write"));

    let modern_list = |authorization: &str| {
        let mut headers = modern_headers("tools/list", None);
        headers.push(("authorization", authorization));
        let reply = send("POST", &url, &headers, Some(&modern_body(3, "tools/list", json!({}))));
        assert_eq!(reply.status, 200, "{reply:?}\n{}", gateway.log());
        listed_tools(&reply, 3)
    };
    let (names, result) = modern_list(&reader);
    assert!(names.contains(&"echo".to_owned()), "{names:?}");
    for hidden in ["add", "slow_progress"] {
        assert!(
            !names.contains(&hidden.to_owned()),
            "{hidden} is hidden from a reader: {names:?}"
        );
    }
    assert_eq!(result["cacheScope"], "private", "{result}");
    let (names, result) = modern_list(&writer);
    for shown in ["echo", "add", "slow_progress"] {
        assert!(
            names.contains(&shown.to_owned()),
            "{shown} is shown to a writer: {names:?}"
        );
    }
    assert_eq!(result["cacheScope"], "private", "{result}");

    // A legacy session sees the same restriction.
    let mut headers = PLAIN.to_vec();
    headers.push(("authorization", &reader));
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "p", "version": "0"}}});
    let reply = send("POST", &url, &headers, Some(&init.to_string()));
    assert_eq!(reply.status, 200, "{reply:?}");
    let session = reply.header("mcp-session-id").expect("session").to_owned();
    let mut headers = legacy_headers(&session, "2025-06-18");
    headers.push(("authorization", &reader));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    assert_eq!(send("POST", &url, &headers, Some(&initialized)).status, 202);
    let reply = send("POST", &url, &headers, Some(&request_body(4, "tools/list", json!({}))));
    assert_eq!(reply.status, 200, "{reply:?}");
    let (names, result) = listed_tools(&reply, 4);
    assert!(
        names.contains(&"echo".to_owned()) && !names.contains(&"add".to_owned()),
        "{names:?}"
    );
    assert!(
        result.get("cacheScope").is_none(),
        "no cacheScope toward a legacy client: {result}"
    );

    // What is hidden is also refused: the prefix rule guards `slow_progress`.
    let mut headers = modern_headers("tools/call", Some("slow_progress"));
    headers.push(("authorization", &reader));
    let body = modern_body(5, "tools/call", json!({"name": "slow_progress", "arguments": {}}));
    assert_eq!(send("POST", &url, &headers, Some(&body)).status, 403);
}
