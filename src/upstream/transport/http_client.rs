//! The HTTP/1.1 client toward upstream endpoints: keep-alive connections kept
//! per origin, checked out and put back without hashing a key or holding a
//! lock across I/O.
//!
//! An upstream's client talks to the handful of origins its configuration names,
//! so a short list of idle senders per origin, found by comparing bytes, does the
//! job of hyper-util's pooled client without its hashed keys and waiter queue
//! (bench/NOTES.md, "Instructions per proxied call").
//!
//! What it keeps of that client's behaviour: connections through the same
//! connector (TCP with `TCP_NODELAY` and a connect timeout, `https://` checked as
//! `[upstreams.tls]` says); at most `max_idle` idle connections per origin, none
//! idle for longer than [`IDLE_TIMEOUT`]; a connection is reused only once its
//! previous answer has been read; and a request that a reused connection could
//! not send (the upstream closed it while idle) is sent once more on another, as
//! nothing of it reached the upstream. Expired connections are closed when a
//! request meets them (taking or putting back one to that origin), not by a
//! timer: an upstream left without traffic keeps up to `max_idle` connections
//! open until it closes them itself or traffic resumes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::HOST;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tower_service::Service;

/// How long a connection may wait idle before it is closed rather than reused.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The connector every connection of a client is made with.
pub(crate) type Connector = HttpsConnector<HttpConnector>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request got no answer. Its `source` chain names the cause
/// (refused, a certificate not trusted, the connection reset...).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The URL names no host to connect to.
    #[error("the upstream URL {0} has no host")]
    NoHost(Uri),
    /// No connection could be made.
    #[error("connecting to the upstream")]
    Connect(#[source] BoxError),
    /// The connection failed during the exchange (or its HTTP/1.1 handshake).
    #[error("HTTP exchange with the upstream")]
    Exchange(#[source] hyper::Error),
}

/// A client of one upstream: cheap to clone, every clone shares its connections.
#[derive(Clone)]
pub(crate) struct HttpClient {
    shared: Arc<Shared>,
}

struct Shared {
    connector: Connector,
    /// Idle connections kept per origin, at most.
    max_idle: usize,
    /// The idle connections of each origin this client has reached.
    origins: Mutex<Vec<OriginIdle>>,
}

/// An origin's idle connections, oldest first: a request takes the most
/// recently used (the least likely to have been closed), expiry the oldest.
struct OriginIdle {
    origin: Origin,
    idle: VecDeque<Idle>,
}

struct Idle {
    sender: SendRequest<Full<Bytes>>,
    since: Instant,
}

/// Where a request goes: scheme and authority.
#[derive(Clone)]
struct Origin {
    https: bool,
    authority: Authority,
}

impl PartialEq for Origin {
    /// As bytes (`Authority`'s own comparison folds case): the URLs come from one
    /// configuration, so one origin is always spelled the same way.
    fn eq(&self, other: &Origin) -> bool {
        self.https == other.https && self.authority.as_str() == other.authority.as_str()
    }
}

/// The `Host` header of requests to `url`'s origin (`None` when it names no
/// host): for a caller that sends many, made once; [`HttpClient::request`] makes
/// it for a request that comes without.
pub(crate) fn host_header(url: &Uri) -> Option<HeaderValue> {
    Origin::of(url)?.host()
}

impl Origin {
    /// The origin of an absolute URL (`None` when it names no host).
    fn of(url: &Uri) -> Option<Origin> {
        Some(Origin {
            https: url.scheme() == Some(&Scheme::HTTPS),
            authority: url.authority()?.clone(),
        })
    }

    /// The `Host` header for it: the host, and the port unless it is the
    /// scheme's own (no user information, which an authority may carry).
    fn host(&self) -> Option<HeaderValue> {
        let authority = &self.authority;
        let default_port = if self.https { 443 } else { 80 };
        let port = authority.port_u16().filter(|port| *port != default_port);
        if !authority.as_str().contains('@') && (port.is_some() || authority.port().is_none()) {
            return HeaderValue::from_str(authority.as_str()).ok();
        }
        let host = match port {
            Some(port) => format!("{}:{port}", authority.host()),
            None => authority.host().to_owned(),
        };
        HeaderValue::from_str(&host).ok()
    }
}

impl HttpClient {
    /// A client making its connections with `connector`, keeping at most
    /// `max_idle` of them idle per origin.
    pub(crate) fn new(connector: Connector, max_idle: usize) -> HttpClient {
        HttpClient {
            shared: Arc::new(Shared {
                connector,
                max_idle,
                origins: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Sends `request` (its URI absolute, as configured) on an idle connection
    /// to its origin, or a new one, and returns the answer's head; its body is
    /// read from the connection as it is polled.
    pub(crate) async fn request(&self, mut request: Request<Full<Bytes>>) -> Result<Response<Incoming>, ClientError> {
        let target = request.uri().clone();
        let Some(origin) = Origin::of(&target) else {
            return Err(ClientError::NoHost(target));
        };
        // HTTP/1.1 sends the path alone, and the origin in `Host` (RFC 9112 §3.2).
        if !request.headers().contains_key(HOST) {
            let host = origin.host().ok_or_else(|| ClientError::NoHost(target.clone()))?;
            request.headers_mut().insert(HOST, host);
        }
        *request.uri_mut() = Uri::from(
            target
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/")),
        );
        loop {
            let (mut sender, reused) = match self.checkout(&origin) {
                Some(sender) => (sender, true),
                // Boxed: connecting (TCP, TLS, the handshake) is once per connection,
                // and would otherwise size every request's state.
                None => (Box::pin(self.connect(&target)).await?, false),
            };
            match sender.try_send_request(request).await {
                Ok(response) => {
                    self.release(origin, sender);
                    return Ok(response);
                }
                Err(mut error) => match error.take_message() {
                    // Nothing of it was written: the upstream closed the idle
                    // connection as it was taken. Once more, on another.
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(ClientError::Exchange(error.into_error())),
                },
            }
        }
    }

    /// An idle connection to `origin` that can take a request now; the closed
    /// and expired ones met on the way are dropped (which closes them).
    fn checkout(&self, origin: &Origin) -> Option<SendRequest<Full<Bytes>>> {
        let mut origins = self.shared.origins.lock().unwrap_or_else(|e| e.into_inner());
        let idle = &mut origins.iter_mut().find(|o| o.origin == *origin)?.idle;
        while let Some(candidate) = idle.pop_back() {
            if candidate.sender.is_ready() && candidate.since.elapsed() < IDLE_TIMEOUT {
                return Some(candidate.sender);
            }
        }
        None
    }

    /// Keeps `sender` for the next request to `origin` once its answer has been
    /// read: now when it has been (a short JSON answer arrives whole), else from a
    /// task that waits for it (an SSE stream, a long body).
    fn release(&self, origin: Origin, mut sender: SendRequest<Full<Bytes>>) {
        if sender.is_ready() {
            self.shared.keep(origin, sender);
        } else if !sender.is_closed() {
            let shared = self.shared.clone();
            tokio::spawn(async move {
                if sender.ready().await.is_ok() {
                    shared.keep(origin, sender);
                }
            });
        }
    }

    /// A new connection to the origin of `target`, ready for a request.
    async fn connect(&self, target: &Uri) -> Result<SendRequest<Full<Bytes>>, ClientError> {
        let mut connector = self.shared.connector.clone();
        std::future::poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(ClientError::Connect)?;
        let io = connector.call(target.clone()).await.map_err(ClientError::Connect)?;
        let (mut sender, connection) = http1::handshake(io).await.map_err(ClientError::Exchange)?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "upstream connection ended");
            }
        });
        sender.ready().await.map_err(ClientError::Exchange)?;
        Ok(sender)
    }
}

impl Shared {
    /// Adds an idle connection to `origin`'s, first dropping the oldest ones while
    /// they are expired or closed, or drops it when `max_idle` are idle already.
    fn keep(&self, origin: Origin, sender: SendRequest<Full<Bytes>>) {
        let mut origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
        let at = match origins.iter().position(|o| o.origin == origin) {
            Some(at) => at,
            None => {
                origins.push(OriginIdle {
                    origin,
                    idle: VecDeque::new(),
                });
                origins.len() - 1
            }
        };
        let Some(OriginIdle { idle, .. }) = origins.get_mut(at) else {
            return;
        };
        let now = Instant::now();
        while idle
            .front()
            .is_some_and(|oldest| oldest.sender.is_closed() || now.duration_since(oldest.since) >= IDLE_TIMEOUT)
        {
            idle.pop_front();
        }
        if idle.len() < self.max_idle {
            idle.push_back(Idle { sender, since: now });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_header_names_the_origin_as_http_does() {
        let cases = [
            ("http://127.0.0.1:8000/mcp", "127.0.0.1:8000"),
            ("http://example.com/mcp", "example.com"),
            ("http://example.com:80/mcp", "example.com"),
            ("https://example.com:443/mcp", "example.com"),
            ("https://example.com:8443/mcp", "example.com:8443"),
            ("http://example.com:443/mcp", "example.com:443"),
            ("http://user:secret@example.com:8000/mcp", "example.com:8000"),
            ("http://user@example.com/mcp", "example.com"),
            ("http://[::1]:9000/mcp", "[::1]:9000"),
        ];
        for (url, expected) in cases {
            let uri: Uri = url.parse().expect(url);
            assert_eq!(host_header(&uri), Some(HeaderValue::from_static(expected)), "{url}");
        }
    }
}
