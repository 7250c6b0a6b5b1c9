//! Tool disclosure (`[[disclosure]] mode = "search"`): a federation of real servers
//! (server-everything and the Python SDK fixture `legacy_server.py --mrtr`, both over stdio)
//! on one path, seen by the Python SDK client in both eras and the TypeScript SDK client.
//! `tools/list` shows the `always` tools and the meta-tools; `search_tools` finds the others,
//! `call_tool` calls them (multi round-trip input included), `load_tools` adds them to a legacy
//! session's list and says so with `notifications/tools/list_changed`; a tool a policy denies is
//! never found, loaded or called; the index follows the members (a restart, a reload). The
//! conformance suite's tool scenarios pass on a path with disclosure.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::conformance;
use common::*;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

/// The Python SDK client (mcp 2.3.0): `spec` holds `url`, `mode` and `calls`, each
/// `{"list_tools": true}` or `{"tool": NAME, "args": {...}, "await_list_changed": bool}`.
/// It answers elicitation with the name "Ada" and reports, per call, the notification
/// methods it received since the previous call.
const PY_DRIVER: &str = r#"
import asyncio, json, sys, warnings
import mcp
import mcp_types as types
from mcp.shared.exceptions import MCPError

warnings.simplefilter("ignore")
spec = json.loads(sys.argv[1])
received = []


async def on_message(message):
    root = getattr(message, "root", message)
    method = getattr(root, "method", None)
    if isinstance(method, str):
        received.append(method)


async def on_elicitation(context, params):
    return types.ElicitResult(action="accept", content={"name": "Ada"})


def text_of(content):
    return "\n".join(getattr(c, "text", "") for c in content if getattr(c, "type", "") == "text")


async def one(client, call):
    try:
        if "list_tools" in call:
            return {"names": [t.name for t in (await client.list_tools()).tools]}
        r = await client.call_tool(call["tool"], call.get("args", {}))
        out = {"text": text_of(r.content), "is_error": bool(r.is_error), "structured": r.structured_content}
        if call.get("await_list_changed"):
            deadline = asyncio.get_running_loop().time() + 5
            while "notifications/tools/list_changed" not in received and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
        return out
    except MCPError as e:
        return {"error": {"code": e.error.code, "message": e.error.message}}


async def main():
    client = mcp.Client(spec["url"], mode=spec["mode"], read_timeout_seconds=20, message_handler=on_message,
                        elicitation_callback=on_elicitation,
                        client_info=types.Implementation(name="eragate-disclosure-client", version="1.0.0"))
    results = []
    async with client:
        for call in spec["calls"]:
            result = await asyncio.wait_for(one(client, call), 25)
            result["received"] = list(received)
            received.clear()
            results.append(result)
    print(json.dumps({"results": results}))


asyncio.run(main())
"#;

/// The TypeScript SDK v1 client, legacy, written after [`TS_CLIENT_PREAMBLE`]: `spec` holds
/// `url` and `calls` as for the Python driver; it counts `notifications/tools/list_changed`.
const TS_DRIVER: &str = r#"
let changed = 0;
const client = new Client({ name: 'eragate-disclosure-ts-client', version: '1.0.0' }, { capabilities: {} });
client.setNotificationHandler(types.ToolListChangedNotificationSchema, async () => { changed += 1; });
await client.connect(new StreamableHTTPClientTransport(new URL(spec.url)));
const results = [];
for (const call of spec.calls) {
  try {
    if (call.list_tools) {
      results.push({ names: (await client.listTools()).tools.map((t) => t.name) });
    } else {
      const r = await client.callTool({ name: call.tool, arguments: call.args ?? {} }, undefined, { timeout: 20000 });
      if (call.await_list_changed) {
        const deadline = Date.now() + 5000;
        while (changed === 0 && Date.now() < deadline) await new Promise((ok) => setTimeout(ok, 50));
      }
      results.push({
        text: r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n'),
        is_error: !!r.isError, structured: r.structuredContent ?? null, changed,
      });
    }
  } catch (e) {
    results.push({ error: { code: e.code ?? null, message: String(e.message) } });
  }
}
await client.close();
process.stdout.write(JSON.stringify({ results }) + '\n');
process.exit(0);
"#;

/// A driver's `results`, failing the test when it fails or hangs.
fn results(command: Command, what: &str) -> Vec<Value> {
    let report = run_json(command, Duration::from_secs(90)).unwrap_or_else(|e| panic!("{what}: {e}"));
    report["results"].as_array().cloned().unwrap_or_default()
}

fn py(url: &str, mode: &str, calls: Value) -> Vec<Value> {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    let script = PATH.get_or_init(|| driver_script("disclosure-client.py", PY_DRIVER));
    let spec = json!({"url": url, "mode": mode, "calls": calls});
    let mut command = Command::new(peers().python());
    command.arg(script).arg(spec.to_string());
    results(command, "the python client")
}

fn ts(url: &str, calls: Value) -> Vec<Value> {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    let script =
        PATH.get_or_init(|| driver_script("disclosure-client.mjs", &format!("{TS_CLIENT_PREAMBLE}{TS_DRIVER}")));
    let spec = json!({"url": url, "calls": calls});
    let mut command = Command::new(peers().node20());
    command
        .arg(script)
        .arg(spec.to_string())
        .env("TS_SDK_DIR", peers().get("TS_SDK_DIR"));
    results(command, "the typescript client")
}

/// server-everything and the `--mrtr` fixture federated on `/mcp` with `[[disclosure]]`
/// (`disclosure` is the entry's body) and `extra` configuration.
fn federation(tag: &str, disclosure: &str, extra: &str) -> Eragate {
    Eragate::start(&federation_toml(tag, disclosure, extra, ""))
}

fn federation_toml(tag: &str, disclosure: &str, extra: &str, more_members: &str) -> String {
    let everything = serde_json::to_string(&everything_stdio_command()).expect("json");
    let mut fixture = tagged_fixture(tag);
    fixture.push("--mrtr".to_owned());
    let fixture = serde_json::to_string(&fixture).expect("json");
    format!(
        r#"
{extra}
[[disclosure]]
path = "/mcp"
mode = "search"
{disclosure}

[[upstreams]]
name = "everything"
prefix_mode = "always"
[upstreams.stdio]
command = {everything}
kill_grace = "200ms"

[[upstreams]]
name = "fixture"
request_timeout = "20s"
[upstreams.stdio]
command = {fixture}
kill_grace = "200ms"
{more_members}"#
    )
}

/// The names a search found, best first.
fn found(result: &Value) -> Vec<String> {
    result["structured"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn names(result: &Value) -> Vec<String> {
    serde_json::from_value(result["names"].clone()).unwrap_or_default()
}

#[test]
fn a_2026_client_lists_searches_and_calls_through_call_tool() {
    let gateway = federation(&unique_tag("disclosure_modern"), r#"always = ["everything_echo"]"#, "");
    let results = py(
        &gateway.url(),
        "2026-07-28",
        json!([
            {"list_tools": true},
            {"tool": "search_tools", "args": {"query": "add two integers"}},
            {"tool": "call_tool", "args": {"name": "fixture_add", "arguments": {"a": 2, "b": 3}}},
            {"tool": "fixture_add", "args": {"a": 4, "b": 5}},
            {"tool": "call_tool", "args": {"name": "fixture_ask_elicitation", "arguments": {"message": "Name?"}}},
            {"tool": "call_tool", "args": {"name": "fixture_ad", "arguments": {}}},
            {"tool": "search_tools", "args": {}},
            {"tool": "search_tools", "args": {"query": "add", "limit": 51}},
            {"tool": "load_tools", "args": {"names": ["fixture_add"]}},
            {"tool": "search_tools", "args": {"query": "echo back a message", "limit": 2}},
        ]),
    );
    let log = gateway.log();
    assert_eq!(
        names(&results[0]),
        ["everything_echo", "search_tools", "call_tool"],
        "{log}"
    );
    assert!(
        found(&results[1]).contains(&"fixture_add".to_owned()),
        "{:?}",
        results[1]
    );
    let first_line = results[1]["text"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default();
    assert!(
        first_line.contains(" — "),
        "a name and one line each: {:?}",
        results[1]["text"]
    );
    assert_eq!(
        results[2]["text"], "5",
        "call_tool returns what the tool returns: {:?}",
        results[2]
    );
    assert_eq!(results[2]["structured"], json!({"sum": 5}));
    assert_eq!(
        results[3]["text"], "9",
        "a found tool is callable by name: {:?}",
        results[3]
    );
    let elicited = results[4]["text"].as_str().unwrap_or_default();
    assert!(
        elicited.starts_with("elicited: accept") && elicited.contains("Ada"),
        "{:?}",
        results[4]
    );
    assert_eq!(results[5]["is_error"], true, "{:?}", results[5]);
    assert!(
        results[5]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Closest: fixture_add"),
        "{:?}",
        results[5]
    );
    for (i, starts) in [
        (6, "search_tools needs a `query`"),
        (7, "search_tools: `limit`"),
        (8, "load_tools keeps"),
    ] {
        assert_eq!(results[i]["is_error"], true, "{i}: {:?}", results[i]);
        assert!(
            results[i]["text"].as_str().unwrap_or_default().starts_with(starts),
            "{i}: {:?}",
            results[i]
        );
    }
    assert_eq!(found(&results[9]).len(), 2, "{:?}", results[9]);
}

#[test]
fn a_legacy_python_client_loads_found_tools_and_is_told_its_list_changed() {
    let gateway = federation(&unique_tag("disclosure_legacy"), "", "");
    let results = py(
        &gateway.url(),
        "legacy",
        json!([
            {"list_tools": true},
            {"tool": "search_tools", "args": {"query": "ask the user for their name"}},
            {"tool": "load_tools", "args": {"names": ["fixture_add", "fixture_ask_elicitation"]}, "await_list_changed": true},
            {"list_tools": true},
            {"tool": "fixture_add", "args": {"a": 1, "b": 2}},
            {"tool": "fixture_ask_elicitation", "args": {}},
            {"tool": "call_tool", "args": {"name": "everything_get-sum", "arguments": {"a": 1, "b": 1}}},
            {"tool": "load_tools", "args": {"names": ["fixture_nope"]}},
            {"list_tools": true},
        ]),
    );
    let log = gateway.log();
    assert_eq!(names(&results[0]), ["search_tools", "call_tool", "load_tools"], "{log}");
    assert!(
        found(&results[1]).contains(&"fixture_ask_elicitation".to_owned()),
        "{:?}",
        results[1]
    );
    assert_eq!(results[2]["is_error"], false, "{:?}", results[2]);
    let received = results[2]["received"].as_array().cloned().unwrap_or_default();
    assert!(
        received.contains(&json!("notifications/tools/list_changed")),
        "load_tools tells the client: {:?}",
        results[2]
    );
    assert_eq!(
        names(&results[3]),
        [
            "fixture_add",
            "fixture_ask_elicitation",
            "search_tools",
            "call_tool",
            "load_tools"
        ],
        "loaded tools are listed in full"
    );
    assert_eq!(results[4]["text"], "3", "{:?}", results[4]);
    assert!(
        results[5]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("elicited: accept"),
        "{:?}",
        results[5]
    );
    assert!(
        results[6]["text"].as_str().unwrap_or_default().contains('2'),
        "{:?}",
        results[6]
    );
    assert_eq!(results[7]["is_error"], true, "{:?}", results[7]);
    assert!(
        results[7]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("load_tools: nothing was loaded"),
        "{:?}",
        results[7]
    );
    assert_eq!(names(&results[8]), names(&results[3]), "a failed load changes nothing");
}

#[test]
fn a_typescript_client_searches_loads_and_calls() {
    let gateway = federation(&unique_tag("disclosure_ts"), "", "");
    let results = ts(
        &gateway.url(),
        json!([
            {"list_tools": true},
            {"tool": "search_tools", "args": {"query": "add two integers", "limit": 3}},
            {"tool": "load_tools", "args": {"names": ["fixture_add"]}, "await_list_changed": true},
            {"list_tools": true},
            {"tool": "fixture_add", "args": {"a": 20, "b": 22}},
            {"tool": "call_tool", "args": {"name": "fixture_add", "arguments": {"a": 1, "b": 1}}},
        ]),
    );
    assert_eq!(
        names(&results[0]),
        ["search_tools", "call_tool", "load_tools"],
        "{}",
        gateway.log()
    );
    assert!(
        found(&results[1]).contains(&"fixture_add".to_owned()),
        "{:?}",
        results[1]
    );
    assert!(found(&results[1]).len() <= 3);
    assert_eq!(results[2]["changed"], 1, "{:?}", results[2]);
    assert!(
        names(&results[3]).contains(&"fixture_add".to_owned()),
        "{:?}",
        results[3]
    );
    assert_eq!(results[4]["text"], "42", "{:?}", results[4]);
    assert_eq!(results[5]["text"], "2", "{:?}", results[5]);
}

/// A tool a policy denies is never found, loaded or called; a direct call of it gets the
/// error an unknown tool gets.
#[test]
fn a_denied_tool_is_never_found_loaded_or_called() {
    let policy = "[[policies]]\npath = \"/mcp\"\n[policies.tools]\ndeny = [\"fixture_add\"]\n";
    let gateway = federation(&unique_tag("disclosure_denied"), "", policy);
    let calls = json!([
        {"tool": "search_tools", "args": {"query": "add two integers", "limit": 50}},
        {"tool": "call_tool", "args": {"name": "fixture_add", "arguments": {"a": 1, "b": 2}}},
        {"tool": "load_tools", "args": {"names": ["fixture_add"]}},
        {"tool": "fixture_add", "args": {"a": 1, "b": 2}},
        {"tool": "fixture_no_such_tool", "args": {}},
        {"tool": "call_tool", "args": {"name": "fixture_no_such_tool", "arguments": {}}},
    ]);
    let results = py(&gateway.url(), "legacy", calls);
    let hits = found(&results[0]);
    assert!(
        !hits.is_empty() && !hits.contains(&"fixture_add".to_owned()),
        "{hits:?}"
    );
    assert_eq!(results[1]["is_error"], true, "{:?}", results[1]);
    assert!(
        results[1]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("call_tool: no tool is named \"fixture_add\"")
    );
    assert!(
        results[2]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("load_tools: nothing was loaded")
    );
    let direct = &results[3]["error"];
    assert_eq!(direct["code"], -32602, "{:?}", results[3]);
    let unknown = &results[4]["error"];
    assert_eq!(
        unknown["code"], direct["code"],
        "denied and unknown look alike: {:?}",
        results[4]
    );
    let meta_unknown = results[5]["text"].as_str().unwrap_or_default();
    assert!(meta_unknown.starts_with("call_tool: no tool is named \"fixture_no_such_tool\""));
    let modern = py(
        &gateway.url(),
        "2026-07-28",
        json!([{"tool": "fixture_add", "args": {"a": 1, "b": 2}}]),
    );
    assert_eq!(modern[0]["error"]["code"], -32602, "{:?}", modern[0]);
}

/// The index follows the catalogue: a member's restart, and a reload that adds a member.
#[test]
fn the_search_follows_a_member_restart_and_a_reload() {
    let tag = unique_tag("disclosure_follows");
    let gateway = federation(&tag, "", "");
    let search = |query: &str| {
        let results = py(
            &gateway.url(),
            "2026-07-28",
            json!([{"tool": "search_tools", "args": {"query": query}}]),
        );
        found(&results[0])
    };
    assert!(search("add two integers").contains(&"fixture_add".to_owned()));
    let children = pids_with(&tag);
    assert!(!children.is_empty(), "the fixture's children");
    for pid in &children {
        signal(*pid, Signal::SIGKILL);
    }
    wait_until("the fixture to be back in the search", Duration::from_secs(30), || {
        search("add two integers").contains(&"fixture_add".to_owned())
    });
    assert!(
        !search("current time in a timezone")
            .iter()
            .any(|n| n.starts_with("ts2_"))
    );
    let ts2 = ts2_http_server();
    let member = format!(
        "\n[[upstreams]]\nname = \"ts2\"\n[upstreams.http]\nurl = \"{}\"\n",
        ts2.url
    );
    let text = federation_toml(&tag, "", "", &member);
    let text = format!("[listen]\naddress = \"{}\"\n{text}", gateway.addr);
    let path = gateway.config_path();
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text).expect("write config");
    std::fs::rename(&partial, &path).expect("rename config");
    signal(gateway.proc.pid(), Signal::SIGHUP);
    wait_until(
        "a reloaded member's tools in the search",
        Duration::from_secs(30),
        || search("greet someone by name").iter().any(|n| n.starts_with("ts2_")),
    );
}

/// A tool named as a meta-tool (here by a policy's rename) is a configuration error naming both.
#[test]
fn a_tool_named_like_a_meta_tool_is_a_configuration_error() {
    let policy = "[[policies]]\npath = \"/mcp\"\n[policies.tools]\nrename = { everything_echo = \"call_tool\" }\n";
    let gateway = federation(&unique_tag("disclosure_collision"), "", policy);
    let results = py(&gateway.url(), "legacy", json!([{"list_tools": true}]));
    let message = results[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("configuration error") && message.contains("\"call_tool\"") && message.contains("/mcp"),
        "{:?}",
        results[0]
    );
    assert!(gateway.log().contains("collides with eragate's meta-tool"));
}

/// The conformance suite's tool scenarios pass on a path with disclosure (`threshold = 0`,
/// `always = []`): listing is disclosure, and every tool stays callable by name.
#[test]
fn the_conformance_tool_scenarios_pass_with_disclosure() {
    let upstream = LegacyHttpServer::start(&["--conformance"]);
    let disclosure = "[[disclosure]]\npath = \"/mcp\"\nmode = \"search\"\nthreshold = 0\nalways = []\n";
    let gateway = Eragate::start(&format!(
        "{disclosure}{}",
        remote_upstream_toml("http", &upstream.url, "")
    ));
    let modern = [
        "tools-list",
        "tools-call-simple-text",
        "tools-call-error",
        "tools-call-with-progress",
    ];
    let legacy = [
        "tools-list",
        "tools-call-simple-text",
        "tools-call-elicitation",
        "tools-call-sampling",
    ];
    let mut runs: Vec<Vec<&str>> = Vec::new();
    for (version, scenarios) in [("2026-07-28", &modern), ("2025-11-25", &legacy)] {
        for scenario in scenarios.iter() {
            runs.push(vec!["--scenario", scenario, "--spec-version", version]);
        }
    }
    conformance::assert_runs_pass(
        "CONFORMANCE_ALPHA_JS",
        &gateway,
        &runs,
        "tool scenarios with disclosure",
    );
}

/// At or under the threshold every tool is listed; over it, the listing is disclosed.
#[test]
fn every_tool_is_listed_while_the_caller_sees_no_more_than_the_threshold() {
    let policy = "[[policies]]\npath = \"/mcp\"\n[policies.tools]\nallow = [\"fixture_a*\"]\n";
    let gateway = federation(&unique_tag("disclosure_threshold"), "threshold = 50", policy);
    let few = py(&gateway.url(), "2026-07-28", json!([{"list_tools": true}]));
    let listed = names(&few[0]);
    assert!(
        listed.len() > 3 && listed.iter().all(|n| n.starts_with("fixture_a")),
        "under the threshold, after policy: {listed:?}"
    );
    let gateway = federation(&unique_tag("disclosure_threshold_over"), "threshold = 5", "");
    let many = py(&gateway.url(), "2026-07-28", json!([{"list_tools": true}]));
    assert_eq!(names(&many[0]), ["search_tools", "call_tool"]);
}
