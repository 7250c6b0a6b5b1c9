//! Legacy sessions without shared state: eragate replicas sharing `[sessions] key` serve one
//! legacy client session alternately, request by request, with no store and no sticky routing;
//! a replica with another key, a tampered id, an expired id, and a session bound to one
//! replica's stdio child all get 404. Key rotation accepts the previous key for its overlap.
//!
//! Raw HTTP throughout: one `initialize`, then every request goes to the other replica's URL.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const KEY: &str = "+lvmRArTdTjUBLud1gW6jkHU/yPJ938rmqyBz7HEOk4=";
const OTHER_KEY: &str = "0QqbL58aiCRrfbFktQMU66Ol8a+x/KkZnsW5XhA7btw=";

fn http_upstream_toml(url: &str) -> String {
    remote_upstream_toml("http", url, "")
}

/// An eragate with `[sessions] key = key` (plus `sessions_extra`) in front of `upstream_toml`.
fn replica(upstream_toml: &str, key: &str, sessions_extra: &str) -> Eragate {
    Eragate::start(&format!(
        "[sessions]\nkey = \"{key}\"\n{sessions_extra}\n{upstream_toml}"
    ))
}

/// The response with `id` in a 200 reply, or the reason there is none.
fn ok_response(reply: &Reply, id: u64) -> Result<Value, String> {
    if reply.status != 200 {
        return Err(format!("HTTP {}: {}", reply.status, reply.body));
    }
    reply
        .response(&json!(id))
        .ok_or_else(|| format!("no response with id {id}: {}", reply.body))
}

/// `logging/setLevel warning` (id 1) on `session` via `url`; what came back unless it worked.
fn set_level_warning(url: &str, session: &str, version: &str) -> Result<(), String> {
    let set = legacy_request(
        url,
        session,
        version,
        1,
        "logging/setLevel",
        json!({"level": "warning"}),
    );
    match ok_response(&set, 1) {
        Ok(r) if r["result"] == json!({}) => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

fn first_text(result: &Value) -> Value {
    result["content"][0]["text"].clone()
}

/// Alternates `rounds` requests of one session between `urls` (starting with the replica that
/// did not mint it) and returns every wrong answer.
fn alternate(urls: &[&str], session: &str, version: &str, rounds: u64) -> Vec<String> {
    let mut problems = Vec::new();
    for i in 0..rounds {
        let url = urls[(i as usize + 1) % urls.len()];
        let id = 100 + i;
        // (method, params, where the answer's text is, what it must say)
        let (method, params, pointer, expected) = match i % 4 {
            0 => (
                "tools/call",
                json!({"name": "echo", "arguments": {"text": format!("n{i}")}}),
                "/content/0/text",
                format!("echo: n{i}"),
            ),
            1 => (
                "resources/read",
                json!({"uri": format!("test://items/{i}")}),
                "/contents/0/text",
                format!("item {i}"),
            ),
            2 => (
                "prompts/get",
                json!({"name": "greet", "arguments": {"name": format!("P{i}")}}),
                "/messages/0/content/text",
                format!("Hello, P{i}!"),
            ),
            _ => (
                "tools/call",
                json!({"name": "add", "arguments": {"a": i, "b": 1}}),
                "/content/0/text",
                (i + 1).to_string(),
            ),
        };
        match ok_response(&legacy_request(url, session, version, id, method, params), id) {
            Ok(response) if response["result"].pointer(pointer) == Some(&json!(expected)) => {}
            Ok(response) => problems.push(format!(
                "round {i} via {url}: {method}: expected {expected}, got {response}"
            )),
            Err(e) => problems.push(format!("round {i} via {url}: {method}: {e}")),
        }
    }
    problems
}

/// Panics with every problem and the named replicas' logs, unless there are no problems.
#[track_caller]
fn assert_no_problems_on(problems: &[String], gateways: &[(&str, &Eragate)]) {
    let logs: Vec<(&str, String)> = gateways.iter().map(|(name, g)| (*name, g.log())).collect();
    assert_no_problems(problems, &logs);
}

/// The status a request with `session` gets from `url`.
fn status_with(url: &str, session: &str, version: &str) -> u16 {
    legacy_request(
        url,
        session,
        version,
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    )
    .status
}

/// `id` with one character in its middle changed (still valid base64url-ish text).
fn tampered(id: &str) -> String {
    let mut chars: Vec<char> = id.chars().collect();
    let i = chars.len() / 2;
    chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

#[test]
fn replicas_sharing_a_key_serve_one_session_over_a_legacy_http_upstream() {
    let upstream = LegacyHttpServer::start(&[]);
    let toml = http_upstream_toml(&upstream.url);
    let a = replica(&toml, KEY, "");
    let b = replica(&toml, KEY, "");
    let c = replica(&toml, OTHER_KEY, "");
    let (a_url, b_url, c_url) = (a.url(), b.url(), c.url());
    let version = "2025-11-25";
    let mut problems = Vec::new();

    let (session, init) = legacy_initialize(&a_url, version);
    if init["protocolVersion"] != json!(version) {
        problems.push(format!("initialize: {init}"));
    }
    // The level lives in the upstream session; the other replica must reach the same one.
    if let Err(e) = set_level_warning(&a_url, &session, version) {
        problems.push(format!("logging/setLevel via A: {e}"));
    }
    match ok_response(
        &legacy_request(
            &b_url,
            &session,
            version,
            2,
            "tools/call",
            json!({"name": "log_message", "arguments": {"level": "info"}}),
        ),
        2,
    ) {
        Ok(r) if first_text(&r["result"]) == json!("suppressed info") => {}
        other => problems.push(format!(
            "log_message info via B after setLevel warning via A (same upstream session?): {other:?}"
        )),
    }
    problems.extend(alternate(&[&a_url, &b_url], &session, version, 12));
    match ok_response(&legacy_request(&b_url, &session, version, 3, "ping", json!({})), 3) {
        Ok(r) if r["result"] == json!({}) => {}
        other => problems.push(format!("ping via B: {other:?}")),
    }

    // Another key, a tampered id, garbage: 404 like an unknown session.
    for (what, url, id) in [
        (
            "the session at a replica with another key",
            c_url.as_str(),
            session.clone(),
        ),
        ("a tampered id at A", a_url.as_str(), tampered(&session)),
        ("a tampered id at B", b_url.as_str(), tampered(&session)),
        (
            "a truncated id at B",
            b_url.as_str(),
            session[..session.len() - 4].to_owned(),
        ),
        ("a made-up id at A", a_url.as_str(), "not-a-session".to_owned()),
    ] {
        let status = status_with(url, &id, version);
        if status != 404 {
            problems.push(format!("{what}: expected 404, got {status}"));
        }
    }
    // Still fine on both after the refusals.
    problems.extend(alternate(&[&b_url, &a_url], &session, version, 2));
    assert_no_problems_on(&problems, &[("A", &a), ("B", &b), ("C", &c)]);
}

#[test]
fn a_session_bound_to_a_stdio_child_is_refused_by_another_replica() {
    let toml = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let d = replica(&toml, KEY, "");
    let e = replica(&toml, KEY, "");
    let version = "2025-06-18";
    let mut problems = Vec::new();
    let (session, _) = legacy_initialize(&d.url(), version);
    let status = status_with(&e.url(), &session, version);
    if status != 404 {
        problems.push(format!(
            "the stdio-bound session at the other replica: expected 404, got {status}"
        ));
    }
    // The owner still serves it.
    problems.extend(alternate(&[&d.url()], &session, version, 4));
    assert_no_problems_on(&problems, &[("D", &d), ("E", &e)]);
}

#[test]
fn replicas_sharing_a_key_serve_one_session_over_a_modern_upstream() {
    let upstream = LegacyHttpServer::start(&["--dual-era", "--rich-content"]);
    let toml = http_upstream_toml(&upstream.url);
    let f = replica(&toml, KEY, "");
    let g = replica(&toml, KEY, "");
    let other = replica(&toml, OTHER_KEY, "");
    let (f_url, g_url) = (f.url(), g.url());
    let mut problems = Vec::new();

    let version = "2025-11-25";
    let (session, _) = legacy_initialize(&f_url, version);
    problems.extend(alternate(&[&f_url, &g_url], &session, version, 12));
    let status = status_with(&other.url(), &session, version);
    if status != 404 {
        problems.push(format!(
            "the session at a replica with another key: expected 404, got {status}"
        ));
    }
    let status = status_with(&g_url, &tampered(&session), version);
    if status != 404 {
        problems.push(format!("a tampered id: expected 404, got {status}"));
    }

    // What the client negotiated travels with the id: the other replica downgrades for a
    // 2024-11-05 client (no audio, no resource_link) ...
    let (old, _) = legacy_initialize(&f_url, "2024-11-05");
    match ok_response(
        &legacy_request(
            &g_url,
            &old,
            "2024-11-05",
            5,
            "tools/call",
            json!({"name": "rich_content", "arguments": {}}),
        ),
        5,
    ) {
        Ok(r)
            if r["result"]["content"]
                .as_array()
                .is_some_and(|c| c.len() == 3 && c.iter().all(|i| i["type"] == json!("text"))) => {}
        other => problems.push(format!(
            "rich_content for a 2024-11-05 session via the other replica: only text expected: {other:?}"
        )),
    }
    // ... and serves a 2025-03-26 session's batch as a batch.
    let (batching, _) = legacy_initialize(&f_url, "2025-03-26");
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "b1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "b2"}}}
    ]);
    let reply = send(
        "POST",
        &g_url,
        &legacy_headers(&batching, "2025-03-26"),
        Some(&batch.to_string()),
    );
    let texts: Option<Vec<Value>> = serde_json::from_str::<Value>(&reply.body)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .map(|items| {
            let mut items = items;
            items.sort_by_key(|m| m["id"].as_u64());
            items.iter().map(|m| first_text(&m["result"])).collect()
        });
    if texts != Some(vec![json!("echo: b1"), json!("echo: b2")]) {
        problems.push(format!(
            "2025-03-26 batch via the other replica: {} {}",
            reply.status, reply.body
        ));
    }
    assert_no_problems_on(&problems, &[("F", &f), ("G", &g)]);
}

#[test]
fn replicas_sharing_a_key_serve_one_session_over_a_modern_stdio_upstream() {
    // A modern upstream is stateless: even over stdio, the session is not bound to one child.
    let toml = stdio_upstream_toml(&dual_era_stdio_command(&[]), "", "");
    let h = replica(&toml, KEY, "");
    let i = replica(&toml, KEY, "");
    let version = "2025-03-26";
    let (session, _) = legacy_initialize(&h.url(), version);
    let problems = alternate(&[&h.url(), &i.url()], &session, version, 8);
    assert_no_problems_on(&problems, &[("H", &h), ("I", &i)]);
}

/// `logging/setLevel` is part of the session: after setting it through one replica, the
/// other must filter the same way (the client cannot tell the replicas apart).
#[test]
#[ignore = "known limit (docs/replicas.md): the level is set after the sealed id exists, so only the replica that received logging/setLevel applies it"]
fn the_log_level_of_a_session_over_a_modern_upstream_holds_on_every_replica() {
    let upstream = LegacyHttpServer::start(&["--dual-era"]);
    let toml = http_upstream_toml(&upstream.url);
    let f = replica(&toml, KEY, "");
    let g = replica(&toml, KEY, "");
    let version = "2025-11-25";
    let (session, _) = legacy_initialize(&f.url(), version);
    let mut problems = Vec::new();
    if let Err(e) = set_level_warning(&f.url(), &session, version) {
        problems.push(format!("logging/setLevel via F: {e}"));
    }
    for (replica_name, url) in [("F", f.url()), ("G", g.url())] {
        for (id, level, delivered) in [(2, "error", true), (3, "info", false)] {
            let reply = legacy_request(
                &url,
                &session,
                version,
                id,
                "tools/call",
                json!({"name": "log_message", "arguments": {"level": level}}),
            );
            let logs = reply.notifications("notifications/message");
            if (logs.len() == 1) != delivered || ok_response(&reply, id).is_err() {
                problems.push(format!(
                    "setLevel warning via F, log_message {level} via {replica_name}: a notification expected: {delivered}; got {} {}",
                    reply.status, reply.body
                ));
            }
        }
    }
    assert_no_problems_on(&problems, &[("F", &f), ("G", &g)]);
}

#[test]
fn expired_ids_and_the_previous_key_after_its_overlap_get_404() {
    let upstream = LegacyHttpServer::start(&[]);
    let toml = http_upstream_toml(&upstream.url);
    let version = "2025-11-25";
    let mut problems = Vec::new();

    // Rotation: the new key with the previous one still accepted, for an hour and for 1 s.
    let old = replica(&toml, KEY, "lifetime = \"6s\"");
    let rotated = replica(
        &toml,
        OTHER_KEY,
        &format!("previous_key = \"{KEY}\"\nprevious_key_valid_for = \"1h\""),
    );
    let overlap_over = replica(
        &toml,
        OTHER_KEY,
        &format!("previous_key = \"{KEY}\"\nprevious_key_valid_for = \"1s\""),
    );
    let (session, _) = legacy_initialize(&old.url(), version);
    let minted = std::time::Instant::now();
    problems.extend(alternate(&[&old.url(), &rotated.url()], &session, version, 4));
    std::thread::sleep(Duration::from_millis(1200));
    let status = status_with(&overlap_over.url(), &session, version);
    if status != 404 {
        problems.push(format!(
            "an id sealed with the previous key after previous_key_valid_for: expected 404, got {status}"
        ));
    }
    problems.extend(alternate(&[&old.url(), &rotated.url()], &session, version, 2));

    // Expiry: `lifetime = "6s"` is sealed into the id; afterwards every replica refuses it,
    // whether it has served the session before (minting, rotated) or not (fresh).
    let fresh = replica(&toml, KEY, "");
    std::thread::sleep(Duration::from_secs(7).saturating_sub(minted.elapsed()));
    for (name, url) in [
        ("a replica that never served it", fresh.url()),
        ("the minting replica", old.url()),
        ("the rotated replica, which served it before", rotated.url()),
    ] {
        let status = status_with(&url, &session, version);
        if status != 404 {
            problems.push(format!("an expired id at {name}: expected 404, got {status}"));
        }
    }
    assert_no_problems_on(
        &problems,
        &[
            ("old", &old),
            ("rotated", &rotated),
            ("overlap over", &overlap_over),
            ("fresh", &fresh),
        ],
    );
}
