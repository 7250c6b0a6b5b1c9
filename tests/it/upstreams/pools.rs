//! Upstream pools with real processes: killed and crash-looping children,
//! HTTP members leaving and rejoining rotation, per-method timeouts with
//! cancellation, 1,000 concurrent calls over 4 children, overload (503),
//! graceful shutdown, replacement of worn children, and the bound on idle
//! connections to an HTTP upstream after a burst. State is read from the admin
//! listener's `/pools`.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

// === helpers ===

/// eragate with an admin listener; `rest` is the TOML after `[admin]` (no `[listen]`).
struct Gateway {
    eragate: Eragate,
    admin: String,
}

impl Gateway {
    fn start(rest: &str) -> Gateway {
        Gateway::start_with_args(rest, &[])
    }

    fn start_with_args(rest: &str, args: &[&str]) -> Gateway {
        let admin = format!("127.0.0.1:{}", free_port());
        let eragate = Eragate::start_with_args(&format!("[admin]\naddress = \"{admin}\"\n{rest}"), args);
        let gateway = Gateway {
            eragate,
            admin: format!("http://{admin}"),
        };
        wait_until("the admin listener", Duration::from_secs(10), || {
            gateway.admin_get("/healthz").is_some_and(|(s, _)| s == 200)
        });
        gateway
    }

    /// One stdio upstream `fixture` running `command`, with extra upstream keys (TOML after the
    /// `[[upstreams]]` header: plain keys first, then tables) and extra `[upstreams.stdio]` keys.
    fn stdio(command: &[String], upstream: &str, stdio: &str) -> Gateway {
        Gateway::start(&stdio_upstream_toml(command, upstream, stdio))
    }

    fn url(&self) -> String {
        self.eragate.url()
    }

    fn log(&self) -> String {
        self.eragate.log()
    }

    fn admin_get(&self, path: &str) -> Option<(u16, String)> {
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .ok()?;
        let response = client.get(format!("{}{path}", self.admin)).send().ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().unwrap_or_default()))
    }

    /// `/pools`, the first (only) upstream.
    fn pool(&self) -> Value {
        let (status, body) = self.admin_get("/pools").expect("GET /pools");
        assert_eq!(status, 200, "{body}");
        let pools: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("/pools is not JSON ({e}): {body}"));
        pools["upstreams"][0].clone()
    }

    /// `/pools`, member `index` of the first upstream.
    fn member(&self, index: usize) -> Value {
        self.pool()["members"][index].clone()
    }
}

/// The first text content of a successful tool result, or a panic with the message.
#[track_caller]
fn text_of(reply: &Reply, id: u64) -> String {
    let message = answer(reply, id);
    message["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("expected a tool result for {id}: {message}"))
        .to_owned()
}

/// A [`Gateway::stdio`] in front of the fixture, its children tagged for this run of test
/// `name` (see [`unique_tag`]); returns the tag too.
fn tagged_gateway(name: &str, upstream: &str, stdio: &str) -> (String, Gateway) {
    let tag = unique_tag(&format!("pools_{name}"));
    let gateway = Gateway::stdio(&tagged_fixture(&tag), upstream, stdio);
    (tag, gateway)
}

/// A JSON-RPC error for `id` that names the upstream `fixture`.
#[track_caller]
fn upstream_error(reply: &Reply, id: u64) -> Value {
    let message = answer(reply, id);
    let error = message
        .get("error")
        .unwrap_or_else(|| panic!("expected an error for {id}: {message}"));
    assert!(error["code"].is_i64(), "{message}");
    assert!(
        error["message"].as_str().is_some_and(|m| m.contains("'fixture'")),
        "the error names the upstream: {message}"
    );
    assert_eq!(error["data"]["upstream"], "fixture", "{message}");
    error.clone()
}

fn count_lines(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle)).count()
}

/// `n` concurrent `slow_progress` calls (`steps` × 50 ms); returns each reply with its id.
fn concurrent_slow_calls(url: &str, first_id: u64, n: u64, steps: u64) -> Vec<(u64, Reply)> {
    let handles: Vec<_> = (first_id..first_id + n)
        .map(|id| {
            let url = url.to_owned();
            std::thread::spawn(move || (id, modern_call(&url, id, "slow_progress", json!({"steps": steps}))))
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("caller")).collect()
}

// === tests ===

/// kill -9 of a stdio child in the middle of a streaming `tools/call`: that client gets a
/// JSON-RPC error at once (not after the timeout), the next request succeeds on a restarted
/// child, and `/pools` counts the restart.
#[test]
fn killed_child_fails_its_call_and_is_restarted() {
    let (tag, gateway) = tagged_gateway("kill", "request_timeout = \"20s\"", "spares = 0");
    let url = gateway.url();
    assert_eq!(
        text_of(&modern_call(&url, 1, "echo", json!({"text": "warm"})), 1),
        "echo: warm"
    );
    let mut children = Vec::new();
    wait_until("one child (spares = 0)", Duration::from_secs(10), || {
        children = pids_with(&tag);
        children.len() == 1
    });
    let victim = children[0];
    let before = gateway.member(0);
    assert_eq!(before["restarts"], 0, "{before}");
    assert_eq!(before["sessions"], 1, "{before}");

    // slow_progress with a progressToken: 200 steps of 50 ms, streamed as SSE.
    let stream_url = url.clone();
    let caller = std::thread::spawn(move || {
        post_modern(
            &stream_url,
            2,
            "tools/call",
            Some("slow_progress"),
            json!({"name": "slow_progress", "arguments": {"steps": 200}, "_meta": {"progressToken": "p2"}}),
        )
    });
    std::thread::sleep(Duration::from_millis(800));
    assert!(!caller.is_finished(), "slow_progress answered early");
    signal(victim, Signal::SIGKILL);
    let killed = Instant::now();
    let reply = caller.join().expect("caller");
    let elapsed = killed.elapsed();
    println!("streaming call on a SIGKILLed child answered {elapsed:?} after the kill");
    assert!(
        elapsed < Duration::from_secs(3),
        "answered {elapsed:?} after the kill (timeout 20 s)"
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let progress = reply
        .messages()
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    assert!(progress >= 1, "progress flowed before the kill: {reply:?}");
    let error = upstream_error(&reply, 2);
    println!("error after the kill: {error}");

    wait_until("/pools to count the restart", Duration::from_secs(3), || {
        gateway.member(0)["restarts"] == 1
    });

    // After the restart backoff (≤ backoff_initial = 250 ms), a new child serves.
    std::thread::sleep(Duration::from_millis(400));
    let reply = modern_call(&url, 3, "echo", json!({"text": "after the backoff"}));
    assert_eq!(text_of(&reply, 3), "echo: after the backoff", "log:\n{}", gateway.log());
    let now = pids_with(&tag);
    assert!(
        !now.contains(&victim) && now.len() == 1,
        "one new child replaced {victim}: {now:?}"
    );
    let after = gateway.member(0);
    println!("/pools after the restart: {after}");
    assert_eq!(after["sessions"], 1, "{after}");
    assert!(after["sessions_opened"].as_u64() >= Some(2), "{after}");
    assert_eq!(after["crash_loop"], false, "{after}");

    // Killed again mid-call: the very next request (sent the moment the error arrives)
    // must succeed on a restarted child, not fail with "restarting after crashes".
    let second = now[0];
    let hang_url = url.clone();
    let caller = std::thread::spawn(move || modern_call(&hang_url, 4, "hang", json!({})));
    std::thread::sleep(Duration::from_millis(500));
    signal(second, Signal::SIGKILL);
    upstream_error(&caller.join().expect("caller"), 4);
    let started = Instant::now();
    let reply = modern_call(&url, 5, "echo", json!({"text": "right after"}));
    println!(
        "request right after the second kill answered in {:?}: {}",
        started.elapsed(),
        reply.body
    );
    assert_eq!(
        text_of(&reply, 5),
        "echo: right after",
        "the next request after a kill succeeds on a restarted child"
    );
    assert_eq!(gateway.member(0)["restarts"], 2);
}

/// Two HTTP members: load is spread over both; one killed is taken out of rotation and
/// requests keep succeeding on the other; restarted on its port, it is probed back in.
#[test]
fn http_member_leaves_and_rejoins_rotation() {
    let a = TracedUpstream::start();
    let mut b = TracedUpstream::start();
    let gateway = Gateway::start(&format!(
        "[[upstreams]]\nname = \"fixture\"\nrequest_timeout = \"5s\"\n\
         [upstreams.http]\nurls = [\"{}\", \"{}\"]\n\
         [upstreams.pool]\nsize = 2\nmax_in_flight_per_session = 1\n\
         [upstreams.health]\ninterval = \"300ms\"\ntimeout = \"1s\"\nunhealthy_after = 1\nhealthy_after = 1\n",
        a.url, b.url
    ));
    let url = gateway.url();
    let mut next_id = 100;
    let mut round = |calls: u64| {
        let replies = concurrent_slow_calls(&url, next_id, calls, 4);
        next_id += calls;
        replies
    };

    // Both up: concurrent calls are spread over both members.
    for _ in 0..3 {
        for (id, reply) in round(6) {
            assert_eq!(text_of(&reply, id), "done", "log:\n{}", gateway.log());
        }
    }
    let (on_a, on_b) = (a.posted_bodies("tools/call").len(), b.posted_bodies("tools/call").len());
    println!("both up: tools/call on a = {on_a}, on b = {on_b}");
    assert_eq!(on_a + on_b, 18);
    assert!(
        on_a >= 3 && on_b >= 3,
        "spread over both members: a = {on_a}, b = {on_b}"
    );
    let pool = gateway.pool();
    println!("/pools with both up: {pool}");
    for member in pool["members"].as_array().expect("members") {
        assert_eq!(member["healthy"], true, "{member}");
        assert_eq!(member["sessions"], 1, "{member}");
    }

    // b dies: it is taken out of rotation.
    signal(b.proc.pid(), Signal::SIGKILL);
    let _ = b.proc.child.wait();
    let killed = Instant::now();
    wait_until("b out of rotation", Duration::from_secs(5), || {
        gateway.member(1)["healthy"] == false
    });
    println!(
        "b taken out {:?} after the kill: {}",
        killed.elapsed(),
        gateway.member(1)
    );
    assert!(gateway.member(1)["consecutive_failures"].as_u64() >= Some(1));
    assert_eq!(gateway.member(0)["healthy"], true);
    let a_before = a.posted_bodies("tools/call").len();
    for _ in 0..3 {
        for (id, reply) in round(6) {
            assert_eq!(
                text_of(&reply, id),
                "done",
                "requests keep succeeding on a; log:\n{}",
                gateway.log()
            );
        }
    }
    assert_eq!(
        a.posted_bodies("tools/call").len(),
        a_before + 18,
        "every call went to a"
    );

    // b returns on the same port: probed back in, then it serves again.
    let port = b.port;
    drop(b);
    let b = TracedUpstream::start_on(port);
    assert_eq!(b.port, port);
    let back = Instant::now();
    wait_until("b back in rotation", Duration::from_secs(5), || {
        gateway.member(1)["healthy"] == true
    });
    println!(
        "b back in rotation {:?} after its restart: {}",
        back.elapsed(),
        gateway.member(1)
    );
    for _ in 0..3 {
        for (id, reply) in round(6) {
            assert_eq!(text_of(&reply, id), "done", "log:\n{}", gateway.log());
        }
    }
    let on_b = b.posted_bodies("tools/call").len();
    println!("after b's return: tools/call on b = {on_b}");
    assert!(
        on_b >= 3,
        "b receives requests again: {on_b}; /pools: {}",
        gateway.pool()
    );
}

/// `timeouts."tools/call" = "1s"` overrides `request_timeout`: a hung call gets a timeout
/// error naming the upstream after about 1 s, and the upstream gets `notifications/cancelled`
/// for exactly that request.
#[test]
fn per_method_timeout_cancels_the_hung_call_upstream() {
    let server = TracedUpstream::start();
    let gateway = Gateway::start(&format!(
        "[[upstreams]]\nname = \"fixture\"\nrequest_timeout = \"30s\"\n\
         [upstreams.timeouts]\n\"tools/call\" = \"1s\"\n\
         [upstreams.http]\nurl = \"{}\"\n",
        server.url
    ));
    let url = gateway.url();
    assert_eq!(
        text_of(&modern_call(&url, 1, "echo", json!({"text": "warm"})), 1),
        "echo: warm"
    );
    // request_timeout is 30 s: the 1 s bound is the per-method one.
    let started = Instant::now();
    let reply = modern_call(&url, 2, "hang", json!({}));
    let elapsed = started.elapsed();
    println!("hung call answered after {elapsed:?}: {}", reply.body);
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(3),
        "took {elapsed:?}"
    );
    let error = upstream_error(&reply, 2);
    assert!(
        error["message"].as_str().is_some_and(|m| m.contains("1000 ms")),
        "the error says which bound passed: {error}"
    );

    // The upstream got notifications/cancelled for the hang request's upstream id.
    let hang = server
        .posted_bodies("tools/call")
        .into_iter()
        .find(|m| m["params"]["name"] == "hang")
        .expect("hang reached the upstream");
    let mut cancelled = Vec::new();
    wait_until("notifications/cancelled upstream", Duration::from_secs(3), || {
        cancelled = server.posted_bodies("notifications/cancelled");
        !cancelled.is_empty()
    });
    println!("upstream got {}", cancelled[0]);
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(
        cancelled[0]["params"]["requestId"], hang["id"],
        "cancels the hung request: {hang} / {}",
        cancelled[0]
    );

    // The session is still usable; a call just under the bound (500 ms) is not cut.
    assert_eq!(
        text_of(&modern_call(&url, 3, "slow_progress", json!({"steps": 10})), 3),
        "done"
    );
    assert_eq!(
        text_of(&modern_call(&url, 4, "echo", json!({"text": "after"})), 4),
        "echo: after"
    );
}

/// 1,000 concurrent modern `tools/call`s over 4 stdio children: every answer matches its
/// request (id and content); none is lost or crossed.
#[test]
fn thousand_concurrent_calls_over_four_children() {
    let (tag, gateway) = tagged_gateway(
        "thousand",
        "max_in_flight = 2000\nrequest_timeout = \"60s\"\n[upstreams.pool]\nsize = 4\nmax_in_flight_per_session = 4\nqueue = 2000\nqueue_timeout = \"60s\"",
        "spares = 0",
    );
    let url = gateway.url();
    assert_eq!(
        text_of(&modern_call(&url, 1, "echo", json!({"text": "warm"})), 1),
        "echo: warm"
    );

    const N: u64 = 1000;
    let nonce = std::process::id();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let started = Instant::now();
    let outcomes: Vec<(u64, String, Result<Reply, String>)> = runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(90))
            .build()
            .expect("client");
        let tasks: Vec<_> = (0..N)
            .map(|i| {
                let client = client.clone();
                let url = url.clone();
                let id = 10_000 + i;
                let text = format!("message {i} of {nonce} «{}»", "x".repeat((i % 7) as usize));
                tokio::spawn(async move {
                    let body = modern_body(id, "tools/call", json!({"name": "echo", "arguments": {"text": text}}));
                    let request = client
                        .post(&url)
                        .headers(modern_header_map("tools/call", Some("echo")))
                        .body(body);
                    let result = async {
                        let response = request.send().await.map_err(|e| e.to_string())?;
                        let status = response.status().as_u16();
                        let headers = response.headers().clone();
                        let body = response.text().await.map_err(|e| e.to_string())?;
                        Ok(Reply { status, headers, body })
                    }
                    .await;
                    (id, text, result)
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await.expect("task"));
        }
        outcomes
    });
    println!("{N} concurrent calls answered in {:?}", started.elapsed());
    let mut failures = Vec::new();
    for (id, text, result) in &outcomes {
        let reply = match result {
            Ok(reply) => reply,
            Err(e) => {
                failures.push(format!("{id}: transport error {e}"));
                continue;
            }
        };
        let messages = reply.messages();
        let answers: Vec<&Value> = messages
            .iter()
            .filter(|m| m.get("result").is_some() || m.get("error").is_some())
            .collect();
        if reply.status != 200
            || answers.len() != 1
            || answers[0]["id"] != json!(id)
            || answers[0]["result"]["content"][0]["text"] != json!(format!("echo: {text}"))
        {
            failures.push(format!("{id}: {} {}", reply.status, reply.body));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {N} wrong, e.g. {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );

    let member = gateway.member(0);
    println!("/pools after the burst: {member}");
    assert_eq!(member["sessions"], 4, "4 pooled sessions: {member}");
    assert_eq!(member["in_flight"], 0, "{member}");
    assert_eq!(member["restarts"], 0, "{member}");
    assert_eq!(pids_with(&tag).len(), 4, "4 children (spares = 0)");
    assert_eq!(gateway.pool()["in_flight"], 0);
}

/// `max_in_flight = 2`, `queue = 1`, `queue_timeout = 200ms`: excess calls get HTTP 503 with
/// `Retry-After` and a JSON-RPC error naming the upstream; the admitted ones succeed.
#[test]
fn overload_gets_503_with_retry_after() {
    let gateway = Gateway::stdio(
        &legacy_stdio_command(),
        "max_in_flight = 2\n[upstreams.pool]\nqueue = 1\nqueue_timeout = \"200ms\"",
        "",
    );
    let url = gateway.url();
    assert_eq!(
        text_of(&modern_call(&url, 1, "echo", json!({"text": "warm"})), 1),
        "echo: warm"
    );

    // 6 calls of 500 ms at once: 2 run, 1 waits 200 ms in the queue and is refused, 3 are
    // refused at once.
    let poll_url = url.clone();
    let handles: Vec<_> = (10..16)
        .map(|id| {
            let url = poll_url.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                let reply = modern_call(&url, id, "slow_progress", json!({"steps": 10}));
                (id, reply, started.elapsed())
            })
        })
        .collect();
    let mut peak = 0;
    while !handles.iter().all(|h| h.is_finished()) {
        let pool = gateway.pool();
        let in_flight = pool["in_flight"].as_u64().unwrap_or(0);
        assert!(in_flight <= 2, "never more than max_in_flight: {pool}");
        assert!(pool["queued"].as_u64() <= Some(1), "never more than the queue: {pool}");
        peak = peak.max(in_flight);
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut ok, mut refused, mut waited) = (0, 0, 0);
    for handle in handles {
        let (id, reply, elapsed) = handle.join().expect("caller");
        if reply.status == 503 {
            refused += 1;
            let retry = reply
                .header("retry-after")
                .unwrap_or_else(|| panic!("503 without Retry-After: {reply:?}"));
            assert!(
                retry.parse::<u64>().is_ok_and(|s| s >= 1),
                "Retry-After in seconds: {retry}"
            );
            assert_eq!(reply.json()["id"], id, "{reply:?}");
            let error = upstream_error(&reply, id);
            assert!(
                elapsed < Duration::from_millis(450),
                "refused without waiting for a slot ({elapsed:?}): {error}"
            );
            if elapsed >= Duration::from_millis(180) {
                waited += 1; // the one that waited out queue_timeout
            }
            println!("refused after {elapsed:?}: {}", reply.body);
        } else {
            assert_eq!(text_of(&reply, id), "done", "{reply:?}");
            ok += 1;
        }
    }
    println!("{ok} succeeded, {refused} refused with 503; peak in flight {peak}");
    assert_eq!(ok, 2, "max_in_flight calls succeed");
    assert_eq!(refused, 4);
    assert_eq!(
        waited, 1,
        "one call waited queue_timeout in the queue, the others were refused at once"
    );
    assert_eq!(peak, 2);

    // Nothing leaked: capacity is back.
    let pool = gateway.pool();
    assert_eq!(
        (pool["in_flight"].clone(), pool["queued"].clone()),
        (json!(0), json!(0)),
        "{pool}"
    );
    for (id, reply) in concurrent_slow_calls(&url, 20, 2, 2) {
        assert_eq!(text_of(&reply, id), "done");
    }

    // A call that waits in the queue less than queue_timeout gets through.
    let handles: Vec<_> = (30..33)
        .map(|id| {
            let url = url.clone();
            let steps = if id == 32 { 1 } else { 2 }; // 2 × 100 ms running, 1 queued
            std::thread::spawn(move || (id, modern_call(&url, id, "slow_progress", json!({"steps": steps}))))
        })
        .collect();
    for handle in handles {
        let (id, reply) = handle.join().expect("caller");
        assert_eq!(
            text_of(&reply, id),
            "done",
            "a short wait in the queue is served: {reply:?}"
        );
    }
}

/// SIGTERM with calls in flight: the ones that finish within `--shutdown-grace` are
/// answered with their result, a hung one with an error, every HTTP request completes,
/// new requests are refused, eragate exits within the grace and no child survives.
#[test]
fn sigterm_drains_in_flight_calls_then_stops_every_child() {
    let tag = unique_tag("pools_drain");
    let mut gateway = Gateway::start_with_args(
        &stdio_upstream_toml(
            &tagged_fixture(&tag),
            "[upstreams.pool]\nsize = 2\nmax_in_flight_per_session = 1",
            "",
        ),
        &["--shutdown-grace", "3s"],
    );
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, "2025-11-25");
    for (id, reply) in concurrent_slow_calls(&url, 1, 3, 1) {
        assert_eq!(text_of(&reply, id), "done");
    }
    // 2 pooled children, 1 dedicated to the legacy session, 1 spare.
    wait_until("four children", Duration::from_secs(10), || pids_with(&tag).len() >= 4);
    let children = pids_with(&tag);
    println!("children before SIGTERM: {children:?}; /pools: {}", gateway.pool());

    // In flight: 3 modern calls of 1.5 s, 1 hung modern call, 1 legacy call of 1.5 s.
    let mut handles: Vec<_> = (10..13)
        .map(|id| {
            let url = url.clone();
            std::thread::spawn(move || (id, modern_call(&url, id, "slow_progress", json!({"steps": 30}))))
        })
        .collect();
    let hang_url = url.clone();
    handles.push(std::thread::spawn(move || {
        (20, modern_call(&hang_url, 20, "hang", json!({})))
    }));
    let (legacy_url, legacy_session) = (url.clone(), session.clone());
    handles.push(std::thread::spawn(move || {
        let body = json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {"name": "slow_progress", "arguments": {"steps": 30}}}).to_string();
        (30, send("POST", &legacy_url, &legacy_headers(&legacy_session, "2025-11-25"), Some(&body)))
    }));
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        handles.iter().all(|h| !h.is_finished()),
        "calls still in flight at SIGTERM"
    );

    let started = Instant::now();
    signal(gateway.eragate.proc.pid(), Signal::SIGTERM);
    // Stop accepting: a request after SIGTERM is not served.
    std::thread::sleep(Duration::from_millis(200));
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let late = client
        .post(&url)
        .headers(modern_header_map("tools/call", Some("echo")))
        .body(modern_body(
            40,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "late"}}),
        ))
        .send();
    match &late {
        Err(e) => println!("request after SIGTERM refused: {e}"),
        Ok(r) => {
            println!("request after SIGTERM answered {}", r.status());
            assert!(
                r.status().as_u16() >= 500,
                "a request after SIGTERM is not served: {r:?}"
            );
        }
    }

    let exited = gateway.eragate.proc.terminate(Duration::from_secs(8));
    let elapsed = started.elapsed();
    println!("eragate exited {elapsed:?} after SIGTERM");
    assert!(exited, "eragate did not exit; log:\n{}", gateway.log());
    assert!(
        elapsed < Duration::from_millis(3000 + 1500),
        "exit took {elapsed:?} (grace 3 s); log:\n{}",
        gateway.log()
    );
    let status = gateway.eragate.proc.child.try_wait().expect("wait").expect("exited");
    assert!(status.success(), "exit status {status:?}");

    for handle in handles {
        let (id, reply) = handle.join().expect("caller");
        match id {
            20 => {
                upstream_error(&reply, id);
            }
            _ => assert_eq!(
                text_of(&reply, id),
                "done",
                "a call that finishes within the grace gets its result: {reply:?}"
            ),
        }
    }
    let survivors: Vec<u32> = children
        .iter()
        .copied()
        .filter(|p| pids_with(&tag).contains(p))
        .collect();
    assert!(
        survivors.is_empty() && pids_with(&tag).is_empty(),
        "children outlived eragate: {:?}",
        pids_with(&tag)
    );
}

/// A command that exits at once: requests fail fast with a clear error, the child is restarted
/// with backoff (not in a tight loop), and `/pools` reports `crash_loop` after
/// `crash_loop_after` crashes.
#[test]
fn crash_loop_is_reported_not_restarted_in_a_tight_loop() {
    let peers = peers();
    let command = vec![
        peers.python().to_owned(),
        "-c".to_owned(),
        "import sys; sys.exit(1)".to_owned(),
    ];
    let gateway = Gateway::stdio(
        &command,
        "[upstreams.restart]\nbackoff_initial = \"200ms\"\nbackoff_max = \"1s\"\ncrash_loop_after = 3",
        "spares = 0",
    );
    let url = gateway.url();
    let started = Instant::now();
    let mut id = 0;
    while started.elapsed() < Duration::from_millis(2500) {
        id += 1;
        let sent = Instant::now();
        let reply = modern_call(&url, id, "echo", json!({"text": "x"}));
        let took = sent.elapsed();
        assert!(took < Duration::from_secs(2), "request {id} took {took:?}");
        assert!(reply.status == 200 || reply.status == 503, "{reply:?}");
        let error = upstream_error(&reply, id);
        if id == 1 || id % 10 == 0 {
            println!("request {id} failed in {took:?}: {}", error["message"]);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = gateway.log();
    for line in log
        .lines()
        .filter(|l| l.contains("upstream child") || l.contains("crash"))
    {
        println!("  log: {line}");
    }
    let starts = count_lines(&log, "started upstream child") as u64;
    let member = gateway.member(0);
    println!("{id} requests in 2.5 s; {starts} children started; /pools: {member}");
    assert!(starts >= 3, "it is restarted at all: {starts}");
    // Backoff 100-200, 200-400, 400-800 ms, then 0.5-1 s: at most ~7 starts in 2.5 s.
    assert!(
        starts <= 8,
        "not restarted in a tight loop: {starts} starts in 2.5 s (backoff 200 ms doubling to 1 s)"
    );
    assert_eq!(member["crash_loop"], true, "crash_loop after 3 crashes: {member}");
    // Every child exited on its own: each one is a crash (the last may not be reaped yet).
    assert!(
        member["restarts"].as_u64() >= Some(starts - 1),
        "{starts} children crashed, /pools counts {}: {member}",
        member["restarts"]
    );
    assert!(
        count_lines(&gateway.log(), "crash-looping") >= 1,
        "the crash loop is logged"
    );
    assert_eq!(
        gateway.admin_get("/readyz").map(|(s, _)| s),
        Some(503),
        "not ready without a live member"
    );
    assert_eq!(gateway.admin_get("/healthz").map(|(s, _)| s), Some(200));
}

/// `restart.max_requests = 5`: worn children are drained and replaced; no request fails,
/// replacements are not counted as crashes, and replaced children are stopped.
#[test]
fn worn_children_are_replaced_without_failing_requests() {
    let (tag, gateway) = tagged_gateway(
        "worn",
        "[upstreams.pool]\nsize = 1\n[upstreams.restart]\nmax_requests = 5",
        "",
    );
    let url = gateway.url();
    let mut seen_children = std::collections::BTreeSet::new();
    for id in 1..=20u64 {
        assert_eq!(
            text_of(&modern_call(&url, id, "echo", json!({"text": id.to_string()})), id),
            format!("echo: {id}"),
            "log:\n{}",
            gateway.log()
        );
        seen_children.extend(pids_with(&tag));
    }
    // Concurrent calls across a replacement: the draining session finishes its calls.
    for round in 0..4u64 {
        for (id, reply) in concurrent_slow_calls(&url, 100 + round * 10, 4, 4) {
            assert_eq!(text_of(&reply, id), "done", "log:\n{}", gateway.log());
        }
        seen_children.extend(pids_with(&tag));
    }
    // A session that wore out while calls were on it goes at the next request, once idle.
    assert_eq!(
        text_of(&modern_call(&url, 200, "echo", json!({"text": "last"})), 200),
        "echo: last"
    );
    let member = gateway.member(0);
    println!("/pools after 37 calls with max_requests = 5: {member}; children seen: {seen_children:?}");
    assert!(
        member["sessions_opened"].as_u64() >= Some(5),
        "worn sessions replaced: {member}"
    );
    assert_eq!(member["restarts"], 0, "a replacement is not a crash: {member}");
    assert_eq!(member["sessions"], 1, "{member}");
    assert!(seen_children.len() >= 5, "new children: {seen_children:?}");
    // Replaced children are stopped: only the pooled child and the spare remain.
    wait_until("replaced children to exit", Duration::from_secs(5), || {
        pids_with(&tag).len() <= 2
    });
}

/// Established TCP connections from this machine to `port` on 127.0.0.1 (the client
/// side of each: `/proc/net/tcp` lists both ends; only the client's has `port` remote).
fn connections_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let remote = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(2) == Some(&remote.as_str()) && fields.get(3) == Some(&"01")
        })
        .count()
}

/// An upstream closes keep-alive connections left idle (uvicorn, under the Python SDK's
/// server, after 5 s): the next calls are not sent on a closed one, and all succeed.
#[test]
fn connections_the_upstream_closed_while_idle_are_not_reused() {
    let upstream = LegacyHttpServer::start(&[]);
    let port = port_of(&upstream.url);
    let gateway = Gateway::start(&format!(
        "[[upstreams]]\nname = \"fixture\"\n[upstreams.http]\nurl = \"{}\"\n",
        upstream.url
    ));
    let url = gateway.url();
    for (id, reply) in concurrent_slow_calls(&url, 1, 4, 2) {
        assert_eq!(text_of(&reply, id), "done", "log:\n{}", gateway.log());
    }
    let busy = connections_to(port);
    assert!(busy >= 2, "{busy} connections to the upstream after 4 concurrent calls");
    // uvicorn closes the idle ones; the pool learns it only when it next looks.
    assert!(
        poll_until(Duration::from_secs(15), || connections_to(port) < busy),
        "the upstream closed no idle connection (still {busy})"
    );
    for id in 10..16 {
        let reply = modern_call(&url, id, "echo", json!({"text": id.to_string()}));
        assert_eq!(text_of(&reply, id), format!("echo: {id}"), "log:\n{}", gateway.log());
    }
}

/// The port of an `http://127.0.0.1:PORT/...` URL.
fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("the upstream's port")
}

/// A burst of concurrent calls opens a connection per call in flight to an HTTP upstream;
/// once they end, no more than `http.max_idle_connections` stay open (the default, the
/// upstream's `max_in_flight` of 512, keeps them all: the control that shows the bound is
/// what closes the rest). How many calls overlap depends on the machine's load, so each
/// count is judged against the most connections the burst had open, sampled while it ran.
#[test]
fn idle_upstream_connections_are_bounded_after_a_burst() {
    for bound in [None, Some(2)] {
        let upstream = LegacyHttpServer::start(&[]);
        let port = port_of(&upstream.url);
        let setting = bound
            .map(|b| format!("max_idle_connections = {b}\n"))
            .unwrap_or_default();
        let gateway = Gateway::start(&format!(
            "[[upstreams]]\nname = \"fixture\"\n[upstreams.http]\nurl = \"{}\"\n{setting}",
            upstream.url
        ));
        let url = gateway.url();
        let burst = std::thread::spawn(move || concurrent_slow_calls(&url, 1, 24, 10));
        let mut opened = 0;
        while !burst.is_finished() {
            opened = opened.max(connections_to(port));
            std::thread::sleep(Duration::from_millis(5));
        }
        for (id, reply) in burst.join().expect("the burst") {
            assert_eq!(text_of(&reply, id), "done", "log:\n{}", gateway.log());
        }
        assert!(
            opened >= 4,
            "max_idle_connections = {bound:?}: the burst had at most {opened} connections open, too few to show a bound"
        );
        // The default keeps every one (but the era probe's and a handshake's, which may
        // close); a bound of 2 keeps two, and one more may still be on its way back.
        let (kept_at_least, kept_at_most) = match bound {
            None => (opened - 2, usize::MAX),
            Some(bound) => (0, bound + 1),
        };
        // Closed connections leave ESTABLISHED at once; give the pool a moment to drop them.
        poll_until(Duration::from_secs(10), || connections_to(port) <= kept_at_most);
        std::thread::sleep(Duration::from_millis(300));
        let open = connections_to(port);
        println!(
            "max_idle_connections = {bound:?}: {open} connections to the upstream after the burst (at most {opened} during it)"
        );
        assert!(
            (kept_at_least..=kept_at_most).contains(&open),
            "max_idle_connections = {bound:?}: {open} connections open, expected {kept_at_least}..={kept_at_most}\nlog:\n{}",
            gateway.log()
        );
    }
}
