//! A minimal, fast, legacy-only MCP server for eragate's benchmarks, so that the
//! upstream is never the bottleneck.
//!
//! ```text
//! fast-upstream --stdio                 newline-delimited JSON-RPC on stdin/stdout
//! fast-upstream --http 127.0.0.1:PORT   Streamable HTTP at /mcp
//! ```
//!
//! It speaks only the handshake era (2024-11-05 … 2025-11-25): `initialize`,
//! `ping`, `tools/list` (two tools) and `tools/call`:
//!
//! - `echo {text}` answers the text at once;
//! - `sleep {ms, text}` answers it after `ms` milliseconds (memory in flight).
//!
//! A `tools/call` carrying `_meta.progressToken` gets one `notifications/progress`
//! before its result: over HTTP the answer is then an SSE stream, which is how
//! the benchmark obtains SSE responses, directly and through a gateway.
//!
//! Over HTTP, `initialize` mints an `Mcp-Session-Id`; every other POST must carry a
//! live one (400 without, 404 unknown), a 2026-07-28 `MCP-Protocol-Version`
//! header is refused with 400, DELETE ends the session and GET is 405.

use std::collections::HashSet;
use std::convert::Infallible;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

const LEGACY: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const LATEST: &str = "2025-11-25";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--stdio") => stdio(),
        Some("--http") => {
            let Some(addr) = args.get(1).and_then(|a| a.parse::<SocketAddr>().ok()) else {
                usage();
            };
            http_server(addr);
        }
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!("usage: fast-upstream --stdio | --http 127.0.0.1:PORT");
    std::process::exit(2);
}

/// What one inbound message asks for.
enum Answer {
    /// A notification or a client's response: nothing to send back.
    Nothing,
    /// A response now.
    Now(Value),
    /// `initialize`: the result, and the revision agreed.
    Initialized(Value),
    /// A response after a delay (`sleep`), optionally preceded by progress.
    Later {
        delay: Duration,
        response: Value,
        progress: Option<Value>,
    },
}

fn answer(message: &Value) -> Answer {
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return Answer::Nothing;
    };
    let Some(id) = message.get("id") else {
        return Answer::Nothing;
    };
    let params = message.get("params");
    let result = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    match method {
        "initialize" => {
            let requested = params
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str)
                .unwrap_or(LATEST);
            let version = if LEGACY.contains(&requested) { requested } else { LATEST };
            Answer::Initialized(result(json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "fast-upstream", "version": env!("CARGO_PKG_VERSION")},
            })))
        }
        "ping" => Answer::Now(result(json!({}))),
        "tools/list" => Answer::Now(result(tools())),
        "tools/call" => {
            let name = params.and_then(|p| p.get("name")).and_then(Value::as_str).unwrap_or("");
            let arguments = params.and_then(|p| p.get("arguments"));
            let text = arguments
                .and_then(|a| a.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let content = result(json!({"content": [{"type": "text", "text": text}], "isError": false}));
            let progress = params
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get("progressToken"))
                .map(|token| json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 1}}));
            let delay = match name {
                "echo" => Duration::ZERO,
                "sleep" => {
                    Duration::from_millis(arguments.and_then(|a| a.get("ms")).and_then(Value::as_u64).unwrap_or(0))
                }
                _ => {
                    return Answer::Now(
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": format!("Unknown tool: {name}")}}),
                    );
                }
            };
            if delay.is_zero() && progress.is_none() {
                Answer::Now(content)
            } else {
                Answer::Later {
                    delay,
                    response: content,
                    progress,
                }
            }
        }
        other => Answer::Now(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Method not found: {other}")}}),
        ),
    }
}

fn tools() -> Value {
    json!({"tools": [
        {"name": "echo", "description": "Answers its text.",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "sleep", "description": "Answers its text after ms milliseconds.",
         "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer"}, "text": {"type": "string"}}}},
    ]})
}

// ---------------------------------------------------------------- stdio

fn stdio() {
    let out = Arc::new(Mutex::new(std::io::BufWriter::new(std::io::stdout())));
    let write = |out: &Mutex<std::io::BufWriter<std::io::Stdout>>, messages: &[&Value]| {
        let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
        for message in messages {
            let _ = serde_json::to_writer(&mut *out, message);
            let _ = out.write_all(b"\n");
        }
        let _ = out.flush();
    };
    let stdin = std::io::stdin();
    let mut line = String::new();
    let mut input = stdin.lock();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(message) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        match answer(&message) {
            Answer::Nothing => {}
            Answer::Now(response) | Answer::Initialized(response) => write(&out, &[&response]),
            Answer::Later {
                delay,
                response,
                progress,
            } if delay.is_zero() => {
                let mut messages: Vec<&Value> = progress.iter().collect();
                messages.push(&response);
                write(&out, &messages);
            }
            Answer::Later {
                delay,
                response,
                progress,
            } => {
                let out = out.clone();
                std::thread::spawn(move || {
                    if let Some(progress) = &progress {
                        write(&out, &[progress]);
                    }
                    std::thread::sleep(delay);
                    write(&out, &[&response]);
                });
            }
        }
    }
}

// ---------------------------------------------------------------- Streamable HTTP

struct State {
    next_session: AtomicU64,
    sessions: Mutex<HashSet<u64>>,
}

fn http_server(addr: SocketAddr) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap_or_else(|e| {
            eprintln!("fast-upstream: cannot listen on {addr}: {e}");
            std::process::exit(1);
        });
        eprintln!("fast-upstream: serving MCP at http://{addr}/mcp");
        let state = Rc::new(State {
            next_session: AtomicU64::new(1),
            sessions: Mutex::new(HashSet::new()),
        });
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let state = state.clone();
                    tokio::task::spawn_local(async move {
                        let service = service_fn(move |request| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(handle(&state, request).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .keep_alive(true)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            })
            .await;
    });
}

type Response = http::Response<Full<Bytes>>;

fn reply(status: StatusCode, content_type: Option<&'static str>, body: impl Into<Bytes>) -> Response {
    let mut response = http::Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    response
}

fn json_reply(value: &Value) -> Response {
    reply(
        StatusCode::OK,
        Some("application/json"),
        serde_json::to_vec(value).unwrap_or_default(),
    )
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}});
    reply(
        status,
        Some("application/json"),
        serde_json::to_vec(&body).unwrap_or_default(),
    )
}

fn session_of(request: &http::Request<Incoming>) -> Option<u64> {
    let value = request.headers().get("mcp-session-id")?.to_str().ok()?;
    u64::from_str_radix(value, 16).ok()
}

async fn handle(state: &State, request: http::Request<Incoming>) -> Response {
    if request.uri().path() != "/mcp" {
        return reply(StatusCode::NOT_FOUND, None, "not found");
    }
    let session = session_of(&request);
    let live =
        |id: Option<u64>| id.is_some_and(|id| state.sessions.lock().unwrap_or_else(|e| e.into_inner()).contains(&id));
    match *request.method() {
        Method::POST => {}
        Method::DELETE => {
            let removed =
                session.is_some_and(|id| state.sessions.lock().unwrap_or_else(|e| e.into_inner()).remove(&id));
            return if removed {
                reply(StatusCode::OK, None, "")
            } else {
                reply(StatusCode::NOT_FOUND, None, "")
            };
        }
        _ => return reply(StatusCode::METHOD_NOT_ALLOWED, None, ""),
    }
    let modern = request
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| !LEGACY.contains(&v));
    if modern {
        return error(
            StatusCode::BAD_REQUEST,
            "Bad Request: unsupported protocol version (legacy-only server)",
        );
    }
    let Ok(body) = request.into_body().collect().await.map(|b| b.to_bytes()) else {
        return error(StatusCode::BAD_REQUEST, "unreadable body");
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Parse error");
    };
    let answer = answer(&message);
    if !matches!(answer, Answer::Initialized(_)) {
        match session {
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: Mcp-Session-Id header is required",
                );
            }
            Some(_) if !live(session) => return error(StatusCode::NOT_FOUND, "Session not found"),
            Some(_) => {}
        }
    }
    match answer {
        Answer::Nothing => reply(StatusCode::ACCEPTED, None, ""),
        Answer::Now(response) => json_reply(&response),
        Answer::Initialized(response) => {
            let id = state.next_session.fetch_add(1, Ordering::Relaxed);
            state.sessions.lock().unwrap_or_else(|e| e.into_inner()).insert(id);
            let mut reply = json_reply(&response);
            if let Ok(value) = HeaderValue::from_str(&format!("{id:x}")) {
                reply.headers_mut().insert("mcp-session-id", value);
            }
            reply
        }
        Answer::Later {
            delay,
            response,
            progress,
        } => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            match progress {
                None => json_reply(&response),
                Some(progress) => {
                    let mut body = Vec::with_capacity(256);
                    for message in [&progress, &response] {
                        body.extend_from_slice(b"event: message\ndata: ");
                        let _ = serde_json::to_writer(&mut body, message);
                        body.extend_from_slice(b"\n\n");
                    }
                    let mut reply = reply(StatusCode::OK, Some("text/event-stream"), body);
                    reply
                        .headers_mut()
                        .insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                    reply
                }
            }
        }
    }
}
