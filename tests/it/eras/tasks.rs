//! The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) served by eragate
//! in front of a legacy-only upstream whose tools know nothing of tasks
//! (`legacy_server.py --tasks`: plain synchronous tools; every call recorded in `--events`).
//!
//! - The alpha conformance suite's ten `tasks-*` scenarios, over stdio and Streamable HTTP:
//!   every check passes. They are extension scenarios: `--requirements 2026-07-28` runs them
//!   but never scores them, and `--scenario tasks-… --spec-version 2026-07-28` alone skips them
//!   (exit 0, no checks), so each runs with `--force`.
//! - The Python SDK (mcp 2.3.0) as a 2026-07-28 client. It has no tasks client: the driver
//!   declares the extension with the SDK's `ClientExtension` (a `ResultClaim` for
//!   `resultType: "task"`) and sends `tasks/get`, `tasks/update` and `tasks/cancel` through its
//!   session's generic `send_request` (a `Request` subclass whose `name_param` mirrors `taskId`
//!   into `Mcp-Name`).
//! - Bad input over raw HTTP: unknown, malformed and another principal's task ids, answers to
//!   questions never asked, a result past `max_result_bytes`, the per-principal task limit.
//! - A 2025-11-25 upstream's own tasks, bridged to the extension without configuration:
//!   server-everything's `simulate-research-query`, and the ten scenarios in front of
//!   `ts_tasks_server.mjs` (TypeScript SDK 1.32.2's experimental tasks).
//! - Two replicas sharing a real `redis-server`: a task created on one is answered, polled and
//!   cancelled on the other.
//! - `input_timeout` and `ttl`: a task waiting for input past the one fails, a task past the
//!   other is cancelled upstream and forgotten.
//!
//! After each, no upstream call is left running: the fixture recorded as many `finished` and
//! `cancelled` as `started`, and the admin `/pools` view shows nothing in flight.
//!
//! The configuration is the one the tasks feature defines (`[tasks]`, `[[upstreams.tasks.tools]]`);
//! only `greet_answers_synchronously_through_an_untasked_gateway` runs without it.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::tokens::{ALICE, BOB, auth_toml};
use common::*;

/// The extension's identifier.
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// The fixture tools eragate runs as tasks: (glob, support, input). `greet` stays synchronous.
const TASK_TOOLS: [(&str, &str, &str); 7] = [
    ("slow_compute", "optional", "in_task"),
    ("protocol_error_job", "optional", "in_task"),
    ("confirm_delete", "optional", "in_task"),
    ("multi_input", "optional", "in_task"),
    ("big_result", "optional", "in_task"),
    ("failing_job", "required", "in_task"),
    ("test_tool_with_task", "required", "before_task"),
];

/// The ten scenarios of `@modelcontextprotocol/conformance@0.2.0-alpha.12` for the extension.
const SCENARIOS: [&str; 10] = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

/// The one scenario with no check of its own yet: it reports a single SKIPPED placeholder
/// (notifications/tasks on subscriptions/listen, "pending subscriptions/listen rewrite").
const PLACEHOLDER_SCENARIO: &str = "tasks-status-notifications";

/// One conformance run at a time (their timing windows, a 2-core machine).
static SERIAL: Mutex<()> = Mutex::new(());

/// The `[[upstreams.tasks.tools]]` of [`TASK_TOOLS`].
fn task_tools_toml() -> String {
    TASK_TOOLS
        .iter()
        .map(|(name, support, input)| {
            format!("[[upstreams.tasks.tools]]\nname = \"{name}\"\nsupport = \"{support}\"\ninput = \"{input}\"\n")
        })
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Transport {
    /// eragate's `[upstreams.stdio]` running `legacy_server.py stdio --tasks`.
    Stdio,
    /// `legacy_server.py http --port 0 --tasks`, eragate's `[upstreams.http]`.
    StreamableHttp,
}

/// eragate (with an admin listener) in front of the `--tasks` fixture, which records its
/// calls in `events`.
struct Gate {
    gateway: Eragate,
    admin: String,
    events: PathBuf,
    _upstream: Option<LegacyHttpServer>,
    _dir: tempfile::TempDir,
}

impl Gate {
    /// `tasks` holds the `[tasks]` table (or nothing), `auth` e.g. [`auth_toml`]; with
    /// `task_tools`, the fixture's [`TASK_TOOLS`] are configured.
    fn start(transport: Transport, tasks: &str, auth: &str, task_tools: bool) -> Gate {
        let dir = tempfile::tempdir().expect("tempdir");
        let events = dir.path().join("events.jsonl");
        let events_arg = events.to_str().expect("utf-8 path").to_owned();
        let (upstream, upstream_toml) = match transport {
            Transport::Stdio => {
                let mut command = legacy_stdio_command();
                command.extend(["--tasks".to_owned(), "--events".to_owned(), events_arg]);
                // Room for several calls waiting on input at once, children started ahead.
                let toml = stdio_upstream_toml(&command, "", "spares = 2\n[upstreams.pool]\nsize = 8\n");
                (None, toml)
            }
            Transport::StreamableHttp => {
                let server = LegacyHttpServer::start(&["--tasks", "--events", &events_arg]);
                let toml = remote_upstream_toml("http", &server.url, "");
                (Some(server), toml)
            }
        };
        let tools = if task_tools { task_tools_toml() } else { String::new() };
        let admin = format!("127.0.0.1:{}", free_port());
        let gateway = Eragate::start(&format!(
            "[admin]\naddress = \"{admin}\"\n{tasks}\n{auth}\n{upstream_toml}\n{tools}"
        ));
        wait_until("the admin listener", Duration::from_secs(10), || {
            std::net::TcpStream::connect(&admin).is_ok()
        });
        Gate {
            gateway,
            admin,
            events,
            _upstream: upstream,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        self.gateway.url()
    }

    fn pools(&self) -> Value {
        send("GET", &format!("http://{}/pools", self.admin), &[], None).json()
    }

    /// How many `event`s the fixture recorded for `tool` (every tool when `None`).
    fn count(&self, event: &str, tool: Option<&str>) -> usize {
        recorded_events(&self.events, event)
            .iter()
            .filter(|e| tool.is_none_or(|t| e["tool"] == t))
            .count()
    }

    /// Waits until the fixture recorded `event` for `tool` `n` times; panics after 10 s.
    #[track_caller]
    fn wait_for_events(&self, event: &str, tool: &str, n: usize) {
        let seen = poll_until(Duration::from_secs(10), || self.count(event, Some(tool)) >= n);
        assert!(
            seen,
            "expected {n} {event:?} events of {tool}: {}\n\neragate log:\n{}",
            std::fs::read_to_string(&self.events).unwrap_or_default(),
            self.gateway.log()
        );
    }

    /// Asserts no upstream call is left running: every `started` call of the fixture was
    /// `finished` or `cancelled`, and `/pools` shows nothing in flight (waits up to 10 s).
    #[track_caller]
    fn assert_drained(&self) {
        let drained = poll_until(Duration::from_secs(10), || {
            let pools = self.pools();
            self.count("started", None) == self.count("finished", None) + self.count("cancelled", None)
                && pools["upstreams"]
                    .as_array()
                    .is_some_and(|u| u.iter().all(|u| u["in_flight"] == 0))
        });
        assert!(
            drained,
            "an upstream call was left running:\nevents:\n{}\npools: {:#}\n\neragate log:\n{}",
            std::fs::read_to_string(&self.events).unwrap_or_default(),
            self.pools(),
            self.gateway.log()
        );
    }
}

// --- raw 2026-07-28 requests ------------------------------------------------------------------

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A 2026-07-28 POST of `method` (with `Mcp-Name: name` when given), declaring the tasks
/// extension and form elicitation when `extension`, with `token` as bearer when given.
fn rpc(
    url: &str,
    token: Option<&str>,
    method: &str,
    name: Option<&str>,
    params: Value,
    extension: bool,
) -> (u64, Reply) {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let mut params = params;
    // The extension, and form elicitation: the fixture's questions are elicitations.
    let capabilities = if extension {
        json!({"elicitation": {}, "extensions": {TASKS: {}}})
    } else {
        json!({})
    };
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": capabilities});
    let authorization = token.map(|t| format!("Bearer {t}"));
    let mut headers = modern_headers(method, name);
    if let Some(authorization) = &authorization {
        headers.push(("authorization", authorization));
    }
    let reply = send("POST", url, &headers, Some(&modern_body(id, method, params)));
    (id, reply)
}

/// The JSON-RPC answer (result or error) of a 2026-07-28 request declaring the extension.
#[track_caller]
fn ask(url: &str, token: Option<&str>, method: &str, name: Option<&str>, params: Value) -> Value {
    let (id, reply) = rpc(url, token, method, name, params, true);
    answer(&reply, id)
}

/// A `tasks/*` request about `task_id` (with `Mcp-Name: task_id`) and `extra` params; its answer.
#[track_caller]
fn task_request(url: &str, token: Option<&str>, method: &str, task_id: &str, extra: Value) -> Value {
    let mut params = extra;
    params["taskId"] = json!(task_id);
    ask(url, token, method, Some(task_id), params)
}

/// `tools/call` of a task-supporting tool: asserts a `CreateTaskResult`; returns it.
#[track_caller]
fn create(url: &str, token: Option<&str>, tool: &str, arguments: Value) -> Value {
    let answer = ask(
        url,
        token,
        "tools/call",
        Some(tool),
        json!({"name": tool, "arguments": arguments}),
    );
    let result = &answer["result"];
    assert_eq!(result["resultType"], "task", "{tool} should create a task: {answer:#}");
    assert!(result["taskId"].as_str().is_some_and(|id| !id.is_empty()), "{answer:#}");
    result.clone()
}

/// `tasks/get`'s result (panics on an error answer).
#[track_caller]
fn get(url: &str, token: Option<&str>, task_id: &str) -> Value {
    let answer = task_request(url, token, "tasks/get", task_id, json!({}));
    assert!(answer.get("result").is_some(), "tasks/get {task_id}: {answer:#}");
    answer["result"].clone()
}

/// Polls `tasks/get` every 100 ms until the status is one of `statuses`; panics after 15 s.
#[track_caller]
fn poll(url: &str, token: Option<&str>, task_id: &str, statuses: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let task = get(url, token, task_id);
        if task["status"].as_str().is_some_and(|s| statuses.contains(&s)) {
            return task;
        }
        assert!(
            Instant::now() < deadline,
            "task {task_id} never reached {statuses:?}: {task:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Asserts `answer` is a JSON-RPC error with `code`.
#[track_caller]
fn assert_error(answer: &Value, code: i64, what: &str) {
    assert_eq!(answer["error"]["code"], code, "{what}: {answer:#}");
    assert!(answer.get("result").is_none(), "{what}: {answer:#}");
}

/// Asserts `answer` is the bare acknowledgement of `tasks/update` / `tasks/cancel`.
#[track_caller]
fn assert_ack(answer: &Value, what: &str) {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "complete", "{what}: {answer:#}");
    for key in ["taskId", "status", "result", "error", "inputRequests"] {
        assert!(result.get(key).is_none(), "{what}: an ack carries no {key}: {answer:#}");
    }
}

// --- 1. the fixture, through the gateway of today ---------------------------------------------

/// The `--tasks` fixture lists the suite's tools through eragate, and the sync `greet` (never
/// configured as a task) answers a 2026-07-28 client declaring the extension with a plain
/// `complete` result: no `taskId`, the fixture's text, one upstream call started and finished.
/// Needs no tasks configuration, so it passes on a gateway without the feature too.
#[test]
fn greet_answers_synchronously_through_an_untasked_gateway() {
    let gate = Gate::start(Transport::Stdio, "", "", false);
    let url = gate.url();
    let listed = ask(&url, None, "tools/list", None, json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {listed:#}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in [
        "greet",
        "slow_compute",
        "failing_job",
        "protocol_error_job",
        "confirm_delete",
        "multi_input",
        "test_tool_with_task",
        "big_result",
    ] {
        assert!(names.contains(&tool), "{tool} not listed: {names:?}");
    }

    let greeted = ask(
        &url,
        None,
        "tools/call",
        Some("greet"),
        json!({"name": "greet", "arguments": {"name": "World"}}),
    );
    let result = &greeted["result"];
    assert_eq!(result["resultType"], "complete", "{greeted:#}");
    assert!(result.get("taskId").is_none(), "{greeted:#}");
    assert_eq!(tool_text(result), "Hello, World!", "{greeted:#}");
    assert_eq!(gate.count("started", Some("greet")), 1);
    assert_eq!(gate.count("finished", Some("greet")), 1);
    gate.assert_drained();
}

// --- 2. the alpha conformance suite -----------------------------------------------------------

/// Runs every scenario of [`SCENARIOS`] at 2026-07-28 against `gate`; panics unless each ran
/// and every check passed ([`PLACEHOLDER_SCENARIO`]: its one SKIPPED placeholder, nothing else
/// but passes). Then no upstream call may be left running.
fn run_scenarios(gate: &Gate, transport: Transport) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (problems, outputs) = scenario_problems(&gate.url());
    assert!(
        problems.is_empty(),
        "alpha tasks-* scenarios against eragate + legacy_server.py --tasks over {transport:?}:\n{}\n\n\
         suite output:\n{}\n\neragate log:\n{}",
        problems.join("\n"),
        outputs.join("\n----------------\n"),
        gate.gateway.log()
    );
    // The scenarios' 60 s slow_compute tasks, cancelled by the suite, must have reached the
    // fixture (and been cancelled there): the drain check below is not vacuous.
    assert!(
        gate.count("started", Some("slow_compute")) >= 5,
        "events: {:?}",
        gate.events
    );
    assert!(
        gate.count("cancelled", Some("slow_compute")) >= 3,
        "events: {:?}",
        gate.events
    );
    gate.assert_drained();
}

/// Runs the ten scenarios against `url`: what is wrong (every check not SUCCESS but the
/// placeholder's, a scenario skipped or without a passing check of its own), and the suite's output.
fn scenario_problems(url: &str) -> (Vec<String>, Vec<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut problems = Vec::new();
    let mut outputs = Vec::new();
    for scenario in SCENARIOS {
        // Without --force an extension scenario is "not applicable at spec version 2026-07-28":
        // skipped, exit 0, no checks. --requirements (which cannot be combined with --scenario)
        // runs it but never scores it.
        let args = ["--scenario", scenario, "--spec-version", "2026-07-28", "--force"];
        let (ok, output) = conformance::run_suite_in("CONFORMANCE_ALPHA_JS", url, &args, dir.path());
        if !ok {
            problems.push(format!("{scenario}: the suite exited non-zero"));
        }
        if output.contains("SKIPPED: scenario") {
            problems.push(format!("{scenario}: skipped instead of run"));
        }
        outputs.push(output);
    }
    let results = conformance::scenario_checks(dir.path());
    for scenario in SCENARIOS {
        let Some(checks) = results.get(scenario) else {
            problems.push(format!("{scenario}: no checks.json (did not run)"));
            continue;
        };
        let own = |c: &&Value| c["id"] != "wire-schema-valid";
        if scenario == PLACEHOLDER_SCENARIO {
            let placeholder: Vec<&Value> = checks.iter().filter(own).collect();
            if placeholder.len() != 1
                || placeholder[0]["id"] != PLACEHOLDER_SCENARIO
                || placeholder[0]["status"] != "SKIPPED"
            {
                problems.push(format!(
                    "{scenario}: expected only its SKIPPED placeholder (the suite changed? then its \
                     checks must pass): {placeholder:?}"
                ));
            }
        } else if !checks.iter().any(|c| own(&c) && c["status"] == "SUCCESS") {
            problems.push(format!("{scenario}: no passing check of its own"));
        }
        for check in checks {
            let placeholder = scenario == PLACEHOLDER_SCENARIO && check["id"] == PLACEHOLDER_SCENARIO;
            if check["status"] != "SUCCESS" && !placeholder {
                let details: String = check["details"].to_string().chars().take(700).collect();
                problems.push(format!(
                    "{scenario}:{} {}: {}\n    details: {details}",
                    check["id"].as_str().unwrap_or("?"),
                    check["status"].as_str().unwrap_or("?"),
                    check["errorMessage"].as_str().unwrap_or("")
                ));
            }
        }
    }
    (problems, outputs)
}

/// The ten scenarios against eragate in front of a 2025-11-25 server with tasks of its own
/// (`ts_tasks_server.mjs`, the TypeScript SDK 1.32.2's experimental tasks): its tasks are
/// bridged to the extension with no configuration, but for `test_tool_with_task`, a plain tool
/// there, which eragate runs as its own task (`input = "before_task"`). Every check passes.
#[test]
fn alpha_tasks_scenarios_pass_in_front_of_a_server_with_its_own_tasks() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let peers = peers();
    let command = [peers.node20().to_owned(), peers.script("ts_tasks_server.mjs")];
    let sdk = format!("env = {{ TS_SDK_DIR = \"{}\" }}", peers.get("TS_SDK_DIR"));
    let tool =
        "[[upstreams.tasks.tools]]\nname = \"test_tool_with_task\"\nsupport = \"required\"\ninput = \"before_task\"\n";
    let gateway = Eragate::start(&format!("{}\n{tool}", stdio_upstream_toml(&command, "", &sdk)));
    let (problems, outputs) = scenario_problems(&gateway.url());
    assert!(
        problems.is_empty(),
        "alpha tasks-* scenarios against eragate + ts_tasks_server.mjs:\n{}\n\nsuite output:\n{}\n\neragate log:\n{}",
        problems.join("\n"),
        outputs.join("\n----------------\n"),
        gateway.log()
    );
}

/// The suite's ten `tasks-*` scenarios (2026-07-28, `--force`d) against eragate in front of
/// the stdio fixture: every check SUCCESS (no FAILURE, WARNING or INFO), the
/// `tasks-status-notifications` placeholder its only SKIPPED; no upstream call left running.
#[test]
fn alpha_tasks_scenarios_pass_over_stdio() {
    let gate = Gate::start(Transport::Stdio, "", "", true);
    run_scenarios(&gate, Transport::Stdio);
}

/// As [`alpha_tasks_scenarios_pass_over_stdio`], with the fixture over Streamable HTTP
/// (cancellation reaches it as an HTTP `notifications/cancelled`).
#[test]
fn alpha_tasks_scenarios_pass_over_streamable_http() {
    let gate = Gate::start(Transport::StreamableHttp, "", "", true);
    run_scenarios(&gate, Transport::StreamableHttp);
}

// --- 3. the Python SDK ------------------------------------------------------------------------

/// Python SDK (mcp 2.3.0) 2026-07-28 client. The SDK has no tasks client; the extension is
/// declared with its `ClientExtension`/`ResultClaim` API and the tasks methods go through the
/// session's generic `send_request`. Prints one JSON report of every step.
const PY_TASKS_DRIVER: &str = r#"
import asyncio, json, sys, time, warnings
from typing import Any, Literal

import mcp
import mcp_types as types
from mcp.client.extension import ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

warnings.simplefilter("ignore")
spec = json.loads(sys.argv[1])
TASKS = "io.modelcontextprotocol/tasks"


class CreateTaskResult(types.Result):
    """SEP-2663's CreateTaskResult, the model of the claim on resultType "task"."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


async def never_resolved(result, ctx):
    raise RuntimeError("the driver calls session.call_tool(allow_claimed=True), never Client.call_tool")


class TasksExtension(ClientExtension):
    """Declares the extension (in every 2026-07-28 request's clientCapabilities) and claims resultType "task"."""

    identifier = TASKS

    def claims(self):
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=never_resolved)]


class TaskRequest(types.Request[dict[str, Any], str]):
    """tasks/get, tasks/update, tasks/cancel: the SDK mirrors params.taskId into Mcp-Name."""

    name_param = "taskId"


ANY = TypeAdapter(dict[str, Any])


async def tasks(client, method, params):
    try:
        return await client.session.send_request(TaskRequest(method=method, params=params), ANY)
    except MCPError as e:
        return {"error": {"code": e.error.code, "message": e.error.message}}


async def create(client, tool, arguments):
    try:
        r = await client.session.call_tool(tool, arguments, allow_claimed=True, allow_input_required=True)
    except MCPError as e:
        return {"error": {"code": e.error.code, "message": e.error.message}}
    return r.model_dump(by_alias=True, mode="json", exclude_none=True) | {"python_type": type(r).__name__}


async def poll(client, task_id, until, within=15.0):
    deadline = time.monotonic() + within
    while True:
        got = await tasks(client, "tasks/get", {"taskId": task_id})
        if got.get("status") in until or "error" in got or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.2)


async def asked_outside_a_task(context, params):
    raise RuntimeError("a task's questions come through tasks/get, never as a callback")


async def main():
    # The callback declares form elicitation, which the confirm_delete task asks for.
    client = mcp.Client(spec["url"], mode="2026-07-28", read_timeout_seconds=20, extensions=[TasksExtension()],
                        elicitation_callback=asked_outside_a_task,
                        client_info=types.Implementation(name="eragate-tasks-client", version="1.0.0"))
    out = {}
    async with client:
        out["protocol_version"] = client.protocol_version
        slow = await create(client, "slow_compute", {"seconds": 30, "label": "py-slow"})
        out["slow_create"] = slow
        if "taskId" not in slow:
            print(json.dumps(out))
            return
        out["slow_get"] = await tasks(client, "tasks/get", {"taskId": slow["taskId"]})
        confirm = await create(client, "confirm_delete", {"filename": "py.txt"})
        out["confirm_create"] = confirm
        if "taskId" in confirm:
            asked = await poll(client, confirm["taskId"], {"input_required", "completed", "failed", "cancelled"})
            out["confirm_input_required"] = asked
            responses = {key: {"action": "accept", "content": {"confirm": True}} for key in asked.get("inputRequests") or {}}
            out["confirm_update"] = await tasks(client, "tasks/update", {"taskId": confirm["taskId"], "inputResponses": responses})
            out["confirm_done"] = await poll(client, confirm["taskId"], {"completed", "failed", "cancelled"})
        out["slow_still"] = await tasks(client, "tasks/get", {"taskId": slow["taskId"]})
        out["slow_cancel"] = await tasks(client, "tasks/cancel", {"taskId": slow["taskId"]})
        out["slow_cancelled"] = await poll(client, slow["taskId"], {"completed", "failed", "cancelled"})
    print(json.dumps(out))


asyncio.run(main())
"#;

fn py_tasks_driver() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| driver_script("tasks-client.py", PY_TASKS_DRIVER))
}

/// The Python SDK as a 2026-07-28 client declaring the extension: `slow_compute` (30 s)
/// becomes a task (`working`, the default `ttlMs` 3600000 and `pollIntervalMs` 500); a
/// `confirm_delete` task reaches `input_required` with its one elicitation, is answered through
/// `tasks/update` (a bare ack) and completes with "Deleted py.txt" while the first still runs;
/// `tasks/cancel` (a bare ack) makes the first `cancelled`, and the fixture saw its call
/// cancelled, not finished.
#[test]
fn the_python_sdk_creates_polls_answers_and_cancels_tasks() {
    let gate = Gate::start(Transport::Stdio, "", "", true);
    let mut command = Command::new(peers().python());
    command
        .arg(py_tasks_driver())
        .arg(json!({"url": gate.url()}).to_string());
    let report = run_json(command, Duration::from_secs(90))
        .unwrap_or_else(|e| panic!("python client: {e}\n\n{}", gate.gateway.log()));
    let context = format!("{report:#}\n\neragate log:\n{}", gate.gateway.log());

    assert_eq!(report["protocol_version"], "2026-07-28", "{context}");
    let slow = &report["slow_create"];
    assert_eq!(slow["python_type"], "CreateTaskResult", "{context}");
    assert_eq!(slow["resultType"], "task", "{context}");
    assert_eq!(slow["status"], "working", "{context}");
    assert_eq!(slow["ttlMs"], 3_600_000, "{context}");
    assert_eq!(slow["pollIntervalMs"], 500, "{context}");
    let slow_id = slow["taskId"].as_str().expect("taskId");
    assert_eq!(report["slow_get"]["taskId"], slow_id, "{context}");
    assert_eq!(report["slow_get"]["status"], "working", "{context}");
    assert!(report["slow_get"].get("result").is_none(), "{context}");

    let confirm = &report["confirm_create"];
    assert_eq!(confirm["resultType"], "task", "{context}");
    let asked = &report["confirm_input_required"];
    assert_eq!(asked["status"], "input_required", "{context}");
    let requests = asked["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{context}");
    let request = requests.values().next().expect("one request");
    assert_eq!(request["method"], "elicitation/create", "{context}");
    assert_eq!(request["params"]["message"], "Delete py.txt?", "{context}");
    assert_eq!(
        request["params"]["requestedSchema"]["properties"]["confirm"]["type"], "boolean",
        "{context}"
    );
    assert_ack(&json!({"result": report["confirm_update"]}), "tasks/update");
    let done = &report["confirm_done"];
    assert_eq!(done["status"], "completed", "{context}");
    assert_eq!(tool_text(&done["result"]), "Deleted py.txt", "{context}");
    assert_ne!(done["result"]["isError"], true, "{context}");

    assert_eq!(report["slow_still"]["status"], "working", "{context}");
    assert_ack(&json!({"result": report["slow_cancel"]}), "tasks/cancel");
    assert_eq!(report["slow_cancelled"]["status"], "cancelled", "{context}");

    gate.wait_for_events("cancelled", "slow_compute", 1);
    let cancelled = recorded_events(&gate.events, "cancelled");
    assert_eq!(cancelled[0]["label"], "py-slow", "{cancelled:?}");
    assert_eq!(gate.count("finished", Some("slow_compute")), 0);
    assert_eq!(gate.count("finished", Some("confirm_delete")), 1);
    gate.assert_drained();
}

// --- 4. bad input -----------------------------------------------------------------------------

/// Unknown, malformed (a number, missing: sent without `Mcp-Name`, there being no name to
/// mirror) and another principal's task ids get -32602 on `tasks/get`, `tasks/update` and
/// `tasks/cancel`; bob's cancel of alice's task changes nothing (it is still `working` for
/// alice, its upstream call still running) until alice cancels it.
#[test]
fn unknown_malformed_and_foreign_task_ids_get_invalid_params() {
    let gate = Gate::start(Transport::Stdio, "", &auth_toml(), true);
    let url = gate.url();
    let task = create(
        &url,
        Some(ALICE),
        "slow_compute",
        json!({"seconds": 30, "label": "alice"}),
    );
    let id = task["taskId"].as_str().expect("taskId").to_owned();
    gate.wait_for_events("started", "slow_compute", 1);

    let update = json!({"inputResponses": {}});
    for (method, extra) in [
        ("tasks/get", json!({})),
        ("tasks/update", update.clone()),
        ("tasks/cancel", json!({})),
    ] {
        let unknown = task_request(&url, Some(ALICE), method, "no-such-task-0000", extra.clone());
        assert_error(&unknown, -32602, &format!("{method} of an unknown id"));
        let foreign = task_request(&url, Some(BOB), method, &id, extra.clone());
        assert_error(&foreign, -32602, &format!("{method} of alice's task by bob"));

        let mut number = extra.clone();
        number["taskId"] = json!(42);
        // No Mcp-Name: a malformed id has no name to mirror (SEP-2243 asks for the header on
        // a name-shaped field), so this is about the params, not a -32020 header mismatch.
        let numbered = ask(&url, Some(ALICE), method, None, number);
        assert_error(&numbered, -32602, &format!("{method} with a numeric taskId"));
        let missing = ask(&url, Some(ALICE), method, None, extra);
        assert_error(&missing, -32602, &format!("{method} without a taskId"));
    }

    let mine = get(&url, Some(ALICE), &id);
    assert_eq!(mine["status"], "working", "{mine:#}");
    assert_eq!(gate.count("cancelled", Some("slow_compute")), 0);
    assert_ack(
        &task_request(&url, Some(ALICE), "tasks/cancel", &id, json!({})),
        "alice's cancel",
    );
    assert_eq!(poll(&url, Some(ALICE), &id, &["cancelled"])["status"], "cancelled");
    gate.wait_for_events("cancelled", "slow_compute", 1);
    gate.assert_drained();
}

/// `tasks/update` answering only a key never asked is acknowledged (SEP-2663: unknown keys are
/// ignored) and changes nothing: the task stays `input_required` with the same request; the
/// real answer then completes it ("Did not delete" for a refusal).
#[test]
fn answers_to_questions_never_asked_are_acked_and_ignored() {
    let gate = Gate::start(Transport::Stdio, "", "", true);
    let url = gate.url();
    let task = create(&url, None, "confirm_delete", json!({"filename": "keep.txt"}));
    let id = task["taskId"].as_str().expect("taskId").to_owned();
    let asked = poll(&url, None, &id, &["input_required"]);
    let requests = asked["inputRequests"].as_object().expect("inputRequests").clone();
    assert_eq!(requests.len(), 1, "{asked:#}");

    let stray = json!({"inputResponses": {"never-asked": {"action": "accept", "content": {"confirm": true}}}});
    assert_ack(
        &task_request(&url, None, "tasks/update", &id, stray),
        "tasks/update with a stray key",
    );
    std::thread::sleep(Duration::from_millis(300));
    let still = get(&url, None, &id);
    assert_eq!(still["status"], "input_required", "{still:#}");
    assert_eq!(still["inputRequests"].as_object(), Some(&requests), "{still:#}");
    assert_eq!(gate.count("finished", Some("confirm_delete")), 0);

    let key = requests.keys().next().expect("a key").clone();
    let refusal = json!({"inputResponses": {key: {"action": "decline"}}});
    assert_ack(&task_request(&url, None, "tasks/update", &id, refusal), "tasks/update");
    let done = poll(&url, None, &id, &["completed", "failed", "cancelled"]);
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(tool_text(&done["result"]), "Did not delete keep.txt", "{done:#}");
    gate.assert_drained();
}

/// With `max_result_bytes = 1000`, a 100-character result completes the task with it, a
/// 5000-character one makes the task `failed` with an error naming `max_result_bytes` and no
/// `result`.
#[test]
fn a_result_past_max_result_bytes_fails_the_task() {
    let gate = Gate::start(Transport::Stdio, "[tasks]\nmax_result_bytes = 1000\n", "", true);
    let url = gate.url();

    let small = create(&url, None, "big_result", json!({"size": 100}));
    let small = poll(
        &url,
        None,
        small["taskId"].as_str().expect("taskId"),
        &["completed", "failed"],
    );
    assert_eq!(small["status"], "completed", "{small:#}");
    assert_eq!(tool_text(&small["result"]), "x".repeat(100), "{small:#}");

    let big = create(&url, None, "big_result", json!({"size": 5000}));
    let big = poll(
        &url,
        None,
        big["taskId"].as_str().expect("taskId"),
        &["completed", "failed"],
    );
    assert_eq!(big["status"], "failed", "{big:#}");
    assert!(big["error"]["code"].is_i64(), "{big:#}");
    let message = big["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("max_result_bytes"), "{big:#}");
    assert!(big.get("result").is_none(), "{big:#}");
    assert_eq!(gate.count("finished", Some("big_result")), 2);
    gate.assert_drained();
}

/// With `max_tasks_per_principal = 2`, alice's third task is refused with HTTP 429 and
/// -32029 naming `tasks.max_tasks_per_principal`, never reaching the upstream; bob, another
/// principal, still gets his. Cancelling the three leaves nothing running.
#[test]
fn the_per_principal_task_limit_answers_429() {
    let gate = Gate::start(
        Transport::Stdio,
        "[tasks]\nmax_tasks_per_principal = 2\n",
        &auth_toml(),
        true,
    );
    let url = gate.url();
    let slow = |label: &str| json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": label}});
    let mut ids = Vec::new();
    for label in ["alice-1", "alice-2"] {
        let task = create(&url, Some(ALICE), "slow_compute", slow(label)["arguments"].clone());
        ids.push((ALICE, task["taskId"].as_str().expect("taskId").to_owned()));
    }
    gate.wait_for_events("started", "slow_compute", 2);

    let (id, reply) = rpc(
        &url,
        Some(ALICE),
        "tools/call",
        Some("slow_compute"),
        slow("alice-3"),
        true,
    );
    assert_eq!(reply.status, 429, "{reply:?}");
    let refused = answer(&reply, id);
    assert_error(&refused, -32029, "alice's third task");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("tasks.max_tasks_per_principal"), "{refused:#}");

    let bobs = create(&url, Some(BOB), "slow_compute", slow("bob-1")["arguments"].clone());
    ids.push((BOB, bobs["taskId"].as_str().expect("taskId").to_owned()));
    gate.wait_for_events("started", "slow_compute", 3);
    std::thread::sleep(Duration::from_millis(300));
    let labels: Vec<Value> = recorded_events(&gate.events, "started")
        .iter()
        .map(|e| e["label"].clone())
        .collect();
    assert!(
        !labels.contains(&json!("alice-3")),
        "the refused call reached the upstream: {labels:?}"
    );

    for (token, id) in &ids {
        assert_ack(
            &task_request(&url, Some(token), "tasks/cancel", id, json!({})),
            "tasks/cancel",
        );
    }
    gate.wait_for_events("cancelled", "slow_compute", 3);
    gate.assert_drained();
}

// --- 5. a 2025-11-25 upstream's own tasks -----------------------------------------------------

/// server-everything (2026.8.31, TypeScript SDK 1.x) has a tool with tasks of its own:
/// `simulate-research-query` (`execution.taskSupport: "required"`), which asks an elicitation
/// through `tasks/result` when the query is ambiguous. With no `[[upstreams.tasks.tools]]`,
/// eragate bridges that task to the extension: a client declaring it gets eragate's
/// `CreateTaskResult`, sees the upstream's question as `input_required` on `tasks/get`, answers
/// it with `tasks/update`, and gets the report (with its answer in it, without the upstream's
/// `related-task` tag); a client that does not declare the extension gets -32021; a second task
/// is cancelled and ends `cancelled`.
#[test]
fn a_2025_11_25_upstreams_own_tasks_are_bridged_to_the_extension() {
    let gateway = Eragate::start(&stdio_upstream_toml(&everything_stdio_command(), "", ""));
    let url = gateway.url();
    let arguments = json!({"topic": "python", "ambiguous": true});

    let (id, reply) = rpc(
        &url,
        None,
        "tools/call",
        Some("simulate-research-query"),
        json!({"name": "simulate-research-query", "arguments": arguments}),
        false,
    );
    assert_error(
        &answer(&reply, id),
        -32021,
        "a required upstream task without the extension",
    );

    let task = create(&url, None, "simulate-research-query", arguments.clone());
    let task_id = task["taskId"].as_str().expect("taskId").to_owned();
    assert_eq!(task["status"], "working", "{task:#}");
    let asked = poll(&url, None, &task_id, &["input_required", "completed", "failed"]);
    assert_eq!(asked["status"], "input_required", "{asked:#}\n{}", gateway.log());
    let requests = asked["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{asked:#}");
    let (key, question) = requests.iter().next().expect("one question");
    assert_eq!(question["method"], "elicitation/create", "{asked:#}");
    let answers = json!({"inputResponses": {key: {"action": "accept", "content": {"interpretation": "programming"}}}});
    assert_ack(
        &task_request(&url, None, "tasks/update", &task_id, answers),
        "tasks/update",
    );
    let done = poll(&url, None, &task_id, &["completed", "failed", "cancelled"]);
    assert_eq!(done["status"], "completed", "{done:#}\n{}", gateway.log());
    let report = tool_text(&done["result"]);
    assert!(report.contains("python (programming)"), "{report}");
    assert!(
        done["result"]["_meta"]
            .get("io.modelcontextprotocol/related-task")
            .is_none(),
        "{done:#}"
    );

    let second = create(&url, None, "simulate-research-query", json!({"topic": "rust"}));
    let second_id = second["taskId"].as_str().expect("taskId").to_owned();
    assert_ack(
        &task_request(&url, None, "tasks/cancel", &second_id, json!({})),
        "tasks/cancel",
    );
    assert_eq!(get(&url, None, &second_id)["status"], "cancelled");
}

// --- 6. replicas sharing Redis ----------------------------------------------------------------

/// Two replicas sharing a real `redis-server` through `[redis]`, each with its own fixture
/// child: a `confirm_delete` task created on the first is seen `input_required` on the
/// second, answered there (`tasks/update` reaches the first through Redis) and seen
/// `completed` with the answer on both; a `slow_compute` task created on the first is polled
/// and cancelled on the second, ends `cancelled`, and the first replica's fixture saw its call
/// cancelled. An id neither replica made stays unknown on both.
#[test]
fn replicas_sharing_redis_serve_each_others_tasks() {
    let redis = common::redis::RedisServer::start();
    let redis_toml = format!("[redis]\nurl = \"redis://127.0.0.1:{}\"\n", redis.port);
    let first = Gate::start(Transport::Stdio, &redis_toml, "", true);
    let second = Gate::start(Transport::Stdio, &redis_toml, "", true);
    let (a, b) = (first.url(), second.url());

    let task = create(&a, None, "confirm_delete", json!({"filename": "shared.txt"}));
    let id = task["taskId"].as_str().expect("taskId").to_owned();
    let asked = poll(&b, None, &id, &["input_required"]);
    let key = asked["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .expect("one question");
    let answers = json!({"inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}});
    assert_ack(
        &task_request(&b, None, "tasks/update", &id, answers),
        "tasks/update on the other replica",
    );
    let done = poll(&b, None, &id, &["completed", "failed", "cancelled"]);
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(tool_text(&done["result"]), "Deleted shared.txt", "{done:#}");
    assert_eq!(get(&a, None, &id)["status"], "completed");

    let slow = create(&a, None, "slow_compute", json!({"seconds": 60, "label": "shared"}));
    let slow_id = slow["taskId"].as_str().expect("taskId").to_owned();
    first.wait_for_events("started", "slow_compute", 1);
    assert_eq!(get(&b, None, &slow_id)["status"], "working");
    assert_ack(
        &task_request(&b, None, "tasks/cancel", &slow_id, json!({})),
        "tasks/cancel on the other replica",
    );
    let cancelled = poll(&b, None, &slow_id, &["completed", "failed", "cancelled"]);
    assert_eq!(cancelled["status"], "cancelled", "{cancelled:#}");
    first.wait_for_events("cancelled", "slow_compute", 1);
    assert_eq!(
        second.count("started", None),
        0,
        "the second replica's child ran nothing"
    );

    for url in [&a, &b] {
        let unknown = task_request(url, None, "tasks/get", "0123456789abcdef0123456789abcdef", json!({}));
        assert_error(&unknown, -32602, "an id no replica made");
    }
    first.assert_drained();
}

// --- 7. the time bounds -----------------------------------------------------------------------

/// With `input_timeout = "1s"`, a `confirm_delete` task whose question nobody answers fails
/// (its error naming `tasks.input_timeout`) and the fixture sees its call cancelled; with
/// `ttl = "3s"`, a 60 s `slow_compute` task is cancelled upstream at its ttl and forgotten
/// within a second: `tasks/get` then answers -32602 as for an unknown id.
#[test]
fn input_waits_and_tasks_live_within_their_bounds() {
    let waiting = Gate::start(Transport::Stdio, "[tasks]\ninput_timeout = \"1s\"\n", "", true);
    let url = waiting.url();
    let task = create(&url, None, "confirm_delete", json!({"filename": "late.txt"}));
    let id = task["taskId"].as_str().expect("taskId").to_owned();
    poll(&url, None, &id, &["input_required"]);
    let failed = poll(&url, None, &id, &["failed", "completed", "cancelled"]);
    assert_eq!(failed["status"], "failed", "{failed:#}");
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("tasks.input_timeout"), "{failed:#}");
    waiting.wait_for_events("cancelled", "confirm_delete", 1);
    waiting.assert_drained();

    let short = Gate::start(Transport::Stdio, "[tasks]\nttl = \"3s\"\n", "", true);
    let url = short.url();
    let slow = create(&url, None, "slow_compute", json!({"seconds": 60, "label": "ttl"}));
    assert_eq!(slow["ttlMs"], 3000, "{slow:#}");
    let slow_id = slow["taskId"].as_str().expect("taskId").to_owned();
    short.wait_for_events("started", "slow_compute", 1);
    short.wait_for_events("cancelled", "slow_compute", 1);
    // Failed at its ttl, it is forgotten at the next sweep (every second).
    let forgotten = poll_until(Duration::from_secs(5), || {
        task_request(&url, None, "tasks/get", &slow_id, json!({}))["error"]["code"] == -32602
    });
    assert!(
        forgotten,
        "a task past its ttl is still answered\n{}",
        short.gateway.log()
    );
    short.assert_drained();
}
