//! `subscriptions/listen` from a 2026-07-28 client to a legacy upstream
//! (server-everything over stdio): the acknowledgement names what the upstream
//! honours, resource subscriptions become `resources/subscribe` upstream, and
//! `notifications/resources/updated` arrive tagged with the listen's id. And the same listen
//! passed through to a 2026-07-28 upstream (`legacy_server.py --dual-era --subscriptions`):
//! what it streams carries the client's listen id, not the id eragate sent upstream.

use crate::common;

use std::io::BufReader;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const URI: &str = "demo://resource/static/document/features.md";

#[test]
fn a_listen_on_a_legacy_upstream_relays_resource_updates() {
    let command = everything_stdio_command();
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let gateway = Eragate::stdio(&command, "");
    let url = gateway.url();

    // Open the listen; its answer is a long-lived SSE stream.
    let response = open_listen(
        &url,
        1,
        json!({"resourceSubscriptions": [URI], "toolsListChanged": true, "promptsListChanged": false}),
    );
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(content_type.starts_with("text/event-stream"), "{content_type}");
    let mut events = SseLines(BufReader::new(response));

    let ack = events.next_message().expect("an acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1,
        "{ack}"
    );
    let honoured = &ack["params"]["notifications"];
    assert_eq!(honoured["resourceSubscriptions"], json!([URI]), "{ack}");
    assert_eq!(honoured["toolsListChanged"], true, "{ack}");
    assert!(
        honoured.get("promptsListChanged").is_none(),
        "not asked, not honoured: {ack}"
    );

    // Ask server-everything (same capability profile, so the same upstream session) to send updates.
    let toggled = post_modern(
        &url,
        2,
        "tools/call",
        Some("toggle-subscriber-updates"),
        json!({"name": "toggle-subscriber-updates", "arguments": {}}),
    );
    let answer = toggled
        .messages()
        .into_iter()
        .find(|m| m["id"] == 2)
        .expect("an answer");
    assert!(answer.get("result").is_some(), "{answer}");

    let deadline = Instant::now() + Duration::from_secs(20);
    let update = loop {
        assert!(
            Instant::now() < deadline,
            "no resources/updated within 20 s; log:\n{}",
            gateway.log()
        );
        let message = events
            .next_message()
            .unwrap_or_else(|| panic!("the listen ended before resources/updated; log:\n{}", gateway.log()));
        if message["method"] == "notifications/resources/updated" {
            break message;
        }
        assert_ne!(
            message["method"], "notifications/message",
            "log messages never go on a listen: {message}"
        );
    };
    assert_eq!(update["params"]["uri"], URI, "{update}");
    assert_eq!(
        update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1,
        "{update}"
    );
}

/// The legacy upstream's process dies under an open listen: the listen ends at once with its
/// result (the spec's graceful end; the client opens it again), rather than staying open
/// with nothing behind it.
#[test]
fn a_listen_on_a_legacy_upstream_ends_when_its_process_dies() {
    let command = everything_stdio_command();
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let gateway = Eragate::stdio(&command, "");
    let response = send_listen(
        &gateway.url(),
        5,
        json!({"resourceSubscriptions": [URI]}),
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(response.status().as_u16(), 200);
    let events = sse_messages(response);
    let ack = events
        .recv_timeout(Duration::from_secs(20))
        .expect("an acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");

    let children = children_with(gateway.proc.pid(), peers().get("EVERYTHING_JS"));
    assert!(!children.is_empty(), "server-everything runs as eragate's child");
    for pid in children {
        signal(pid, nix::sys::signal::Signal::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let ended = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = events
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no listen result ({e}); log:\n{}", gateway.log()));
        if message.get("id").is_some() {
            break message;
        }
    };
    assert_eq!(ended["id"], 5, "{ended}");
    assert!(ended.get("result").is_some(), "a graceful end, not an error: {ended}");
}

#[test]
fn a_listen_on_a_modern_upstream_is_tagged_with_the_clients_id() {
    let upstream = LegacyHttpServer::start(&["--dual-era", "--subscriptions"]);
    let gateway = Eragate::http(&upstream.url, "");
    let url = gateway.url();
    let (a, b) = ("test://items/a", "test://items/b");

    let response = open_listen(&url, 41, json!({"resourceSubscriptions": [a]}));
    let mut events = SseLines(BufReader::new(response));

    // The upstream acknowledges once it holds the listen, so what is touched next reaches it.
    let ack = events
        .next_message()
        .unwrap_or_else(|| panic!("no acknowledgement; log:\n{}", gateway.log()));
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([a]),
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 41,
        "{ack}"
    );
    for (id, uri) in [(2, b), (3, a)] {
        let touched = modern_call(&url, id, "touch", json!({"uri": uri}));
        assert_eq!(tool_text(&answer(&touched, id)["result"]), format!("touched {uri}"));
    }
    let update = events
        .next_message()
        .unwrap_or_else(|| panic!("the listen ended before resources/updated; log:\n{}", gateway.log()));
    assert_eq!(update["method"], "notifications/resources/updated", "{update}");
    assert_eq!(update["params"]["uri"], a, "b was not subscribed: {update}");
    assert_eq!(
        update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 41,
        "{update}"
    );
}
