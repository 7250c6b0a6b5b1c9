//! Principals protected from each other on the upstream side: an upstream
//! that names a foreign POST endpoint, an upstream that never ends the answers
//! to notifications, and clients that try to make new pool partitions (and
//! children) with capability keys no revision defines.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// Starts the misbehaving upstream `script` (in `tests/peers/`), recording what it gets to `record`.
fn hostile_server(script: &str, record: &std::path::Path) -> ListeningServer {
    let peers = peers();
    let path = peers.script(script);
    let record = record.display().to_string();
    ListeningServer::start(script, peers.python(), &[&path, "--record", &record], &[])
}

#[test]
fn an_sse_endpoint_event_naming_another_origin_fails_the_link() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("posts.jsonl");
    let hostile = hostile_server("hostile_sse_server.py", &record);
    let gateway = Eragate::start(&remote_upstream_toml("sse", &hostile.url, "handshake_timeout = \"5s\""));
    let reply = post_modern(&gateway.url(), 1, "tools/list", None, json!({}));
    let body = reply.json();
    assert!(body.get("error").is_some(), "the request succeeded: {body}");
    let posts = || std::fs::read_to_string(&record).unwrap_or_default();
    wait_until("a refusal or a post", Duration::from_secs(20), || {
        gateway.log().contains("another origin") || !posts().is_empty()
    });
    assert!(
        posts().is_empty(),
        "eragate posted to the foreign endpoint: {}",
        posts()
    );
    assert!(gateway.log().contains("another origin"), "no refusal logged");
}

/// An upstream that answers notifications with a stream it never ends (a `200`
/// `text/event-stream` where the transport says `202`, no body) costs eragate a
/// bounded wait per notification, not a hang: its own `notifications/initialized`
/// does not stall the handshake, a client's notification is acknowledged, and the
/// session's calls go on.
#[test]
fn notifications_answered_with_endless_streams_do_not_hang_the_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("notified.jsonl");
    let hostile = hostile_server("hostile_streamable_server.py", &record);
    // Longer than the test's HTTP client waits (30 s): a handshake stalled by the
    // endless stream shows as a failed initialize, not as a timeout error in time.
    let gateway = Eragate::start(&remote_upstream_toml(
        "http",
        &hostile.url,
        "handshake_timeout = \"60s\"",
    ));
    let url = gateway.url();
    let version = "2025-06-18";
    let (session, _) = legacy_initialize(&url, version);

    let roots_changed = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}).to_string();
    let ack = send("POST", &url, &legacy_headers(&session, version), Some(&roots_changed));
    assert_eq!(ack.status, 202, "the client's notification: {ack:?}");

    let reply = legacy_request(
        &url,
        &session,
        version,
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "still here"}}),
    );
    assert_eq!(tool_text(&answer(&reply, 1)["result"]), "still here", "{reply:?}");

    let notified = || {
        std::fs::read_to_string(&record)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|line| line["notified"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    wait_until("both notifications upstream", Duration::from_secs(20), || {
        let seen = notified();
        seen.iter().any(|m| m == "notifications/initialized")
            && seen.iter().any(|m| m == "notifications/roots/list_changed")
    });
}

/// The `_meta` of a 2026-07-28 request whose client capabilities are `capabilities`.
fn envelope_with(capabilities: Value) -> Value {
    let mut meta = modern_envelope();
    meta["io.modelcontextprotocol/clientCapabilities"] = capabilities;
    meta
}

#[test]
fn unknown_capability_keys_make_no_new_partitions_or_children() {
    let tag = unique_tag("hostile_partitions");
    let config = stdio_upstream_toml(&tagged_fixture(&tag), "", "spares = 1");
    let gateway = Eragate::start(&config);
    for i in 0..40u64 {
        let capabilities = json!({ format!("x-vendor-{i}"): {"on": i}, "experimental": {format!("e{i}"): {}} });
        let params = json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": envelope_with(capabilities)});
        let reply = post_modern(&gateway.url(), i + 1, "tools/call", Some("echo"), params);
        let result = reply.json().get("result").cloned();
        let result = result.unwrap_or_else(|| panic!("call {i} failed: {:?}; log:\n{}", reply.json(), gateway.log()));
        assert_eq!(tool_text(&result), "echo: hi");
    }
    let started = gateway.log().matches("started upstream child").count();
    let alive = pids_with(&tag).len();
    assert!(
        started <= 8,
        "40 capability sets started {started} children ({alive} alive)"
    );
    // A defined capability still makes its own partition.
    let params = json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": envelope_with(json!({"roots": {}}))});
    let reply = post_modern(&gateway.url(), 100, "tools/call", Some("echo"), params);
    assert!(reply.json().get("result").is_some(), "{:?}", reply.json());
}

#[test]
fn calls_naming_unknown_tools_do_not_relist_the_upstream_each_time() {
    let upstream = TracedUpstream::start_with(&["--dual-era", "--param-headers"]);
    let gateway = Eragate::http(&upstream.url, "era = \"modern\"");
    let (session, _) = legacy_initialize(&gateway.url(), "2025-06-18");
    let call = |id: u64, name: &str, arguments: Value| {
        let params = json!({"name": name, "arguments": arguments});
        legacy_request(&gateway.url(), &session, "2025-06-18", id, "tools/call", params)
    };
    let reply = call(1, "regional", json!({"region": "eu-west"}));
    assert_eq!(
        tool_text(&answer(&reply, 1)["result"]),
        "regional: eu-west ",
        "{reply:?}"
    );
    let listed = upstream.posted_bodies("tools/list").len();
    for id in 2..=21 {
        let _ = call(id, &format!("no-such-tool-{id}"), json!({}));
    }
    let relists = upstream.posted_bodies("tools/list").len() - listed;
    assert!(
        relists <= 2,
        "20 calls of unknown tools caused {relists} tools/list relists"
    );
    // Known tools still carry their headers from the kept listing.
    let reply = call(30, "regional", json!({"region": "ap-1"}));
    assert_eq!(tool_text(&answer(&reply, 30)["result"]), "regional: ap-1 ", "{reply:?}");
}
