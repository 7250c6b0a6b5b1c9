//! What the other protections leave open: the cost of
//! forgetting ended sessions, the admin listener and running out of
//! descriptors, what a stdio child can read of eragate, refused and oversized
//! upstream messages, and HTTP/1.1 pipelining. The real binary throughout;
//! where the fault is a cost, the test counts the work (entries visited,
//! accept attempts) that eragate reports on its admin view, never time.

mod common;

use common::*;
use serde_json::{Value, json};

/// `[admin]` on a port of its own, plus `extra` keys of that table.
fn admin_table(extra: &str) -> (u16, String) {
    let port = free_port();
    (port, format!("[admin]\naddress = \"127.0.0.1:{port}\"\n{extra}\n"))
}

/// The admin view `/pools`.
fn pools(admin: u16) -> Value {
    let reply = send("GET", &format!("http://127.0.0.1:{admin}/pools"), &[], None);
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.json()
}

// === 3: ended sessions ===

/// Past `max_ended_sessions`, each DELETE forgets the ended id expiring soonest,
/// found without walking the set: the admin view counts the entries visited.
#[test]
fn ended_ids_past_the_bound_are_forgotten_visiting_a_few_entries_per_delete() {
    const BOUND: u64 = 40;
    const SESSIONS: u64 = 200;
    let (admin, admin_toml) = admin_table("");
    let config = format!(
        "{admin_toml}[limits]\nmax_ended_sessions = {BOUND}\n{}[upstreams.pool]\nlegacy_sessions = \"shared\"\n",
        stdio_upstream_toml(&legacy_stdio_command(), "", "")
    );
    let gateway = Eragate::start(&config);
    let client = http_client();
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    .to_string();
    let mut ended = Vec::new();
    for _ in 0..SESSIONS {
        let opened = client
            .post(gateway.url())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize.clone())
            .send()
            .expect("initialize");
        assert_eq!(opened.status(), 200);
        let session = opened.headers()["mcp-session-id"].to_str().expect("id").to_owned();
        let deleted = client
            .delete(gateway.url())
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-06-18")
            .send()
            .expect("DELETE");
        assert!(deleted.status().is_success(), "DELETE: {}", deleted.status());
        ended.push(session);
    }
    let stats = &pools(admin)["ended_sessions"];
    assert_eq!(stats["remembered"], BOUND, "{stats}");
    let evicted = stats["evicted"].as_u64().expect("evicted");
    assert_eq!(evicted, SESSIONS - BOUND, "{stats}");
    let visited = stats["visited"].as_u64().expect("visited");
    // One entry per id forgotten, and a rebuild of the heap now and then: far below
    // the 2 x BOUND per DELETE of a walk of the set.
    assert!(
        visited <= 2 * evicted + BOUND,
        "{visited} entries visited for {evicted} forgotten: {stats}"
    );
    // The most recently ended are still refused.
    let last = ended.last().expect("a session");
    let reply = legacy_request(&gateway.url(), last, "2025-06-18", 1, "tools/list", json!({}));
    assert_eq!(reply.status, 404, "{reply:?}");
}
