//! Hot reload of `eragate run --config FILE`, on a file change and on SIGHUP: a
//! reload that adds an upstream path and changes another keeps a legacy session
//! (and its GET stream) on the changed upstream and an HTTP+SSE stream on an
//! unchanged one, keeps the unchanged upstream's children, sends new sessions
//! to the new upstream, and closes the old one once its session ends; a broken
//! file is refused with check-config's messages while traffic continues.
//! `[rate_limits]` and the `[limits]` quotas are applied by a reload while a call
//! is in flight; a file that moves the listen address is refused whole.
//! `[auth.oauth]` is swapped by a reload (a token for the old audience is then
//! refused, a call admitted before finishes), and so is `[log] level`; a reload of
//! `listen.sse_keep_alive` and `listen.stream_after` reaches the next answer and stream.

use crate::common;
use crate::common::oauth;

use std::io::{BufRead, BufReader};
use std::time::Duration;

use common::*;
use nix::sys::signal::Signal;
use serde_json::json;

const VERSION: &str = "2025-06-18";

/// `[listen]` with quick keep-alives, then one tagged legacy fixture per (name, path, tag).
fn config(upstreams: &[(&str, &str, &str)]) -> String {
    let mut text = String::from("[listen]\nsse_keep_alive = \"300ms\"\n");
    for (name, path, tag) in upstreams {
        let command = serde_json::to_string(&tagged_fixture(tag)).expect("json");
        text.push_str(&format!(
            "[[upstreams]]\nname = \"{name}\"\npath = \"{path}\"\n[upstreams.stdio]\ncommand = {command}\nkill_grace = \"200ms\"\n"
        ));
    }
    text
}

/// Replaces the running gateway's file whole (write, then rename), keeping its listen address.
fn rewrite(gateway: &Eragate, text: &str) {
    let text = text.replacen("[listen]", &format!("[listen]\naddress = \"{}\"", gateway.addr), 1);
    let path = gateway.config_path();
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text).expect("write config");
    std::fs::rename(&partial, &path).expect("rename config");
}

fn wait_for_log(gateway: &Eragate, what: &str, count: usize) {
    if !poll_until(Duration::from_secs(60), || gateway.log().matches(what).count() >= count) {
        panic!("no {what:?} (x{count}) in the log:\n{}", gateway.log());
    }
}

/// Waits for the log to say a child of `upstream` exited (its era probe's, at start).
fn wait_for_exit_of(gateway: &Eragate, upstream: &str) {
    let exited = || {
        let log = gateway.log();
        log.lines()
            .any(|line| line.contains("upstream child exited") && line.contains(upstream))
    };
    if !poll_until(Duration::from_secs(60), exited) {
        panic!("no child of {upstream} exited:\n{}", gateway.log());
    }
}

fn echo(url: &str, session: &str, id: u64) -> String {
    let reply = legacy_request(
        url,
        session,
        VERSION,
        id,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    tool_text(&answer(&reply, id)["result"]).to_owned()
}

fn wait_ready(gateway: &Eragate) {
    let url = format!("http://{}/readyz", gateway.addr);
    wait_until("readiness", Duration::from_secs(60), || {
        send("GET", &url, &[], None).status == 200
    });
}

#[test]
fn a_file_change_adds_a_path_and_drains_a_changed_upstream_without_dropping_sessions() {
    let (kept, old, new, added) = (
        unique_tag("reload_kept"),
        unique_tag("reload_old"),
        unique_tag("reload_new"),
        unique_tag("reload_added"),
    );
    let gateway = Eragate::start(&config(&[("kept", "/mcp", &kept), ("changed", "/other", &old)]));
    wait_ready(&gateway);
    let base = format!("http://{}", gateway.addr);
    let (other, added_url) = (format!("{base}/other"), format!("{base}/added"));

    // Before: a legacy session on the upstream about to change, with its GET stream open, and
    // an HTTP+SSE stream on the one that stays.
    let (session, _) = legacy_initialize(&other, VERSION);
    assert_eq!(echo(&other, &session, 1), "echo: hi");
    let stream = open_legacy_stream(&other, &session, VERSION, Duration::from_secs(30));
    assert_eq!(stream.status(), 200);
    let mut stream = BufReader::new(stream);
    let sse = http_client().get(format!("{base}/sse")).send().expect("GET /sse");
    let mut sse = BufReader::new(sse);
    let messages = std::iter::from_fn(|| {
        let mut line = String::new();
        (sse.read_line(&mut line).ok()? > 0).then_some(line)
    })
    .find_map(|line| line.strip_prefix("data:").map(|d| d.trim().to_owned()))
    .expect("the endpoint event");
    // The child that learned the kept upstream's era is closed once it has, and may take
    // the kill grace and more to exit; the children counted are the ones left serving.
    wait_for_exit_of(&gateway, "kept");
    let kept_pids = pids_with(&kept);
    assert!(!kept_pids.is_empty());

    rewrite(
        &gateway,
        &config(&[
            ("kept", "/mcp", &kept),
            ("changed", "/other", &new),
            ("added", "/added", &added),
        ]),
    );
    wait_for_log(&gateway, "configuration reloaded", 1);
    wait_ready(&gateway);

    // The session opened before goes on, on the upstream it was opened on; its stream is open.
    assert_eq!(echo(&other, &session, 2), "echo: hi", "{}", gateway.log());
    assert!(
        process_alive_with(&old),
        "the draining upstream was stopped under its session"
    );
    let mut line = String::new();
    assert!(stream.read_line(&mut line).expect("the GET stream after the reload") > 0);
    // The HTTP+SSE stream on the unchanged upstream still carries answers.
    let init = json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let posted = send("POST", &format!("{base}{messages}"), &PLAIN, Some(&init.to_string()));
    assert_eq!(posted.status, 202, "{posted:?}");
    let answered = std::iter::from_fn(|| {
        let mut line = String::new();
        (sse.read_line(&mut line).ok()? > 0).then_some(line)
    })
    .any(|line| line.contains("\"id\":5") && line.contains("protocolVersion"));
    assert!(answered, "no answer on the HTTP+SSE stream opened before the reload");
    // The unchanged upstream kept its children; the new path serves; new sessions go to the
    // changed upstream's new command.
    assert!(
        kept_pids.iter().all(|pid| pids_with(&kept).contains(pid)),
        "a kept upstream's child was replaced"
    );
    let (added_session, _) = legacy_initialize(&added_url, VERSION);
    assert_eq!(echo(&added_url, &added_session, 3), "echo: hi");
    assert!(process_alive_with(&added));
    let (fresh, _) = legacy_initialize(&other, VERSION);
    assert_eq!(echo(&other, &fresh, 4), "echo: hi");
    assert!(
        process_alive_with(&new),
        "a new session did not reach the changed upstream"
    );

    // A broken file is refused, named as check-config names it; traffic continues.
    rewrite(
        &gateway,
        &format!("{}\nbogus = 1\n", config(&[("kept", "/mcp", &kept)])),
    );
    wait_for_log(&gateway, "configuration refused", 1);
    assert!(
        gateway.log().contains("upstreams[0].stdio.bogus: unknown field"),
        "{}",
        gateway.log()
    );
    assert_eq!(echo(&other, &session, 6), "echo: hi");
    assert_eq!(
        echo(&added_url, &added_session, 7),
        "echo: hi",
        "the refused file removed /added"
    );

    // Once its last session ends, the replaced upstream closes.
    drop(stream);
    let ended = send("DELETE", &other, &legacy_headers(&session, VERSION), None);
    assert!(ended.status < 300, "{ended:?}");
    wait_until(
        "the drained upstream's children to stop",
        Duration::from_secs(60),
        || !process_alive_with(&old),
    );
    assert_eq!(echo(&other, &fresh, 8), "echo: hi");
}

#[test]
fn sighup_reloads_and_refuses_a_broken_file() {
    let kept = unique_tag("hup_kept");
    let added = unique_tag("hup_added");
    let gateway = Eragate::start_with_args(&config(&[("kept", "/mcp", &kept)]), &["--watch-config", "0s"]);
    wait_ready(&gateway);
    let base = format!("http://{}", gateway.addr);
    let (session, _) = legacy_initialize(&format!("{base}/mcp"), VERSION);

    // With the file not watched, SIGHUP is what reloads it.
    rewrite(
        &gateway,
        &config(&[("kept", "/mcp", &kept), ("added", "/added", &added)]),
    );
    signal(gateway.proc.pid(), Signal::SIGHUP);
    wait_for_log(&gateway, "configuration reloaded", 1);
    wait_ready(&gateway);
    let (added_session, _) = legacy_initialize(&format!("{base}/added"), VERSION);
    assert_eq!(echo(&format!("{base}/added"), &added_session, 1), "echo: hi");

    // A broken file: every problem logged as check-config prints it, the old config kept.
    rewrite(&gateway, "[listen]\n[[upstreams]]\nname = \"\"\npath = \"nope\"\n");
    signal(gateway.proc.pid(), Signal::SIGHUP);
    wait_for_log(&gateway, "configuration refused", 1);
    let log = gateway.log();
    for problem in [
        "upstreams[0].name: must not be empty",
        "upstreams[0].path: must start with '/'",
    ] {
        assert!(log.contains(problem), "{problem} not logged:\n{log}");
    }
    assert_eq!(echo(&format!("{base}/mcp"), &session, 2), "echo: hi");
    assert_eq!(echo(&format!("{base}/added"), &added_session, 3), "echo: hi");
}

#[test]
fn a_reload_applies_rate_limits_and_quotas_and_refuses_a_moved_listener() {
    let tag = unique_tag("reload_limits");
    // Set from the start, so the anonymous principal's requests are counted (left unset,
    // the quota spares the one principal of a gateway without authentication).
    let generous = "[limits]\nmax_in_flight_per_principal = 100\n";
    let gateway = Eragate::start(&format!("{}{generous}", config(&[("fixture", "/mcp", &tag)])));
    wait_ready(&gateway);
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, VERSION);
    let call = |id: u64, name: &str, arguments: serde_json::Value| {
        legacy_request(
            &url,
            &session,
            VERSION,
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
    };
    // A call in flight across the reload (30 s of progress steps; a client that waits 5 minutes).
    let slow = {
        let (url, session) = (url.clone(), session.clone());
        std::thread::spawn(move || {
            let body = request_body(
                1,
                "tools/call",
                json!({"name": "slow_progress", "arguments": {"steps": 600}}),
            );
            let client = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(300))
                .build();
            let mut request = client.expect("client").post(&url).body(body);
            for (name, value) in legacy_headers(&session, VERSION) {
                request = request.header(name, value);
            }
            let response = request.send().expect("the slow call");
            (response.status().as_u16(), response.text().unwrap_or_default())
        })
    };
    let policies =
        "[limits]\nmax_in_flight_per_principal = 1\n\n[rate_limits]\ntools.echo = { requests = 1, per = \"1h\" }\n";
    rewrite(&gateway, &format!("{}{policies}", config(&[("fixture", "/mcp", &tag)])));
    wait_for_log(&gateway, "[rate_limits] reloaded", 1);
    wait_for_log(&gateway, "[limits] quotas reloaded", 1);
    assert!(!gateway.log().contains("restart eragate"), "{}", gateway.log());

    // The one place in flight is the slow call's: another call is refused...
    let refused = call(2, "add", json!({"a": 1, "b": 2}));
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(
        refused.json()["error"]["data"]["limit"],
        "requests in flight",
        "{refused:?}"
    );
    // ...and the slow call, in flight across the reload, is answered.
    let (status, body) = slow.join().expect("the slow call");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""text":"done""#), "the slow call's answer: {body}");
    // The new rate limit: one echo an hour.
    assert_eq!(call(3, "echo", json!({"text": "hi"})).status, 200);
    let limited = call(4, "echo", json!({"text": "hi"}));
    assert_eq!(
        (limited.status, limited.json()["error"]["data"]["limit"].clone()),
        (429, json!("tool"))
    );

    // A file that moves the listener is refused whole: the rate limit stays.
    let moved = format!("[listen]\naddress = \"127.0.0.1:{}\"\n", free_port());
    let text = config(&[("fixture", "/mcp", &tag)]).replacen("[listen]\n", &moved, 1);
    let path = gateway.config_path();
    std::fs::write(path.with_extension("partial"), text).expect("write config");
    std::fs::rename(path.with_extension("partial"), &path).expect("rename config");
    wait_for_log(&gateway, "configuration refused: listen.address moved", 1);
    assert_eq!(call(5, "echo", json!({"text": "hi"})).status, 429, "{}", gateway.log());
}

/// `[listen]`, `[auth.oauth]` for `issuer` with `extra` keys, and the legacy fixture.
fn oauth_config(issuer: &str, extra: &str) -> String {
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    format!("[listen]\n{}\n{upstream}", oauth::oauth_toml(issuer, extra))
}

#[test]
fn a_reload_of_auth_oauth_refuses_a_token_for_the_old_audience_and_lets_a_call_in_flight_finish() {
    let idp = oauth::Idp::start();
    let gateway = Eragate::start(&oauth_config(&idp.issuer, ""));
    let url = gateway.url();
    let token = idp.token("tester", &url, "mcp:read");
    let answered = oauth::call_as(&url, &token, "before");
    assert_eq!(answered.status, 200, "{answered:?}");

    // A call admitted under the old audience, still running when the new one comes.
    let slow = {
        let (url, token) = (url.clone(), token.clone());
        std::thread::spawn(move || {
            let mut headers = modern_headers("tools/call", Some("slow_progress"));
            let bearer = format!("Bearer {token}");
            headers.push(("authorization", bearer.as_str()));
            let body = modern_body(
                2,
                "tools/call",
                json!({"name": "slow_progress", "arguments": {"steps": 100}}),
            );
            send("POST", &url, &headers, Some(&body))
        })
    };
    let elsewhere = "https://elsewhere.example/mcp";
    rewrite(
        &gateway,
        &oauth_config(&idp.issuer, &format!("resource = \"{elsewhere}\"")),
    );
    wait_for_log(&gateway, "[auth.oauth] reloaded", 1);
    assert!(!gateway.log().contains("restart eragate"), "{}", gateway.log());

    let refused = oauth::call_as(&url, &token, "after");
    assert_eq!(refused.status, 401, "{refused:?}");
    assert_eq!(oauth::challenge(&refused).1.as_deref(), Some("invalid_token"));
    let metadata = send(
        "GET",
        &format!("http://{}/.well-known/oauth-protected-resource/mcp", gateway.addr),
        &[],
        None,
    );
    assert_eq!(metadata.json()["resource"], elsewhere, "{metadata:?}");
    let for_elsewhere = idp.token("tester", elsewhere, "mcp:read");
    let answered = oauth::call_as(&url, &for_elsewhere, "after");
    assert_eq!(answered.status, 200, "{answered:?}");

    let slow = slow.join().expect("the slow call");
    assert_eq!(slow.status, 200, "{slow:?}");
    assert!(
        slow.body.contains(r#""text":"done""#),
        "the slow call's answer: {slow:?}"
    );
}

#[test]
fn a_reload_changes_the_log_level() {
    let tag = unique_tag("reload_log");
    let with_level = |level: &str| format!("{}[log]\nlevel = \"{level}\"\n", config(&[("fixture", "/mcp", &tag)]));
    // ERAGATE_LOG empty: the file's level decides.
    let gateway = Eragate::start_with_env(&with_level("warn"), &[], &[("ERAGATE_LOG", "")]);
    wait_ready(&gateway);
    rewrite(&gateway, &with_level("info"));
    wait_for_log(&gateway, "[log] level reloaded", 1);
    let log = gateway.log();
    // Logged at info while the level was still warn: left out.
    assert!(!log.contains("configuration reloaded"), "{log}");
    assert!(!log.contains("restart eragate"), "{log}");
    // The reload's own lines are at info: now in.
    rewrite(&gateway, &format!("{}\n", with_level("info")));
    wait_for_log(&gateway, "configuration reloaded", 1);
}

#[test]
fn a_reload_applies_a_lowered_value_bound_and_body_size_to_the_next_request() {
    let tag = unique_tag("reload_bounds");
    let base = config(&[("fixture", "/mcp", &tag)]);
    let gateway = Eragate::start(&base);
    wait_ready(&gateway);
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, VERSION);
    assert_eq!(echo(&url, &session, 1), "echo: hi");

    // A tools/call of echo is about ten JSON values: five are too few.
    rewrite(&gateway, &format!("{base}[limits]\nmax_request_values = 5\n"));
    wait_for_log(&gateway, "[limits] reloaded", 1);
    let call = |id: u64| {
        legacy_request(
            &url,
            &session,
            VERSION,
            id,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )
    };
    let refused = call(2);
    assert_eq!(refused.status, 413, "{refused:?}");
    assert_eq!(refused.json()["error"]["code"], -32600, "{refused:?}");

    // The value bound back up, the body bound down to a few bytes.
    rewrite(
        &gateway,
        &base.replacen("[listen]\n", "[listen]\nmax_body_bytes = 16\n", 1),
    );
    wait_for_log(&gateway, "[limits] reloaded", 2);
    let too_long = call(3);
    assert_eq!(too_long.status, 413, "{too_long:?}");
    rewrite(&gateway, &base);
    wait_for_log(&gateway, "[limits] reloaded", 3);
    assert_eq!(echo(&url, &session, 4), "echo: hi");
    assert!(!gateway.log().contains("restart eragate"), "{}", gateway.log());
}

#[test]
fn a_reload_applies_stream_timing_to_the_next_answer_and_stream() {
    let tag = unique_tag("reload_streams");
    let timing = |keep_alive: &str, stream_after: &str| {
        config(&[("fixture", "/mcp", &tag)]).replacen(
            "sse_keep_alive = \"300ms\"",
            &format!("sse_keep_alive = \"{keep_alive}\"\nstream_after = \"{stream_after}\""),
            1,
        )
    };
    let gateway = Eragate::start(&timing("1h", "1h"));
    wait_ready(&gateway);
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, VERSION);
    // Silent for at least half a second (ten steps of 50 ms, no progressToken to report to).
    let silent_call = |id: u64| {
        let reply = legacy_request(
            &url,
            &session,
            VERSION,
            id,
            "tools/call",
            json!({"name": "slow_progress", "arguments": {"steps": 10}}),
        );
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(tool_text(&answer(&reply, id)["result"]), "done", "{reply:?}");
        reply
    };
    let before = silent_call(1);
    assert!(
        before.content_type_is("application/json"),
        "within stream_after (1h): {before:?}"
    );

    rewrite(&gateway, &timing("200ms", "100ms"));
    wait_for_log(&gateway, "[listen] stream timing reloaded", 1);
    let after = silent_call(2);
    assert!(
        after.content_type_is("text/event-stream"),
        "silent past the reloaded stream_after (100ms): {after:?}"
    );
    // A GET stream opened now gets keep-alive comments (with the start's 1h, none would come
    // before the stream's read timeout).
    let stream = open_legacy_stream(&url, &session, VERSION, Duration::from_secs(30));
    assert_eq!(stream.status(), 200);
    let comment = BufReader::new(stream)
        .lines()
        .map(|line| line.expect("a keep-alive comment before the read timeout"))
        .find(|line| line.starts_with(':'));
    assert!(comment.is_some(), "the stream ended without a keep-alive comment");
    assert!(!gateway.log().contains("restart eragate"), "{}", gateway.log());
}
