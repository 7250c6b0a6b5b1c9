//! `[[policies]]`: what each principal sees and calls on a path, with real peers. A
//! federation on `/mcp` of the Python SDK fixture (`legacy_server.py`, Streamable HTTP,
//! legacy) and the TypeScript SDK v2 fixture (`ts2_server.mjs`, 2026-07-28), and the
//! fixture alone on `/solo`; alice and bob hold static tokens (bob by a `[groups]`
//! entry). The Python SDK client of both eras lists and calls as each; raw 2026-07-28
//! requests check what the SDK does not show (descriptions, `cacheScope`). And
//! resource updates from a 2026-07-28 upstream (`legacy_server.py --dual-era
//! --subscriptions`) reach a principal's listen or GET stream only for a resource its
//! policy shows.

use crate::common;

use std::io::BufReader;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::tokens::{ALICE, BOB, auth_toml};
use common::*;
use serde_json::{Value, json};

struct Served {
    eragate: Eragate,
    _py: LegacyHttpServer,
    _ts2: ListeningServer,
}

impl Served {
    fn start() -> Served {
        let py = LegacyHttpServer::start(&[]);
        let ts2 = ts2_http_server();
        let config = format!(
            r#"
{auth}

[groups]
readers = ["bob"]

[[policies]]
path = "/mcp"
subjects = ["alice"]
[policies.tools]
deny = ["*_add"]
rename = {{ py_echo = "say" }}
descriptions = {{ py_echo = "Says it back, for alice." }}
[policies.prompts]
allow = ["ts2_*"]
[policies.resources]
deny = ["py+*"]

[[policies]]
path = "/mcp"
groups = ["readers"]
[policies.tools]
allow = ["ts2_*"]

[[policies]]
path = "/solo"
subjects = ["bob"]
[policies.tools]
deny = ["echo"]

[[upstreams]]
name = "py"
request_timeout = "10s"
[upstreams.http]
url = "{py}"

[[upstreams]]
name = "ts2"
[upstreams.http]
url = "{ts2}"

[[upstreams]]
name = "solo"
path = "/solo"
[upstreams.http]
url = "{py}"
"#,
            auth = auth_toml(),
            py = py.url,
            ts2 = ts2.url,
        );
        Served {
            eragate: Eragate::start(&config),
            _py: py,
            _ts2: ts2,
        }
    }

    fn url(&self, path: &str) -> String {
        self.eragate.url().replace("/mcp", path)
    }

    /// The Python SDK client in `mode` as the bearer of `token`, running `plan` on `path`.
    fn plan(&self, path: &str, token: &str, mode: &str, plan: Value) -> Value {
        let plan = plan.to_string();
        let url = self.url(path);
        let header = format!("Authorization: Bearer {token}");
        let args = [
            "--mode",
            mode,
            "--url",
            &url,
            "--header",
            &header,
            "--scenario",
            "plan",
            "--plan",
            &plan,
        ];
        py_client(&args).unwrap_or_else(|e| panic!("{e}\nlog:\n{}", self.eragate.log()))
    }

    /// A raw 2026-07-28 request on `path` as the bearer of `token`: its JSON-RPC answer.
    fn modern(&self, path: &str, token: &str, id: u64, method: &str, name: Option<&str>, params: Value) -> Value {
        let bearer = format!("Bearer {token}");
        let mut headers = modern_headers(method, name);
        headers.push(("authorization", &bearer));
        let reply = send(
            "POST",
            &self.url(path),
            &headers,
            Some(&modern_body(id, method, params)),
        );
        answer(&reply, id)
    }
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn each_principal_sees_and_calls_what_its_policy_allows_on_a_federated_path() {
    let served = Served::start();
    for mode in ["legacy", "2026-07-28"] {
        let alice = served.plan(
            "/mcp",
            ALICE,
            mode,
            json!([
                ["list_tools"],
                ["call", "say", {"text": "hi"}],
                ["call", "py_echo", {"text": "hi"}],
                ["call", "ts2_add", {"a": 1, "b": 2}],
                ["call", "ts2_echo", {"text": "t"}],
                ["list_prompts"],
                ["prompt", "py_greet", {"name": "Ada"}],
                ["prompt", "ts2_greet", {"name": "Bo"}],
                ["list_resources"],
                ["read", "py+test://static/hello"],
            ]),
        );
        let results = &alice["results"];
        let tools = names(&results["0:list_tools"]["names"]);
        assert!(tools.contains(&"say".to_owned()), "{mode}: renamed: {tools:?}");
        assert!(tools.contains(&"ts2_echo".to_owned()), "{mode}: {tools:?}");
        for hidden in ["py_echo", "py_add", "ts2_add"] {
            assert!(
                !tools.contains(&hidden.to_owned()),
                "{mode}: {hidden} hidden: {tools:?}"
            );
        }
        assert_eq!(
            results["1:call"]["text"], "echo: hi",
            "{mode}: the new name routes back: {alice}"
        );
        for step in ["2:call", "3:call"] {
            let error = &results[step]["error"];
            assert_eq!(
                error["code"], -32602,
                "{mode}: {step} fails like an unknown tool: {alice}"
            );
            assert!(
                error["message"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("Unknown tool"),
                "{mode}: {alice}"
            );
        }
        assert_eq!(results["4:call"]["text"], "echo: t", "{mode}: {alice}");
        let prompts = names(&results["5:list_prompts"]["names"]);
        assert_eq!(prompts, ["ts2_greet"], "{mode}: only the allowed prompts: {alice}");
        assert_eq!(results["6:prompt"]["error"]["code"], -32602, "{mode}: {alice}");
        assert_eq!(results["7:prompt"]["text"], "Hello, Bo!", "{mode}: {alice}");
        let uris = names(&results["8:list_resources"]["uris"]);
        assert!(
            !uris.is_empty() && uris.iter().all(|u| !u.starts_with("py+")),
            "{mode}: {uris:?}"
        );
        assert_eq!(results["9:read"]["error"]["code"], -32002, "{mode}: {alice}");

        let bob = served.plan(
            "/mcp",
            BOB,
            mode,
            json!([["list_tools"], ["call", "py_echo", {"text": "x"}], ["call", "say", {"text": "x"}], ["call", "ts2_add", {"a": 2, "b": 3}], ["read", "py+test://static/hello"]]),
        );
        let results = &bob["results"];
        let tools = names(&results["0:list_tools"]["names"]);
        assert!(
            !tools.is_empty() && tools.iter().all(|t| t.starts_with("ts2_")),
            "{mode}: bob's group sees ts2 only: {tools:?}"
        );
        assert!(tools.contains(&"ts2_add".to_owned()), "{mode}: {tools:?}");
        assert_eq!(results["1:call"]["error"]["code"], -32602, "{mode}: {bob}");
        assert_eq!(
            results["2:call"]["error"]["code"], -32602,
            "{mode}: alice's names are not bob's: {bob}"
        );
        assert_eq!(results["3:call"]["text"], "5", "{mode}: {bob}");
        assert_eq!(
            results["4:read"]["text"], "hello world",
            "{mode}: no resource rule for bob: {bob}"
        );
    }

    // What the SDK does not show: the description alice's policy gives, and private lists.
    let listed = served.modern("/mcp", ALICE, 1, "tools/list", None, json!({}));
    let tools = listed["result"]["tools"].as_array().cloned().unwrap_or_default();
    let say = tools
        .iter()
        .find(|t| t["name"] == "say")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(say["description"], "Says it back, for alice.", "{listed}");
    assert!(
        say.get("inputSchema").is_some(),
        "the rest of the tool passes: {listed}"
    );
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");
    for (id, method) in [
        (2, "prompts/list"),
        (3, "resources/list"),
        (4, "resources/templates/list"),
    ] {
        let listed = served.modern("/mcp", BOB, id, method, None, json!({}));
        assert_eq!(listed["result"]["cacheScope"], "private", "{method}: {listed}");
    }
    let called = served.modern(
        "/mcp",
        ALICE,
        5,
        "tools/call",
        Some("say"),
        json!({"name": "say", "arguments": {"text": "raw"}}),
    );
    assert_eq!(called["result"]["content"][0]["text"], "echo: raw", "{called}");
}

#[test]
fn a_policy_narrows_a_single_upstream_path_and_check_config_checks_it() {
    let served = Served::start();
    for mode in ["legacy", "2026-07-28"] {
        let bob = served.plan(
            "/solo",
            BOB,
            mode,
            json!([["list_tools"], ["call", "echo", {"text": "x"}], ["call", "add", {"a": 1, "b": 1}]]),
        );
        let tools = names(&bob["results"]["0:list_tools"]["names"]);
        assert!(
            !tools.contains(&"echo".to_owned()) && tools.contains(&"add".to_owned()),
            "{mode}: {tools:?}"
        );
        assert_eq!(bob["results"]["1:call"]["error"]["code"], -32602, "{mode}: {bob}");
        assert_eq!(bob["results"]["2:call"]["text"], "2", "{mode}: {bob}");

        // No entry names alice on /solo: she sees everything.
        let alice = served.plan(
            "/solo",
            ALICE,
            mode,
            json!([["list_tools"], ["call", "echo", {"text": "y"}]]),
        );
        let tools = names(&alice["results"]["0:list_tools"]["names"]);
        assert!(tools.contains(&"echo".to_owned()), "{mode}: {tools:?}");
        assert_eq!(alice["results"]["1:call"]["text"], "echo: y", "{mode}: {alice}");
    }
    // ... but privately: another principal's list on this path differs.
    let listed = served.modern("/solo", ALICE, 1, "tools/list", None, json!({}));
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("check.toml");
    let text = "[[upstreams]]\nname = \"a\"\nstdio.command = [\"x\"]\n\n[[policies]]\npath = \"/elsewhere\"\n\
                groups = [\"nobody\"]\n[policies.tools]\nrename = { a = \"c\", b = \"c\" }\n";
    std::fs::write(&path, text).expect("write");
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_eragate"))
        .arg("check-config")
        .arg(&path)
        .output()
        .expect("check-config");
    assert_eq!(checked.status.code(), Some(2), "{checked:?}");
    let stderr = String::from_utf8_lossy(&checked.stderr);
    for key in ["policies[0].path", "policies[0].groups", "policies[0].tools.rename.b"] {
        assert!(stderr.contains(key), "{key} in {stderr}");
    }
}

const OPEN: &str = "test://items/open";
const SECRET: &str = "test://items/secret";

/// An SSE body read on a thread: its messages as they come, until it ends.
fn reading(response: reqwest::blocking::Response) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut events = SseLines(BufReader::new(response));
        while let Some(message) = events.next_message() {
            if tx.send(message).is_err() {
                return;
            }
        }
    });
    rx
}

/// The `uri`s of the `notifications/resources/updated` among `messages`.
fn updated(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/resources/updated")
        .filter_map(|m| m["params"]["uri"].as_str().map(str::to_owned))
        .collect()
}

/// A 2026-07-28 `subscriptions/listen` as the bearer of `token`: its acknowledgement
/// and what follows it.
fn listen_as(url: &str, token: &str, id: u64, uris: &[&str]) -> (Value, mpsc::Receiver<Value>) {
    let bearer = format!("Bearer {token}");
    let body = modern_body(
        id,
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": uris}}),
    );
    let mut request = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
        .post(url)
        .header("authorization", &bearer)
        .body(body);
    for (name, value) in modern_headers("subscriptions/listen", None) {
        request = request.header(name, value);
    }
    let response = request.send().expect("listen");
    assert_eq!(response.status().as_u16(), 200, "{token}");
    let messages = reading(response);
    let ack = messages
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("no acknowledgement for {token}: {e}"));
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    (ack, messages)
}

/// A legacy (2025-06-18) session as the bearer of `token`: the session id.
fn legacy_session_as(url: &str, token: &str) -> String {
    let bearer = format!("Bearer {token}");
    let mut headers = PLAIN.to_vec();
    headers.push(("authorization", &bearer));
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "policies", "version": "0"}}});
    let reply = send("POST", url, &headers, Some(&body.to_string()));
    assert_eq!(reply.status, 200, "{reply:?}");
    let session = reply.header("mcp-session-id").expect("a session").to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let sent = legacy_as(url, token, &session, &initialized);
    assert_eq!(sent.status, 202, "{sent:?}");
    session
}

/// A legacy POST of `body` on `session` as the bearer of `token`.
fn legacy_as(url: &str, token: &str, session: &str, body: &str) -> Reply {
    let bearer = format!("Bearer {token}");
    let mut headers = legacy_headers(session, "2025-06-18");
    headers.push(("authorization", &bearer));
    send("POST", url, &headers, Some(body))
}

/// A legacy `resources/subscribe` of `uri`: its JSON-RPC answer.
fn legacy_subscribe(url: &str, token: &str, session: &str, id: u64, uri: &str) -> Value {
    let body = request_body(id, "resources/subscribe", json!({"uri": uri}));
    answer(&legacy_as(url, token, session, &body), id)
}

/// The GET stream of a legacy session, as the bearer of `token`.
fn legacy_stream_as(url: &str, token: &str, session: &str) -> mpsc::Receiver<Value> {
    let response = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
        .get(url)
        .header("accept", "text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .expect("GET stream");
    assert_eq!(response.status().as_u16(), 200, "{token}");
    reading(response)
}

/// Asks the upstream to publish an update of each of `uris`, in order.
fn touch(url: &str, id: u64, uris: &[&str]) {
    let bearer = format!("Bearer {BOB}");
    for (i, uri) in uris.iter().enumerate() {
        let id = id + i as u64;
        let mut headers = modern_headers("tools/call", Some("touch"));
        headers.push(("authorization", &bearer));
        let body = modern_body(id, "tools/call", json!({"name": "touch", "arguments": {"uri": uri}}));
        let touched = send("POST", url, &headers, Some(&body));
        assert_eq!(tool_text(&answer(&touched, id)["result"]), format!("touched {uri}"));
    }
}

#[test]
fn a_resource_update_reaches_only_the_principals_whose_policy_shows_it() {
    let upstream = LegacyHttpServer::start(&["--dual-era", "--subscriptions"]);
    let config = format!(
        "{auth}\n[[policies]]\npath = \"/mcp\"\nsubjects = [\"alice\"]\n[policies.resources]\n\
         deny = [\"test://items/secret*\"]\n\n{upstream}",
        auth = auth_toml(),
        upstream = remote_upstream_toml("http", &upstream.url, ""),
    );
    let gateway = Eragate::start(&config);
    let url = gateway.url();

    // 2026-07-28: alice's listen is acknowledged without what she may not see; bob's whole.
    let (ack, alice) = listen_as(&url, ALICE, 1, &[SECRET, OPEN]);
    let subscribed = &ack["params"]["notifications"]["resourceSubscriptions"];
    assert_eq!(subscribed, &json!([OPEN]), "alice's: {ack}");
    let (ack, bob) = listen_as(&url, BOB, 2, &[SECRET, OPEN]);
    let subscribed = &ack["params"]["notifications"]["resourceSubscriptions"];
    assert_eq!(subscribed, &json!([SECRET, OPEN]), "bob's: {ack}");
    touch(&url, 10, &[SECRET, OPEN]);
    let next = |messages: &mpsc::Receiver<Value>, who: &str| {
        messages
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("{who}: no update ({e}); log:\n{}", gateway.log()))
    };
    let first = next(&alice, "alice");
    assert_eq!(
        updated(std::slice::from_ref(&first)),
        [OPEN],
        "alice's first update is the one she sees: {first}"
    );
    assert_eq!(
        first["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1,
        "{first}"
    );
    let (first, second) = (next(&bob, "bob"), next(&bob, "bob"));
    assert_eq!(updated(&[first, second]), [SECRET, OPEN], "bob sees both");

    // Legacy: alice cannot subscribe to what she may not see, and her GET stream
    // carries no update of it; bob's carries it.
    let alice_session = legacy_session_as(&url, ALICE);
    let refused = legacy_subscribe(&url, ALICE, &alice_session, 20, SECRET);
    assert_eq!(refused["error"]["code"], -32002, "like an unknown resource: {refused}");
    let taken = legacy_subscribe(&url, ALICE, &alice_session, 21, OPEN);
    assert!(taken.get("result").is_some(), "{taken}");
    let bob_session = legacy_session_as(&url, BOB);
    let taken = legacy_subscribe(&url, BOB, &bob_session, 22, SECRET);
    assert!(taken.get("result").is_some(), "{taken}");
    let alice_stream = legacy_stream_as(&url, ALICE, &alice_session);
    let bob_stream = legacy_stream_as(&url, BOB, &bob_session);
    // A subscription becomes a listen upstream in the background: touch until both arrive.
    let (mut alice_seen, mut bob_seen) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut id = 100;
    while !(updated(&alice_seen).contains(&OPEN.to_owned()) && updated(&bob_seen).contains(&SECRET.to_owned())) {
        assert!(
            Instant::now() < deadline,
            "alice {alice_seen:?}, bob {bob_seen:?}; log:\n{}",
            gateway.log()
        );
        touch(&url, id, &[SECRET, OPEN]);
        id += 2;
        std::thread::sleep(Duration::from_millis(200));
        alice_seen.extend(alice_stream.try_iter());
        bob_seen.extend(bob_stream.try_iter());
    }
    assert!(
        !updated(&alice_seen).contains(&SECRET.to_owned()),
        "alice's GET stream: {alice_seen:?}"
    );
    assert!(
        !updated(&bob_seen).contains(&OPEN.to_owned()),
        "bob did not subscribe to it: {bob_seen:?}"
    );
    // Her listen never carried it either.
    let later: Vec<Value> = alice.try_iter().collect();
    assert!(
        !updated(&later).contains(&SECRET.to_owned()),
        "alice's listen: {later:?}"
    );
    drop(bob);
}

/// Every client edge serves through the same policy stage: a catch-all entry (the open
/// gateway's anonymous caller, stdio's too) over Streamable HTTP, the old HTTP+SSE transport
/// and `eragate stdio`, of both eras where the edge has them. A renamed prompt's new name
/// routes back for `prompts/get` and `completion/complete`; the old one fails like an unknown
/// prompt; a denied tool and resource fail like unknown ones.
#[test]
fn every_client_edge_calls_and_completes_under_the_policy() {
    let py = LegacyHttpServer::start(&[]);
    let config = format!(
        "[[policies]]\npath = \"/mcp\"\n[policies.tools]\ndeny = [\"add\"]\n[policies.prompts]\n\
         rename = {{ greet = \"hello\" }}\n[policies.resources]\ndeny = [\"test://static/*\"]\n\n{}",
        remote_upstream_toml("http", &py.url, "")
    );
    let gateway = Eragate::start(&config);
    let plan = json!([
        ["call", "echo", {"text": "x"}],
        ["call", "add", {"a": 1, "b": 2}],
        ["prompt", "hello", {"name": "Ada"}],
        ["prompt", "greet", {"name": "Ada"}],
        ["complete", "hello", "name", "a"],
        ["complete", "greet", "name", "a"],
        ["read", "test://static/hello"],
    ])
    .to_string();
    let check = |how: &str, report: &Value| {
        let results = &report["results"];
        assert_eq!(results["0:call"]["text"], "echo: x", "{how}: {report}");
        assert_eq!(results["1:call"]["error"]["code"], -32602, "{how}: {report}");
        assert_eq!(results["2:prompt"]["text"], "Hello, Ada!", "{how}: {report}");
        assert_eq!(results["3:prompt"]["error"]["code"], -32602, "{how}: {report}");
        assert_eq!(results["4:complete"]["values"], json!(["alice"]), "{how}: {report}");
        assert_eq!(results["5:complete"]["error"]["code"], -32602, "{how}: {report}");
        assert_eq!(results["6:read"]["error"]["code"], -32002, "{how}: {report}");
    };
    let url = gateway.url();
    for mode in ["legacy", "2026-07-28"] {
        let report = py_client(&["--mode", mode, "--url", &url, "--scenario", "plan", "--plan", &plan])
            .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", gateway.log()));
        check(&format!("Streamable HTTP, {mode}"), &report);
    }
    let sse = url.clone() + "/sse";
    let report = py_client(&["--mode", "legacy", "--sse", &sse, "--scenario", "plan", "--plan", &plan])
        .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", gateway.log()));
    check("HTTP+SSE", &report);
    let stdio = format!(
        "{} stdio --config {}",
        env!("CARGO_BIN_EXE_eragate"),
        gateway.config_path().display()
    );
    for mode in ["legacy", "2026-07-28"] {
        let report = py_client(&["--mode", mode, "--stdio", &stdio, "--scenario", "plan", "--plan", &plan])
            .unwrap_or_else(|e| panic!("stdio {mode}: {e}"));
        check(&format!("stdio, {mode}"), &report);
    }
}

/// Touches `uris` in rounds until each of `streams` has carried an update of `last`,
/// collecting what they carry (a subscription may become a listen upstream in the background).
fn touch_until(
    gateway: &Eragate,
    id: &mut u64,
    uris: &[&str],
    last: &str,
    streams: &[&mpsc::Receiver<Value>],
) -> Vec<Vec<Value>> {
    let url = gateway.url();
    let mut seen: Vec<Vec<Value>> = streams.iter().map(|_| Vec::new()).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.iter().all(|messages| updated(messages).contains(&last.to_owned())) {
        assert!(Instant::now() < deadline, "{seen:?}; log:\n{}", gateway.log());
        touch(&url, *id, uris);
        *id += uris.len() as u64;
        std::thread::sleep(Duration::from_millis(200));
        for (stream, messages) in streams.iter().zip(&mut seen) {
            messages.extend(stream.try_iter());
        }
    }
    seen
}

/// Open streams follow a reload: once alice's policy hides a resource, the updates of it
/// her listen and her legacy GET stream were already subscribed to stop reaching her.
#[test]
fn a_reload_that_hides_a_resource_stops_its_updates_on_open_streams() {
    let upstream = LegacyHttpServer::start(&["--dual-era", "--subscriptions"]);
    let config = |denied: &str| {
        format!(
            "{auth}\n[[policies]]\npath = \"/mcp\"\nsubjects = [\"alice\"]\n[policies.resources]\n\
             deny = [\"{denied}\"]\n\n{upstream}",
            auth = auth_toml(),
            upstream = remote_upstream_toml("http", &upstream.url, ""),
        )
    };
    let gateway = Eragate::start(&config("test://items/other*"));
    let url = gateway.url();
    let (ack, listen) = listen_as(&url, ALICE, 1, &[SECRET, OPEN]);
    let subscribed = &ack["params"]["notifications"]["resourceSubscriptions"];
    assert_eq!(subscribed, &json!([SECRET, OPEN]), "not hidden yet: {ack}");
    let session = legacy_session_as(&url, ALICE);
    for (id, uri) in [(2, SECRET), (3, OPEN)] {
        let taken = legacy_subscribe(&url, ALICE, &session, id, uri);
        assert!(taken.get("result").is_some(), "{taken}");
    }
    let stream = legacy_stream_as(&url, ALICE, &session);
    let mut id = 10;
    // Before: both streams carry both updates, in the order they were touched.
    let before = touch_until(&gateway, &mut id, &[SECRET, OPEN], OPEN, &[&listen, &stream]);
    for (what, messages) in ["listen", "GET stream"].iter().zip(&before) {
        assert!(
            updated(messages).contains(&SECRET.to_owned()),
            "{what} before the reload: {messages:?}"
        );
    }

    let text = std::fs::read_to_string(gateway.config_path()).expect("config");
    let text = text.replace("test://items/other*", "test://items/secret*");
    let partial = gateway.config_path().with_extension("partial");
    std::fs::write(&partial, text).expect("write config");
    std::fs::rename(&partial, gateway.config_path()).expect("rename config");
    let mut probe = 100;
    wait_until("the reloaded policy", Duration::from_secs(30), || {
        probe += 1;
        legacy_subscribe(&url, ALICE, &session, probe, SECRET)["error"]["code"] == -32002
    });
    // Every update touched before is delivered before an update of OPEN touched now.
    touch_until(&gateway, &mut id, &[OPEN], OPEN, &[&listen, &stream]);
    let after = touch_until(&gateway, &mut id, &[SECRET, OPEN], OPEN, &[&listen, &stream]);
    for (what, messages) in ["listen", "GET stream"].iter().zip(&after) {
        assert!(
            !updated(messages).contains(&SECRET.to_owned()),
            "{what} after the reload: {messages:?}"
        );
    }
}

/// A listen opened while no `[[policies]]` entry applied follows a reload that adds one:
/// alice's listen, opened unnarrowed, stops carrying the updates of the resource the new
/// policy hides, while an allowed one's still come.
#[test]
fn a_listen_opened_before_policies_are_added_follows_the_reload() {
    let upstream = LegacyHttpServer::start(&["--dual-era", "--subscriptions"]);
    let unnarrowed = format!(
        "{auth}\n{upstream}",
        auth = auth_toml(),
        upstream = remote_upstream_toml("http", &upstream.url, ""),
    );
    let gateway = Eragate::start(&unnarrowed);
    let url = gateway.url();
    let (ack, listen) = listen_as(&url, ALICE, 1, &[SECRET, OPEN]);
    let subscribed = &ack["params"]["notifications"]["resourceSubscriptions"];
    assert_eq!(subscribed, &json!([SECRET, OPEN]), "nothing hidden yet: {ack}");
    let mut id = 10;
    let before = touch_until(&gateway, &mut id, &[SECRET, OPEN], OPEN, &[&listen]);
    assert!(
        updated(&before[0]).contains(&SECRET.to_owned()),
        "before the reload: {:?}",
        before[0]
    );

    // The running configuration (eragate's test harness completes it) with a policy added.
    let running = std::fs::read_to_string(gateway.config_path()).expect("config");
    let narrowed = format!(
        "{running}\n[[policies]]\npath = \"/mcp\"\nsubjects = [\"alice\"]\n[policies.resources]\n\
         deny = [\"test://items/secret*\"]\n"
    );
    let partial = gateway.config_path().with_extension("partial");
    std::fs::write(&partial, narrowed).expect("write config");
    std::fs::rename(&partial, gateway.config_path()).expect("rename config");
    let session = legacy_session_as(&url, ALICE);
    let mut probe = 100;
    let reloaded = poll_until(Duration::from_secs(30), || {
        probe += 1;
        legacy_subscribe(&url, ALICE, &session, probe, SECRET)["error"]["code"] == -32002
    });
    assert!(reloaded, "the policy was not reloaded; log:\n{}", gateway.log());
    // Every update touched before is delivered before an update of OPEN touched now.
    touch_until(&gateway, &mut id, &[OPEN], OPEN, &[&listen]);
    let after = touch_until(&gateway, &mut id, &[SECRET, OPEN], OPEN, &[&listen]);
    assert!(
        !updated(&after[0]).contains(&SECRET.to_owned()),
        "after the reload: {:?}",
        after[0]
    );
}
