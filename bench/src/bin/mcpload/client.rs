//! One MCP client connection over HTTP/1.1 keep-alive, speaking either era.

use std::fmt::Write as _;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

/// How a client talks to the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Handshake once per connection, then every request on that session.
    Legacy,
    /// 2026-07-28: every request self-contained (headers + `_meta` envelope).
    Modern,
    /// Per request: `initialize`, `notifications/initialized`, the call, DELETE.
    Handshake,
    /// 2026-07-28 `tools/list` (the first page) instead of a call, every request
    /// self-contained: with eragate's list cache on, the cache's hit path.
    List,
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Pattern, String> {
        match text {
            "legacy" => Ok(Pattern::Legacy),
            "modern" => Ok(Pattern::Modern),
            "handshake" => Ok(Pattern::Handshake),
            "list" => Ok(Pattern::List),
            other => Err(format!("unknown pattern {other:?} (legacy, modern, handshake, list)")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::Legacy => "legacy",
            Pattern::Modern => "modern",
            Pattern::Handshake => "handshake",
            Pattern::List => "list",
        }
    }
}

pub const LEGACY_VERSION: &str = "2025-11-25";
pub const MODERN_VERSION: &str = "2026-07-28";
const ACCEPT: &str = "application/json, text/event-stream";
/// The echoed text: small, and recognisable in the answer.
pub const ECHO_TEXT: &str = "mcpload says hello";

/// Where to send: `host:port` and the MCP path, and the `Authorization` every request carries.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub authority: String,
    pub path: String,
    pub authorization: Option<String>,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("bad URL {url:?}: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!("only http:// URLs: {url}"));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("URL without host: {url}"))?
            .to_string();
        let path = uri.path_and_query().map_or("/".to_owned(), |p| p.as_str().to_owned());
        Ok(Endpoint {
            authority,
            path,
            authorization: None,
        })
    }

    /// The endpoint with every request carrying `Authorization: Bearer` the token in `file`.
    pub fn with_token_file(mut self, file: Option<&str>) -> Result<Endpoint, String> {
        if let Some(file) = file {
            let token = std::fs::read_to_string(file).map_err(|e| format!("token file {file}: {e}"))?;
            self.authorization = Some(format!("Bearer {}", token.trim()));
        }
        Ok(self)
    }
}

/// One keep-alive connection.
pub struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    endpoint: std::rc::Rc<Endpoint>,
    next_id: u64,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Conn {
    pub async fn open(endpoint: std::rc::Rc<Endpoint>) -> Result<Conn, String> {
        let stream = tokio::net::TcpStream::connect(endpoint.authority.as_str())
            .await
            .map_err(|e| format!("connect {}: {e}", endpoint.authority))?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::task::spawn_local(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            sender,
            endpoint,
            next_id: 1,
        })
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub async fn send(&mut self, method: Method, headers: &[(&str, &str)], body: Bytes) -> Result<Reply, String> {
        let (status, headers, body) = self.open_stream(method, headers, body).await?;
        let body = body.collect().await.map_err(|e| format!("body: {e}"))?.to_bytes();
        Ok(Reply { status, headers, body })
    }

    /// Sends a request and returns the answer's head and its body unread (an SSE
    /// stream stays open while the body is held).
    pub async fn open_stream(
        &mut self,
        method: Method,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<(StatusCode, HeaderMap, Incoming), String> {
        let mut builder = http::Request::builder()
            .method(method)
            .uri(self.endpoint.path.as_str())
            .header(http::header::HOST, self.endpoint.authority.as_str())
            .header(http::header::ACCEPT, ACCEPT);
        if !body.is_empty() {
            builder = builder.header(http::header::CONTENT_TYPE, "application/json");
        }
        if let Some(authorization) = &self.endpoint.authorization {
            builder = builder.header(http::header::AUTHORIZATION, authorization.as_str());
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder.body(Full::new(body)).map_err(|e| e.to_string())?;
        self.sender.ready().await.map_err(|e| format!("connection: {e}"))?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let (parts, body) = response.into_parts();
        Ok((parts.status, parts.headers, body))
    }

    /// `ping` on a legacy session: whether the session is alive (200 with a
    /// result; an ended or evicted session gets 404).
    pub async fn ping(&mut self, session: &str) -> Result<bool, String> {
        let id = self.id();
        let headers = [("mcp-session-id", session), ("mcp-protocol-version", LEGACY_VERSION)];
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        let reply = self.send(Method::POST, &headers, Bytes::from(body)).await?;
        match reply.status {
            StatusCode::OK if contains(&reply.body, b"\"result\"") => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            status => Err(format!("ping: HTTP {status} {}", excerpt(&reply.body))),
        }
    }

    /// Opens a legacy session's GET stream (server-to-client messages); the
    /// body stays open while it is held.
    pub async fn get_stream(&mut self, session: &str) -> Result<Incoming, String> {
        let headers = [("mcp-session-id", session), ("mcp-protocol-version", LEGACY_VERSION)];
        let (status, headers, body) = self.open_stream(Method::GET, &headers, Bytes::new()).await?;
        expect_event_stream("GET", status, &headers)?;
        Ok(body)
    }

    /// A 2026-07-28 `subscriptions/listen` for tool list changes; the body (an
    /// SSE stream whose first event is the acknowledgement) stays open while held.
    pub async fn listen(&mut self) -> Result<Incoming, String> {
        let id = self.id();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN_VERSION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"mcpload","version":"0"}}}}}}}}"#
        );
        let headers = [
            ("mcp-protocol-version", MODERN_VERSION),
            ("mcp-method", "subscriptions/listen"),
        ];
        let (status, headers, body) = self.open_stream(Method::POST, &headers, Bytes::from(body)).await?;
        expect_event_stream("subscriptions/listen", status, &headers)?;
        Ok(body)
    }

    /// A 2026-07-28 `tools/list` (the first page); checks that it lists the echo tool.
    pub async fn list_tools(&mut self) -> Result<(), String> {
        let id = self.id();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN_VERSION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"mcpload","version":"0"}}}}}}}}"#
        );
        let headers = [("mcp-protocol-version", MODERN_VERSION), ("mcp-method", "tools/list")];
        let reply = self.send(Method::POST, &headers, Bytes::from(body)).await?;
        if reply.status != StatusCode::OK || !contains(&reply.body, b"\"tools\"") || !contains(&reply.body, b"\"echo\"")
        {
            return Err(format!("tools/list: HTTP {} {}", reply.status, excerpt(&reply.body)));
        }
        Ok(())
    }

    /// `initialize` + `notifications/initialized`; returns the session id.
    pub async fn handshake(&mut self) -> Result<String, String> {
        let id = self.id();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"{LEGACY_VERSION}","capabilities":{{}},"clientInfo":{{"name":"mcpload","version":"0"}}}}}}"#
        );
        let reply = self.send(Method::POST, &[], Bytes::from(body)).await?;
        if reply.status != StatusCode::OK {
            return Err(format!("initialize: HTTP {} {}", reply.status, excerpt(&reply.body)));
        }
        let session = reply
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| "initialize: no Mcp-Session-Id".to_owned())?
            .to_owned();
        if !contains(&reply.body, b"\"result\"") {
            return Err(format!("initialize: {}", excerpt(&reply.body)));
        }
        let headers = [
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", LEGACY_VERSION),
        ];
        let body = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let reply = self.send(Method::POST, &headers, body).await?;
        if !reply.status.is_success() {
            return Err(format!("notifications/initialized: HTTP {}", reply.status));
        }
        Ok(session)
    }

    /// Ends a legacy session.
    pub async fn delete(&mut self, session: &str) -> Result<(), String> {
        let headers = [("mcp-session-id", session), ("mcp-protocol-version", LEGACY_VERSION)];
        let reply = self.send(Method::DELETE, &headers, Bytes::new()).await?;
        if reply.status.is_success() {
            Ok(())
        } else {
            Err(format!("DELETE: HTTP {}", reply.status))
        }
    }

    /// One `tools/call`: on a legacy session when `session` is given, else as a
    /// 2026-07-28 request. `sse` asks for progress, which makes the answer a stream.
    pub async fn call(&mut self, session: Option<&str>, tool: &str, arguments: &str, sse: bool) -> Result<(), String> {
        let id = self.id();
        let mut body = String::with_capacity(320);
        let _ = write!(
            body,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}"#
        );
        match (session, sse) {
            (Some(_), false) => {}
            (Some(_), true) => {
                let _ = write!(body, r#","_meta":{{"progressToken":{id}}}"#);
            }
            (None, sse) => {
                let _ = write!(
                    body,
                    r#","_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN_VERSION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"mcpload","version":"0"}}"#
                );
                if sse {
                    let _ = write!(body, r#","progressToken":{id}"#);
                }
                body.push('}');
            }
        }
        body.push_str("}}");
        let reply = match session {
            Some(session) => {
                let headers = [("mcp-session-id", session), ("mcp-protocol-version", LEGACY_VERSION)];
                self.send(Method::POST, &headers, Bytes::from(body)).await?
            }
            None => {
                let headers = [
                    ("mcp-protocol-version", MODERN_VERSION),
                    ("mcp-method", "tools/call"),
                    ("mcp-name", tool),
                ];
                self.send(Method::POST, &headers, Bytes::from(body)).await?
            }
        };
        check_call(&reply, sse)
    }
}

fn expect_event_stream(what: &str, status: StatusCode, headers: &HeaderMap) -> Result<(), String> {
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if status == StatusCode::OK && content_type.starts_with("text/event-stream") {
        Ok(())
    } else {
        Err(format!("{what}: HTTP {status}, Content-Type {content_type:?}"))
    }
}

fn check_call(reply: &Reply, sse: bool) -> Result<(), String> {
    if reply.status != StatusCode::OK {
        return Err(format!("tools/call: HTTP {} {}", reply.status, excerpt(&reply.body)));
    }
    let content_type = reply
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // A server may always answer with a stream (supergateway does); asked for
    // progress, it must.
    let ok = content_type.starts_with("text/event-stream") || (!sse && content_type.starts_with("application/json"));
    if !ok {
        return Err(format!(
            "tools/call: Content-Type {content_type:?} (sse wanted: {sse}): {}",
            excerpt(&reply.body)
        ));
    }
    if sse && !contains(&reply.body, b"notifications/progress") {
        return Err(format!("tools/call: SSE without progress: {}", excerpt(&reply.body)));
    }
    if !contains(&reply.body, b"\"result\"") || !contains(&reply.body, ECHO_TEXT.as_bytes()) {
        return Err(format!("tools/call: unexpected answer: {}", excerpt(&reply.body)));
    }
    Ok(())
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

pub fn excerpt(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()
}

/// The echo tool's arguments when the text goes in `name` (`text` for the fast
/// upstream, `message` for server-everything).
pub fn echo_arguments_named(name: &str) -> String {
    format!(r#"{{"{name}":"{ECHO_TEXT}"}}"#)
}

pub fn sleep_arguments(ms: u64) -> String {
    format!(r#"{{"ms":{ms},"text":"{ECHO_TEXT}"}}"#)
}
