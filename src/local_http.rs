//! One plain-HTTP request from eragate's command line to a listener of its own
//! (`eragate health`, `eragate pins`): connect, send, read a bounded answer. The
//! callers check their URL and say what its status means.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;

/// Most bytes of an answer read.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Sends `method` to `target` (a path and query) at `authority`, with `Authorization:
/// Bearer token` when given: the status and the body, or why there is none.
pub(crate) async fn request(
    method: http::Method,
    authority: &http::uri::Authority,
    target: &str,
    token: Option<&str>,
    user_agent: &'static str,
) -> Result<(http::StatusCode, Bytes), String> {
    let port = authority.port_u16().unwrap_or(80);
    let host = authority.host().trim_start_matches('[').trim_end_matches(']');
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake with {authority}: {e}"))?;
    tokio::spawn(connection);
    let mut builder = http::Request::builder()
        .method(method)
        .uri(target)
        .header(http::header::HOST, authority.as_str())
        .header(http::header::USER_AGENT, user_agent);
    if let Some(token) = token {
        builder = builder.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = builder
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("cannot build the request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("request to {authority} failed: {e}"))?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| format!("reading the answer from {authority}: {e}"))?
        .to_bytes();
    Ok((status, body))
}
