//! Legacy clients in front of a 2026-07-28 upstream, with real peers on both sides: the
//! Python SDK (`mcp` 2.3.0) as a handshake-era client, through eragate over Streamable HTTP
//! (its GET stream) or `eragate stdio`, to `legacy_server.py --dual-era` over Streamable HTTP
//! or stdio.
//!
//! - `resources/subscribe` / `resources/unsubscribe` become one `subscriptions/listen` per
//!   client session, reopened with the new set on every change: the client gets
//!   `notifications/resources/updated` for what it subscribed and nothing else, and the
//!   upstream holds exactly one listen with the current set (its `--events` record, and for
//!   the HTTP upstream the trace of what was POSTed).
//!   When the upstream process dies, eragate opens the listen again on its successor.
//! - `notifications/cancelled` from the client aborts the call upstream (the fixture's `hang`
//!   tool records its cancellation), the session keeps serving, and eragate has nothing left
//!   in flight (its admin `/pools`).
//!
//! The client driver is a small script kept in this file (written to `CARGO_TARGET_TMPDIR`).

use crate::common;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use common::*;

// --- the client driver ------------------------------------------------------------------------

/// Python SDK (mcp 2.3.0) legacy client. `spec`: `target` (`{"url"}` or `{"stdio": argv}`),
/// `offer_version`, `events` (the fixture's events file), `scenario` (`subscriptions` with
/// `uris` [a, b, c], or `cancel` with an optional `pools` URL of eragate's admin listener).
/// It synchronises on the fixture's events (what the upstream really holds) instead of on time.
const PY_DRIVER: &str = r#"
import asyncio, json, os, sys, time, urllib.request, warnings
import anyio
import mcp
import mcp.client.session as client_session
import mcp_types as types
from mcp.client.stdio import StdioServerParameters

warnings.simplefilter("ignore")  # resources/subscribe is deprecated at 2026-07-28; we are legacy
spec = json.loads(sys.argv[1])
received = []  # URIs of notifications/resources/updated, in arrival order


async def on_message(message):
    if getattr(message, "method", None) == "notifications/resources/updated":
        received.append(str(message.params.uri))


def events():
    """The fixture's complete event lines so far."""
    try:
        with open(spec["events"], encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.split("\n")[:-1] if line]


def open_listens():
    """The URI sets of the listens the upstream holds open now."""
    held = {}
    for e in events():
        if e["event"] == "listen":
            held[json.dumps(e["id"])] = e["uris"]
        elif e["event"] == "listen_closed":
            held.pop(json.dumps(e["id"]), None)
    return sorted(held.values())


async def wait(pred, within):
    deadline = time.monotonic() + within
    while not pred():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def until(what, pred, within=20.0):
    if not await wait(pred, within):
        raise RuntimeError(f"gave up waiting for {what}; received {received}; upstream events {events()}")


def text_of(result):
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def touch(client, uri):
    result = await client.call_tool("touch", {"uri": uri})
    if text_of(result) != f"touched {uri}":
        raise RuntimeError(f"touch {uri} answered {result}")


async def settle(held):
    want = [sorted(held)] if held else []
    await until(f"the upstream's open listens to be {want}", lambda: open_listens() == want)


async def first_update(client, uri, also=None):
    """Touches `uri` (after `also`, when given) until its first update arrives: an HTTP
    client's GET stream may attach after the first update, which is then lost. The rounds it took."""
    rounds = 0
    while uri not in received and rounds < 10:
        rounds += 1
        if also is not None:
            await touch(client, also)
        await touch(client, uri)
        await wait(lambda: uri in received, 2.0)
    await until(f"the update of {uri}", lambda: uri in received, 0)
    return rounds


async def subscriptions(client):
    a, b, c = spec["uris"]
    phases, mark = [], 0

    def phase():
        nonlocal mark
        phases.append(received[mark:])
        mark = len(received)

    await client.subscribe_resource(a)
    await settle([a])
    # b (not subscribed) is touched first every round: it must never arrive.
    rounds = await first_update(client, a, also=b)
    phase()

    await client.subscribe_resource(b)
    await settle([a, b])
    await touch(client, b)
    await until("the update of b", lambda: b in received[mark:])
    phase()

    await client.unsubscribe_resource(a)
    await settle([b])
    await touch(client, a)
    await touch(client, b)
    await until("the second update of b", lambda: b in received[mark:])
    phase()

    await client.unsubscribe_resource(b)
    await settle([])
    await touch(client, a)
    await touch(client, b)
    await client.subscribe_resource(c)
    await settle([c])
    await touch(client, c)
    await until("the update of c", lambda: c in received[mark:])
    phase()
    return {"phases": phases, "rounds": rounds}


async def restart(client):
    """Subscribed to a, the driver says so (the `ready` file) and the test restarts the
    upstream; eragate opens the session's listen again on the new process: a's updates come
    again, on the same session."""
    a = spec["uris"][0]
    await client.subscribe_resource(a)
    await settle([a])
    await first_update(client, a)
    before = len(received)
    with open(spec["ready"], "w", encoding="utf-8") as f:
        f.write("subscribed")
    await until("the listen opened again on a new process",
                lambda: len([e for e in events() if e["event"] == "listen"]) >= 2, 60.0)
    await touch(client, a)
    await until("the update of a after the restart", lambda: a in received[before:])
    return {"after_restart": received[before:]}


def pools():
    with urllib.request.urlopen(spec["pools"], timeout=5) as answer:
        return json.load(answer)


def drained(snapshot):
    return all(
        u["in_flight"] == 0 and all(m["in_flight"] == 0 for m in u["members"]) for u in snapshot["upstreams"]
    )


async def cancel(client):
    outcome = {}

    async def hang():
        try:
            await client.call_tool("hang", {})
            outcome["hang"] = "returned"
        except Exception as e:  # the SDK may surface the cancellation as an error
            outcome["hang"] = repr(e)

    async with anyio.create_task_group() as tg:
        tg.start_soon(hang)
        await until("the upstream to start hang", lambda: any(e["event"] == "started" for e in events()))
        # Abandoning the call makes the SDK send notifications/cancelled for it.
        tg.cancel_scope.cancel()
    await wait(lambda: any(e["event"] == "cancelled" for e in events()), 20.0)
    outcome["after"] = text_of(await client.call_tool("echo", {"text": "still alive"}))
    if spec.get("pools"):
        last = {}

        def check():
            nonlocal last
            last = pools()
            return drained(last)

        await wait(check, 10.0)
        outcome["pools"] = last
    outcome["events"] = events()
    return outcome


async def main():
    client_session.LATEST_HANDSHAKE_VERSION = spec["offer_version"]
    t = spec["target"]
    target = t["url"] if "url" in t else StdioServerParameters(command=t["stdio"][0], args=t["stdio"][1:], env=dict(os.environ))
    client = mcp.Client(target, mode="legacy", message_handler=on_message, read_timeout_seconds=30,
                        client_info=types.Implementation(name="eragate-legacy-over-modern", version="1.0.0"))
    async with client:
        version = client.protocol_version
        capabilities = client.server_capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
        scenario = {"subscriptions": subscriptions, "restart": restart, "cancel": cancel}[spec["scenario"]]
        report = await scenario(client)
    print(json.dumps({"protocol_version": version, "capabilities": capabilities, "received": received, **report}))


asyncio.run(asyncio.wait_for(main(), 150))
"#;

/// The driver script, written once per test process (atomically: other runs may read it).
fn py_driver() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let path = dir.join("legacy-over-modern-client.py");
        let partial = dir.join(format!("legacy-over-modern-client.py.{}", std::process::id()));
        std::fs::write(&partial, PY_DRIVER).expect("write driver");
        std::fs::rename(&partial, &path).expect("rename driver");
        path
    })
}

/// Runs the driver with `spec`; its JSON report.
fn legacy_client(spec: &Value) -> Value {
    let script = py_driver().display().to_string();
    run_driver(peers().python(), &script, &[&spec.to_string()])
        .unwrap_or_else(|e| panic!("python legacy client {spec}: {e}"))
}

// --- the fixture's record -----------------------------------------------------------------

/// The file `legacy_server.py --events` appends what it observed to.
struct Events {
    dir: tempfile::TempDir,
}

impl Events {
    fn new() -> Events {
        Events {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn path(&self) -> String {
        self.dir.path().join("events.jsonl").display().to_string()
    }

    /// Every complete event line so far.
    fn read(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.path()).unwrap_or_default();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .map(|line| serde_json::from_str(line).expect("an event is JSON"))
            .collect()
    }

    /// The URI sets of the listens the upstream opened, in order.
    fn listen_sets(&self) -> Vec<Value> {
        self.of("listen").into_iter().map(|e| e["uris"].clone()).collect()
    }

    /// How many listens are open now.
    fn open_listens(&self) -> usize {
        self.of("listen").len() - self.of("listen_closed").len()
    }

    fn of(&self, kind: &str) -> Vec<Value> {
        self.read().into_iter().filter(|e| e["event"] == kind).collect()
    }
}

// --- upstreams and front ends -------------------------------------------------------------------

/// `legacy_server.py --dual-era --subscriptions --events FILE`: a real 2026-07-28 upstream.
enum Modern {
    /// Over Streamable HTTP, traced.
    Http(TracedUpstream),
    /// Over stdio, as eragate's child.
    Stdio(Vec<String>),
}

impl Modern {
    fn http(events: &Events) -> Modern {
        let path = events.path();
        Modern::Http(TracedUpstream::start_with(&[
            "--dual-era",
            "--subscriptions",
            "--events",
            &path,
        ]))
    }

    fn stdio(events: &Events) -> Modern {
        Modern::Stdio(dual_era_stdio_command(&["--subscriptions", "--events", &events.path()]))
    }

    fn toml(&self) -> String {
        match self {
            Modern::Http(upstream) => remote_upstream_toml("http", &upstream.url, ""),
            Modern::Stdio(command) => stdio_upstream_toml(command, "", ""),
        }
    }

    fn traced(&self) -> Option<&TracedUpstream> {
        match self {
            Modern::Http(upstream) => Some(upstream),
            Modern::Stdio(_) => None,
        }
    }
}

/// Where the legacy client connects.
enum Front {
    /// eragate over Streamable HTTP, with its admin listener.
    Http { gateway: Eragate, admin: String },
    /// `eragate stdio --config FILE`, started by the client.
    Stdio { config: PathBuf, _dir: tempfile::TempDir },
}

impl Front {
    fn http(upstream: &Modern) -> Front {
        let admin = format!("127.0.0.1:{}", free_port());
        let gateway = Eragate::start(&format!("[admin]\naddress = \"{admin}\"\n{}", upstream.toml()));
        wait_until("the admin listener", Duration::from_secs(10), || {
            std::net::TcpStream::connect(&admin).is_ok()
        });
        Front::Http { gateway, admin }
    }

    fn stdio(upstream: &Modern) -> Front {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("eragate.toml");
        std::fs::write(&config, upstream.toml()).expect("write config");
        Front::Stdio { config, _dir: dir }
    }

    /// The driver's `target`.
    fn target(&self) -> Value {
        match self {
            Front::Http { gateway, .. } => json!({"url": gateway.url()}),
            Front::Stdio { config, .. } => json!({"stdio": [
                env!("CARGO_BIN_EXE_eragate"), "stdio", "--config", config.display().to_string()
            ]}),
        }
    }

    /// eragate's admin `/pools` URL (HTTP only).
    fn pools(&self) -> Option<String> {
        match self {
            Front::Http { admin, .. } => Some(format!("http://{admin}/pools")),
            Front::Stdio { .. } => None,
        }
    }

    /// eragate's log (`eragate stdio` logs to the driver's stderr, shown when it fails).
    fn log(&self) -> String {
        match self {
            Front::Http { gateway, .. } => gateway.log(),
            Front::Stdio { .. } => String::new(),
        }
    }
}

// --- resources/subscribe as a listen ----------------------------------------------------------

const A: &str = "test://items/a";
const B: &str = "test://items/b";
const C: &str = "test://items/c";

/// Subscribe a, then b, unsubscribe a, unsubscribe b, subscribe c; after each change the
/// upstream must hold one listen with exactly the set, and touching resources must reach the
/// client only for what it subscribed.
fn subscriptions_through(front: &Front, upstream: &Modern, events: &Events, offer: &str) {
    let report = legacy_client(&json!({
        "target": front.target(), "offer_version": offer, "events": events.path(),
        "scenario": "subscriptions", "uris": [A, B, C],
    }));
    let context = format!(
        "report: {report:#}\nupstream events: {:#?}\n{}",
        events.read(),
        front.log()
    );
    assert_eq!(report["protocol_version"], offer, "{context}");
    assert_eq!(
        report["capabilities"]["resources"]["subscribe"], true,
        "a modern upstream serving listens offers resources/subscribe: {context}"
    );
    let phases: Vec<Vec<&str>> = report["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| p.as_array().expect("phase").iter().filter_map(Value::as_str).collect())
        .collect();
    println!(
        "updates per phase: {phases:?} (first phase in {} round(s))",
        report["rounds"]
    );
    assert_eq!(phases.len(), 4, "{context}");
    // Subscribed to a; b (touched first, every round) never arrives. One a per round at most.
    let rounds = report["rounds"].as_u64().expect("rounds") as usize;
    assert!(
        !phases[0].is_empty() && phases[0].len() <= rounds && phases[0].iter().all(|u| *u == A),
        "only a, subscribed: {context}"
    );
    // Subscribed to a and b: b arrives (after any a still on its way from the first rounds).
    let fresh: Vec<&str> = phases[1].iter().copied().skip_while(|u| *u == A).collect();
    assert_eq!(fresh, [B], "b once subscribed: {context}");
    // Unsubscribed from a: touching a and then b brings only b.
    assert_eq!(phases[2], [B], "nothing for a after resources/unsubscribe: {context}");
    // Unsubscribed from both: a and b were touched, then c subscribed and touched: only c.
    assert_eq!(phases[3], [C], "nothing after unsubscribing everything: {context}");

    // One listen per change, each with the whole set (a listen's filter is fixed).
    let sets = json!([[A], [A, B], [B], [C]]);
    assert_eq!(Value::from(events.listen_sets()), sets, "{context}");
    if let Some(traced) = upstream.traced() {
        let posted: Vec<Value> = traced
            .posted_bodies("subscriptions/listen")
            .into_iter()
            .map(|body| {
                assert_eq!(
                    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
                    "a listen carries the envelope: {body}"
                );
                let mut uris = body["params"]["notifications"]["resourceSubscriptions"].clone();
                if let Some(list) = uris.as_array_mut() {
                    list.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
                }
                uris
            })
            .collect();
        assert_eq!(Value::from(posted), sets, "the listens POSTed upstream: {context}");
    }
    // The client is gone (its session deleted, or eragate stdio ended): so is its listen. Only
    // checked where the upstream can see the end (not a stdio child killed with its eragate).
    if matches!((front, upstream), (Front::Http { .. }, _) | (_, Modern::Http(_))) {
        wait_until("the upstream's listens to end", Duration::from_secs(20), || {
            events.open_listens() == 0
        });
    }
}

#[test]
fn http_legacy_client_subscribes_through_a_modern_http_upstream() {
    let events = Events::new();
    let upstream = Modern::http(&events);
    let front = Front::http(&upstream);
    subscriptions_through(&front, &upstream, &events, "2025-11-25");
}

#[test]
fn http_legacy_client_subscribes_through_a_modern_stdio_upstream() {
    let events = Events::new();
    let upstream = Modern::stdio(&events);
    let front = Front::http(&upstream);
    subscriptions_through(&front, &upstream, &events, "2025-06-18");
}

#[test]
fn stdio_legacy_client_subscribes_through_a_modern_http_upstream() {
    let events = Events::new();
    let upstream = Modern::http(&events);
    let front = Front::stdio(&upstream);
    subscriptions_through(&front, &upstream, &events, "2025-06-18");
}

#[test]
fn stdio_legacy_client_subscribes_through_a_modern_stdio_upstream() {
    let events = Events::new();
    let upstream = Modern::stdio(&events);
    let front = Front::stdio(&upstream);
    subscriptions_through(&front, &upstream, &events, "2025-11-25");
}

/// The upstream's process restarts under a subscribed legacy session (an HTTP upstream
/// killed and started again on its port): its listen ends, eragate opens it again with the
/// same set (the fixture records a second listen of `[a]`), and the next update of `a`
/// reaches the client on the same session.
///
/// (A stdio upstream's process ending ends the stateless session the client session is bound
/// to: the client session ends with it and the client starts a new one.)
#[test]
fn a_legacy_sessions_listen_is_opened_again_after_its_upstream_restarts() {
    let events = Events::new();
    let upstream = Modern::http(&events);
    let front = Front::http(&upstream);
    let ready = events.dir.path().join("ready");
    let spec = json!({
        "target": front.target(), "offer_version": "2025-11-25", "events": events.path(),
        "scenario": "restart", "uris": [A, B, C], "ready": ready.display().to_string(),
    });
    let script = py_driver().display().to_string();
    let driver = std::thread::spawn(move || run_driver(peers().python(), &script, &[&spec.to_string()]));
    wait_until("the client to be subscribed", Duration::from_secs(60), || {
        ready.exists()
    });
    let Modern::Http(first) = upstream else {
        unreachable!("an HTTP upstream")
    };
    let port = first.port;
    drop(first);
    let events_file = events.path();
    let _second = TracedUpstream::start_on_with(port, &["--dual-era", "--subscriptions", "--events", &events_file]);
    let report = driver
        .join()
        .expect("the driver thread")
        .unwrap_or_else(|e| panic!("python legacy client: {e}\nlog:\n{}", front.log()));
    let context = format!(
        "report: {report:#}\nupstream events: {:#?}\n{}",
        events.read(),
        front.log()
    );
    assert_eq!(report["after_restart"], json!([A]), "{context}");
    assert_eq!(Value::from(events.listen_sets()), json!([[A], [A]]), "{context}");
}

// --- notifications/cancelled ----------------------------------------------------------------------

/// The client starts `hang`, abandons it once the upstream runs it (the SDK sends
/// `notifications/cancelled`), then calls `echo` on the same session.
fn cancel_through(front: &Front, upstream: &Modern, events: &Events, offer: &str) {
    let report = legacy_client(&json!({
        "target": front.target(), "offer_version": offer, "events": events.path(),
        "scenario": "cancel", "pools": front.pools(),
    }));
    let context = format!("report: {report:#}\n{}", front.log());
    assert_eq!(report["protocol_version"], offer, "{context}");
    let started: Vec<Value> = events.of("started").into_iter().map(|e| e["id"].clone()).collect();
    let cancelled: Vec<Value> = events.of("cancelled").into_iter().map(|e| e["id"].clone()).collect();
    assert_eq!(started.len(), 1, "one hang call reached the upstream: {context}");
    assert_eq!(
        cancelled, started,
        "the upstream saw that very call cancelled: {context}"
    );
    if let Some(traced) = upstream.traced() {
        // Over HTTP the cancelled id is the one eragate POSTed the call with.
        let hang: Vec<Value> = traced
            .posted_bodies("tools/call")
            .into_iter()
            .filter(|b| b["params"]["name"] == "hang")
            .map(|b| b["id"].clone())
            .collect();
        assert_eq!(hang, started, "trace:\n{}\n{context}", traced.raw());
        // 2026-07-28 over HTTP: the closed stream is the cancellation, no notification (spec §1.6).
        assert_eq!(
            traced.posted("notifications/cancelled").len(),
            0,
            "trace:\n{}\n{context}",
            traced.raw()
        );
    }
    assert_eq!(
        report["after"], "echo: still alive",
        "the session keeps serving: {context}"
    );
    if front.pools().is_some() {
        let pools = &report["pools"];
        assert_eq!(pools["legacy_sessions"], 1, "the session is still there: {context}");
        for upstream in pools["upstreams"].as_array().expect("upstreams") {
            assert_eq!(upstream["in_flight"], 0, "no admission slot held: {context}");
            for member in upstream["members"].as_array().expect("members") {
                assert_eq!(member["in_flight"], 0, "no upstream request pending: {context}");
            }
        }
    }
}

#[test]
fn http_legacy_client_cancels_a_call_on_a_modern_http_upstream() {
    let events = Events::new();
    let upstream = Modern::http(&events);
    let front = Front::http(&upstream);
    cancel_through(&front, &upstream, &events, "2025-11-25");
}

#[test]
fn http_legacy_client_cancels_a_call_on_a_modern_stdio_upstream() {
    let events = Events::new();
    let upstream = Modern::stdio(&events);
    let front = Front::http(&upstream);
    cancel_through(&front, &upstream, &events, "2025-03-26");
}

#[test]
fn stdio_legacy_client_cancels_a_call_on_a_modern_http_upstream() {
    let events = Events::new();
    let upstream = Modern::http(&events);
    let front = Front::stdio(&upstream);
    cancel_through(&front, &upstream, &events, "2025-06-18");
}

#[test]
fn stdio_legacy_client_cancels_a_call_on_a_modern_stdio_upstream() {
    let events = Events::new();
    let upstream = Modern::stdio(&events);
    let front = Front::stdio(&upstream);
    cancel_through(&front, &upstream, &events, "2025-11-25");
}
