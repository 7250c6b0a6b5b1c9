//! Server→client input across eras, with real peers (issue 6).
//!
//! - Legacy upstream, 2026-07-28 client (multi round-trip requests): server-everything's
//!   sampling and elicitation tools (stdio and Streamable HTTP) driven by a Python SDK
//!   2026-07-28 client with callbacks; the `--mrtr` fixture tools of `legacy_server.py`
//!   (sampling, form and URL elicitation, roots, two rounds, three inputs at once, a prompt, a
//!   resource, a completion) on stdio, Streamable HTTP and HTTP+SSE; the raw `input_required`
//!   exchange with its `requestState` checks; a retry after the upstream crashed; what a
//!   suspended call does to the next request on its pooled session; the expiry (ignored: it
//!   takes the 2 minutes eragate does not let a test configure).
//! - Modern upstream, legacy client: `legacy_server.py --dual-era --mrtr` answers
//!   `input_required`; Python SDK and TypeScript SDK 1.32.2 legacy clients with handlers.
//! - The alpha conformance suite's `input-required-result-*` scenarios against eragate in front
//!   of the legacy-only fixture.
//!
//! The client drivers are small scripts kept in this file (written to `CARGO_TARGET_TMPDIR`).

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use common::*;

// --- client drivers -------------------------------------------------------------------------

/// Python SDK (mcp 2.3.0) client with sampling / elicitation / roots callbacks; written after
/// [`PY_ASKED_CLIENT_PREAMBLE`] (imports, `spec`, `asked`, `on_sampling`, `fill`).
const PY_DRIVER: &str = r#"

async def on_elicitation(context, params):
    if getattr(params, "mode", None) == "url":
        asked.append({"method": "elicitation/create", "mode": "url", "url": params.url, "elicitation_id": params.elicitation_id})
        return types.ElicitResult(action="accept")
    asked.append({"method": "elicitation/create", "mode": "form", "message": params.message})
    return types.ElicitResult(action="accept", content=fill(params.requested_schema))


async def on_roots(context):
    asked.append({"method": "roots/list"})
    return types.ListRootsResult(roots=[types.Root(uri="file:///work/alpha", name="alpha")])


def text_of(content):
    return "\n".join(getattr(c, "text", "") for c in content if getattr(c, "type", "") == "text")


async def one(client, call):
    try:
        if "tool" in call:
            r = await client.call_tool(call["tool"], call.get("args", {}))
            return {"text": text_of(r.content), "is_error": bool(r.is_error)}
        if "prompt" in call:
            r = await client.get_prompt(call["prompt"], call.get("args", {}))
            return {"text": text_of([m.content for m in r.messages])}
        if "read" in call:
            r = await client.read_resource(call["read"])
            return {"text": "\n".join(getattr(c, "text", "") for c in r.contents)}
        if "list_tools" in call:
            return {"names": [t.name for t in (await client.list_tools()).tools]}
        if "complete" in call:
            r = await client.complete(types.PromptReference(type="ref/prompt", name=call["complete"]),
                                      {"name": call["argument"], "value": call["value"]})
            return {"values": r.completion.values}
    except MCPError as e:
        return {"error": {"code": e.error.code, "message": e.error.message}}
    raise SystemExit(f"unknown call {call}")


async def main():
    if spec.get("offer_version"):
        import mcp.client.session as client_session
        client_session.LATEST_HANDSHAKE_VERSION = spec["offer_version"]
    cbs = set(spec.get("callbacks", []))
    kwargs = {}
    if "sampling" in cbs:
        kwargs["sampling_callback"] = on_sampling
    if "elicitation" in cbs:
        kwargs["elicitation_callback"] = on_elicitation
    if "roots" in cbs:
        kwargs["list_roots_callback"] = on_roots
    client = mcp.Client(spec["url"], mode=spec["mode"], read_timeout_seconds=20,
                        client_info=types.Implementation(name="eragate-mrtr-client", version="1.0.0"), **kwargs)
    results = []
    async with client:
        version = client.protocol_version
        for call in spec["calls"]:
            results.append(await asyncio.wait_for(one(client, call), 25))
    print(json.dumps({"protocol_version": version, "results": results, "asked": asked}))


asyncio.run(main())
"#;

/// TypeScript SDK v1 (1.32.2) legacy client with request handlers for what it declares;
/// written after [`TS_CLIENT_PREAMBLE`] (`sdk`, `spec`, `Client`, the transport, `types`).
const TS_DRIVER: &str = r#"
const asked = [];
const client = new Client({ name: 'eragate-mrtr-ts-client', version: '1.0.0' }, { capabilities: spec.capabilities });
if (spec.capabilities.sampling) {
  client.setRequestHandler(types.CreateMessageRequestSchema, async (request) => {
    asked.push({ method: 'sampling/createMessage', texts: request.params.messages.map((m) => m.content.text) });
    return { role: 'assistant', content: { type: 'text', text: 'sampled-by-ts' }, model: 'ts-model', stopReason: 'endTurn' };
  });
}
if (spec.capabilities.elicitation) {
  client.setRequestHandler(types.ElicitRequestSchema, async (request) => {
    const p = request.params;
    if (p.mode === 'url') {
      asked.push({ method: 'elicitation/create', mode: 'url', url: p.url, elicitation_id: p.elicitationId ?? null });
      return { action: 'accept' };
    }
    asked.push({ method: 'elicitation/create', mode: 'form', message: p.message });
    return { action: 'accept', content: { name: 'Grace' } };
  });
}
if (spec.capabilities.roots) {
  client.setRequestHandler(types.ListRootsRequestSchema, async () => {
    asked.push({ method: 'roots/list' });
    return { roots: [{ uri: 'file:///work/ts', name: 'ts' }] };
  });
}
await client.connect(new StreamableHTTPClientTransport(new URL(spec.url)));
const results = [];
for (const call of spec.calls) {
  try {
    const r = await client.callTool({ name: call.tool, arguments: call.args ?? {} }, undefined, { timeout: 20000 });
    results.push({ text: r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n'), is_error: !!r.isError });
  } catch (e) {
    results.push({ error: { code: e.code ?? null, message: String(e.message) } });
  }
}
await client.close();
process.stdout.write(JSON.stringify({ results, asked }) + '\n');
process.exit(0);
"#;

fn py_driver() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| driver_script("mrtr-client.py", &format!("{PY_ASKED_CLIENT_PREAMBLE}{PY_DRIVER}")))
}

fn ts_driver() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| driver_script("mrtr-client.mjs", &format!("{TS_CLIENT_PREAMBLE}{TS_DRIVER}")))
}

/// The Python client: `spec` holds `url`, `mode`, `callbacks`, `calls` (see `PY_DRIVER`).
fn py(spec: Value) -> Value {
    let mut command = Command::new(peers().python());
    command.arg(py_driver()).arg(spec.to_string());
    run_json(command, Duration::from_secs(60)).unwrap_or_else(|e| panic!("python client {spec}: {e}"))
}

/// The TypeScript client: `spec` holds `url`, `capabilities`, `calls` (tools only).
fn ts(spec: Value) -> Value {
    let mut command = Command::new(peers().node20());
    command
        .arg(ts_driver())
        .arg(spec.to_string())
        .env("TS_SDK_DIR", peers().get("TS_SDK_DIR"));
    run_json(command, Duration::from_secs(60)).unwrap_or_else(|e| panic!("typescript client {spec}: {e}"))
}

// --- gateways ---------------------------------------------------------------------------------

/// eragate with an admin listener in front of `upstream_toml`.
struct Gate {
    gateway: Eragate,
    admin: String,
}

impl Gate {
    fn start(upstream_toml: &str) -> Gate {
        let admin = format!("127.0.0.1:{}", free_port());
        let gateway = Eragate::start(&format!("[admin]\naddress = \"{admin}\"\n{upstream_toml}"));
        wait_until("the admin listener", Duration::from_secs(10), || {
            std::net::TcpStream::connect(&admin).is_ok()
        });
        Gate { gateway, admin }
    }

    fn url(&self) -> String {
        self.gateway.url()
    }

    fn pools(&self) -> Value {
        send("GET", &format!("http://{}/pools", self.admin), &[], None).json()
    }

    fn suspended(&self) -> u64 {
        self.pools()["suspended_calls"].as_u64().expect("suspended_calls")
    }

    /// Asserts nothing is left suspended or in flight (upstream calls finish just after the
    /// client's answer, so this waits a little).
    #[track_caller]
    fn assert_drained(&self) {
        let drained = poll_until(Duration::from_secs(5), || {
            let pools = self.pools();
            pools["suspended_calls"] == 0
                && pools["upstreams"]
                    .as_array()
                    .is_some_and(|u| u.iter().all(|u| u["in_flight"] == 0))
        });
        assert!(
            drained,
            "suspended calls or in-flight requests leaked: {:#}\n\neragate log:\n{}",
            self.pools(),
            self.gateway.log()
        );
    }
}

fn fixture_stdio(extra: &[&str], pool: &str) -> Gate {
    let mut command = legacy_stdio_command();
    command.extend(extra.iter().map(|s| (*s).to_owned()));
    Gate::start(&stdio_upstream_toml(&command, "", pool))
}

const ALL_CALLBACKS: [&str; 3] = ["sampling", "elicitation", "roots"];

/// Every call of the `--mrtr` fixture (what a client with every callback sees, in order).
fn fixture_calls() -> Value {
    json!([
        {"tool": "ask_sampling", "args": {"prompt": "hi"}},
        {"tool": "ask_elicitation"},
        {"tool": "ask_url", "args": {"url": "https://example.com/auth"}},
        {"tool": "ask_roots"},
        {"tool": "ask_twice"},
        {"tool": "ask_all"},
        {"prompt": "test_input_required_result_prompt"},
        {"read": "test://ask/roots"},
    ])
}

#[track_caller]
fn assert_fixture_results(report: &Value, sampled: &str, name: &str, roots: &str) {
    let texts: Vec<&str> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            r["text"]
                .as_str()
                .unwrap_or_else(|| panic!("no text in {r}; report {report:#}"))
        })
        .collect();
    let elicited = format!("accept {{\"name\": \"{name}\"}}");
    assert_eq!(
        texts,
        [
            format!("sampled: {sampled}"),
            format!("elicited: {elicited}"),
            "url: accept".to_owned(),
            format!("roots: {roots}"),
            format!("twice: {name} / {sampled}"),
            format!("all: {elicited} | {sampled} | {roots}"),
            format!("Use this context: {name}"),
            format!("roots: {roots}"),
        ],
        "{report:#}"
    );
    assert!(
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r.get("is_error").is_none_or(|e| e == false)),
        "{report:#}"
    );
}

fn asked_methods(report: &Value) -> Vec<String> {
    report["asked"]
        .as_array()
        .expect("asked")
        .iter()
        .map(|a| match a["mode"].as_str() {
            Some(mode) => format!("{} {mode}", a["method"].as_str().unwrap()),
            None => a["method"].as_str().unwrap().to_owned(),
        })
        .collect()
}

fn url_elicitations(report: &Value) -> Vec<Value> {
    report["asked"]
        .as_array()
        .expect("asked")
        .iter()
        .filter(|a| a["mode"] == "url")
        .cloned()
        .collect()
}

// --- 1. server-everything: a 2026-07-28 client with callbacks --------------------------------

fn everything_through(gate: &Gate) {
    let url = gate.url();
    let report = py(json!({
        "url": url, "mode": "2026-07-28", "callbacks": ["sampling", "elicitation"],
        "calls": [
            {"list_tools": true},
            {"tool": "trigger-sampling-request", "args": {"prompt": "hi"}},
            {"tool": "trigger-elicitation-request", "args": {}},
            // The -32042 path: the first call fails with URL elicitations, eragate asks them as
            // input_required and re-issues the call, which then asks its own URL elicitation.
            {"tool": "trigger-url-elicitation", "args": {"url": "https://example.com/auth", "errorPath": true}},
        ],
    }));
    let results = &report["results"];
    let names = results[0]["names"].as_array().expect("names");
    for tool in ["trigger-sampling-request", "trigger-elicitation-request"] {
        assert!(
            names.iter().any(|n| n == tool),
            "{tool} missing for a declaring client: {report:#}"
        );
    }
    let sampling = results[1]["text"].as_str().expect("sampling text");
    assert!(
        results[1]["is_error"] == false
            && sampling.starts_with("LLM sampling result:")
            && sampling.contains("\"text\": \"sampled-by-client\"")
            && sampling.contains("\"model\": \"test-model\""),
        "{report:#}"
    );
    let elicitation = results[2]["text"].as_str().expect("elicitation text");
    assert!(
        results[2]["is_error"] == false
            && elicitation.contains("User provided the requested information")
            && elicitation.contains("- Name: Ada")
            && elicitation.contains("- Email: ada@example.com"),
        "{report:#}"
    );
    let url_flow = results[3]["text"].as_str().expect("url text");
    assert!(
        results[3]["is_error"] == false
            && url_flow.contains("User completed the URL elicitation flow")
            && url_flow.contains("URL: https://example.com/auth"),
        "{report:#}"
    );
    assert_eq!(
        report["asked"][0]["texts"],
        json!(["Resource trigger-sampling-request context: hi"]),
        "{report:#}"
    );
    // 2026-07-28 URL elicitations carry no elicitationId (eragate keeps the upstream's).
    let urls = url_elicitations(&report);
    assert_eq!(urls.len(), 2, "{report:#}");
    assert!(urls.iter().all(|u| u["elicitation_id"].is_null()), "{report:#}");
    assert_eq!(urls[1]["url"], "https://example.com/auth", "{report:#}");

    // A client that declared neither: the tools are not offered; calling them anyway is a
    // clean error, and nothing hangs.
    let report = py(json!({
        "url": url, "mode": "2026-07-28", "callbacks": [],
        "calls": [
            {"list_tools": true},
            {"tool": "trigger-sampling-request", "args": {"prompt": "hi"}},
            {"tool": "trigger-elicitation-request", "args": {}},
        ],
    }));
    let results = &report["results"];
    let names = results[0]["names"].as_array().expect("names");
    assert!(
        !names.iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.starts_with("trigger-sampling") || n.starts_with("trigger-elicitation"))),
        "{report:#}"
    );
    for result in [&results[1], &results[2]] {
        assert!(
            result["is_error"] == true || result.get("error").is_some(),
            "expected a clean error: {report:#}"
        );
    }
    assert_eq!(report["asked"], json!([]), "{report:#}");
    gate.assert_drained();
}

#[test]
fn everything_sampling_and_elicitation_for_a_modern_client_over_stdio() {
    let command = everything_stdio_command();
    let gate = Gate::start(&stdio_upstream_toml(&command, "", ""));
    everything_through(&gate);
}

#[test]
fn everything_sampling_and_elicitation_for_a_modern_client_over_streamable_http() {
    let everything = everything_server("streamableHttp");
    let gate = Gate::start(&remote_upstream_toml("http", &everything.url, ""));
    everything_through(&gate);
}

// --- the --mrtr fixture: every kind of input, every carrier -------------------------------------

fn fixture_through(gate: &Gate) {
    let url = gate.url();
    let report = py(json!({
        "url": url, "mode": "2026-07-28", "callbacks": ALL_CALLBACKS,
        "calls": fixture_calls(),
    }));
    assert_fixture_results(&report, "sampled-by-client", "Ada", "file:///work/alpha");
    let mut asked = asked_methods(&report);
    // ask_all's three arrive in one input_required: the order the client answers them is its own.
    asked[6..9].sort_unstable();
    assert_eq!(
        asked,
        [
            "sampling/createMessage",
            "elicitation/create form",
            "elicitation/create url",
            "roots/list",
            "elicitation/create form",
            "sampling/createMessage",
            "elicitation/create form",
            "roots/list",
            "sampling/createMessage",
            "elicitation/create form",
            "roots/list",
        ],
        "{report:#}"
    );
    assert_eq!(report["asked"][5]["texts"], json!(["Greet Ada"]), "{report:#}");
    assert_eq!(
        url_elicitations(&report),
        [
            json!({"method": "elicitation/create", "mode": "url", "url": "https://example.com/auth", "elicitation_id": null})
        ],
        "{report:#}"
    );

    // Nothing to ask during a completion: eragate answers the upstream's request itself.
    let report = py(json!({
        "url": url, "mode": "2026-07-28", "callbacks": ALL_CALLBACKS,
        "calls": [{"complete": "test_input_required_result_prompt", "argument": "context", "value": "x"}],
    }));
    assert_eq!(report["results"][0]["values"], json!(["refused -32601"]), "{report:#}");
    assert_eq!(report["asked"], json!([]), "{report:#}");

    // Undeclared kinds: the request needs what the client lacks, so it fails with -32021
    // naming the method (2026-07-28); nothing reaches the client.
    let report = py(json!({
        "url": url, "mode": "2026-07-28", "callbacks": [],
        "calls": [
            {"tool": "ask_sampling", "args": {"prompt": "hi"}},
            {"tool": "ask_elicitation"},
            {"tool": "ask_url", "args": {"url": "https://example.com/auth"}},
            {"tool": "ask_roots"},
        ],
    }));
    let needed = [
        "sampling/createMessage",
        "elicitation/create",
        "elicitation/create",
        "roots/list",
    ];
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), needed.len(), "{report:#}");
    for (result, method) in results.iter().zip(needed) {
        assert_eq!(result["error"]["code"], -32021, "{method}: {report:#}");
        let message = result["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(method), "{method}: {report:#}");
    }
    assert_eq!(report["asked"], json!([]), "{report:#}");
    // Only sampling declared: the elicitation asked together with it is declined by eragate.
    let report = py(json!({
        "url": url, "mode": "2026-07-28", "callbacks": ["sampling"],
        "calls": [{"tool": "test_input_required_result_capabilities"}],
    }));
    assert_eq!(
        report["results"][0]["text"], "capabilities: sampled-by-client / decline",
        "{report:#}"
    );
    assert_eq!(asked_methods(&report), ["sampling/createMessage"], "{report:#}");
    gate.assert_drained();
}

#[test]
fn fixture_input_kinds_for_a_modern_client_over_stdio() {
    fixture_through(&fixture_stdio(&["--mrtr"], ""));
}

#[test]
fn fixture_input_kinds_for_a_modern_client_over_streamable_http() {
    let server = LegacyHttpServer::start(&["--mrtr"]);
    fixture_through(&Gate::start(&remote_upstream_toml("http", &server.url, "")));
}

#[test]
fn fixture_input_kinds_for_a_modern_client_over_http_sse() {
    // The 2024-11-05 transport: server→client requests name no request there either.
    let server = legacy_sse_server(&["--mrtr"]);
    fixture_through(&Gate::start(&remote_upstream_toml("sse", &server.url, "")));
}

// --- 2. the raw exchange ----------------------------------------------------------------------

fn caps(capabilities: Value) -> Value {
    json!({"io.modelcontextprotocol/clientCapabilities": capabilities})
}

/// A modern request with `capabilities` declared; its answer.
fn ask(url: &str, id: u64, method: &str, name: &str, mut params: Value, capabilities: &Value) -> Value {
    params["_meta"] = caps(capabilities.clone());
    let reply = post_modern(url, id, method, Some(name), params);
    assert_eq!(reply.status, 200, "{reply:?}");
    answer(&reply, id)
}

/// A tools/call with `capabilities`; its answer.
fn call(url: &str, id: u64, tool: &str, arguments: Value, capabilities: &Value) -> Value {
    ask(
        url,
        id,
        "tools/call",
        tool,
        json!({"name": tool, "arguments": arguments}),
        capabilities,
    )
}

/// The retry of a tools/call with `responses` and `state`; its answer.
fn retry(
    url: &str,
    id: u64,
    tool: &str,
    arguments: Value,
    responses: Value,
    state: &str,
    capabilities: &Value,
) -> Value {
    ask(
        url,
        id,
        "tools/call",
        tool,
        json!({"name": tool, "arguments": arguments, "inputResponses": responses, "requestState": state}),
        capabilities,
    )
}

/// The `input_required` result of `answer` (asserting its shape): its requests and state.
#[track_caller]
fn input_required(answer: &Value) -> (serde_json::Map<String, Value>, String) {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer:#}");
    let requests = result["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("no inputRequests: {answer:#}"))
        .clone();
    for (key, request) in &requests {
        let noun = request["method"]
            .as_str()
            .and_then(|m| m.split('/').next())
            .unwrap_or("?");
        // eragate's keys are `<noun>-<id>`; the fixture names its conformance inputs (snake_case).
        let named = !key.contains('-');
        assert!(named || key.starts_with(&format!("{noun}-")), "key {key} for {request}");
        let members: Vec<&String> = request.as_object().expect("object").keys().collect();
        assert_eq!(
            members,
            ["method", "params"],
            "an input request is only {{method, params}}: {request}"
        );
    }
    let state = result["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestState: {answer:#}"));
    assert!(state.len() >= 32, "{answer:#}");
    (requests, state.to_owned())
}

#[track_caller]
fn assert_invalid_state(answer: &Value, why: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer:#}");
    let message = answer["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("requestState ") && message.contains(why),
        "expected …{why}…: {answer:#}"
    );
}

fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "raw-model"})
}

#[test]
fn raw_input_required_exchange() {
    let gate = fixture_stdio(&["--mrtr"], "");
    let url = gate.url();
    let sampling = json!({"sampling": {}});

    // The shape: one sampling request keyed by noun and upstream id, no JSON-RPC id, a sealed state.
    let first = call(&url, 1, "ask_sampling", json!({"prompt": "hi"}), &sampling);
    let (requests, state) = input_required(&first);
    assert_eq!(requests.len(), 1, "{first:#}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(
        request,
        &json!({"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 50}}),
        "{first:#}"
    );
    assert_eq!(
        first["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "eragate-legacy-fixture"
    );
    assert_eq!(gate.suspended(), 1);
    let responses = json!({key.clone(): sampled("X")});

    // Tampered (one character flipped inside), other params, another method: -32602, and the call stays.
    let mut tampered: Vec<char> = state.chars().collect();
    let middle = tampered.len() / 2;
    tampered[middle] = if tampered[middle] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    let answer = retry(
        &url,
        2,
        "ask_sampling",
        json!({"prompt": "hi"}),
        responses.clone(),
        &tampered,
        &sampling,
    );
    assert_invalid_state(&answer, "is not one eragate issued");
    let answer = retry(
        &url,
        3,
        "ask_sampling",
        json!({"prompt": "other"}),
        responses.clone(),
        &state,
        &sampling,
    );
    assert_invalid_state(&answer, "belongs to another request");
    let answer = retry(
        &url,
        4,
        "ask_elicitation",
        json!({"prompt": "hi"}),
        responses.clone(),
        &state,
        &sampling,
    );
    assert_invalid_state(&answer, "belongs to another request");
    let answer = ask(
        &url,
        5,
        "prompts/get",
        "ask_sampling",
        json!({"name": "ask_sampling", "inputResponses": responses, "requestState": state}),
        &sampling,
    );
    assert_invalid_state(&answer, "belongs to another request");
    assert_eq!(gate.suspended(), 1);

    // The retry (new id) resumes the same upstream call.
    let done = retry(
        &url,
        6,
        "ask_sampling",
        json!({"prompt": "hi"}),
        responses.clone(),
        &state,
        &sampling,
    );
    assert_eq!(done["id"], 6, "{done:#}");
    assert_eq!(done["result"]["resultType"], "complete", "{done:#}");
    assert_eq!(tool_text(&done["result"]), "sampled: X", "{done:#}");
    // Reused: the call is gone.
    let answer = retry(
        &url,
        7,
        "ask_sampling",
        json!({"prompt": "hi"}),
        responses,
        &state,
        &sampling,
    );
    assert_invalid_state(&answer, "no longer waiting");

    // URL mode: no elicitationId toward the client.
    let url_caps = json!({"elicitation": {"url": {}}});
    let first = call(
        &url,
        8,
        "ask_url",
        json!({"url": "https://example.com/auth"}),
        &url_caps,
    );
    let (requests, state) = input_required(&first);
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(
        request,
        &json!({"method": "elicitation/create", "params": {
            "mode": "url", "message": "Open this page", "url": "https://example.com/auth"}}),
        "{first:#}"
    );
    let done = retry(
        &url,
        9,
        "ask_url",
        json!({"url": "https://example.com/auth"}),
        json!({key.clone(): {"action": "accept"}}),
        &state,
        &url_caps,
    );
    assert_eq!(tool_text(&done["result"]), "url: accept", "{done:#}");

    // Three inputs at once; a retry answering one of them is asked the two others again.
    let every = json!({"sampling": {}, "elicitation": {"form": {}}, "roots": {}});
    let first = call(&url, 10, "ask_all", json!({}), &every);
    let (requests, state) = input_required(&first);
    let mut methods: Vec<&str> = requests.values().map(|r| r["method"].as_str().unwrap()).collect();
    methods.sort_unstable();
    assert_eq!(
        methods,
        ["elicitation/create", "roots/list", "sampling/createMessage"],
        "{first:#}"
    );
    let key_of = |requests: &serde_json::Map<String, Value>, method: &str| {
        requests
            .iter()
            .find(|(_, r)| r["method"] == method)
            .map(|(k, _)| k.clone())
            .unwrap()
    };
    let sampling_key = key_of(&requests, "sampling/createMessage");
    let again = retry(
        &url,
        11,
        "ask_all",
        json!({}),
        json!({sampling_key.clone(): sampled("S")}),
        &state,
        &every,
    );
    let (missing, state2) = input_required(&again);
    assert_ne!(state2, state, "a new round has a new requestState");
    let mut left: Vec<&String> = missing.keys().collect();
    left.sort_unstable();
    let mut expected: Vec<&String> = requests.keys().filter(|k| **k != sampling_key).collect();
    expected.sort_unstable();
    assert_eq!(left, expected, "{again:#}");
    let responses = json!({
        key_of(&requests, "elicitation/create"): {"action": "accept", "content": {"name": "Eve"}},
        key_of(&requests, "roots/list"): {"roots": [{"uri": "file:///r"}]},
        "unrelated-key": {"ignored": true},
    });
    let done = retry(&url, 12, "ask_all", json!({}), responses, &state2, &every);
    assert_eq!(
        tool_text(&done["result"]),
        "all: accept {\"name\": \"Eve\"} | S | file:///r",
        "{done:#}"
    );

    // Two rounds: the resumed call asks again, with another state.
    let first = call(&url, 13, "ask_twice", json!({}), &every);
    let (requests, state) = input_required(&first);
    let key = requests.keys().next().unwrap().clone();
    let second = retry(
        &url,
        14,
        "ask_twice",
        json!({}),
        json!({key: {"action": "accept", "content": {"name": "Ada"}}}),
        &state,
        &every,
    );
    let (requests, state) = input_required(&second);
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"], "Greet Ada",
        "{second:#}"
    );
    let done = retry(
        &url,
        15,
        "ask_twice",
        json!({}),
        json!({key.clone(): sampled("hello")}),
        &state,
        &every,
    );
    assert_eq!(tool_text(&done["result"]), "twice: Ada / hello", "{done:#}");

    // prompts/get and resources/read suspend too.
    let first = ask(
        &url,
        16,
        "prompts/get",
        "test_input_required_result_prompt",
        json!({"name": "test_input_required_result_prompt"}),
        &every,
    );
    let (requests, state) = input_required(&first);
    let key = requests.keys().next().unwrap().clone();
    assert_eq!(key, "user_context", "the name the upstream gave in _meta: {first:#}");
    let done = ask(
        &url,
        17,
        "prompts/get",
        "test_input_required_result_prompt",
        json!({"name": "test_input_required_result_prompt", "requestState": state,
               "inputResponses": {key: {"action": "accept", "content": {"context": "tea"}}}}),
        &every,
    );
    assert_eq!(done["result"]["resultType"], "complete", "{done:#}");
    assert_eq!(
        done["result"]["messages"][0]["content"]["text"], "Use this context: tea",
        "{done:#}"
    );
    let first = ask(
        &url,
        18,
        "resources/read",
        "test://ask/roots",
        json!({"uri": "test://ask/roots"}),
        &every,
    );
    let (requests, state) = input_required(&first);
    let key = requests.keys().next().unwrap().clone();
    let done = ask(
        &url,
        19,
        "resources/read",
        "test://ask/roots",
        json!({"uri": "test://ask/roots", "requestState": state, "inputResponses": {key: {"roots": [{"uri": "file:///z"}]}}}),
        &every,
    );
    assert_eq!(done["result"]["contents"][0]["text"], "roots: file:///z", "{done:#}");

    // Not declared: -32021 with HTTP 400, naming the capability in `requiredCapabilities`
    // (never input_required, never a silent decline); the upstream call is cancelled.
    let undeclared = [
        (20, "ask_elicitation", json!({}), json!({"elicitation": {"form": {}}})),
        (21, "ask_roots", json!({"sampling": {}}), json!({"roots": {}})),
        (
            22,
            "ask_sampling",
            json!({"elicitation": {"form": {}}}),
            json!({"sampling": {}}),
        ),
    ];
    for (id, tool, declared, required) in undeclared {
        let mut params = json!({"name": tool, "arguments": {"prompt": "hi"}});
        params["_meta"] = caps(declared.clone());
        let reply = post_modern(&url, id, "tools/call", Some(tool), params);
        assert_eq!(reply.status, 400, "{tool} with {declared}: {reply:?}");
        let refused = common::answer(&reply, id);
        assert_eq!(refused["error"]["code"], -32021, "{refused:#}");
        assert_eq!(
            refused["error"]["data"]["requiredCapabilities"], required,
            "{refused:#}"
        );
    }
    assert_eq!(gate.suspended(), 0);

    gate.assert_drained();
}

/// A retry whose upstream died meanwhile: a clear error, nothing left, and the next call works.
#[test]
fn a_retry_after_the_upstream_crashed_gets_a_clear_error() {
    let tag = unique_tag("mrtr_crash");
    let mut command = tagged_fixture(&tag);
    command.push("--mrtr".to_owned());
    let gate = Gate::start(&stdio_upstream_toml(&command, "", ""));
    let url = gate.url();
    let sampling = json!({"sampling": {}});
    let first = call(&url, 1, "ask_sampling", json!({"prompt": "hi"}), &sampling);
    let (requests, state) = input_required(&first);
    let key = requests.keys().next().unwrap().clone();
    let pids = pids_with(&tag);
    assert!(!pids.is_empty());
    for pid in &pids {
        signal(*pid, Signal::SIGKILL);
    }
    // eragate restarts children (with the same tag): wait for the killed ones to be gone.
    wait_until("the upstream children to die", Duration::from_secs(10), || {
        let alive = pids_with(&tag);
        !pids.iter().any(|p| alive.contains(p))
    });
    let answer = retry(
        &url,
        2,
        "ask_sampling",
        json!({"prompt": "hi"}),
        json!({key: sampled("X")}),
        &state,
        &sampling,
    );
    let error = answer
        .get("error")
        .unwrap_or_else(|| panic!("expected an error: {answer:#}"));
    let message = error["message"].as_str().unwrap_or("");
    assert!(
        error["code"].is_i64()
            && message.contains("fixture")
            && (message.contains("closed") || message.contains("exited")),
        "{answer:#}"
    );
    assert_eq!(gate.suspended(), 0);
    // Killing the spare too can count as a crash loop: eragate then refuses at once ("unavailable:
    // restarting after crashes; next start in …") until its backoff has passed.
    let mut again = Value::Null;
    let restarted = poll_until(Duration::from_secs(15), || {
        again = call(&url, 3, "ask_sampling", json!({"prompt": "again"}), &sampling);
        let unavailable = again["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unavailable: restarting after crashes"));
        !unavailable
    });
    assert!(restarted, "the upstream was never restarted: {again:#}");
    let (requests, state) = input_required(&again);
    let key = requests.keys().next().unwrap().clone();
    let done = retry(
        &url,
        4,
        "ask_sampling",
        json!({"prompt": "again"}),
        json!({key: sampled("Y")}),
        &state,
        &sampling,
    );
    assert_eq!(tool_text(&done["result"]), "sampled: Y", "{done:#}");
    gate.assert_drained();
}

/// A suspended call keeps its stdio session; the next request that may be asked for input must
/// not share it (a server→client request on a shared stdio session cannot be attributed), with
/// the default pool. Reported to the lead: eragate puts it on the busy session and then refuses
/// (or, for elicitation, declines on the user's behalf) the input the second client could give.
#[test]
fn a_suspended_call_does_not_take_the_next_requests_input_away() {
    let gate = fixture_stdio(&["--mrtr"], "");
    let url = gate.url();
    let sampling = json!({"sampling": {}, "elicitation": {}});
    let first = call(&url, 1, "ask_sampling", json!({"prompt": "first"}), &sampling);
    let (first_requests, first_state) = input_required(&first);
    // Another client, same capabilities, while the first call waits for its input.
    let second = call(&url, 2, "ask_sampling", json!({"prompt": "second"}), &sampling);
    let second_ok = second["result"]["resultType"] == "input_required";
    let elicit = call(&url, 3, "ask_elicitation", json!({}), &sampling);
    let elicit_ok = elicit["result"]["resultType"] == "input_required";
    // The first call still completes.
    let key = first_requests.keys().next().unwrap().clone();
    let done = retry(
        &url,
        4,
        "ask_sampling",
        json!({"prompt": "first"}),
        json!({key: sampled("1")}),
        &first_state,
        &sampling,
    );
    assert_eq!(tool_text(&done["result"]), "sampled: 1", "{done:#}");
    assert!(
        second_ok && elicit_ok,
        "while one call was suspended, the next requests were not asked for their input:\n\
         tools/call ask_sampling → {second:#}\ntools/call ask_elicitation → {elicit:#}"
    );
}

/// Never retried: at expiry (`sessions.input_expiry`) the upstream call is cancelled and
/// the session released. `sessions.input_expiry` is shortened to 3 s for the test.
#[test]
fn a_suspended_call_never_retried_is_cancelled_upstream_at_expiry() {
    let server = TracedUpstream::start_with(&["--mrtr"]);
    let gate = Gate::start(&format!(
        "[sessions]\ninput_expiry = \"3s\"\n{}",
        remote_upstream_toml("http", &server.url, "")
    ));
    let url = gate.url();
    let first = call(
        &url,
        1,
        "ask_sampling",
        json!({"prompt": "never"}),
        &json!({"sampling": {}}),
    );
    input_required(&first);
    assert_eq!(gate.suspended(), 1);
    let started = Instant::now();
    wait_until("the suspended call to expire", Duration::from_secs(20), || {
        gate.suspended() == 0
    });
    assert!(started.elapsed() > Duration::from_secs(2), "expired too early");
    wait_until("notifications/cancelled upstream", Duration::from_secs(10), || {
        server.raw().contains("notifications/cancelled")
    });
    gate.assert_drained();
}

// --- 3. modern upstream, legacy clients --------------------------------------------------------

#[test]
fn legacy_clients_answer_a_modern_upstreams_input_required() {
    let gate = Gate::start(&stdio_upstream_toml(&dual_era_stdio_command(&["--mrtr"]), "", ""));
    let url = gate.url();

    // Python SDK, 2025-11-25, every callback.
    let report = py(json!({"url": url, "mode": "legacy", "callbacks": ALL_CALLBACKS, "calls": fixture_calls()}));
    assert_eq!(report["protocol_version"], "2025-11-25");
    assert_fixture_results(&report, "sampled-by-client", "Ada", "file:///work/alpha");
    let urls = url_elicitations(&report);
    assert_eq!(urls.len(), 1, "{report:#}");
    let minted = urls[0]["elicitation_id"].as_str().unwrap_or("");
    assert!(
        minted.len() >= 16,
        "eragate mints an elicitationId for a 2025-11-25 client: {report:#}"
    );

    // Without callbacks: a clear -32021 for each kind.
    let report = py(json!({
        "url": url, "mode": "legacy", "callbacks": [],
        "calls": [
            {"tool": "ask_sampling", "args": {"prompt": "hi"}},
            {"tool": "ask_elicitation"},
            {"tool": "ask_roots"},
            {"prompt": "test_input_required_result_prompt"},
        ],
    }));
    for (result, method) in report["results"].as_array().unwrap().iter().zip([
        "sampling/createMessage",
        "elicitation/create",
        "roots/list",
        "elicitation/create",
    ]) {
        assert_eq!(result["error"]["code"], -32021, "{report:#}");
        assert!(
            result["error"]["message"].as_str().unwrap().contains(method),
            "{report:#}"
        );
    }
    assert_eq!(report["asked"], json!([]), "{report:#}");

    // A 2025-06-18 client: form elicitation yes, URL mode (2025-11-25 only) no.
    let report = py(json!({
        "url": url, "mode": "legacy", "offer_version": "2025-06-18", "callbacks": ALL_CALLBACKS,
        "calls": [{"tool": "ask_url", "args": {"url": "https://example.com/a"}}, {"tool": "ask_elicitation"}],
    }));
    assert_eq!(report["protocol_version"], "2025-06-18");
    assert_eq!(report["results"][0]["error"]["code"], -32021, "{report:#}");
    assert_eq!(
        report["results"][1]["text"], "elicited: accept {\"name\": \"Ada\"}",
        "{report:#}"
    );

    // TypeScript SDK 1.32.2 with every handler.
    let tools = json!([
        {"tool": "ask_sampling", "args": {"prompt": "hi"}},
        {"tool": "ask_elicitation"},
        {"tool": "ask_url", "args": {"url": "https://example.com/auth"}},
        {"tool": "ask_roots"},
        {"tool": "ask_twice"},
        {"tool": "ask_all"},
    ]);
    let report = ts(json!({
        "url": url, "capabilities": {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}}, "calls": tools,
    }));
    let texts: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        texts,
        [
            "sampled: sampled-by-ts",
            "elicited: accept {\"name\": \"Grace\"}",
            "url: accept",
            "roots: file:///work/ts",
            "twice: Grace / sampled-by-ts",
            "all: accept {\"name\": \"Grace\"} | sampled-by-ts | file:///work/ts",
        ],
        "{report:#}"
    );
    assert!(
        url_elicitations(&report)[0]["elicitation_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{report:#}"
    );

    // TypeScript, elicitation `{}` only (form): sampling and URL mode get -32021, form works.
    let report = ts(json!({
        "url": url, "capabilities": {"elicitation": {}},
        "calls": [{"tool": "ask_sampling", "args": {"prompt": "hi"}}, {"tool": "ask_url", "args": {"url": "https://example.com/a"}}, {"tool": "ask_elicitation"}],
    }));
    assert_eq!(report["results"][0]["error"]["code"], -32021, "{report:#}");
    assert_eq!(report["results"][1]["error"]["code"], -32021, "{report:#}");
    assert_eq!(
        report["results"][2]["text"], "elicited: accept {\"name\": \"Grace\"}",
        "{report:#}"
    );
    assert_eq!(asked_methods(&report), ["elicitation/create form"], "{report:#}");
}

#[test]
fn a_legacy_client_answers_a_modern_http_upstreams_input_required() {
    let server = LegacyHttpServer::start(&["--dual-era", "--mrtr"]);
    let gate = Gate::start(&remote_upstream_toml("http", &server.url, ""));
    let report = py(json!({"url": gate.url(), "mode": "legacy", "callbacks": ALL_CALLBACKS, "calls": fixture_calls()}));
    assert_fixture_results(&report, "sampled-by-client", "Ada", "file:///work/alpha");
}

// --- 4. the alpha conformance suite ---------------------------------------------------------------

/// Every `input-required-result-*` scenario of the alpha suite.
const INPUT_REQUIRED_SCENARIOS: [&str; 14] = [
    "basic-elicitation",
    "basic-sampling",
    "basic-list-roots",
    "request-state",
    "multiple-input-requests",
    "multi-round",
    "missing-input-response",
    "non-tool-request",
    "result-type",
    "unsupported-methods",
    "tampered-state",
    "capability-check",
    "ignore-extra-params",
    "validate-input",
];

#[test]
fn alpha_input_required_result_scenarios_pass() {
    // Scenarios that never retry leave their call suspended (until expiry); a pool with room
    // keeps each on its own session (see a_suspended_call_does_not_take_the_next_requests_input_away).
    // The fixture names its conformance inputs (`user_name`, …) in `_meta["dev.eragate/inputKey"]`,
    // which eragate keeps as the `inputRequests` keys; every check must pass.
    let gate = fixture_stdio(&["--mrtr"], "[upstreams.pool]\nsize = 16\n");
    let scenarios: Vec<String> = INPUT_REQUIRED_SCENARIOS
        .iter()
        .map(|s| format!("input-required-result-{s}"))
        .collect();
    let runs: Vec<Vec<&str>> = scenarios
        .iter()
        .map(|scenario| vec!["--scenario", scenario.as_str()])
        .collect();
    conformance::assert_runs_pass(
        "CONFORMANCE_ALPHA_JS",
        &gate.gateway,
        &runs,
        "input-required-result scenarios",
    );
}

/// `inputResponses` sent on the first call, before anything was asked: used when
/// their key matches the name the server gives its request (`dev.eragate/inputKey`),
/// ignored otherwise (the alpha `input-required-result-ignore-extra-params` warns on
/// a gateway that asks again).
#[test]
fn answers_sent_before_they_were_asked_are_used_for_named_inputs() {
    let gate = fixture_stdio(&["--mrtr"], "");
    let url = gate.url();
    let form = json!({"elicitation": {"form": {}}});
    let tool = "test_input_required_result_elicitation";
    let ada = json!({"action": "accept", "content": {"name": "Ada"}});

    let first = ask(
        &url,
        1,
        "tools/call",
        tool,
        json!({"name": tool, "arguments": {}, "inputResponses": {"user_name": ada.clone()}}),
        &form,
    );
    assert_eq!(first["result"]["resultType"], "complete", "{first:#}");
    assert_eq!(tool_text(&first["result"]), "Hello, Ada!", "{first:#}");
    assert_eq!(gate.suspended(), 0);

    // An answer without the shape of an elicitation result is no answer: the question is asked.
    let malformed = ask(
        &url,
        4,
        "tools/call",
        tool,
        json!({"name": tool, "arguments": {}, "inputResponses": {"user_name": 12345}}),
        &form,
    );
    let (requests, state) = input_required(&malformed);
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["user_name"], "{malformed:#}");
    let done = retry(
        &url,
        5,
        tool,
        json!({}),
        json!({"user_name": ada.clone()}),
        &state,
        &form,
    );
    assert_eq!(tool_text(&done["result"]), "Hello, Ada!", "{done:#}");

    // A key the server did not name is no answer: the question is asked.
    let other = ask(
        &url,
        2,
        "tools/call",
        tool,
        json!({"name": tool, "arguments": {}, "inputResponses": {"someone_else": ada.clone()}}),
        &form,
    );
    let (requests, state) = input_required(&other);
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["user_name"], "{other:#}");
    let done = retry(&url, 3, tool, json!({}), json!({"user_name": ada}), &state, &form);
    assert_eq!(tool_text(&done["result"]), "Hello, Ada!", "{done:#}");
    gate.assert_drained();
}
