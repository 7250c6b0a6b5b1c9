//! The lists eragate keeps of a legacy upstream, and the caching hints it states for them,
//! seen from a 2026-07-28 client over HTTP: the Python SDK fixture (`legacy_server.py`) over
//! stdio, with `--conformance` (it declares tools `listChanged` and has a tool that sends
//! `notifications/tools/list_changed`) or without (it cannot announce changes). Hits and
//! misses are read from `/metrics`. And the `resources/read` results a modern upstream (the
//! TypeScript SDK v2 fixture, `ts2_server.mjs --cached-reads`) lets eragate keep.

use crate::common;

use std::time::Duration;

use common::tokens::{ALICE, BOB, auth_toml};
use common::*;
use serde_json::{Value, json};

/// eragate with an admin listener in front of the stdio fixture run with `fixture_args`;
/// `cache` is the body of `[upstreams.cache]`, `extra` more top-level TOML.
struct Cached {
    eragate: Eragate,
    admin: String,
}

impl Cached {
    fn start(fixture_args: &[&str], cache: &str, extra: &str) -> Cached {
        let admin = format!("127.0.0.1:{}", free_port());
        let mut command = legacy_stdio_command();
        command.extend(fixture_args.iter().map(|a| (*a).to_owned()));
        let upstream = stdio_upstream_toml(&command, &format!("[upstreams.cache]\n{cache}\n"), "");
        let config = format!("[admin]\naddress = \"{admin}\"\n{extra}\n{upstream}");
        let eragate = Eragate::start(&config);
        Cached {
            eragate,
            admin: format!("http://{admin}"),
        }
    }

    /// `tools/list` as `token`'s principal (or anonymously): its result.
    fn tools_list(&self, id: u64, token: Option<&str>) -> Value {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut headers = modern_headers("tools/list", None);
        if let Some(bearer) = &bearer {
            headers.push(("Authorization", bearer));
        }
        let reply = send(
            "POST",
            &self.eragate.url(),
            &headers,
            Some(&modern_body(id, "tools/list", json!({}))),
        );
        let message = answer(&reply, id);
        assert!(message.get("result").is_some(), "tools/list: {message}");
        message["result"].clone()
    }

    /// (hits, misses) of the upstream's list cache, from `/metrics`.
    fn counted(&self) -> (u64, u64) {
        let text = http_client()
            .get(format!("{}/metrics", self.admin))
            .send()
            .and_then(|r| r.text())
            .expect("/metrics");
        let sample = |metric: &str| {
            let prefix = format!("{metric}{{upstream=\"fixture\"}} ");
            text.lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or_else(|| panic!("{metric} in /metrics:\n{text}")) as u64
        };
        (
            sample("eragate_list_cache_hits_total"),
            sample("eragate_list_cache_misses_total"),
        )
    }
}

fn hints(result: &Value) -> (Value, Value) {
    (result["ttlMs"].clone(), result["cacheScope"].clone())
}

fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn an_announced_list_is_served_from_the_cache_until_it_changes() {
    let gateway = Cached::start(&["--conformance"], "ttl_ms = 30000", "");
    let first = gateway.tools_list(1, None);
    assert!(
        tool_names(&first).contains(&"test_trigger_tool_change".to_owned()),
        "{first}"
    );
    // Announced changes: the cap; no authentication, so every caller is the same principal.
    assert_eq!(hints(&first), (json!(30000), json!("public")), "{first}");
    assert_eq!(gateway.counted(), (0, 1));

    let second = gateway.tools_list(2, None);
    assert_eq!(gateway.counted(), (1, 1), "the second list is a hit");
    assert_eq!(tool_names(&second), tool_names(&first));
    assert_eq!(hints(&second), hints(&first));
    assert_eq!(
        second["_meta"]["io.modelcontextprotocol/serverInfo"], first["_meta"]["io.modelcontextprotocol/serverInfo"],
        "{second}"
    );

    // The upstream announces a change on the warm session: the next list is fetched again.
    let reply = modern_call(&gateway.eragate.url(), 3, "test_trigger_tool_change", json!({}));
    assert_eq!(
        tool_text(&answer(&reply, 3)["result"]),
        "tools list changed",
        "{reply:?}"
    );
    wait_until("the kept page to be dropped", Duration::from_secs(10), || {
        gateway.tools_list(4, None);
        gateway.counted().1 >= 2
    });
    let after = gateway.tools_list(5, None);
    assert_eq!(tool_names(&after), tool_names(&first));
    let (hits, misses) = gateway.counted();
    assert!(
        misses == 2 && hits >= 2,
        "refetched once, then served: {hits} hits, {misses} misses"
    );
}

#[test]
fn a_list_that_cannot_be_announced_is_kept_only_with_a_relist_interval() {
    // Without an interval eragate cannot tell when the list changes: 0, fetched every time.
    let blind = Cached::start(&[], "", "");
    let first = blind.tools_list(1, None);
    blind.tools_list(2, None);
    assert_eq!(hints(&first), (json!(0), json!("public")), "{first}");
    assert_eq!(blind.counted(), (0, 2));

    // With one: kept that long, and the ttlMs is what is left of it (capped).
    let relisted = Cached::start(&[], "relist_interval = \"1h\"\nttl_ms = 20000", "");
    let first = relisted.tools_list(1, None);
    assert_eq!(hints(&first), (json!(20000), json!("public")), "{first}");
    let second = relisted.tools_list(2, None);
    assert_eq!(relisted.counted(), (1, 1));
    assert_eq!(hints(&second), (json!(20000), json!("public")), "{second}");
    assert_eq!(tool_names(&second), tool_names(&first));
}

#[test]
fn pages_are_kept_per_principal_and_public_only_once_two_got_the_same() {
    let gateway = Cached::start(&["--conformance"], "", &auth_toml());
    let alice = gateway.tools_list(1, Some(ALICE));
    // One principal seen: nothing proves the list is the same for another.
    assert_eq!(hints(&alice), (json!(60000), json!("private")), "{alice}");
    gateway.tools_list(2, Some(ALICE));
    assert_eq!(gateway.counted(), (1, 1));
    // bob's partition has its own page: a miss, never alice's copy.
    let bob = gateway.tools_list(3, Some(BOB));
    assert_eq!(gateway.counted(), (1, 2));
    assert_eq!(tool_names(&bob), tool_names(&alice));
    // Both got the same list: it does not depend on who asks.
    assert_eq!(hints(&bob), (json!(60000), json!("public")), "{bob}");
    assert_eq!(hints(&gateway.tools_list(4, Some(ALICE))).1, json!("public"));
    // The operator can keep everything private.
    let private = Cached::start(&["--conformance"], "scope = \"private\"", "");
    assert_eq!(hints(&private.tools_list(1, None)), (json!(60000), json!("private")));
}

/// A 2026-07-28 `resources/read` of `uri` as the bearer of `token`: its result.
fn read_as(eragate: &Eragate, id: u64, uri: &str, token: &str) -> Value {
    let bearer = format!("Bearer {token}");
    let mut headers = modern_headers("resources/read", Some(uri));
    headers.push(("Authorization", &bearer));
    let reply = send(
        "POST",
        &eragate.url(),
        &headers,
        Some(&modern_body(id, "resources/read", json!({"uri": uri}))),
    );
    let message = answer(&reply, id);
    assert!(message.get("result").is_some(), "resources/read {uri}: {message}");
    message["result"].clone()
}

#[test]
fn a_modern_upstreams_reads_are_kept_as_it_says_and_private_ones_per_principal() {
    let ts2 = ts2_http_server_with(&["--cached-reads"]);
    let admin = format!("127.0.0.1:{}", free_port());
    let config = format!(
        "[admin]\naddress = \"{admin}\"\n{auth}\n[[upstreams]]\nname = \"ts2\"\n[upstreams.http]\nurl = \"{url}\"\n",
        auth = auth_toml(),
        url = ts2.url
    );
    let eragate = Eragate::start(&config);
    let counted = || {
        let text = http_client()
            .get(format!("http://{admin}/metrics"))
            .send()
            .and_then(|r| r.text())
            .expect("/metrics");
        let sample = |metric: &str| {
            let prefix = format!("{metric}{{upstream=\"ts2\"}} ");
            text.lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or_else(|| panic!("{metric} in /metrics:\n{text}")) as u64
        };
        (
            sample("eragate_read_cache_hits_total"),
            sample("eragate_read_cache_misses_total"),
        )
    };
    let text = |result: &Value| result["contents"][0]["text"].as_str().unwrap_or_default().to_owned();

    // public: read once upstream, then served to alice and bob alike from what eragate kept.
    let first = read_as(&eragate, 1, "test://cached/public", ALICE);
    assert_eq!(text(&first), "public read 1", "{first}");
    assert_eq!(first["cacheScope"], "public", "{first}");
    let again = read_as(&eragate, 2, "test://cached/public", BOB);
    assert_eq!(text(&again), "public read 1", "kept for everyone: {again}");
    assert_eq!(again["cacheScope"], "public", "{again}");
    let left = again["ttlMs"].as_u64().unwrap_or(0);
    assert!(
        left > 0 && left <= 60_000,
        "what is left of the upstream's ttl: {again}"
    );
    assert_eq!(counted(), (1, 1), "one miss, then one hit");

    // private: kept for the principal that read it, never served to another.
    let alices = read_as(&eragate, 3, "test://cached/private", ALICE);
    assert_eq!(text(&alices), "private read 1", "{alices}");
    assert_eq!(
        text(&read_as(&eragate, 4, "test://cached/private", ALICE)),
        "private read 1"
    );
    let bobs = read_as(&eragate, 5, "test://cached/private", BOB);
    assert_eq!(
        text(&bobs),
        "private read 2",
        "bob's own read reached the upstream: {bobs}"
    );
    assert_eq!(bobs["cacheScope"], "private", "{bobs}");
    assert_eq!(
        text(&read_as(&eragate, 6, "test://cached/private", BOB)),
        "private read 2"
    );
    assert_eq!(counted(), (3, 3), "alice's and bob's own copies");

    // A read the upstream says nothing for (ttlMs 0) is never kept.
    for id in [7, 8] {
        let hello = read_as(&eragate, id, "test://static/hello", ALICE);
        assert_eq!(hello["ttlMs"], 0, "{hello}");
    }
    assert_eq!(counted(), (3, 5), "two misses, nothing kept");
}
