//! Shared harness for the integration tests: the real `eragate` binary as a
//! process, the real peers installed by `tests/peers/install.sh`, and a small
//! blocking HTTP helper for exact-bytes protocol checks.

#![allow(dead_code)]

pub mod auth_server;
pub mod conformance;
pub mod matrix;
pub mod oauth;
pub mod pyfork;
pub mod redis;
pub mod tls;
pub mod tokens;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::Value;

/// Sends `sig` to one process (never to a group, never to pid 0 or 1).
pub fn signal(pid: u32, sig: Signal) {
    if let Ok(pid) = i32::try_from(pid)
        && pid > 1
    {
        let _ = kill(Pid::from_raw(pid), sig);
    }
}

/// Paths of the installed peers (from `.cache/peers/env.sh`).
pub struct Peers {
    vars: HashMap<String, String>,
}

impl Peers {
    /// A peer path by its env.sh name, e.g. `PEERS_PYTHON`.
    pub fn get(&self, name: &str) -> &str {
        self.vars
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("{name} missing from env.sh"))
    }

    /// The Python interpreter with `mcp==2.3.0`, as a launcher that forks each peer from a
    /// process with the SDK already imported ([`pyfork`]) unless `ERAGATE_TEST_PYFORK=0`.
    pub fn python(&self) -> &str {
        let python = self.get("PEERS_PYTHON");
        pyfork::launcher(python, &self.script("pyfork.py")).unwrap_or(python)
    }

    /// The Python interpreter itself, for what must not be forked from the zygote.
    pub fn python_itself(&self) -> &str {
        self.get("PEERS_PYTHON")
    }

    /// The system Node (20) for server-everything and the TypeScript SDK.
    pub fn node20(&self) -> &str {
        self.get("PEERS_NODE20")
    }

    /// Node 22, for the conformance suites.
    pub fn node22(&self) -> &str {
        self.get("PEERS_NODE22")
    }

    /// A script in `tests/peers/`.
    pub fn script(&self, name: &str) -> String {
        repo_root().join("tests/peers").join(name).display().to_string()
    }
}

/// The peers, installed by `tests/peers/install.sh` (the README's test command runs it).
pub fn peers() -> &'static Peers {
    static PEERS: OnceLock<Peers> = OnceLock::new();
    PEERS.get_or_init(|| {
        let dir = std::env::var("ERAGATE_PEERS")
            .map(PathBuf::from)
            .unwrap_or_else(|_| repo_root().join(".cache/peers"));
        let env = dir.join("env.sh");
        let text = std::fs::read_to_string(&env).unwrap_or_else(|e| {
            panic!(
                "peers are not installed ({}: {e}); run tests/peers/install.sh (or tests/run.sh)",
                env.display()
            )
        });
        let vars = text
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('\'').to_owned()))
            .collect();
        Peers { vars }
    })
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A free loopback port (bound then released), never one this test process was
/// given before: the kernel may hand a released port out again at once, and two
/// listeners of one test (an admin address and eragate's own) must not share it.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        if GIVEN.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            return port;
        }
    }
}

/// A process killed (its whole group) when dropped.
pub struct Proc {
    pub child: Child,
    pub name: String,
}

impl Proc {
    /// Spawns `command` in its own process group.
    pub fn spawn(name: &str, command: &mut Command) -> Proc {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc {
            child,
            name: name.to_owned(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to `within`; returns whether it exited.
    pub fn terminate(&mut self, within: Duration) -> bool {
        signal(self.child.id(), Signal::SIGTERM);
        poll_until(within, || matches!(self.child.try_wait(), Ok(Some(_))))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate(Duration::from_secs(5));
        }
        // The group, in case anything outlived its leader.
        if let Ok(pid) = i32::try_from(self.child.id())
            && pid > 1
        {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running eragate.
pub struct Eragate {
    pub proc: Proc,
    pub addr: SocketAddr,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Eragate {
    /// Starts eragate with `config` (TOML without `[listen] address`, which the harness sets)
    /// and waits until it accepts connections.
    pub fn start(config: &str) -> Eragate {
        Eragate::start_with_args(config, &[])
    }

    /// Like [`Eragate::start`], with extra `eragate run` arguments (e.g. `--shutdown-grace 3s`).
    pub fn start_with_args(config: &str, args: &[&str]) -> Eragate {
        Eragate::start_with_env(config, args, &[])
    }

    /// Like [`Eragate::start_with_args`], with extra environment variables for eragate itself.
    pub fn start_with_env(config: &str, args: &[&str], env: &[(&str, &str)]) -> Eragate {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        Eragate::start_at(addr, config, args, env)
    }

    /// Like [`Eragate::start_with_env`], listening at `addr` (a restart on the same
    /// address, or a URL that must be known before eragate starts).
    pub fn start_at(addr: SocketAddr, config: &str, args: &[&str], env: &[(&str, &str)]) -> Eragate {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = format!("{config}\n");
        let config = if config.contains("[listen]") {
            config.replacen("[listen]", &format!("[listen]\naddress = \"{addr}\""), 1)
        } else {
            format!("[listen]\naddress = \"{addr}\"\n{config}")
        };
        let path = dir.path().join("eragate.toml");
        std::fs::write(&path, config).expect("write config");
        let log = dir.path().join("eragate.log");
        let log_file = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_eragate"));
        command
            .args(["run", "--config"])
            .arg(&path)
            .args(args)
            .env(
                "ERAGATE_LOG",
                std::env::var("ERAGATE_LOG").unwrap_or_else(|_| "info,eragate=debug".into()),
            )
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log_file);
        let proc = Proc::spawn("eragate", &mut command);
        let gateway = Eragate {
            proc,
            addr,
            log,
            _dir: dir,
        };
        if !accepting(addr, Duration::from_secs(20)) {
            panic!("eragate did not start listening on {addr}; log:\n{}", gateway.log());
        }
        gateway
    }

    /// Starts eragate in front of one stdio upstream command.
    pub fn stdio(command: &[&str], extra_upstream_toml: &str) -> Eragate {
        Eragate::start(&stdio_upstream_toml(command, extra_upstream_toml, ""))
    }

    /// Starts eragate in front of one Streamable HTTP upstream.
    pub fn http(url: &str, extra_upstream_toml: &str) -> Eragate {
        Eragate::start(&remote_upstream_toml("http", url, extra_upstream_toml))
    }

    /// `http://127.0.0.1:PORT/mcp`
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The configuration file eragate was started with (rewrite it to reload).
    pub fn config_path(&self) -> PathBuf {
        self._dir.path().join("eragate.toml")
    }

    /// eragate's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The TOML of one upstream `fixture` running `command` over stdio: `upstream` holds extra
/// upstream keys, `stdio` extra `[upstreams.stdio]` keys (or its sub-tables).
pub fn stdio_upstream_toml<S: AsRef<str>>(command: &[S], upstream: &str, stdio: &str) -> String {
    let command: Vec<&str> = command.iter().map(AsRef::as_ref).collect();
    let command = serde_json::to_string(&command).expect("json");
    format!(
        "[[upstreams]]\nname = \"fixture\"\n{upstream}\n[upstreams.stdio]\ncommand = {command}\nkill_grace = \"200ms\"\n{stdio}\n"
    )
}

/// The TOML of one upstream `fixture` at `url` over `transport` (`http` or `sse`), with extra
/// upstream keys.
pub fn remote_upstream_toml(transport: &str, url: &str, extra_upstream_toml: &str) -> String {
    format!("[[upstreams]]\nname = \"fixture\"\n{extra_upstream_toml}\n[upstreams.{transport}]\nurl = \"{url}\"\n")
}

/// Polls `pred` every 25 ms for up to `within`; returns whether it came true.
pub fn poll_until(within: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if pred() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    false
}

/// Waits up to `within` for `pred`, or panics naming `what`.
#[track_caller]
pub fn wait_until(what: &str, within: Duration, pred: impl FnMut() -> bool) {
    if !poll_until(within, pred) {
        panic!("timed out after {within:?} waiting for {what}");
    }
}

/// Whether `addr` accepts connections within `within`.
pub fn listening(addr: impl std::net::ToSocketAddrs + Copy, within: Duration) -> bool {
    poll_until(within, || TcpStream::connect(addr).is_ok())
}

/// Whether eragate accepts connections at `addr`, seen to the end: its probe is
/// closed by eragate before this returns. A probe only connected and dropped
/// would be accepted later and hold a connection slot (`max_connections_per_ip`)
/// while the test's own connections arrive.
fn accepting(addr: SocketAddr, within: Duration) -> bool {
    poll_until(within, || {
        let Ok(mut probe) = TcpStream::connect(addr) else {
            return false;
        };
        // Nothing to send: eragate reads the end and closes (a TLS listener too).
        let _ = probe.shutdown(Shutdown::Write);
        let _ = probe.set_read_timeout(Some(Duration::from_secs(5)));
        let mut rest = Vec::new();
        let _ = probe.read_to_end(&mut rest);
        true
    })
}

/// The legacy-only Python fixture server (`tests/peers/legacy_server.py`) over Streamable HTTP.
pub struct LegacyHttpServer {
    pub proc: Proc,
    pub url: String,
}

impl LegacyHttpServer {
    /// Starts it on a free port (`extra`: e.g. `--json-response`).
    pub fn start(extra: &[&str]) -> LegacyHttpServer {
        let ListeningServer { proc, url } = legacy_server("http", extra);
        LegacyHttpServer { proc, url }
    }
}

/// The command line that runs the legacy fixture over stdio.
pub fn legacy_stdio_command() -> Vec<String> {
    let peers = peers();
    stdio_command(peers.python(), peers.script("legacy_server.py"))
}

/// `program script stdio`.
fn stdio_command(program: &str, script: String) -> Vec<String> {
    vec![program.to_owned(), script, "stdio".to_owned()]
}

/// The command line that runs the fixture as a dual-era (modern) server over stdio, with `extra`.
pub fn dual_era_stdio_command(extra: &[&str]) -> Vec<String> {
    let mut command = legacy_stdio_command();
    command.push("--dual-era".to_owned());
    command.extend(extra.iter().map(|s| (*s).to_owned()));
    command
}

/// The command line that runs server-everything over stdio.
pub fn everything_stdio_command() -> Vec<String> {
    let peers = peers();
    stdio_command(peers.node20(), peers.get("EVERYTHING_JS").to_owned())
}

/// Runs a peer driver (`py_client.py` or `ts_client.mjs`) and returns its JSON report.
pub fn run_driver(program: &str, script: &str, args: &[&str]) -> Result<Value, String> {
    let output = Command::new(program)
        .arg(script)
        .args(args)
        .env("TS_SDK_DIR", peers().get("TS_SDK_DIR"))
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{script} {args:?} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "{script} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// Runs the Python SDK driver.
pub fn py_client(args: &[&str]) -> Result<Value, String> {
    let peers = peers();
    run_driver(peers.python(), &peers.script("py_client.py"), args)
}

/// Runs the TypeScript SDK v1 driver.
pub fn ts_client(args: &[&str]) -> Result<Value, String> {
    let peers = peers();
    run_driver(peers.node20(), &peers.script("ts_client.mjs"), args)
}

/// A raw HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether the Content-Type starts with `prefix` (e.g. `text/event-stream`).
    pub fn content_type_is(&self, prefix: &str) -> bool {
        self.header("content-type").is_some_and(|c| c.starts_with(prefix))
    }

    /// The JSON-RPC messages of an SSE body, or the one JSON body.
    pub fn messages(&self) -> Vec<Value> {
        if self.content_type_is("text/event-stream") {
            self.body
                .split("\n\n")
                .filter_map(|event| {
                    let data: Vec<&str> = event
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim_start)
                        .collect();
                    (!data.is_empty()).then(|| serde_json::from_str(&data.join("\n")).expect("SSE data is JSON"))
                })
                .collect()
        } else {
            vec![self.json()]
        }
    }

    /// The response (result or error) to request `id`, if the reply holds one.
    pub fn response(&self, id: &Value) -> Option<Value> {
        self.messages()
            .into_iter()
            .find(|m| m.get("id") == Some(id) && (m.get("result").is_some() || m.get("error").is_some()))
    }

    /// The notifications with `method` among the messages, in order.
    pub fn notifications(&self, method: &str) -> Vec<Value> {
        self.messages().into_iter().filter(|m| m["method"] == method).collect()
    }
}

/// The response to request `id` in a reply (JSON or SSE); panics with the reply otherwise.
#[track_caller]
pub fn answer(reply: &Reply, id: impl Into<Value>) -> Value {
    let id = id.into();
    reply
        .response(&id)
        .unwrap_or_else(|| panic!("no answer for id {id} in {reply:?}"))
}

/// The first text content of a tool result (panics with the result when there is none).
#[track_caller]
pub fn tool_text(result: &Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {result}"))
}

/// `v` as string slices.
pub fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Panics with every problem and each named eragate log, unless there are no problems.
#[track_caller]
pub fn assert_no_problems(problems: &[String], logs: &[(&str, String)]) {
    if problems.is_empty() {
        return;
    }
    let logs: Vec<String> = logs
        .iter()
        .map(|(name, log)| format!("--- eragate log ({name}):\n{log}"))
        .collect();
    panic!(
        "{} problem(s):\n{}\n\n{}",
        problems.len(),
        problems.join("\n"),
        logs.join("\n")
    );
}

/// A blocking HTTP client for exact protocol checks.
pub fn http_client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Sends a request with `headers` and returns status, headers and body.
pub fn send(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> Reply {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = http_client().request(method, url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.body(body.to_owned());
    }
    let response = request
        .send()
        .unwrap_or_else(|e| panic!("request to {url} failed: {e}"));
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.text().unwrap_or_default();
    Reply { status, headers, body }
}

/// The headers every JSON-RPC POST carries.
pub const PLAIN: [(&str, &str); 2] = [
    ("content-type", "application/json"),
    ("accept", "application/json, text/event-stream"),
];

/// A JSON-RPC request body, exactly as given.
pub fn request_body(id: impl Into<Value>, method: &str, params: Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params}).to_string()
}

/// The standard headers of a 2026-07-28 POST for `method` (plus `Mcp-Name` when given).
pub fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = PLAIN.to_vec();
    headers.extend([("mcp-protocol-version", "2026-07-28"), ("mcp-method", method)]);
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    headers
}

/// [`modern_headers`] as a header map, for a request built on a client of one's own
/// (`.headers(...)`, blocking or async).
pub fn modern_header_map(method: &str, name: Option<&str>) -> reqwest::header::HeaderMap {
    use reqwest::header::{HeaderName, HeaderValue};
    modern_headers(method, name)
        .into_iter()
        .map(|(k, v)| {
            (
                HeaderName::from_bytes(k.as_bytes()).expect("header name"),
                HeaderValue::from_str(v).expect("header value"),
            )
        })
        .collect()
}

/// The `_meta` envelope of a 2026-07-28 request.
pub fn modern_envelope() -> Value {
    serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "eragate-tests", "version": "0"}
    })
}

/// A 2026-07-28 request body with the envelope and extra params.
pub fn modern_body(id: u64, method: &str, params: Value) -> String {
    let mut params = params;
    let meta = modern_envelope();
    match params.get_mut("_meta").and_then(Value::as_object_mut) {
        Some(existing) => {
            for (k, v) in meta.as_object().expect("object") {
                existing.entry(k.clone()).or_insert(v.clone());
            }
        }
        None => {
            params
                .as_object_mut()
                .expect("params object")
                .insert("_meta".into(), meta);
        }
    }
    request_body(id, method, params)
}

/// POSTs a 2026-07-28 `subscriptions/listen` with id `id` for `notifications`; its 200
/// answer, read with a 30 s timeout.
pub fn open_listen(url: &str, id: u64, notifications: Value) -> reqwest::blocking::Response {
    let response = send_listen(url, id, notifications, &[], Duration::from_secs(30));
    assert_eq!(response.status().as_u16(), 200);
    response
}

/// A 2026-07-28 `subscriptions/listen` with `extra` headers, whatever its status: the live
/// response (its SSE body unread), read with `timeout`.
pub fn send_listen(
    url: &str,
    id: u64,
    notifications: Value,
    extra: &[(&str, &str)],
    timeout: Duration,
) -> reqwest::blocking::Response {
    let body = modern_body(
        id,
        "subscriptions/listen",
        serde_json::json!({"notifications": notifications}),
    );
    let mut request = reqwest::blocking::Client::builder()
        .timeout(timeout)
        .build()
        .expect("client")
        .post(url)
        .body(body);
    for (name, value) in modern_headers("subscriptions/listen", None) {
        request = request.header(name, value);
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    request.send().expect("listen")
}

/// The messages of an SSE response, read on a thread of their own: a stream
/// left open would block a read for ever, a channel's `recv_timeout` does not.
/// The channel closes when the stream ends.
pub fn sse_messages(response: reqwest::blocking::Response) -> std::sync::mpsc::Receiver<Value> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut events = SseLines(BufReader::new(response));
    std::thread::spawn(move || {
        while let Some(message) = events.next_message() {
            if tx.send(message).is_err() {
                return;
            }
        }
    });
    rx
}

/// The JSON-RPC messages of an SSE body, read as they come.
pub struct SseLines<R: BufRead>(pub R);

impl<R: BufRead> SseLines<R> {
    /// The next message, or `None` when the stream ends (the client's read timeout bounds the wait).
    pub fn next_message(&mut self) -> Option<Value> {
        let mut data = String::new();
        loop {
            let mut line = String::new();
            if self.0.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if let Some(rest) = line.strip_prefix("data:") {
                data.push_str(rest.trim_start());
            } else if line.is_empty() && !data.is_empty() {
                return serde_json::from_str(&data).ok();
            }
        }
    }
}

/// Posts a modern request and returns the reply.
pub fn post_modern(url: &str, id: u64, method: &str, name: Option<&str>, params: Value) -> Reply {
    send(
        "POST",
        url,
        &modern_headers(method, name),
        Some(&modern_body(id, method, params)),
    )
}

/// Posts a modern `tools/call` of `tool` with `arguments` and returns the reply.
pub fn modern_call(url: &str, id: u64, tool: &str, arguments: Value) -> Reply {
    post_modern(
        url,
        id,
        "tools/call",
        Some(tool),
        serde_json::json!({"name": tool, "arguments": arguments}),
    )
}

/// Opens a legacy session with `initialize` offering `version`; returns the session id and result.
pub fn legacy_initialize(url: &str, version: &str) -> (String, Value) {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "eragate-tests", "version": "0"}}});
    let reply = send("POST", url, &PLAIN, Some(&body.to_string()));
    assert_eq!(reply.status, 200, "initialize failed: {reply:?}");
    let session = reply
        .header("mcp-session-id")
        .expect("Mcp-Session-Id on the initialize answer")
        .to_owned();
    let result = reply.messages().into_iter().next().expect("a message")["result"].clone();
    let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let ack = send("POST", url, &legacy_headers(&session, version), Some(&initialized));
    assert_eq!(ack.status, 202, "notifications/initialized: {ack:?}");
    (session, result)
}

/// The events of one kind the legacy fixture recorded (`legacy_server.py --events FILE`).
pub fn recorded_events(file: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == event)
        .collect()
}

/// A legacy client's `notifications/cancelled` for request 7 on `session`, posted to `url`.
pub fn cancel_request_7(url: &str, session: &str, version: &str) -> Reply {
    let cancel = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "user pressed stop"}});
    send(
        "POST",
        url,
        &legacy_headers(session, version),
        Some(&cancel.to_string()),
    )
}

/// Headers of a legacy POST on a session.
pub fn legacy_headers<'a>(session: &'a str, version: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut headers = PLAIN.to_vec();
    headers.extend([("mcp-session-id", session), ("mcp-protocol-version", version)]);
    headers
}

/// Sends one legacy request on `session` and returns the reply.
pub fn legacy_request(url: &str, session: &str, version: &str, id: u64, method: &str, params: Value) -> Reply {
    send(
        "POST",
        url,
        &legacy_headers(session, version),
        Some(&request_body(id, method, params)),
    )
}

/// Opens the GET stream of a legacy session (a client with `timeout`).
pub fn open_legacy_stream(url: &str, session: &str, version: &str, timeout: Duration) -> reqwest::blocking::Response {
    reqwest::blocking::Client::builder()
        .timeout(timeout)
        .build()
        .expect("client")
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", version)
        .send()
        .expect("GET stream")
}

/// Whether any live process's command line contains `needle` (checked in `/proc`).
pub fn process_alive_with(needle: &str) -> bool {
    !pids_with(needle).is_empty()
}

/// Live (non-zombie) processes whose command line contains `needle`.
pub fn pids_with(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (text.contains(needle) && !is_zombie(&entry.path())).then_some(pid)
        })
        .collect()
}

/// [`pids_with`] among `parent`'s direct children.
pub fn children_with(parent: u32, needle: &str) -> Vec<u32> {
    let parent = parent.to_string();
    pids_with(needle)
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
                status
                    .lines()
                    .any(|line| line.strip_prefix("PPid:").is_some_and(|p| p.trim() == parent))
            })
        })
        .collect()
}

fn is_zombie(proc_dir: &Path) -> bool {
    std::fs::read_to_string(proc_dir.join("stat"))
        .is_ok_and(|s| s.split(") ").nth(1).is_some_and(|rest| rest.starts_with('Z')))
}

/// A tag unique to this test run (`eragate_<name>_<pid>_<nanos>`), put on a child's command
/// line (`python -X tag`) so its processes can be found in /proc without touching anyone else's.
pub fn unique_tag(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("eragate_{name}_{}_{nanos}", std::process::id())
}

/// The legacy fixture over stdio, tagged.
pub fn tagged_fixture(tag: &str) -> Vec<String> {
    let peers = peers();
    vec![
        peers.python().to_owned(),
        "-X".to_owned(),
        tag.to_owned(),
        peers.script("legacy_server.py"),
        "stdio".to_owned(),
    ]
}

/// A fixture server that prints `{"listening": URL, ...}` on stdout once it listens
/// (`legacy_server.py http|sse`, `ts2_server.mjs http`).
pub struct ListeningServer {
    pub proc: Proc,
    pub url: String,
}

impl ListeningServer {
    /// Starts `program args` (its stdout piped, stderr inherited) and waits for the ready line.
    pub fn start(name: &str, program: &str, args: &[&str], env: &[(&str, &str)]) -> ListeningServer {
        let mut command = Command::new(program);
        command.args(args).envs(env.iter().copied()).stderr(Stdio::inherit());
        ListeningServer::spawn(name, &mut command)
    }

    /// Spawns `command` with its stdout piped and waits for the ready line.
    pub fn spawn(name: &str, command: &mut Command) -> ListeningServer {
        ListeningServer::try_spawn(name, command).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`ListeningServer::spawn`], but an error (the process stopped) when no good ready
    /// line comes, e.g. because its port is still taken.
    pub fn try_spawn(name: &str, command: &mut Command) -> Result<ListeningServer, String> {
        let mut proc = Proc::spawn(name, command.stdout(Stdio::piped()));
        let stdout = proc.child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("{name}: no ready line: {e}"))?;
        let ready: Value = serde_json::from_str(&line).map_err(|e| format!("{name}: bad ready line {line:?}: {e}"))?;
        let url = ready["listening"]
            .as_str()
            .ok_or_else(|| format!("{name}: no url in {line:?}"))?
            .to_owned();
        Ok(ListeningServer { proc, url })
    }
}

/// `legacy_server.py <transport> --port 0 [extra]` (`transport`: `http` or `sse`).
fn legacy_server(transport: &str, extra: &[&str]) -> ListeningServer {
    let peers = peers();
    let script = peers.script("legacy_server.py");
    let mut args = vec![script.as_str(), transport, "--port", "0"];
    args.extend_from_slice(extra);
    ListeningServer::start(&format!("legacy_server.py {transport}"), peers.python(), &args, &[])
}

/// `legacy_server.py sse --port 0 [extra]`; `url` is its `GET /sse` endpoint.
pub fn legacy_sse_server(extra: &[&str]) -> ListeningServer {
    legacy_server("sse", extra)
}

/// `legacy_server.py http --trace` (the legacy fixture over Streamable HTTP), its stderr (the
/// trace: one line per HTTP request it receives) in a file.
pub struct TracedUpstream {
    pub proc: Proc,
    pub url: String,
    /// The port it listens on.
    pub port: u16,
    pub trace: PathBuf,
    _dir: tempfile::TempDir,
}

/// One HTTP request the traced upstream received.
#[derive(Debug)]
pub struct Traced {
    pub method: String,
    pub headers: Value,
    pub body: Option<Value>,
}

impl TracedUpstream {
    /// Starts it on a free port.
    pub fn start() -> TracedUpstream {
        TracedUpstream::start_with(&[])
    }

    /// Starts it on a free port with extra arguments (e.g. `--mrtr`).
    pub fn start_with(extra: &[&str]) -> TracedUpstream {
        TracedUpstream::try_start(0, extra).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts it on `port` (a port just freed by a killed server: retried while still taken).
    pub fn start_on(port: u16) -> TracedUpstream {
        TracedUpstream::start_on_with(port, &[])
    }

    /// [`TracedUpstream::start_on`] with extra arguments.
    pub fn start_on_with(port: u16, extra: &[&str]) -> TracedUpstream {
        let mut last = String::new();
        for _ in 0..40 {
            match TracedUpstream::try_start(port, extra) {
                Ok(upstream) => return upstream,
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!("legacy_server.py http did not start on port {port}: {last}");
    }

    fn try_start(port: u16, extra: &[&str]) -> Result<TracedUpstream, String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let trace = dir.path().join("trace.log");
        let peers = peers();
        let mut command = Command::new(peers.python());
        command
            .arg(peers.script("legacy_server.py"))
            .args(["http", "--port", &port.to_string(), "--trace"])
            .args(extra)
            .stderr(std::fs::File::create(&trace).expect("trace file"));
        let ListeningServer { proc, url } =
            ListeningServer::try_spawn("legacy_server.py http --trace", &mut command)
                .map_err(|e| format!("{e}; trace:\n{}", std::fs::read_to_string(&trace).unwrap_or_default()))?;
        let port = reqwest::Url::parse(&url)
            .ok()
            .and_then(|u| u.port())
            .unwrap_or_else(|| panic!("no port in {url}"));
        Ok(TracedUpstream {
            proc,
            url,
            port,
            trace,
            _dir: dir,
        })
    }

    /// The trace so far.
    pub fn raw(&self) -> String {
        std::fs::read_to_string(&self.trace).unwrap_or_default()
    }

    /// Every complete request line of the trace.
    pub fn requests(&self) -> Vec<Traced> {
        let raw = self.raw();
        let complete = match raw.rfind('\n') {
            Some(end) => &raw[..end],
            None => "",
        };
        complete
            .lines()
            .filter_map(|line| line.strip_prefix("TRACE "))
            .filter(|rest| !rest.starts_with("->"))
            .filter_map(|rest| {
                let (method, rest) = rest.split_once(' ')?;
                let (_, rest) = rest.split_once(" headers=")?;
                let (headers, body) = match rest.split_once(" body=") {
                    Some((h, b)) => (h, Some(b)),
                    None => (rest, None),
                };
                Some(Traced {
                    method: method.to_owned(),
                    headers: serde_json::from_str(headers).unwrap_or(Value::Null),
                    body: body.and_then(|b| serde_json::from_str(b).ok()),
                })
            })
            .collect()
    }

    /// JSON-RPC bodies POSTed with this `method`, with the headers they came with.
    pub fn posted(&self, method: &str) -> Vec<(Value, Value)> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == "POST")
            .filter_map(|r| r.body.map(|b| (r.headers, b)))
            .filter(|(_, b)| b["method"] == method)
            .collect()
    }

    /// JSON-RPC bodies POSTed with this `method`.
    pub fn posted_bodies(&self, method: &str) -> Vec<Value> {
        self.posted(method).into_iter().map(|(_, body)| body).collect()
    }

    /// Waits until `pred` holds for the trace (or panics after `within`).
    #[track_caller]
    pub fn wait_for(&self, what: &str, within: Duration, pred: impl Fn(&TracedUpstream) -> bool) {
        if !poll_until(within, || pred(self)) {
            panic!("upstream never saw {what} within {within:?}; trace:\n{}", self.raw());
        }
    }
}

/// The TypeScript SDK v2 fixture server (`ts2_server.mjs http`); `url` is its `/mcp` endpoint.
pub fn ts2_http_server() -> ListeningServer {
    ts2_http_server_with(&[])
}

/// As [`ts2_http_server`], with extra arguments (`--trace FILE`).
pub fn ts2_http_server_with(extra: &[&str]) -> ListeningServer {
    let peers = peers();
    let script = peers.script("ts2_server.mjs");
    let mut args = vec![script.as_str(), "http", "--port", "0"];
    args.extend_from_slice(extra);
    ListeningServer::start(
        "ts2_server.mjs http",
        peers.node20(),
        &args,
        &[("TS2_SERVER_DIR", peers.get("TS2_SERVER_DIR"))],
    )
}

/// The command line that runs the TypeScript SDK v2 fixture over stdio (it finds the SDK
/// through `TS2_SERVER_DIR`, which a child inherits from the test process or gets in config).
pub fn ts2_stdio_command() -> Vec<String> {
    let peers = peers();
    stdio_command(peers.node20(), peers.script("ts2_server.mjs"))
}

/// server-everything over `sse` (url: `.../sse`) or `streamableHttp` (url: `.../mcp`) on a free
/// loopback port, once that port accepts connections.
pub fn everything_server(transport: &str) -> ListeningServer {
    let peers = peers();
    let port = free_port();
    let mut command = Command::new(peers.node20());
    command
        .args([
            "--require",
            peers.get("BIND_LOCALHOST_CJS"),
            peers.get("EVERYTHING_JS"),
            transport,
        ])
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let proc = Proc::spawn(&format!("server-everything {transport}"), &mut command);
    assert!(
        listening(("127.0.0.1", port), Duration::from_secs(20)),
        "server-everything {transport} did not listen on {port}"
    );
    let path = if transport == "sse" { "sse" } else { "mcp" };
    ListeningServer {
        proc,
        url: format!("http://127.0.0.1:{port}/{path}"),
    }
}

/// Python: the start of a Python SDK (mcp 2.3.0) client driver that answers a server's
/// requests (`tests/it/eras/mrtr.rs`, `tests/it/federation.rs`): the imports, `spec` (the JSON of
/// `sys.argv[1]`), `asked` (every request answered, in order), `on_sampling` (answers
/// "sampled-by-client") and `fill(schema)`, an answer to an elicitation's requested
/// schema (a default where the schema gives one, else a value of the member's type or
/// format). Each driver's own text follows it.
pub const PY_ASKED_CLIENT_PREAMBLE: &str = r#"
import asyncio, json, os, sys, warnings
import mcp
import mcp_types as types
from mcp.shared.exceptions import MCPError

warnings.simplefilter("ignore")
spec = json.loads(sys.argv[1])
asked = []


async def on_sampling(context, params):
    asked.append({"method": "sampling/createMessage", "texts": [getattr(m.content, "text", None) for m in params.messages]})
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="sampled-by-client"),
                                     model="test-model", stop_reason="endTurn")


def fill(schema):
    out = {}
    for key, prop in (schema.get("properties") or {}).items():
        if "default" in prop:
            out[key] = prop["default"]
        elif prop.get("type") == "boolean":
            out[key] = True
        elif prop.get("type") == "integer":
            out[key] = 7
        elif prop.get("type") == "number":
            out[key] = 7.5
        elif prop.get("type") == "array":
            out[key] = []
        elif "enum" in prop:
            out[key] = prop["enum"][0]
        elif prop.get("format") == "email":
            out[key] = "ada@example.com"
        elif prop.get("format") == "uri":
            out[key] = "https://example.com/ada"
        elif prop.get("format") == "date":
            out[key] = "1815-12-10"
        elif key == "color":
            out[key] = "blue"
        else:
            out[key] = "Ada"
    return out
"#;

/// JavaScript: the start of a TypeScript SDK v1 client driver (`tests/it/eras/mrtr.rs`,
/// `tests/it/policy/disclosure.rs`): `sdk(rel)` (imports a module of the SDK in
/// `TS_SDK_DIR`), `spec` (the JSON of `process.argv[2]`), `Client`,
/// `StreamableHTTPClientTransport` and `types`. Each driver's own text follows it.
pub const TS_CLIENT_PREAMBLE: &str = r#"
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const sdk = (rel) => import(pathToFileURL(path.join(process.env.TS_SDK_DIR, 'dist', 'esm', rel)).href);
const spec = JSON.parse(process.argv[2]);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const types = await sdk('types.js');
"#;

/// A driver script, written once per test process (atomically: other runs may read it).
pub fn driver_script(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(name);
    let partial = dir.join(format!("{name}.{}", std::process::id()));
    std::fs::write(&partial, text).expect("write driver");
    std::fs::rename(&partial, &path).expect("rename driver");
    path
}

/// Runs a driver with a hard deadline (a hang is a failure, not a stuck test); its JSON report.
pub fn run_json(mut command: Command, within: Duration) -> Result<Value, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("out"))
        .stderr(std::fs::File::create(&err).expect("err"));
    let mut child = command.spawn().map_err(|e| format!("cannot start the driver: {e}"))?;
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            signal(child.id(), Signal::SIGKILL);
            let _ = child.wait();
            return Err(format!(
                "the driver hung for {within:?}; stderr:\n{}",
                std::fs::read_to_string(&err).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "the driver failed ({status}):\n{stdout}\n{}",
            std::fs::read_to_string(&err).unwrap_or_default()
        ));
    }
    serde_json::from_str(&stdout).map_err(|e| format!("the driver printed no JSON ({e}): {stdout}"))
}
