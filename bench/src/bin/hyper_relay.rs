//! The design's floor for issue 17: a reverse proxy built from the parts eragate is
//! built from (tokio's runtime, chosen as eragate's is, hyper's HTTP/1.1 server and client
//! connections, kept alive in a list of idle connections as eragate's upstream
//! client keeps them) that does nothing but forward.
//!
//! ```text
//! hyper-relay 127.0.0.1:PORT http://127.0.0.1:UPSTREAM_PORT
//! ```
//!
//! Every request is read whole, sent to the upstream with the same method, path,
//! query and end-to-end headers, and the upstream's answer is read whole and sent
//! back, as eragate reads and writes whole JSON-RPC messages. It parses no JSON,
//! keeps no session, spawns no task per request and records nothing: whatever
//! eragate spends above this relay is the cost of understanding MCP, and whatever
//! this relay spends above nginx is the cost of hyper and tokio (bench/NOTES.md,
//! "The floor of this design").

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// Keep-alive connections to the one upstream: idle ones are taken from the end
/// and put back there once their answer is read, as eragate's upstream client does
/// (src/upstream/transport/http_client.rs; no idle timeout: the runs are short).
#[derive(Clone)]
struct UpstreamClient {
    upstream: SocketAddr,
    idle: Arc<Mutex<Vec<SendRequest<Full<Bytes>>>>>,
}

/// Idle upstream connections kept at most.
const MAX_IDLE: usize = 512;

impl UpstreamClient {
    async fn request(&self, request: Request<Full<Bytes>>) -> Result<Response<Incoming>, String> {
        let mut request = request;
        loop {
            let taken = {
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                std::iter::from_fn(|| idle.pop()).find(SendRequest::is_ready)
            };
            let (mut sender, reused) = match taken {
                Some(sender) => (sender, true),
                None => (self.connect().await?, false),
            };
            match sender.try_send_request(request).await {
                Ok(response) => {
                    self.release(sender);
                    return Ok(response);
                }
                Err(mut error) => match error.take_message() {
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(error.into_error().to_string()),
                },
            }
        }
    }

    fn release(&self, mut sender: SendRequest<Full<Bytes>>) {
        if sender.is_ready() {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < MAX_IDLE {
                idle.push(sender);
            }
        } else if !sender.is_closed() {
            let client = self.clone();
            tokio::spawn(async move {
                if sender.ready().await.is_ok() {
                    client.release(sender);
                }
            });
        }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, String> {
        let stream = tokio::net::TcpStream::connect(self.upstream)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(connection);
        sender.ready().await.map_err(|e| format!("handshake: {e}"))?;
        Ok(sender)
    }
}

/// Headers of one hop (RFC 9110 §7.6.1), never forwarded.
const HOP_BY_HOP: [HeaderName; 6] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(listen), Some(upstream)) = (
        args.first().and_then(|a| a.parse::<SocketAddr>().ok()),
        args.get(1).and_then(|a| a.parse::<Uri>().ok()),
    ) else {
        eprintln!("usage: hyper-relay 127.0.0.1:PORT http://127.0.0.1:UPSTREAM_PORT");
        std::process::exit(2);
    };
    let address = upstream.authority().and_then(|a| a.as_str().parse::<SocketAddr>().ok());
    let Some(address) = address.filter(|_| upstream.scheme_str() == Some("http")) else {
        eprintln!("hyper-relay: the upstream must be an http:// URL with an IP address and port");
        std::process::exit(2);
    };
    // As many workers as the process may use (the benchmark pins it to the server cores),
    // and one thread for everything when that is one, as eragate's default runtime does.
    let one_cpu = std::thread::available_parallelism().map_or(true, |cpus| cpus.get() == 1);
    let mut builder = match one_cpu {
        true => tokio::runtime::Builder::new_current_thread(),
        false => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("hyper-relay: no runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(serve(listen, upstream, address)) {
        eprintln!("hyper-relay: {e}");
        std::process::exit(1);
    }
}

async fn serve(listen: SocketAddr, upstream: Uri, address: SocketAddr) -> std::io::Result<()> {
    let client = UpstreamClient {
        upstream: address,
        idle: Arc::new(Mutex::new(Vec::new())),
    };
    let listener = tokio::net::TcpListener::bind(listen).await?;
    eprintln!("hyper-relay: listening on {listen}, forwarding to {upstream}");
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors or a connection reset before accept: keep serving.
                eprintln!("hyper-relay: accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let client = client.clone();
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| relay(client.clone(), upstream.clone(), request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One request, forwarded whole; any failure toward the upstream is a 502.
async fn relay(
    client: UpstreamClient,
    upstream: Uri,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(match forward(&client, &upstream, request).await {
        Ok(response) => response,
        Err(e) => {
            let mut response = Response::new(Full::new(Bytes::from(e)));
            *response.status_mut() = StatusCode::BAD_GATEWAY;
            response
        }
    })
}

async fn forward(
    client: &UpstreamClient,
    upstream: &Uri,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, String> {
    let (mut parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| format!("client body: {e}"))?
        .to_bytes();
    // HTTP/1.1 to the upstream: the path as it came, the upstream's authority as `Host`.
    strip_hop_by_hop(&mut parts.headers);
    let host = upstream.authority().map_or("", |a| a.as_str());
    let host = http::HeaderValue::from_str(host).map_err(|e| format!("upstream host: {e}"))?;
    parts.headers.insert(header::HOST, host);
    let answer = client
        .request(Request::from_parts(parts, Full::new(body)))
        .await
        .map_err(|e| format!("upstream: {e}"))?;
    let (mut parts, body) = answer.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| format!("upstream body: {e}"))?
        .to_bytes();
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(Response::from_parts(parts, Full::new(body)))
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}
