//! Issue 13, the client edge: every principal protected from every other. The
//! real binary in front of the legacy fixture, driven over raw sockets where
//! the point is what a misbehaving client does to the connection (HTTP/1.1, and
//! h2 frames by hand where the keep-alive pings are the point).

use crate::common;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// The legacy fixture over stdio, plus `extra` TOML (tables of its own).
fn gateway(extra: &str) -> Eragate {
    Eragate::start(&format!(
        "{extra}\n{}",
        stdio_upstream_toml(&legacy_stdio_command(), "", "")
    ))
}

/// A raw connection with a generous read timeout (a closed socket reads at once).
fn connect(gateway: &Eragate) -> TcpStream {
    let stream = TcpStream::connect(gateway.addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    stream
}

/// Reads until the peer closes; panics when the socket is still open after the read timeout.
#[track_caller]
fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("the connection is still open: {e}")
            }
            Err(_) => break, // reset: closed too
        }
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// The first 300 characters of `text`, for failure messages.
fn excerpt(text: &str) -> String {
    text.chars().take(300).collect()
}

/// The status line's code of a raw HTTP/1.1 answer.
fn status_of(answer: &str) -> Option<u16> {
    answer.split(' ').nth(1).and_then(|code| code.parse().ok())
}

/// A raw POST to `/mcp` with `host` and `body`, read to the end.
fn raw_post(gateway: &Eragate, host: &str, body: &str) -> String {
    let mut stream = connect(gateway);
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("write");
    read_until_closed(&mut stream)
}

/// The peak resident set of a process, in bytes (`VmHWM`).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .expect("VmHWM")
}

/// `[0,0,…,0]` of just under `bytes` bytes.
fn zeros(bytes: usize) -> String {
    let n = (bytes - 2) / 2;
    format!("[{}0]", "0,".repeat(n - 1))
}

/// The first 8 hex digits of the SHA-256 of `id`, as eragate logs a session.
fn fingerprint(id: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(id.as_bytes())[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const FOUR_MIB: usize = 4 * 1024 * 1024;

fn initialize_body(version: &str, client_info: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": client_info}})
    .to_string()
}

#[test]
fn slowloris_sockets_are_closed_and_a_request_gets_through_at_the_connection_cap() {
    let gateway = gateway("[listen]\nmax_connections = 2\n[limits]\nheader_read_timeout = \"1s\"");
    let mut silent = connect(&gateway);
    let mut slow = connect(&gateway);
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .expect("write");
    // Both slots are held; a legitimate request gets one once the header timeout frees it.
    let health = send("GET", &format!("http://{}/healthz", gateway.addr), &[], None);
    assert_eq!(health.status, 200);
    read_until_closed(&mut silent);
    read_until_closed(&mut slow);
}

#[test]
fn half_a_head_after_a_request_is_closed_at_the_header_read_timeout() {
    // The idle timeout far away: only the header read time can end this connection.
    let gateway = gateway("[limits]\nheader_read_timeout = \"1s\"\nidle_timeout = \"1h\"");
    let mut stream = connect(&gateway);
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .expect("write");
    let mut first = [0u8; 256];
    let read = stream.read(&mut first).expect("the first answer");
    assert!(
        first[..read].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&first[..read])
    );
    // The next request's head, begun and never finished (the connection was kept alive).
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .expect("write");
    // Closed by the header read time: the idle time (1 h) would outlast the read's 60 s.
    read_until_closed(&mut stream);
}

#[test]
fn a_slow_body_is_answered_408_and_an_idle_keep_alive_connection_is_closed() {
    let gateway = gateway("[limits]\nbody_read_timeout = \"1s\"\nidle_timeout = \"1s\"\nheader_read_timeout = \"60s\"");
    let mut stream = connect(&gateway);
    stream
        .write_all(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
              Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":",
        )
        .expect("write");
    let answer = read_until_closed(&mut stream);
    assert_eq!(status_of(&answer), Some(408), "{answer}");

    let mut idle = connect(&gateway);
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .expect("write");
    let answer = read_until_closed(&mut idle);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn a_live_sse_stream_outlives_the_idle_timeout() {
    let gateway = gateway("[listen]\nsse_keep_alive = \"300ms\"\n[limits]\nidle_timeout = \"1s\"");
    let url = gateway.url();
    let (session, _) = legacy_initialize(&url, "2025-06-18");
    let stream = open_legacy_stream(&url, &session, "2025-06-18", Duration::from_secs(30));
    assert_eq!(stream.status(), 200);
    // Ten keep-alives take three idle timeouts: the stream is in flight, never idle.
    let mut lines = BufReader::new(stream).lines();
    let mut comments = 0;
    while comments < 10 {
        let line = lines.next().expect("the stream ended").expect("the stream failed");
        comments += usize::from(line.starts_with(':'));
    }
}

#[test]
fn per_ip_connections_are_capped() {
    let gateway = gateway("[limits]\nmax_connections_per_ip = 1\nheader_read_timeout = \"60s\"");
    let holder = connect(&gateway);
    let mut second = connect(&gateway);
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .expect("write");
    // Refused with an answer (before: closed without one, so a client could not tell why).
    let answer = read_until_closed(&mut second);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    assert!(head.starts_with("HTTP/1.1 503"), "the refusal: {answer:?}");
    assert!(head.to_ascii_lowercase().contains("\r\nretry-after: 1"), "{head}");
    let error: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(error["error"]["code"], -32029, "{error}");
    assert_eq!(error["error"]["data"]["limit"], "connections_per_ip", "{error}");
    assert!(
        !answer.contains("HTTP/1.1 200"),
        "a second connection from one IP was served: {answer}"
    );
    drop(holder);
    wait_until("the slot to be given back", Duration::from_secs(30), || {
        let mut again = connect(&gateway);
        let _ = again.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        read_until_closed(&mut again).starts_with("HTTP/1.1 200")
    });
}

#[test]
fn batches_are_refused_or_capped_before_they_are_parsed() {
    let gateway = gateway("");
    let url = gateway.url();
    let batch = zeros(FOUR_MIB);
    // No session (and any revision but 2025-03-26): no batches at all.
    let refused = send("POST", &url, &PLAIN, Some(&batch));
    assert_eq!(refused.status, 400, "{}", excerpt(&refused.body));
    assert_eq!(refused.json()["error"]["code"], -32600);
    assert!(refused.body.contains("2025-03-26"), "{}", refused.body);
    // A 2025-03-26 session may batch, up to `limits.max_batch_items`.
    let (session, _) = legacy_initialize(&url, "2025-03-26");
    let capped = send("POST", &url, &legacy_headers(&session, "2025-03-26"), Some(&batch));
    assert_eq!(capped.status, 400, "{}", excerpt(&capped.body));
    assert!(capped.body.contains("at most 100"), "{}", capped.body);
    let small: Vec<Value> = (1..=3)
        .map(|id| json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
        .collect();
    let served = send(
        "POST",
        &url,
        &legacy_headers(&session, "2025-03-26"),
        Some(&Value::Array(small).to_string()),
    );
    assert_eq!(served.json().as_array().map(Vec::len), Some(3), "{}", served.body);
    // One message with millions of elements inside: too many values.
    let params = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"ping","params":{{"a":{}}}}}"#,
        zeros(FOUR_MIB - 100)
    );
    let bloated = send("POST", &url, &legacy_headers(&session, "2025-03-26"), Some(&params));
    assert_eq!(bloated.status, 413, "{}", excerpt(&bloated.body));
    // Parsed whole, one such body costs ~230 MB; scanned, the body itself.
    let peak = peak_rss(gateway.proc.pid());
    assert!(peak < 150 * 1024 * 1024, "peak RSS {peak} bytes");
}

#[test]
fn an_oversized_body_is_answered_413_to_a_client_that_keeps_sending() {
    let gateway = gateway("[limits]\nlinger_timeout = \"120s\"");
    let mut stream = connect(&gateway);
    let length = 64 * 1024 * 1024;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("write the head");
    let chunk = vec![b' '; 64 * 1024];
    for _ in 0..length / chunk.len() {
        // A naive client (curl, httpx, requests) sends everything before reading.
        stream.write_all(&chunk).expect("the body could not be sent to the end");
    }
    let mut answer = String::new();
    BufReader::new(&mut stream)
        .read_line(&mut answer)
        .expect("read the answer");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}

#[test]
fn a_request_without_origin_naming_a_foreign_host_is_refused() {
    let gateway = gateway("[listen]\nallowed_hosts = [\"gw.internal\"]");
    let port = gateway.addr.port();
    let body = initialize_body("2025-06-18", json!({"name": "t", "version": "0"}));
    let forged = raw_post(&gateway, &format!("rebound.example:{port}"), &body);
    assert_eq!(status_of(&forged), Some(421), "{forged}");
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "gw.internal".to_owned(),
    ] {
        let answer = raw_post(&gateway, &host, &body);
        assert_eq!(status_of(&answer), Some(200), "{host}: {answer}");
    }
}

#[test]
fn session_ids_are_logged_as_fingerprints_only() {
    let gateway = gateway("");
    let (session, _) = legacy_initialize(&gateway.url(), "2025-06-18");
    let log = gateway.log();
    assert!(log.contains("legacy client session opened"), "{log}");
    assert!(!log.contains(&session), "the full session id is in the log:\n{log}");
    assert!(log.contains(&fingerprint(&session)), "{log}");
}

#[test]
fn an_initialize_carrying_megabytes_of_client_info_is_refused() {
    let gateway = gateway("");
    let info = json!({"name": "t", "version": "0", "description": "x".repeat(3 * 1024 * 1024)});
    let reply = send(
        "POST",
        &gateway.url(),
        &PLAIN,
        Some(&initialize_body("2025-06-18", info)),
    );
    assert_eq!(reply.status, 400, "{}", excerpt(&reply.body));
    assert_eq!(reply.json()["error"]["code"], -32602);
    assert!(reply.header("mcp-session-id").is_none());
    // A normal one still opens a session.
    legacy_initialize(&gateway.url(), "2025-06-18");
}

/// A legacy stdio server whose every `tools/call` answer carries a `[0,…]` of ~30 MiB.
const BLOATED_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    method, id = message["method"], message["id"]
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "bloated", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "big", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        zeros = "0," * (15 * 1024 * 1024) + "0"
        sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{"content":[],"big":[%s]}}\n' % (json.dumps(id), zeros))
        sys.stdout.flush()
        continue
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + "\n")
    sys.stdout.flush()
"#;

#[test]
fn an_upstream_line_of_millions_of_elements_is_refused_before_it_is_parsed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("bloated.py");
    std::fs::write(&script, BLOATED_SERVER).expect("write the server");
    let command = [peers().python().to_owned(), script.display().to_string()];
    let gateway = Eragate::start(&stdio_upstream_toml(&command, "request_timeout = \"5s\"", ""));
    let reply = modern_call(&gateway.url(), 1, "big", json!({}));
    let answer = answer(&reply, 1);
    let text = answer.to_string();
    assert!(answer.get("error").is_some(), "{}", excerpt(&text));
    // Parsed whole, the line costs over half a gigabyte; scanned, the line itself.
    let peak = peak_rss(gateway.proc.pid());
    assert!(peak < 200 * 1024 * 1024, "peak RSS {peak} bytes");
    let log = gateway.log();
    assert!(log.contains("more than 1000000 JSON values"), "{}", excerpt(&log));
}

const H2_SETTINGS: u8 = 4;
const H2_PING: u8 = 6;
const H2_GOAWAY: u8 = 7;
const H2_ACK: u8 = 1;

/// An HTTP/2 frame on stream 0.
fn h2_frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).expect("small frame").to_be_bytes();
    let mut frame = vec![length[1], length[2], length[3], kind, flags, 0, 0, 0, 0];
    frame.extend_from_slice(payload);
    frame
}

/// The next frame's type, flags and payload; `None` once the peer closed (or reset) the
/// connection. Panics when nothing comes within the read timeout: the connection is still open.
fn h2_read(stream: &mut TcpStream) -> Option<(u8, u8, Vec<u8>)> {
    let mut read = |buffer: &mut [u8]| match stream.read_exact(buffer) {
        Ok(()) => Some(()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("the h2 connection is still open and silent: {e}")
        }
        Err(_) => None,
    };
    let mut header = [0u8; 9];
    read(&mut header)?;
    let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    let mut payload = vec![0u8; length];
    read(&mut payload)?;
    Some((header[3], header[4], payload))
}

/// A plaintext h2 connection (prior knowledge): the preface and empty SETTINGS sent.
fn h2_connect(gateway: &Eragate) -> TcpStream {
    let mut stream = connect(gateway);
    stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").expect("preface");
    stream.write_all(&h2_frame(H2_SETTINGS, 0, &[])).expect("settings");
    stream
}

#[test]
fn h2_keep_alive_pings_keep_a_live_peer_and_drop_a_dead_one() {
    // Idle and first-request timers far away: only the pings can end these connections.
    let gateway = gateway(
        "[limits]\nh2_keep_alive_interval = \"1s\"\nh2_keep_alive_timeout = \"1s\"\n\
         header_read_timeout = \"1h\"\nidle_timeout = \"1h\"",
    );
    // A live peer answers every ping, on a thread of its own, and stays connected through them:
    // through every ping while the dead peer is dropped, and three after.
    let dead_gone = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut live = h2_connect(&gateway);
    let gone = dead_gone.clone();
    let live = std::thread::spawn(move || {
        let (mut before, mut after) = (0, 0);
        while after < 3 {
            let frame = h2_read(&mut live);
            let Some((kind, flags, payload)) = frame else {
                return Err(format!("a live peer was dropped after {before} + {after} pings"));
            };
            match kind {
                H2_SETTINGS if flags & H2_ACK == 0 => live.write_all(&h2_frame(H2_SETTINGS, H2_ACK, &[])).expect("ack"),
                H2_PING if flags & H2_ACK == 0 => {
                    live.write_all(&h2_frame(H2_PING, H2_ACK, &payload)).expect("pong");
                    match gone.load(std::sync::atomic::Ordering::Acquire) {
                        false => before += 1,
                        true => after += 1,
                    }
                }
                H2_GOAWAY => return Err(format!("GOAWAY to a live peer: {payload:?}")),
                _ => {}
            }
        }
        Ok(before + after)
    });
    // A dead peer (it acknowledges the settings, then never answers) is pinged, then dropped.
    let mut dead = h2_connect(&gateway);
    let mut pings = 0;
    while let Some((kind, flags, _)) = h2_read(&mut dead) {
        match kind {
            H2_SETTINGS if flags & H2_ACK == 0 => dead.write_all(&h2_frame(H2_SETTINGS, H2_ACK, &[])).expect("ack"),
            H2_PING if flags & H2_ACK == 0 => pings += 1,
            _ => {}
        }
    }
    dead_gone.store(true, std::sync::atomic::Ordering::Release);
    assert!(pings >= 1, "the dead peer was dropped without a ping");
    let answered = live.join().expect("the live peer's thread");
    assert!(answered.is_ok(), "{answered:?}\n{}", gateway.log());
}
