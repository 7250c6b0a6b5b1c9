//! What the other protections leave open: the cost of
//! forgetting ended sessions, the admin listener and running out of
//! descriptors, what a stdio child can read of eragate, refused and oversized
//! upstream messages, and HTTP/1.1 pipelining. The real binary throughout;
//! where the fault is a cost, the test counts the work (entries visited,
//! accept attempts) that eragate reports on its admin view, never time.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

/// eragate started through `wrapper` (`prlimit …`, `setpriv …`, which exec it:
/// the same process), its directory readable by any user.
struct Wrapped {
    proc: Proc,
    addr: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Wrapped {
    fn start(wrapper: &[&str], config: &str, env: &[(&str, &str)]) -> Wrapped {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        let config = format!("[listen]\naddress = \"{addr}\"\n{config}\n");
        let path = dir.path().join("eragate.toml");
        std::fs::write(&path, config).expect("write config");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let log = dir.path().join("eragate.log");
        let log_file = std::fs::File::create(&log).expect("log file");
        let (program, args) = wrapper.split_first().expect("a wrapper");
        let mut command = Command::new(program);
        command
            .args(args)
            .arg(env!("CARGO_BIN_EXE_eragate"))
            .args(["run", "--config"])
            .arg(&path)
            .env("ERAGATE_LOG", "info,eragate=debug")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log_file);
        let proc = Proc::spawn("eragate", &mut command);
        let wrapped = Wrapped {
            proc,
            addr,
            log,
            _dir: dir,
        };
        if !listening(addr, Duration::from_secs(20)) {
            panic!("eragate did not start listening on {addr}; log:\n{}", wrapped.log());
        }
        wrapped
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `[admin]` on a port of its own, plus `extra` keys of that table.
fn admin_table(extra: &str) -> (u16, String) {
    let port = free_port();
    (port, format!("[admin]\naddress = \"127.0.0.1:{port}\"\n{extra}\n"))
}

/// The admin view `/pools`.
fn pools(admin: u16) -> Value {
    let reply = send("GET", &format!("http://127.0.0.1:{admin}/pools"), &[], None);
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.json()
}

/// Reads until the peer closes or `within` passes; what came, and whether it closed.
fn read_for(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    stream.set_read_timeout(Some(within)).expect("timeout");
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    let closed = loop {
        match stream.read(&mut buffer) {
            Ok(0) => break true,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => break false,
            Err(_) => break true,
        }
    };
    (String::from_utf8_lossy(&received).into_owned(), closed)
}

/// A raw GET of `path` on `port` with `headers`, read to the end (`Connection: close`).
fn raw_get(port: u16, path: &str, headers: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("write");
    read_for(&mut stream, Duration::from_secs(20)).0
}

/// `text` without its ANSI colour sequences (a text log's fields are coloured).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The status code of a raw HTTP/1.1 answer.
fn status_of(answer: &str) -> Option<u16> {
    answer.split(' ').nth(1).and_then(|code| code.parse().ok())
}

// === 3: ended sessions ===

/// Past `max_ended_sessions`, each DELETE forgets the ended id expiring soonest,
/// found without walking the set: the admin view counts the entries visited.
#[test]
fn ended_ids_past_the_bound_are_forgotten_visiting_a_few_entries_per_delete() {
    const BOUND: u64 = 40;
    const SESSIONS: u64 = 200;
    let (admin, admin_toml) = admin_table("");
    let config = format!(
        "{admin_toml}[limits]\nmax_ended_sessions = {BOUND}\n{}[upstreams.pool]\nlegacy_sessions = \"shared\"\n",
        stdio_upstream_toml(&legacy_stdio_command(), "", "")
    );
    let gateway = Eragate::start(&config);
    let client = http_client();
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    .to_string();
    let mut ended = Vec::new();
    for _ in 0..SESSIONS {
        let opened = client
            .post(gateway.url())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize.clone())
            .send()
            .expect("initialize");
        assert_eq!(opened.status(), 200);
        let session = opened.headers()["mcp-session-id"].to_str().expect("id").to_owned();
        let deleted = client
            .delete(gateway.url())
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-06-18")
            .send()
            .expect("DELETE");
        assert!(deleted.status().is_success(), "DELETE: {}", deleted.status());
        ended.push(session);
    }
    let stats = &pools(admin)["ended_sessions"];
    assert_eq!(stats["remembered"], BOUND, "{stats}");
    let evicted = stats["evicted"].as_u64().expect("evicted");
    assert_eq!(evicted, SESSIONS - BOUND, "{stats}");
    let visited = stats["visited"].as_u64().expect("visited");
    // One entry per id forgotten, and a rebuild of the heap now and then: far below
    // the 2 x BOUND per DELETE of a walk of the set.
    assert!(
        visited <= 2 * evicted + BOUND,
        "{visited} entries visited for {evicted} forgotten: {stats}"
    );
    // The most recently ended are still refused.
    let last = ended.last().expect("a session");
    let reply = legacy_request(&gateway.url(), last, "2025-06-18", 1, "tools/list", json!({}));
    assert_eq!(reply.status, 404, "{reply:?}");
}

// === 5: the admin listener and descriptors ===

/// The admin listener keeps the MCP listener's timeouts and caps: a silent
/// socket is closed at the header read timeout, and past the connection cap a
/// client waits in the backlog (its request unanswered) until a slot frees.
#[test]
fn the_admin_listener_closes_silent_sockets_and_caps_connections() {
    let (admin, admin_toml) = admin_table("max_connections = 2\nmax_connections_per_ip = 5");
    let config = format!(
        "{admin_toml}[limits]\nheader_read_timeout = \"1s\"\n{}",
        stdio_upstream_toml(&legacy_stdio_command(), "", "")
    );
    let _gateway = Eragate::start(&config);
    let connect = || TcpStream::connect(("127.0.0.1", admin)).expect("connect");
    let mut silent = connect();
    let (_, closed) = read_for(&mut silent, Duration::from_secs(10));
    assert!(closed, "a silent admin connection stayed open");

    let mut held = [connect(), connect()];
    std::thread::sleep(Duration::from_millis(200));
    let mut waiting = connect();
    waiting
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .expect("write");
    let (early, closed) = read_for(&mut waiting, Duration::from_millis(400));
    assert!(early.is_empty() && !closed, "served past the connection cap: {early:?}");
    // The header read timeout frees the slots; then it is served.
    let (answer, _) = read_for(&mut waiting, Duration::from_secs(10));
    assert_eq!(status_of(&answer), Some(200), "{answer}");
    for stream in &mut held {
        let (_, closed) = read_for(stream, Duration::from_secs(10));
        assert!(closed, "a silent admin connection stayed open");
    }
}

/// The admin listener's per-IP cap (one past it is answered 503 and closed),
/// and the MCP listener's Host and Origin checks, on everything but the probes.
#[test]
fn the_admin_listener_caps_each_address_and_checks_hosts() {
    let (admin, admin_toml) = admin_table("max_connections_per_ip = 1");
    let config = format!("{admin_toml}{}", stdio_upstream_toml(&legacy_stdio_command(), "", ""));
    let _gateway = Eragate::start(&config);
    let first = TcpStream::connect(("127.0.0.1", admin)).expect("connect");
    std::thread::sleep(Duration::from_millis(200));
    let mut second = TcpStream::connect(("127.0.0.1", admin)).expect("connect");
    second
        .write_all(b"GET /pools HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .expect("write");
    let (answer, closed) = read_for(&mut second, Duration::from_secs(10));
    assert_eq!(status_of(&answer), Some(503), "{answer}");
    assert!(answer.contains("-32029"), "{answer}");
    assert!(closed);
    drop(first);

    let localhost = format!("Host: localhost:{admin}\r\n");
    let cases = [
        ("/pools", "Host: 127.0.0.1\r\n", 200),
        ("/pools", localhost.as_str(), 200),
        ("/pools", "Host: rebound.example\r\n", 421),
        ("/metrics", "Host: rebound.example:9090\r\n", 421),
        (
            "/status.json",
            "Host: 127.0.0.1\r\nOrigin: http://evil.example\r\n",
            403,
        ),
        ("/healthz", "Host: rebound.example\r\n", 200),
    ];
    for (path, headers, status) in cases {
        // One at a time (the per-IP cap is one): a connection just closed may not be
        // given back yet.
        let mut answer = raw_get(admin, path, headers);
        for _ in 0..50 {
            if status_of(&answer) != Some(503) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            answer = raw_get(admin, path, headers);
        }
        assert_eq!(status_of(&answer), Some(status), "{path} with {headers:?}: {answer}");
    }
}

/// With eragate's descriptors all taken (a hard limit of 96 open files, and
/// silent clients on the MCP listener holding them), both accept loops fail
/// with EMFILE; each pauses, 5 ms doubling up to a second, rather than retrying
/// at once. At start eragate raises its soft limit on open files to the hard
/// one, and logs both.
#[test]
fn accept_loops_pause_while_descriptors_run_out() {
    let (admin, admin_toml) = admin_table("max_connections = 1000\nmax_connections_per_ip = 1000");
    let config = format!(
        "{admin_toml}[limits]\nheader_read_timeout = \"120s\"\nidle_timeout = \"120s\"\n{}",
        stdio_upstream_toml(&legacy_stdio_command(), "", "spares = 0")
    );
    // Started with a soft limit below the hard one: eragate raises it.
    let gateway = Wrapped::start(&["prlimit", "--nofile=64:96", "--"], &config, &[]);
    wait_until("the file limit logged", Duration::from_secs(10), || {
        plain(&gateway.log()).contains("open files limit")
    });
    let log = plain(&gateway.log());
    assert!(log.contains("soft=96 hard=96 was=64"), "{log}");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", gateway.proc.pid())).expect("limits");
    let open_files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(open_files.get(3..5), Some(&["96", "96"][..]), "{limits}");

    // Silent clients until eragate cannot accept any more.
    let mut held = Vec::new();
    for _ in 0..120 {
        held.push(TcpStream::connect(gateway.addr).expect("connect"));
    }
    // Accepted until none is left (the rest wait in the backlog); then the admin's turn.
    let open_files = || std::fs::read_dir(format!("/proc/{}/fd", gateway.proc.pid())).map_or(0, Iterator::count);
    wait_until("eragate out of descriptors", Duration::from_secs(30), || {
        open_files() >= 95
    });
    let waiting_admin: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(("127.0.0.1", admin)).expect("connect"))
        .collect();
    let starved = Duration::from_secs(4);
    std::thread::sleep(starved);
    // Descriptors back: the admin view answers (after the connections it queued).
    drop(held);
    drop(waiting_admin);
    wait_until("the admin view answering", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", admin)).is_ok()
    });
    let view = pools(admin);
    let accepts = &view["accepts"];
    for listener in ["mcp", "admin"] {
        let failures = accepts[listener]["failures"].as_u64().expect("failures");
        assert!(failures >= 1, "{listener}: the descriptors never ran out? {accepts}");
        // 5 ms doubling to 1 s: about a dozen failures in 4 s, then one a second
        // (retried at once, millions).
        assert!(
            failures <= 30,
            "{listener}: {failures} failed accepts in {starved:?}: {accepts}"
        );
    }
    // And everything works again.
    let reply = modern_call(&gateway.url(), 1, "echo", json!({"text": "back"}));
    assert_eq!(tool_text(&answer(&reply, 1)["result"]), "echo: back");
}

// === 6: secrets and children ===

/// A stdio server answering `tools/call` of `bytes` with a text of `size` bytes
/// (the first `first` of them, then a pause of `pause` seconds, then the rest),
/// of `values` with `count` zeros, and of `echo`; its answers put `id` last, as
/// the TypeScript SDK writes them.
const HEAVY_SERVER: &str = r#"
import json, sys, time
out = sys.stdout
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    method, id = message["method"], message["id"]
    tail = ',"jsonrpc":"2.0","id":%s}\n' % json.dumps(id)
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "heavy", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("bytes", "values", "echo")]}
    elif method == "tools/call":
        name, args = message["params"]["name"], message["params"].get("arguments", {})
        if name == "bytes":
            size, first = args["size"], args.get("first", args["size"])
            out.write('{"result":{"content":[{"type":"text","text":"' + "x" * first)
            out.flush()
            time.sleep(args.get("pause", 0))
            out.write("x" * (size - first) + '"}]}' + tail)
            out.flush()
            continue
        if name == "values":
            out.write('{"result":{"content":[],"zeros":[' + ",".join("0" * args["count"]) + "]}" + tail)
            out.flush()
            continue
        result = {"content": [{"type": "text", "text": "echo: " + args.get("text", "")}]}
    else:
        result = {}
    out.write(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + "\n")
    out.flush()
"#;

/// The heavy server's command line (written to `dir`).
fn heavy_server(dir: &Path) -> Vec<String> {
    let script = dir.join("heavy.py");
    std::fs::write(&script, HEAVY_SERVER).expect("write the server");
    vec![peers().python().to_owned(), script.display().to_string()]
}

/// A stdio child runs as eragate's user: without more, it reads
/// `/proc/<eragate>/environ`, `ERAGATE_SESSION_KEY` included. eragate is made
/// non-dumpable at start, so the kernel refuses it. Run as an unprivileged user:
/// root reads any process's environment.
#[test]
fn a_stdio_child_running_as_eragates_user_cannot_read_its_environment() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    // The upstream in plain Python (the peers' interpreter may live where only
    // root can reach it); each child (spares too) writes files named by its pid.
    let server = heavy_server(dir.path());
    std::fs::set_permissions(&server[1], std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let python = ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or_else(|| peers().python());
    let script = format!(
        "d='{dir}'; id -u > $d/$$.uid; echo $PPID > $d/$$.ppid; \
         cat /proc/$PPID/environ > $d/$$.environ 2> $d/$$.error; touch $d/$$.done; \
         exec '{python}' '{server}'",
        dir = dir.path().display(),
        server = server[1],
    );
    let command = ["/bin/sh".to_owned(), "-c".to_owned(), script];
    let key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let gateway = Wrapped::start(
        &["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"],
        &stdio_upstream_toml(&command, "", ""),
        &[("ERAGATE_SESSION_KEY", key)],
    );
    let children = || -> Vec<String> {
        std::fs::read_dir(dir.path())
            .map(|entries| {
                entries
                    .filter_map(|e| {
                        e.ok()?
                            .file_name()
                            .into_string()
                            .ok()?
                            .strip_suffix(".done")
                            .map(str::to_owned)
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    wait_until("a child's attempt", Duration::from_secs(20), || !children().is_empty());
    for child in children() {
        let read = |what: &str| std::fs::read_to_string(dir.path().join(format!("{child}.{what}"))).unwrap_or_default();
        assert_eq!(
            read("uid").trim(),
            "65534",
            "the child runs as eragate's unprivileged user"
        );
        assert_eq!(
            read("ppid").trim(),
            gateway.proc.pid().to_string(),
            "the child's parent is eragate"
        );
        let environ = read("environ");
        assert!(
            !environ.contains("ERAGATE_SESSION_KEY") && !environ.contains(key),
            "child {child} read eragate's environment: {environ:?}"
        );
        assert!(read("error").contains("Permission denied"), "{:?}", read("error"));
    }
    // eragate itself is unharmed: it serves, and its own process is still readable where it must be.
    let reply = modern_call(&gateway.url(), 1, "echo", json!({"text": "hi"}));
    let result = answer(&reply, 1)["result"].clone();
    assert!(result.is_object(), "{reply:?}\n{}", gateway.log());
    assert_eq!(tool_text(&result), "echo: hi");
    let status = std::fs::read_to_string(format!("/proc/{}/status", gateway.proc.pid())).expect("status");
    assert!(status.contains("VmHWM"), "{status}");
}

// === 7: messages from upstreams ===

/// A `tools/call` and how long its answer took; the error message, if it failed.
fn timed_call(url: &str, id: u64, tool: &str, arguments: Value) -> (Duration, Result<Value, String>) {
    let started = Instant::now();
    let reply = modern_call(url, id, tool, arguments);
    let answer = answer(&reply, id);
    let outcome = match answer.get("error") {
        Some(error) => Err(error["message"].as_str().unwrap_or_default().to_owned()),
        None => Ok(answer["result"].clone()),
    };
    (started.elapsed(), outcome)
}

/// An upstream answer eragate refuses (a line past the 64 MiB a message may
/// hold, or with more values than `limits.max_upstream_values`) fails its call
/// at once with the reason, well within `request_timeout` (60 s); the session
/// goes on serving.
#[test]
fn a_refused_upstream_answer_fails_its_call_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!(
        "[limits]\nmax_upstream_values = 1000\n{}",
        stdio_upstream_toml(&heavy_server(dir.path()), "request_timeout = \"60s\"", "")
    );
    let gateway = Eragate::start(&config);
    let url = gateway.url();
    let (_, warm) = timed_call(&url, 1, "echo", json!({"text": "warm"}));
    assert!(warm.is_ok(), "{warm:?}: {}", gateway.log());
    let cases = [
        ("values", json!({"count": 5000}), "more than 1000 JSON values"),
        ("bytes", json!({"size": 65 * 1024 * 1024}), "larger than 67108864 bytes"),
    ];
    for (i, (tool, arguments, reason)) in cases.into_iter().enumerate() {
        let (took, outcome) = timed_call(&url, 10 + i as u64, tool, arguments);
        let message = outcome.expect_err("a refused answer is an error");
        assert!(message.contains(reason), "{tool}: {message}");
        assert!(took < Duration::from_secs(20), "{tool}: answered after {took:?}");
        // Nothing lost: the same session serves the next call.
        let (_, next) = timed_call(&url, 20 + i as u64, "echo", json!({"text": "after"}));
        assert_eq!(tool_text(&next.expect("served")), "echo: after");
    }
}

/// The bytes held for upstream messages being read are bounded across every
/// session (`limits.max_upstream_buffered_bytes`): while one child's 6 MiB
/// answer is half read, another's 5 MiB answer would pass 8 MiB and is refused
/// at once with the reason; the first completes.
#[test]
fn bytes_held_for_upstream_messages_are_bounded_across_sessions() {
    const MIB: u64 = 1024 * 1024;
    let dir = tempfile::tempdir().expect("tempdir");
    let (admin, admin_toml) = admin_table("");
    let config = format!(
        "{admin_toml}[limits]\nmax_upstream_buffered_bytes = {}\n{}[upstreams.pool]\nsize = 2\nmax_in_flight_per_session = 1\n",
        8 * MIB,
        stdio_upstream_toml(&heavy_server(dir.path()), "request_timeout = \"60s\"", "")
    );
    let gateway = Eragate::start(&config);
    let url = gateway.url();
    let (_, warm) = timed_call(&url, 1, "echo", json!({"text": "warm"}));
    assert!(warm.is_ok(), "{warm:?}");
    let slow = {
        let url = url.clone();
        std::thread::spawn(move || timed_call(&url, 2, "bytes", json!({"size": 6 * MIB, "first": 5 * MIB, "pause": 4})))
    };
    wait_until("the first answer half read", Duration::from_secs(20), || {
        pools(admin)["upstream_buffered_bytes"]["held"].as_u64() >= Some(4 * MIB)
    });
    let (took, second) = timed_call(&url, 3, "bytes", json!({"size": 5 * MIB}));
    let message = second.expect_err("past the bound: refused");
    assert!(message.contains("max_upstream_buffered_bytes"), "{message}");
    assert!(took < Duration::from_secs(3), "refused after {took:?}");
    let (_, first) = slow.join().expect("the first call");
    let first = first.unwrap_or_else(|e| panic!("the first answer was refused: {e}"));
    assert_eq!(tool_text(&first).len() as u64, 6 * MIB);
    let held = &pools(admin)["upstream_buffered_bytes"];
    assert!(held["peak"].as_u64() <= Some(8 * MIB), "{held}");
    assert!(held["refused"].as_u64() >= Some(1), "{held}");
    assert_eq!(held["held"], 0, "{held}");
}

// === 9: HTTP/1.1 pipelining ===

/// One HTTP/1.1 answer read off a raw connection: its status and body (chunked
/// or of a `Content-Length`), or `None` when the connection closed or went
/// silent for `within` first.
fn read_answer(stream: &mut TcpStream, pending: &mut Vec<u8>, within: Duration) -> Option<(u16, String)> {
    let deadline = Instant::now() + within;
    let mut fill = |pending: &mut Vec<u8>| -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).expect("timeout");
        let mut buffer = [0u8; 65536];
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                pending.extend_from_slice(&buffer[..n]);
                true
            }
        }
    };
    let head_end = loop {
        if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if !fill(pending) {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).to_ascii_lowercase();
    pending.drain(..head_end + 4);
    let status = status_of(&head)?;
    let header = |name: &str| {
        head.lines().find_map(|l| {
            l.strip_prefix(name)
                .and_then(|v| v.strip_prefix(':'))
                .map(|v| v.trim().to_owned())
        })
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let line_end = loop {
                if let Some(end) = pending.windows(2).position(|w| w == b"\r\n") {
                    break end;
                }
                if !fill(pending) {
                    return None;
                }
            };
            let size = usize::from_str_radix(String::from_utf8_lossy(&pending[..line_end]).trim(), 16).ok()?;
            while pending.len() < line_end + 2 + size + 2 {
                if !fill(pending) {
                    return None;
                }
            }
            body.extend_from_slice(&pending[line_end + 2..line_end + 2 + size]);
            pending.drain(..line_end + 2 + size + 2);
            if size == 0 {
                break;
            }
        }
    } else {
        let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        while pending.len() < length {
            if !fill(pending) {
                return None;
            }
        }
        body.extend(pending.drain(..length));
    }
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// The ids of the JSON-RPC responses in an answer's body (JSON, or SSE events).
fn response_ids(body: &str) -> Vec<Value> {
    let texts: Vec<String> = if body.trim_start().starts_with('{') {
        vec![body.to_owned()]
    } else {
        body.split("\n\n")
            .map(|event| {
                event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .filter(|data| !data.is_empty())
            .collect()
    };
    texts
        .iter()
        .filter_map(|text| serde_json::from_str::<Value>(text).ok())
        .filter(|m| m.get("result").is_some() || m.get("error").is_some())
        .map(|m| m["id"].clone())
        .collect()
}

/// A raw 2026-07-28 POST of `method` with `params` as request `id`.
fn raw_modern(id: u64, method: &str, name: Option<&str>, params: Value) -> Vec<u8> {
    let body = modern_body(id, method, params);
    let name = name.map(|n| format!("Mcp-Name: {n}\r\n")).unwrap_or_default();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: {method}\r\n{name}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Requests pipelined on one HTTP/1.1 connection are each answered, in the
/// order they were sent: several in one write, one behind an answer streamed
/// as SSE (longer than `listen.stream_after`), and one whose head comes in
/// pieces behind another. The connection's header read timeout is far away,
/// so a request left unanswered shows as silence, not as a close.
#[test]
fn pipelined_requests_are_answered_in_order() {
    let config = format!(
        "[limits]\nheader_read_timeout = \"60s\"\n{}",
        stdio_upstream_toml(&legacy_stdio_command(), "", "")
    );
    let gateway = Eragate::start(&config);
    let echo = |id: u64, text: &str| {
        let arguments = json!({"name": "echo", "arguments": {"text": text}});
        raw_modern(id, "tools/call", Some("echo"), arguments)
    };
    let (_, warm) = timed_call(&gateway.url(), 99, "echo", json!({"text": "warm"}));
    assert!(warm.is_ok(), "{warm:?}");
    let streamed = raw_modern(
        4,
        "tools/call",
        Some("slow_progress"),
        json!({"name": "slow_progress", "arguments": {"steps": 60}}),
    );
    // (case, the writes, the ids answered in order)
    type Case = (&'static str, Vec<Vec<u8>>, Vec<u64>);
    let cases: [Case; 3] = [
        (
            "three in one write",
            vec![
                [
                    echo(1, "one"),
                    raw_modern(2, "tools/list", None, json!({})),
                    echo(3, "three"),
                ]
                .concat(),
            ],
            vec![1, 2, 3],
        ),
        (
            "behind a streamed answer",
            vec![[streamed, echo(5, "five")].concat()],
            vec![4, 5],
        ),
        (
            "a head in pieces",
            {
                let second = echo(7, "seven");
                let (a, b) = second.split_at(20);
                vec![[echo(6, "six"), a.to_vec()].concat(), b.to_vec()]
            },
            vec![6, 7],
        ),
    ];
    for (case, writes, ids) in cases {
        let mut stream = TcpStream::connect(gateway.addr).expect("connect");
        for (i, write) in writes.iter().enumerate() {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(200));
            }
            stream.write_all(write).expect("write");
        }
        let mut pending = Vec::new();
        let mut answered = Vec::new();
        for _ in &ids {
            let Some((status, body)) = read_answer(&mut stream, &mut pending, Duration::from_secs(15)) else {
                panic!(
                    "{case}: answered {answered:?} of {ids:?}, then nothing; log:\n{}",
                    gateway.log()
                );
            };
            assert_eq!(status, 200, "{case}: {body}");
            answered.extend(response_ids(&body));
        }
        let expected: Vec<Value> = ids.iter().map(|id| json!(id)).collect();
        assert_eq!(answered, expected, "{case}");
    }
}
