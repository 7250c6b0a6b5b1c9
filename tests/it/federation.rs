//! Federation: three real servers of different eras and transports on one path, seen by
//! real clients of both eras. Members: server-everything over stdio (legacy), the Python
//! SDK fixture (`legacy_server.py`) over Streamable HTTP (legacy) and the TypeScript SDK v2
//! fixture (`ts2_server.mjs`) over Streamable HTTP (2026-07-28). Clients: the Python SDK
//! client in `legacy` and `2026-07-28` modes (`py_client.py --scenario plan`), and raw
//! 2026-07-28 HTTP for what the SDK does not expose (`_meta`, listens); the Python SDK client
//! also over the old HTTP+SSE transport and over stdio (`eragate stdio --config`), the Python
//! SDK client subscribing to a member's resource, and a raw legacy client cancelling a call.
//! The fixture and ts2 serve the same names (`echo`, `add`, `greet`…), and server-everything
//! has an `echo` too: every prefix mode meets collisions.

use crate::common;

use std::io::BufReader;
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

/// The members, and eragate federating them on `/mcp`.
struct Federation {
    eragate: Eragate,
    /// `http://` + the admin listener.
    admin: String,
    py: LegacyHttpServer,
    _ts2: ListeningServer,
}

impl Federation {
    /// `prefix_mode` is the value given on the first member (the others leave it unset).
    fn start(prefix_mode: &str) -> Federation {
        Federation::start_with(prefix_mode, "")
    }

    /// [`Federation::start`] with `extra` configuration before the upstreams.
    fn start_with(prefix_mode: &str, extra: &str) -> Federation {
        let py = LegacyHttpServer::start(&[]);
        let ts2 = ts2_http_server();
        let everything = serde_json::to_string(&everything_stdio_command()).expect("json");
        let admin = format!("127.0.0.1:{}", free_port());
        let config = format!(
            r#"
[admin]
address = "{admin}"
{extra}
[[upstreams]]
name = "everything"
prefix_mode = "{prefix_mode}"
[upstreams.stdio]
command = {everything}
kill_grace = "200ms"

[[upstreams]]
name = "py"
request_timeout = "10s"
[upstreams.http]
url = "{py}"

[[upstreams]]
name = "ts2"
[upstreams.http]
url = "{ts2}"
"#,
            py = py.url,
            ts2 = ts2.url,
        );
        let eragate = Eragate::start(&config);
        Federation {
            eragate,
            admin: format!("http://{admin}"),
            py,
            _ts2: ts2,
        }
    }

    /// The Python SDK client in `mode` running `plan`: its results by step.
    fn plan(&self, mode: &str, plan: Value) -> Value {
        let plan = plan.to_string();
        let url = self.eragate.url();
        py_client(&["--mode", mode, "--url", &url, "--scenario", "plan", "--plan", &plan])
            .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", self.eragate.log()))
    }

    /// A raw 2026-07-28 request's JSON-RPC answer.
    fn modern(&self, id: u64, method: &str, name: Option<&str>, params: Value) -> Value {
        let reply = post_modern(&self.eragate.url(), id, method, name, params);
        answer(&reply, id)
    }
}

/// Every member's tools, prompts and resources, through the Python SDK client of `mode`.
fn every_member_serves(federation: &Federation, mode: &str) {
    let report = federation.plan(
        mode,
        json!([
            ["list_tools"],
            ["call", "everything_echo", {"message": "hi"}],
            ["call", "py_echo", {"text": "from py"}],
            ["call", "ts2_add", {"a": 2, "b": 3}],
            ["list_resources"],
            ["read", "py+test://static/hello"],
            ["read", "ts2+test://items/42"],
            ["read", "everything+demo://resource/static/document/features.md"],
            ["list_prompts"],
            ["prompt", "py_greet", {"name": "Ada"}],
            ["prompt", "ts2_greet", {"name": "Bo"}],
            ["prompt", "everything_simple-prompt", {}],
            ["complete", "py_greet", "name", "a"],
            ["call", "nobody_echo", {}],
        ]),
    );
    let results = &report["results"];
    let tools = names(&results["0:list_tools"]["names"]);
    for tool in [
        "everything_echo",
        "everything_get-sum",
        "py_echo",
        "py_add",
        "ts2_echo",
        "ts2_add",
    ] {
        assert!(tools.contains(&tool.to_owned()), "{mode}: {tool} in {tools:?}");
    }
    assert!(
        !tools.contains(&"echo".to_owned()),
        "{mode}: always prefixed: {tools:?}"
    );
    assert_eq!(results["1:call"]["text"], "Echo: hi", "{mode}: {report}");
    assert_eq!(results["2:call"]["text"], "echo: from py", "{mode}: {report}");
    assert_eq!(results["3:call"]["text"], "5", "{mode}: {report}");
    assert_eq!(results["3:call"]["structured"], json!({"sum": 5}), "{mode}: {report}");
    let uris = names(&results["4:list_resources"]["uris"]);
    for uri in [
        "py+test://static/hello",
        "everything+demo://resource/static/document/features.md",
    ] {
        assert!(uris.contains(&uri.to_owned()), "{mode}: {uri} in {uris:?}");
    }
    assert_eq!(results["5:read"]["text"], "hello world", "{mode}: {report}");
    assert_eq!(results["5:read"]["uri"], "py+test://static/hello", "{mode}: {report}");
    assert_eq!(results["6:read"]["text"], "item 42", "{mode}: {report}");
    assert!(results["7:read"]["length"].as_u64() > Some(0), "{mode}: {report}");
    let prompts = names(&results["8:list_prompts"]["names"]);
    for prompt in ["py_greet", "ts2_greet", "everything_simple-prompt"] {
        assert!(prompts.contains(&prompt.to_owned()), "{mode}: {prompt} in {prompts:?}");
    }
    assert_eq!(results["9:prompt"]["text"], "Hello, Ada!", "{mode}: {report}");
    assert_eq!(results["10:prompt"]["text"], "Hello, Bo!", "{mode}: {report}");
    assert!(results["11:prompt"]["messages"].as_u64() >= Some(1), "{mode}: {report}");
    assert_eq!(results["12:complete"]["values"], json!(["alice"]), "{mode}: {report}");
    let unknown = &results["13:call"]["error"];
    assert_eq!(unknown["code"], -32602, "{mode}: {report}");
    let message = unknown["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("nobody_echo") && message.contains("everything, py, ts2"),
        "{mode}: {message}"
    );
}

#[test]
fn clients_of_both_eras_reach_every_member() {
    let federation = Federation::start("always");
    for mode in ["legacy", "2026-07-28"] {
        every_member_serves(&federation, mode);
    }

    // One handshake: eragate's identity, every member listed, capabilities merged.
    let legacy = federation.plan("legacy", json!([]));
    assert_eq!(legacy["server_info"]["name"], "eragate", "{legacy}");
    let capabilities = &legacy["capabilities"];
    assert!(
        capabilities.get("prompts").is_some() && capabilities.get("completions").is_some(),
        "{legacy}"
    );
    // Its GET stream carries the list changes server-everything announces.
    assert_eq!(capabilities["tools"]["listChanged"], true, "{legacy}");
    let discover = federation.modern(1, "server/discover", None, json!({}));
    let result = &discover["result"];
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "eragate",
        "{discover}"
    );
    let members: Vec<&str> = result["_meta"]["dev.eragate/members"]
        .as_array()
        .unwrap_or_else(|| panic!("members in {discover}"))
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(members, ["everything", "py", "ts2"], "{discover}");
    assert_eq!(
        result["capabilities"]["tools"]["listChanged"], true,
        "everything can say so, on a listen: {discover}"
    );
    assert_eq!(
        result["capabilities"]["resources"]["subscribe"], true,
        "everything's resources, subscribed on a listen: {discover}"
    );
    assert_eq!(
        capabilities["resources"]["subscribe"], true,
        "everything's resources, subscribed for a legacy client too: {legacy}"
    );
    let instructions = result["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains("## ts2\n\nTypeScript SDK v2 fixture"),
        "{discover}"
    );
}

#[test]
fn a_member_down_is_left_out_and_the_others_serve() {
    let mut federation = Federation::start("always");
    let before = federation.modern(1, "tools/list", None, json!({}));
    assert!(
        tool_names(&before["result"]).contains(&"py_echo".to_owned()),
        "{before}"
    );
    assert!(
        before["result"]["_meta"].get("dev.eragate/leftOut").is_none(),
        "{before}"
    );

    assert!(
        federation.py.proc.terminate(Duration::from_secs(5)),
        "the py member stops"
    );
    let after = federation.modern(2, "tools/list", None, json!({}));
    let result = &after["result"];
    let tools = tool_names(result);
    assert!(!tools.iter().any(|t| t.starts_with("py_")), "{after}");
    assert!(
        tools.contains(&"everything_echo".to_owned()) && tools.contains(&"ts2_echo".to_owned()),
        "{after}"
    );
    let left_out = &result["_meta"]["dev.eragate/leftOut"];
    assert_eq!(left_out[0]["name"], "py", "{after}");
    assert_eq!(result["ttlMs"], 0, "a page missing a member is not to be kept: {after}");

    // Its tools fail naming it; the others' still answer, for both eras.
    let report = federation.plan(
        "legacy",
        json!([["call", "py_echo", {"text": "x"}], ["call", "ts2_echo", {"text": "still"}], ["list_tools"]]),
    );
    let failed = report["results"]["0:call"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(failed.contains("'py'"), "the error names the member: {report}");
    assert_eq!(report["results"]["1:call"]["text"], "echo: still", "{report}");
    let listed = names(&report["results"]["2:list_tools"]["names"]);
    assert!(listed.contains(&"everything_echo".to_owned()), "{report}");
    assert_eq!(
        report["results"]["2:list_tools"]["meta"]["dev.eragate/leftOut"][0]["name"], "py",
        "{report}"
    );

    // Operators see every member, the federation it serves in, and the count of members left out.
    let pools = http_client()
        .get(format!("{}/pools", federation.admin))
        .send()
        .and_then(|r| r.text())
        .expect("/pools");
    let pools: Value = serde_json::from_str(&pools).expect("/pools is JSON");
    let upstreams = pools["upstreams"].as_array().cloned().unwrap_or_default();
    let listed: Vec<&str> = upstreams.iter().filter_map(|u| u["upstream"].as_str()).collect();
    assert_eq!(listed, ["everything", "py", "ts2"], "{pools}");
    for upstream in &upstreams {
        assert_eq!(upstream["federation"]["path"], "/mcp", "{pools}");
        assert!(upstream["federation"]["left_out"].as_u64() >= Some(2), "{pools}");
    }
}

#[test]
fn on_collision_prefixes_only_shared_names() {
    let mut federation = Federation::start("on_collision");
    let report = federation.plan(
        "2026-07-28",
        json!([
            ["list_tools"],
            ["call", "get-sum", {"a": 1, "b": 2}],
            ["call", "py_echo", {"text": "p"}],
            ["call", "ts2_echo", {"text": "t"}],
            ["call", "everything_echo", {"message": "e"}],
            ["prompt", "ts2_greet", {"name": "Cy"}],
            ["call", "echo", {"text": "whose?"}],
        ]),
    );
    let results = &report["results"];
    let tools = names(&results["0:list_tools"]["names"]);
    for tool in ["get-sum", "everything_echo", "py_echo", "ts2_echo"] {
        assert!(tools.contains(&tool.to_owned()), "{tool} in {tools:?}");
    }
    assert!(
        !tools.contains(&"echo".to_owned()) && !tools.contains(&"everything_get-sum".to_owned()),
        "{tools:?}"
    );
    assert_eq!(results["1:call"]["text"], "The sum of 1 and 2 is 3.", "{report}");
    assert_eq!(results["2:call"]["text"], "echo: p", "{report}");
    assert_eq!(results["3:call"]["text"], "echo: t", "{report}");
    assert_eq!(results["4:call"]["text"], "Echo: e", "{report}");
    assert_eq!(results["5:prompt"]["text"], "Hello, Cy!", "{report}");
    assert_eq!(
        results["6:call"]["error"]["code"], -32602,
        "a shared name is no one's: {report}"
    );

    // With py down, a call to its tool fails naming it, and the others still answer. (A name
    // the names do not hold makes eragate learn them again, at most once per interval: see
    // `calls_naming_unknown_names_do_not_relist_the_members_each_time`, where the error also
    // names the member that could not be listed.)
    assert!(
        federation.py.proc.terminate(Duration::from_secs(5)),
        "the py member stops"
    );
    let called = federation.modern(
        7,
        "tools/call",
        Some("py_echo"),
        json!({"name": "py_echo", "arguments": {"text": "x"}}),
    );
    let message = called["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("'py'"), "{called}");
    let called = federation.modern(
        8,
        "tools/call",
        Some("ts2_echo"),
        json!({"name": "ts2_echo", "arguments": {"text": "t"}}),
    );
    assert_eq!(tool_text(&called["result"]), "echo: t", "{called}");
}

#[test]
fn never_refuses_shared_names() {
    // check-config starts the members and lists their names: echo is everything's and py's.
    let py = LegacyHttpServer::start(&[]);
    let everything = serde_json::to_string(&everything_stdio_command()).expect("json");
    let members = format!(
        "[[upstreams]]\nname = \"everything\"\nprefix_mode = \"never\"\n[upstreams.stdio]\ncommand = {everything}\n\
         kill_grace = \"200ms\"\n[[upstreams]]\nname = \"py\"\n[upstreams.http]\nurl = \"{}\"\n",
        py.url
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let checked = check_config(&dir, &members);
    assert_eq!(checked.status.code(), Some(2), "{checked:?}");
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(
        stderr.contains("upstreams[0].prefix_mode: members everything and py both offer \"echo\""),
        "{stderr}"
    );

    // eragate run refuses to start, naming the same collision.
    let address = format!("127.0.0.1:{}", free_port());
    let path = dir.path().join("run.toml");
    std::fs::write(&path, format!("[listen]\naddress = \"{address}\"\n{members}")).expect("write");
    let ran = std::process::Command::new(env!("CARGO_BIN_EXE_eragate"))
        .args(["run", "--config"])
        .arg(&path)
        .output()
        .expect("eragate run");
    assert!(!ran.status.success(), "{ran:?}");
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        stderr.contains("refusing to start") && stderr.contains("both offer \"echo\""),
        "{stderr}"
    );

    // Under `always` the same members are fine (and check-config starts none of them).
    let always = members.replace("prefix_mode = \"never\"", "prefix_mode = \"always\"");
    let checked = check_config(&dir, &always);
    assert!(checked.status.success(), "{checked:?}");

    // What check-config knows without the members: modes must agree, prefixes must differ.
    let text = "[[upstreams]]\nname = \"a\"\nprefix_mode = \"never\"\nstdio.command = [\"x\"]\n\
                [[upstreams]]\nname = \"b\"\nprefix_mode = \"always\"\ntool_prefix = \"a\"\nstdio.command = [\"x\"]\n";
    let checked = check_config(&dir, text);
    assert_eq!(checked.status.code(), Some(2), "{checked:?}");
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(stderr.contains("upstreams[1].prefix_mode: "), "{stderr}");
    assert!(stderr.contains("upstreams[1].tool_prefix: "), "{stderr}");
}

/// `eragate check-config` of `text`, written in `dir`.
fn check_config(dir: &tempfile::TempDir, text: &str) -> std::process::Output {
    let path = dir.path().join("check.toml");
    std::fs::write(&path, text).expect("write");
    std::process::Command::new(env!("CARGO_BIN_EXE_eragate"))
        .arg("check-config")
        .arg(&path)
        .output()
        .expect("check-config")
}

#[test]
fn a_list_change_in_a_member_reaches_a_listening_client() {
    let federation = Federation::start("always");
    let url = federation.eragate.url();
    let before = federation.modern(1, "resources/list", None, json!({}));
    let count = before["result"]["resources"].as_array().map_or(0, Vec::len);

    let watched = "everything+demo://resource/static/document/features.md";
    let wanted = json!({"resourcesListChanged": true, "toolsListChanged": true, "resourceSubscriptions": [watched]});
    let response = open_listen(&url, 7, wanted);
    let mut events = SseLines(BufReader::new(response));
    let ack = events.next_message().expect("an acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7,
        "{ack}"
    );
    let honoured = &ack["params"]["notifications"];
    assert_eq!(honoured["resourcesListChanged"], true, "everything honours it: {ack}");
    assert_eq!(
        honoured["resourceSubscriptions"],
        json!([watched]),
        "its own URI, exposed: {ack}"
    );

    // server-everything registers a resource for the file it compresses: its resource list changes.
    let called = federation.modern(
        2,
        "tools/call",
        Some("everything_gzip-file-as-resource"),
        json!({"name": "everything_gzip-file-as-resource",
               "arguments": {"name": "note.txt", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"}}),
    );
    assert!(called.get("result").is_some(), "{called}");

    let deadline = Instant::now() + Duration::from_secs(20);
    let changed = loop {
        assert!(
            Instant::now() < deadline,
            "no list_changed; log:\n{}",
            federation.eragate.log()
        );
        let message = events
            .next_message()
            .unwrap_or_else(|| panic!("the listen ended; log:\n{}", federation.eragate.log()));
        if message["method"] == "notifications/resources/list_changed" {
            break message;
        }
    };
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7,
        "{changed}"
    );

    // The subscribed resource's updates come with its exposed URI.
    let toggled = federation.modern(
        4,
        "tools/call",
        Some("everything_toggle-subscriber-updates"),
        json!({"name": "everything_toggle-subscriber-updates", "arguments": {}}),
    );
    assert!(toggled.get("result").is_some(), "{toggled}");
    let updated = loop {
        assert!(
            Instant::now() < deadline,
            "no resources/updated; log:\n{}",
            federation.eragate.log()
        );
        let message = events
            .next_message()
            .unwrap_or_else(|| panic!("the listen ended; log:\n{}", federation.eragate.log()));
        if message["method"] == "notifications/resources/updated" {
            break message;
        }
    };
    assert_eq!(updated["params"]["uri"], watched, "{updated}");
    let after = federation.modern(3, "resources/list", None, json!({}));
    let uris = names(&Value::Array(
        after["result"]["resources"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|r| r["uri"].clone())
            .collect(),
    ));
    assert_eq!(uris.len(), count + 1, "the next list has the new resource: {after}");
    assert!(
        uris.iter()
            .any(|u| u.starts_with("everything+") && u.contains("note.txt")),
        "{uris:?}"
    );
}

#[test]
fn a_legacy_client_hears_list_changes_on_its_get_stream() {
    let federation = Federation::start("always");
    let url = federation.eragate.url();
    let version = "2025-06-18";
    let (session, initialized) = legacy_initialize(&url, version);
    assert_eq!(initialized["serverInfo"]["name"], "eragate", "{initialized}");
    let members = &initialized["_meta"]["dev.eragate/members"];
    assert_eq!(members.as_array().map(Vec::len), Some(3), "{initialized}");
    let listed = legacy_request(&url, &session, version, 1, "resources/list", json!({}));
    let count = answer(&listed, 1)["result"]["resources"].as_array().map_or(0, Vec::len);
    let stream = open_legacy_stream(&url, &session, version, Duration::from_secs(30));
    assert_eq!(stream.status().as_u16(), 200);
    let mut events = SseLines(BufReader::new(stream));

    // server-everything registers a resource for the file it compresses: its resource list changes.
    let called = legacy_request(
        &url,
        &session,
        version,
        2,
        "tools/call",
        json!({"name": "everything_gzip-file-as-resource",
               "arguments": {"name": "legacy.txt", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"}}),
    );
    let called = answer(&called, 2);
    assert!(called["result"]["content"].is_array(), "{called}");
    assert!(
        called["result"].get("resultType").is_none(),
        "a legacy result: {called}"
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            Instant::now() < deadline,
            "no list_changed; log:\n{}",
            federation.eragate.log()
        );
        let message = events
            .next_message()
            .unwrap_or_else(|| panic!("the GET stream ended; log:\n{}", federation.eragate.log()));
        if message["method"] == "notifications/resources/list_changed" {
            break;
        }
    }
    let after = legacy_request(&url, &session, version, 3, "resources/list", json!({}));
    let after = answer(&after, 3);
    let resources = after["result"]["resources"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        resources.len(),
        count + 1,
        "the next list has the new resource: {after}"
    );
    assert!(
        resources
            .iter()
            .any(|r| r["uri"].as_str().is_some_and(|u| u.starts_with("everything+")) && r["name"] == "legacy.txt"),
        "{after}"
    );

    // A session id eragate never gave is not found; no session at all is refused.
    let unknown = legacy_request(&url, "not-a-session", version, 4, "tools/list", json!({}));
    assert_eq!(unknown.status, 404, "{unknown:?}");
    let sessionless = send("POST", &url, &PLAIN, Some(&request_body(5, "tools/list", json!({}))));
    assert_eq!(sessionless.status, 400, "{sessionless:?}");
}

/// Python SDK (mcp 2.3.0) legacy client subscribing on a federated path. `spec`: `url`,
/// `watched` and `marker` (two exposed URIs of server-everything), `unknown` (an exposed URI
/// of no member), `unsubscribable` (an exposed URI of a member offering no subscriptions).
/// server-everything, once `toggle-subscriber-updates` is called on the member
/// session the client's calls run on, sends `notifications/resources/updated` every 5 s for
/// what that session subscribed: the driver waits for events, never for a time.
const SUBSCRIBING_CLIENT: &str = r#"
import asyncio, json, sys, warnings
import mcp
from mcp.shared.exceptions import MCPError

warnings.simplefilter("ignore")  # resources/subscribe is deprecated at 2026-07-28; we are legacy
spec = json.loads(sys.argv[1])
received = []  # notifications/resources/updated, as they came (params)


async def on_message(message):
    if getattr(message, "method", None) == "notifications/resources/updated":
        received.append(message.params.model_dump(by_alias=True, mode="json", exclude_none=True))


def uris(since=0):
    return [r.get("uri") for r in received[since:]]


async def until(what, pred, within=40.0):
    for _ in range(int(within / 0.05)):
        if pred():
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"gave up waiting for {what}; received {received}")


async def main():
    watched, marker = spec["watched"], spec["marker"]
    client = mcp.Client(spec["url"], mode="legacy", message_handler=on_message, read_timeout_seconds=30)
    report = {}
    async with client:
        report["capabilities"] = client.server_capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
        await client.subscribe_resource(watched)
        await client.call_tool("everything_toggle-subscriber-updates", {})
        await until("an update of the watched resource", lambda: watched in uris())
        report["subscribed"] = list(received)

        # Unsubscribed from it; subscribed to the marker instead. Once the marker's update
        # came (the new listen is open), two more of the member's rounds bring only the marker.
        await client.unsubscribe_resource(watched)
        mark = len(received)
        await client.subscribe_resource(marker)
        await until("an update of the marker", lambda: marker in uris(mark))
        first = mark + uris(mark).index(marker)
        await until("two more rounds of the marker", lambda: uris(first + 1).count(marker) >= 2)
        report["after_unsubscribe"] = uris(first)

        for refused in ["unknown", "unsubscribable"]:
            try:
                await client.subscribe_resource(spec[refused])
                report[refused] = "subscribed"
            except MCPError as e:
                report[refused] = {"code": e.error.code, "message": e.error.message}
        await client.unsubscribe_resource(marker)
        await client.call_tool("everything_toggle-subscriber-updates", {})
    print(json.dumps(report))


asyncio.run(asyncio.wait_for(main(), 150))
"#;

/// A legacy client subscribes on a federated path (the Python SDK client): `resources/subscribe`
/// is offered, the owning member's `notifications/resources/updated` reach the client's GET
/// stream with the exposed URI and no subscription tag; after `resources/unsubscribe` none come
/// for it; an exposed URI of no member is not found, naming it; one whose member offers no
/// subscriptions is refused, naming the member.
#[test]
fn a_legacy_client_subscribes_to_a_members_resource() {
    let federation = Federation::start("always");
    let watched = "everything+demo://resource/static/document/features.md";
    let marker = "everything+demo://resource/static/document/architecture.md";
    let unknown = "nobody+demo://resource/static/document/features.md";
    let driver = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("federation-subscribing-client.py");
    std::fs::write(&driver, SUBSCRIBING_CLIENT).expect("write the client driver");
    let spec = json!({"url": federation.eragate.url(), "watched": watched, "marker": marker, "unknown": unknown,
                      "unsubscribable": "py+test://static/hello"});
    let report = run_driver(peers().python(), &driver.display().to_string(), &[&spec.to_string()])
        .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", federation.eragate.log()));
    assert_eq!(report["capabilities"]["resources"]["subscribe"], true, "{report:#}");
    let subscribed = report["subscribed"].as_array().cloned().unwrap_or_default();
    assert!(!subscribed.is_empty(), "{report:#}");
    for update in &subscribed {
        assert_eq!(update["uri"], watched, "only what it subscribed, exposed: {report:#}");
        assert!(update.get("_meta").is_none(), "no subscription tag: {report:#}");
    }
    let after = names(&report["after_unsubscribe"]);
    assert!(after.len() >= 3, "{report:#}");
    assert!(
        after.iter().all(|uri| uri == marker),
        "nothing for the unsubscribed resource: {report:#}"
    );
    let unknown_error = &report["unknown"];
    assert_eq!(unknown_error["code"], -32002, "{report:#}");
    let message = unknown_error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(unknown) && message.contains("everything, py, ts2"),
        "{report:#}"
    );
    // The Python fixture's member declares no `subscribe`: refused, naming it.
    let refused = &report["unsubscribable"];
    assert_eq!(refused["code"], -32603, "{report:#}");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("py+test://static/hello") && message.contains("member py"),
        "{report:#}"
    );
}

#[test]
fn a_reload_turns_a_path_into_a_federation_and_back() {
    let py = LegacyHttpServer::start(&[]);
    let everything = serde_json::to_string(&everything_stdio_command()).expect("json");
    let alone = format!(
        "[[upstreams]]\nname = \"everything\"\n[upstreams.stdio]\ncommand = {everything}\nkill_grace = \"200ms\"\n"
    );
    let eragate = Eragate::start(&alone);
    let url = eragate.url();
    let tools = |id: u64| tool_names(&answer(&post_modern(&url, id, "tools/list", None, json!({})), id)["result"]);
    assert!(tools(1).contains(&"echo".to_owned()), "one upstream: its own names");

    let config = std::fs::read_to_string(eragate.config_path()).expect("config");
    let federated = format!(
        "{config}\n[[upstreams]]\nname = \"py\"\n[upstreams.http]\nurl = \"{}\"\n",
        py.url
    );
    std::fs::write(eragate.config_path(), &federated).expect("rewrite");
    let mut id = 10;
    wait_until("the path to become a federation", Duration::from_secs(20), || {
        id += 1;
        tools(id).contains(&"py_echo".to_owned())
    });
    let listed = tools(100);
    assert!(listed.contains(&"everything_echo".to_owned()), "{listed:?}");
    let called = answer(&modern_call(&url, 101, "py_add", json!({"a": 20, "b": 22})), 101);
    assert_eq!(tool_text(&called["result"]), "42", "{called}");

    std::fs::write(eragate.config_path(), &config).expect("rewrite");
    wait_until("the path to serve one upstream again", Duration::from_secs(20), || {
        id += 1;
        tools(id).contains(&"echo".to_owned())
    });
}

/// The suites' scenarios that need no fixture and do not depend on the names of a single
/// server (`tools-call-error` calls `test_error_handling`, which under `always` is a prefixed
/// name: it has a test of its own below, under `on_collision`).
#[test]
fn the_conformance_suites_list_and_caching_scenarios_pass_on_the_federated_path() {
    let federation = Federation::start("always");
    let modern: Vec<Vec<&str>> = [
        "caching",
        "tools-list",
        "resources-list",
        "prompts-list",
        "sep-2164-resource-not-found",
    ]
    .iter()
    .map(|s| vec!["--scenario", s])
    .collect();
    common::conformance::assert_runs_pass(
        "CONFORMANCE_ALPHA_JS",
        &federation.eragate,
        &modern,
        "alpha scenario(s) on the federated path",
    );
    let handshake: Vec<Vec<&str>> = [
        "server-initialize",
        "ping",
        "tools-list",
        "resources-list",
        "prompts-list",
    ]
    .iter()
    .map(|s| vec!["--scenario", s, "--spec-version", "2025-11-25"])
    .collect();
    common::conformance::assert_runs_pass(
        "CONFORMANCE_STABLE_JS",
        &federation.eragate,
        &handshake,
        "stable scenario(s) on the federated path",
    );
}

/// `tools-call-error` calls `test_error_handling`, a name only the Python fixture run with
/// `--conformance` has: under `on_collision` it keeps its own name on the federated path, and
/// the tool error (isError) reaches clients of both eras as it would from the member alone.
#[test]
fn the_conformance_tools_call_error_scenario_passes_on_the_federated_path() {
    let py = LegacyHttpServer::start(&["--conformance"]);
    let ts2 = ts2_http_server();
    let config = format!(
        "[[upstreams]]\nname = \"py\"\nprefix_mode = \"on_collision\"\nrequest_timeout = \"10s\"\n[upstreams.http]\nurl = \"{}\"\n\n\
         [[upstreams]]\nname = \"ts2\"\n[upstreams.http]\nurl = \"{}\"\n",
        py.url, ts2.url
    );
    let eragate = Eragate::start(&config);
    let listed = answer(&post_modern(&eragate.url(), 1, "tools/list", None, json!({})), 1);
    let tools = tool_names(&listed["result"]);
    assert!(tools.contains(&"test_error_handling".to_owned()), "{listed}");
    assert!(
        tools.contains(&"py_echo".to_owned()) && tools.contains(&"ts2_echo".to_owned()),
        "a shared name is still prefixed: {listed}"
    );
    let scenario = |extra: &[&'static str]| {
        let mut args = vec!["--scenario", "tools-call-error"];
        args.extend_from_slice(extra);
        args
    };
    common::conformance::assert_runs_pass(
        "CONFORMANCE_ALPHA_JS",
        &eragate,
        &[scenario(&[])],
        "alpha tools-call-error on the federated path",
    );
    common::conformance::assert_runs_pass(
        "CONFORMANCE_STABLE_JS",
        &eragate,
        &[scenario(&["--spec-version", "2025-11-25"])],
        "stable tools-call-error on the federated path",
    );
}

/// The federated path through eragate's other client edges: the Python SDK client over the
/// old HTTP+SSE transport (`/mcp/sse`, 2024-11-05 framing) and over stdio (`eragate stdio
/// --config`, which serves the first upstream's path: the federation), of both eras.
#[test]
fn http_sse_and_stdio_clients_reach_every_member() {
    let federation = Federation::start("always");
    let plan = json!([
        ["list_tools"],
        ["call", "everything_echo", {"message": "hi"}],
        ["call", "py_echo", {"text": "from py"}],
        ["call", "ts2_add", {"a": 2, "b": 3}],
        ["read", "ts2+test://items/7"],
        ["prompt", "py_greet", {"name": "Ada"}],
    ])
    .to_string();
    let check = |how: &str, report: &Value| {
        let results = &report["results"];
        let tools = names(&results["0:list_tools"]["names"]);
        for tool in ["everything_echo", "py_echo", "ts2_add"] {
            assert!(tools.contains(&tool.to_owned()), "{how}: {tool} in {tools:?}");
        }
        assert_eq!(results["1:call"]["text"], "Echo: hi", "{how}: {report}");
        assert_eq!(results["2:call"]["text"], "echo: from py", "{how}: {report}");
        assert_eq!(results["3:call"]["text"], "5", "{how}: {report}");
        assert_eq!(results["4:read"]["text"], "item 7", "{how}: {report}");
        assert_eq!(results["4:read"]["uri"], "ts2+test://items/7", "{how}: {report}");
        assert_eq!(results["5:prompt"]["text"], "Hello, Ada!", "{how}: {report}");
    };
    let sse = federation.eragate.url() + "/sse";
    let report = py_client(&["--mode", "legacy", "--sse", &sse, "--scenario", "plan", "--plan", &plan])
        .unwrap_or_else(|e| panic!("{e}\nlog:\n{}", federation.eragate.log()));
    check("HTTP+SSE", &report);

    let stdio = format!(
        "{} stdio --config {}",
        env!("CARGO_BIN_EXE_eragate"),
        federation.eragate.config_path().display()
    );
    for mode in ["legacy", "2026-07-28"] {
        let report = py_client(&["--mode", mode, "--stdio", &stdio, "--scenario", "plan", "--plan", &plan])
            .unwrap_or_else(|e| panic!("stdio {mode}: {e}"));
        check(&format!("stdio, {mode}"), &report);
    }
}

/// A legacy client's `notifications/cancelled` on a federated path reaches the member owning
/// the call (the Python fixture records the cancellation of its `hang`), frees the member's
/// admission slot at once, and the client gets no answer for it; the session goes on.
#[test]
fn a_legacy_clients_cancellation_reaches_the_owning_member() {
    let dir = tempfile::tempdir().expect("tempdir");
    let events = dir.path().join("events.jsonl");
    let events_arg = events.display().to_string();
    let py = LegacyHttpServer::start(&["--events", &events_arg]);
    let ts2 = ts2_http_server();
    let admin = format!("127.0.0.1:{}", free_port());
    let eragate = Eragate::start(&format!(
        "[admin]\naddress = \"{admin}\"\n\n[[upstreams]]\nname = \"py\"\nrequest_timeout = \"60s\"\n\
         [upstreams.http]\nurl = \"{}\"\n\n[[upstreams]]\nname = \"ts2\"\n[upstreams.http]\nurl = \"{}\"\n",
        py.url, ts2.url
    ));
    wait_until("the admin listener", Duration::from_secs(10), || {
        std::net::TcpStream::connect(&admin).is_ok()
    });
    let py_in_flight = || {
        let pools = send("GET", &format!("http://{admin}/pools"), &[], None).json();
        let upstreams = pools["upstreams"].as_array().cloned().unwrap_or_default();
        let py = upstreams
            .iter()
            .find(|u| u["upstream"] == "py")
            .cloned()
            .unwrap_or_default();
        py["in_flight"].as_u64().unwrap_or(u64::MAX)
    };
    let seen = |event: &str| recorded_events(&events, event);
    let url = eragate.url();
    let (session, _) = legacy_initialize(&url, "2025-06-18");
    let hang = {
        let (url, session) = (url.clone(), session.clone());
        let arguments = json!({"name": "py_hang", "arguments": {}});
        std::thread::spawn(move || legacy_request(&url, &session, "2025-06-18", 7, "tools/call", arguments))
    };
    wait_until("hang to start on the member", Duration::from_secs(10), || {
        !seen("started").is_empty()
    });
    assert_eq!(py_in_flight(), 1);
    let ack = cancel_request_7(&url, &session, "2025-06-18");
    assert_eq!(ack.status, 202, "{ack:?}");
    assert!(
        poll_until(Duration::from_secs(5), || py_in_flight() == 0),
        "the member's slot stayed taken; log:\n{}",
        eragate.log()
    );
    let reply = hang.join().expect("hang thread");
    let answered = !reply.body.trim().is_empty() && reply.messages().iter().any(|m| m.get("id").is_some());
    assert!(!answered, "a cancelled request gets no answer: {reply:?}");
    wait_until("the member to see the cancellation", Duration::from_secs(10), || {
        !seen("cancelled").is_empty()
    });

    // The session goes on; a cancellation naming nothing in flight changes nothing.
    let ack = cancel_request_7(&url, &session, "2025-06-18");
    assert_eq!(ack.status, 202, "{ack:?}");
    let reply = legacy_request(
        &url,
        &session,
        "2025-06-18",
        8,
        "tools/call",
        json!({"name": "ts2_echo", "arguments": {"text": "after"}}),
    );
    let answer = reply
        .messages()
        .into_iter()
        .find(|m| m["id"] == 8)
        .unwrap_or_else(|| panic!("{reply:?}"));
    assert_eq!(tool_text(&answer["result"]), "echo: after", "{answer}");
}

/// Python SDK (mcp 2.3.0) client answering sampling, elicitation and roots with callbacks.
/// `spec`: `url`, `mode`, `calls` (`{"tool", "args"}`, or `{"together": [calls]}` sent at once).
/// Written after [`PY_ASKED_CLIENT_PREAMBLE`] (imports, `spec`, `asked`, `on_sampling`, `fill`).
const ASKED_CLIENT: &str = r#"

async def on_elicitation(context, params):
    asked.append({"method": "elicitation/create", "message": params.message})
    return types.ElicitResult(action="accept", content=fill(params.requested_schema))


async def on_roots(context):
    asked.append({"method": "roots/list"})
    return types.ListRootsResult(roots=[types.Root(uri="file:///work/alpha", name="alpha")])


async def one(client, call):
    if "together" in call:
        return await asyncio.gather(*(one(client, c) for c in call["together"]))
    try:
        r = await client.call_tool(call["tool"], call.get("args", {}))
        text = "\n".join(getattr(c, "text", "") for c in r.content if getattr(c, "type", "") == "text")
        return {"text": text, "is_error": bool(r.is_error)}
    except MCPError as e:
        return {"error": {"code": e.error.code, "message": e.error.message}}


async def main():
    client = mcp.Client(spec["url"], mode=spec["mode"], read_timeout_seconds=20,
                        sampling_callback=on_sampling, elicitation_callback=on_elicitation,
                        list_roots_callback=on_roots)
    results = []
    async with client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        for call in spec["calls"]:
            results.append(await asyncio.wait_for(one(client, call), 25))
    print(json.dumps({"results": results, "asked": asked, "tools": tools}))


asyncio.run(main())
"#;

/// What members ask a client during its call (sampling, elicitation, roots) reaches it on a
/// federated path, whatever its era, and the tools that ask are in the list it gets: a legacy client is asked on the call's stream under ids
/// of eragate's (two members asking at once do not collide) and its answers go back to the
/// member that asked; a 2026-07-28 client gets `input_required`. Members: server-everything
/// (stdio) and the Python fixture's `--mrtr` tools (Streamable HTTP), both legacy.
#[test]
fn members_ask_a_client_of_either_era_during_its_call() {
    let py = LegacyHttpServer::start(&["--mrtr"]);
    let everything = serde_json::to_string(&everything_stdio_command()).expect("json");
    let eragate = Eragate::start(&format!(
        "[[upstreams]]\nname = \"everything\"\nprefix_mode = \"always\"\n[upstreams.stdio]\ncommand = {everything}\n\
         kill_grace = \"200ms\"\n\n[[upstreams]]\nname = \"py\"\n[upstreams.http]\nurl = \"{}\"\n",
        py.url
    ));
    let driver = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("federation-asked-client.py");
    std::fs::write(&driver, format!("{PY_ASKED_CLIENT_PREAMBLE}{ASKED_CLIENT}")).expect("write the client driver");
    let driver = driver.display().to_string();
    for mode in ["legacy", "2026-07-28"] {
        let spec = json!({
            "url": eragate.url(), "mode": mode,
            "calls": [
                {"tool": "everything_trigger-sampling-request", "args": {"prompt": "hi"}},
                {"tool": "everything_trigger-elicitation-request", "args": {}},
                {"tool": "py_ask_roots", "args": {}},
                {"together": [
                    {"tool": "everything_trigger-sampling-request", "args": {"prompt": "one"}},
                    {"tool": "py_ask_sampling", "args": {"prompt": "two"}},
                ]},
            ],
        });
        let report = run_driver(peers().python(), &driver, &[&spec.to_string()])
            .unwrap_or_else(|e| panic!("{mode}: {e}\nlog:\n{}", eragate.log()));
        // server-everything offers these only to a session whose client declared what they
        // ask for: the list a client gets is fetched with its own capabilities.
        let tools = names(&report["tools"]);
        for tool in [
            "everything_trigger-sampling-request",
            "everything_trigger-elicitation-request",
            "everything_get-roots-list",
        ] {
            assert!(tools.contains(&tool.to_owned()), "{mode}: {tool} in {tools:?}");
        }
        let results = &report["results"];
        let sampled = results[0]["text"].as_str().unwrap_or_default();
        assert!(
            results[0]["is_error"] == false && sampled.contains("sampled-by-client") && sampled.contains("test-model"),
            "{mode}: {report:#}"
        );
        let elicited = results[1]["text"].as_str().unwrap_or_default();
        assert!(
            results[1]["is_error"] == false && elicited.contains("- Name: Ada"),
            "{mode}: {report:#}"
        );
        assert_eq!(results[2]["text"], "roots: file:///work/alpha", "{mode}: {report:#}");
        let together = &results[3];
        assert!(
            together[0]["text"]
                .as_str()
                .unwrap_or_default()
                .contains("sampled-by-client"),
            "{mode}: {report:#}"
        );
        assert_eq!(together[1]["text"], "sampled: sampled-by-client", "{mode}: {report:#}");
        let mut sampling_texts: Vec<String> = report["asked"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["method"] == "sampling/createMessage")
            .filter_map(|a| a["texts"][0].as_str().map(str::to_owned))
            .collect();
        sampling_texts.sort();
        assert_eq!(
            sampling_texts,
            [
                "Resource trigger-sampling-request context: hi",
                "Resource trigger-sampling-request context: one",
                "two",
            ],
            "{mode}: each member's question asked once: {report:#}"
        );
    }
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// A listen on a federated path is one of its principal's listens, however many members it
/// joins, and eragate's own watch of the members (one listen each) is nobody's: with one
/// listen allowed per principal, a client's listen across three members opens and is
/// acknowledged with what they honour, and a second is refused with 429 until the first closes.
#[test]
fn a_joined_listen_takes_one_place_in_the_listen_quota() {
    let federation = Federation::start_with("always", "[limits]\nmax_listens_per_principal = 1\n");
    let url = federation.eragate.url();
    let wanted = json!({"toolsListChanged": true, "resourcesListChanged": true});
    let first = open_listen(&url, 1, wanted.clone());
    let mut events = SseLines(BufReader::new(first));
    let ack = events.next_message().expect("an acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(
        ack["params"]["notifications"]["toolsListChanged"],
        true,
        "members honour it: {ack}\nlog:\n{}",
        federation.eragate.log()
    );

    let second = send_listen(&url, 2, wanted.clone(), &[], Duration::from_secs(10));
    assert_eq!(second.status().as_u16(), 429, "a second listen is over the quota");
    let body: Value = serde_json::from_str(&second.text().expect("a body")).expect("a JSON-RPC error");
    assert_eq!(body["error"]["code"], -32029, "{body}");

    // Closing the first gives its place back (the release is seen when eragate notices the close).
    drop(events);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let again = send_listen(&url, 3, wanted.clone(), &[], Duration::from_secs(10));
        if again.status().as_u16() == 200 {
            let ack = SseLines(BufReader::new(again))
                .next_message()
                .expect("an acknowledgement");
            assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed listen's place never came back; log:\n{}",
            federation.eragate.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// server-everything's processes eragate runs as a member (its direct children).
fn everything_children(eragate: &Eragate) -> Vec<u32> {
    children_with(eragate.proc.pid(), peers().get("EVERYTHING_JS"))
}

/// The next `method` notification on `events`, read until `deadline`.
fn next_notification(
    events: &std::sync::mpsc::Receiver<Value>,
    method: &str,
    deadline: Instant,
    log: impl Fn() -> String,
) -> Value {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = events
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no {method} ({e}); log:\n{}", log()));
        if message["method"] == method {
            return message;
        }
    }
}

/// When a member ends its share of a joined listen (here its stdio process is killed and
/// restarted), the client's listen stays open and eragate opens the share again on the new
/// process: the subscribed resource's updates come again on the same stream, with the
/// listen's id and the exposed URI.
#[test]
fn a_joined_listen_survives_a_member_restart() {
    let federation = Federation::start("always");
    let url = federation.eragate.url();
    let log = || federation.eragate.log();
    let watched = "everything+demo://resource/static/document/features.md";
    let wanted = json!({"toolsListChanged": true, "resourceSubscriptions": [watched]});
    let response = send_listen(&url, 9, wanted, &[], Duration::from_secs(120));
    assert_eq!(response.status().as_u16(), 200);
    let events = sse_messages(response);
    let ack = events
        .recv_timeout(Duration::from_secs(20))
        .expect("an acknowledgement");
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([watched]),
        "{ack}"
    );

    let toggle = |id| {
        federation.modern(
            id,
            "tools/call",
            Some("everything_toggle-subscriber-updates"),
            json!({"name": "everything_toggle-subscriber-updates", "arguments": {}}),
        )
    };
    let toggled = toggle(1);
    assert!(toggled.get("result").is_some(), "{toggled}");
    let updated = next_notification(
        &events,
        "notifications/resources/updated",
        Instant::now() + Duration::from_secs(20),
        log,
    );
    assert_eq!(updated["params"]["uri"], watched, "{updated}");

    let killed = everything_children(&federation.eragate);
    assert!(!killed.is_empty(), "server-everything runs as eragate's child");
    for pid in &killed {
        signal(*pid, Signal::SIGKILL);
    }
    let restarted = poll_until(Duration::from_secs(30), || {
        everything_children(&federation.eragate)
            .iter()
            .any(|pid| !killed.contains(pid))
    });
    assert!(restarted, "no new server-everything process; log:\n{}", log());
    // The new process starts with its updates off: turn them on (retried while it starts).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut id = 2;
    loop {
        let toggled = toggle(id);
        if toggled.get("result").is_some_and(|r| r["isError"] != true) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted member never served: {toggled}\nlog:\n{}",
            log()
        );
        id += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    let again = next_notification(
        &events,
        "notifications/resources/updated",
        Instant::now() + Duration::from_secs(45),
        log,
    );
    assert_eq!(again["params"]["uri"], watched, "{again}");
    assert_eq!(
        again["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 9,
        "{again}"
    );
    assert!(
        federation.eragate.log().contains("opened again"),
        "the share was opened again; log:\n{}",
        federation.eragate.log()
    );
}

/// Calls naming what no member owns (a client guessing, or flooding) on an `on_collision`
/// federation of two members that record every request they get, and a third that is down:
/// the names are learned by one listing of each member, however many calls wait for them,
/// and an unknown name relists the members at most once in a while, never once per call.
#[test]
fn calls_naming_unknown_names_do_not_relist_the_members_each_time() {
    let a = TracedUpstream::start();
    let b = TracedUpstream::start();
    let config = format!(
        r#"
[[upstreams]]
name = "a"
prefix_mode = "on_collision"
[upstreams.http]
url = "{}"

[[upstreams]]
name = "b"
[upstreams.http]
url = "{}"

[[upstreams]]
name = "down"
[upstreams.http]
url = "http://127.0.0.1:{}/mcp"
"#,
        a.url,
        b.url,
        free_port()
    );
    let eragate = Eragate::start(&config);
    let url = eragate.url();
    let (session, _) = legacy_initialize(&url, "2025-06-18");
    let listed = || a.posted_bodies("tools/list").len() + b.posted_bodies("tools/list").len();
    let before = listed();

    // 200 calls of unknown names, 8 at a time, half from 2026-07-28 clients and half on a
    // legacy client's session; the first ones arrive before any name is known.
    let refused: usize = std::thread::scope(|scope| {
        let callers: Vec<_> = (0..8u64)
            .map(|caller| {
                let (url, session) = (&url, &session);
                scope.spawn(move || {
                    let mut refused = 0;
                    for i in 0..25u64 {
                        let id = 1 + caller * 25 + i;
                        let name = format!("nobody-{id}");
                        let params = json!({"name": name, "arguments": {}});
                        let reply = match id % 2 {
                            0 => post_modern(url, id, "tools/call", Some(&name), params),
                            _ => legacy_request(url, session, "2025-06-18", id, "tools/call", params),
                        };
                        let error = &answer(&reply, id)["error"];
                        assert_eq!(error["code"], -32602, "{reply:?}");
                        let message = error["message"].as_str().unwrap_or_default();
                        assert!(message.contains("unavailable: down"), "{reply:?}");
                        refused += 1;
                    }
                    refused
                })
            })
            .collect();
        callers.into_iter().map(|c| c.join().expect("caller")).sum()
    });
    assert_eq!(refused, 200);
    let relists = listed() - before;
    // One listing of each member to learn the names, and (should the calls outlast the pace)
    // at most one more of each per interval: a handful, where every call used to cost two.
    assert!(
        (2..=6).contains(&relists),
        "200 calls of unknown names caused {relists} tools/list to the members; log:\n{}",
        eragate.log()
    );

    // The names learned serve the known ones.
    let reply = post_modern(
        &url,
        300,
        "tools/call",
        Some("a_echo"),
        json!({"name": "a_echo", "arguments": {"text": "still"}}),
    );
    let called = answer(&reply, 300);
    assert_eq!(tool_text(&called["result"]), "echo: still", "{called}");
}
