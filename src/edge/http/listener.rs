//! Accepting client connections: the global and per-IP connection caps (a
//! connection past the per-IP cap is answered 503 and closed; a connection from a
//! `listen.trusted_proxies` peer is not capped per IP: it carries many clients,
//! and no header has been read when it is accepted), hyper's
//! builder with a timer (HTTP/2 keep-alive pings), the idle watchdog that
//! frees the slot of a connection with nothing in flight, and graceful shutdown.
//! The admin listener ([`crate::admin`]) is guarded by the same pieces: a
//! [`Gate`] of its own, [`builder`], [`Activity`] and [`watched`].
//!
//! A connection is idle when no request is in flight: an open SSE stream is a
//! request whose body has not ended, so a live stream is never idle. The
//! watchdog also keeps `limits.header_read_timeout`: a connection gets only
//! that long before its first request (a socket that sends nothing, half an
//! HTTP/2 preface or half a head), and an HTTP/1.1 connection only that long
//! between one request's end and the next one's complete head. hyper's own
//! header timer, which would allow the same time, is off: it would arm a runtime
//! timer on every request, where the watchdog's one timer fires at most once per
//! timeout.
//!
//! An accept that fails for want of descriptors or memory (`EMFILE`, `ENFILE`,
//! `ENOBUFS`, `ENOMEM`) leaves the connection in the kernel's queue, so the
//! listener stays ready and an immediate retry fails again: the loop pauses
//! instead, 5 ms after the first failure, doubling up to 1 s, until an accept
//! succeeds. Attempts and failures are counted per listener ([`accept_counts`]).

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use dashmap::DashMap;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::HttpFrontend;
use crate::config::LimitsConfig;
use crate::edge::respond::Body;
use crate::protocol::errors::Rejection;

/// Accepts connections until `shutdown` resolves, then lets in-flight
/// requests finish for up to `drain` before returning.
pub(super) async fn serve(
    frontend: Arc<HttpFrontend>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let graceful = GracefulShutdown::new();
    let gate = Gate::new(Listening::Mcp, frontend.gateway.edge().listen().max_connections);
    // Built again when a reload changes `[limits]`: each connection is served under the
    // limits current when it was accepted.
    let mut limits = frontend.gateway.edge().applied().limits.clone();
    let mut builder = builder(&limits);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = gate.accept(&listener) => accepted,
            () = &mut shutdown => break,
        };
        {
            let applied = frontend.gateway.edge().applied();
            if applied.limits != limits {
                limits = applied.limits.clone();
                builder = self::builder(&limits);
            }
        }
        let refusal = Refusal {
            limit: limits.max_connections_per_ip,
            tls: frontend.tls.clone(),
            within: limits.header_read_timeout.0,
        };
        // A trusted proxy carries many clients on its connections: its clients are
        // counted by address where a request names them, never its connections.
        let trusts = |peer: IpAddr| frontend.gateway.edge().listen().trusted_proxies.trusts(peer);
        let Some((stream, peer, held)) = gate.admit(accepted, refusal, trusts) else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            frontend: frontend.clone(),
            builder: builder.clone(),
            watcher: graceful.watcher(),
            peer,
            header_read: limits.header_read_timeout.0,
            idle: limits.idle_timeout.0,
        };
        let tls = frontend.tls.clone();
        tokio::spawn(async move {
            match tls {
                None => connection.serve(TokioIo::new(stream)).await,
                Some(acceptor) => match tokio::time::timeout(connection.header_read, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => connection.serve(TokioIo::new(stream)).await,
                    Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                },
            }
            drop(held);
        });
    }
    drop(listener);
    // Standing streams (GET streams, listens, HTTP+SSE connections) end now;
    // requests in flight get until the deadline.
    frontend.gateway.edge().closing().cancel();
    if tokio::time::timeout(drain, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still in flight at the shutdown deadline");
    }
    frontend.sse_connections.close_all();
}

// === impl Gate ===

/// The listeners whose accepts are counted apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listening {
    /// The MCP listener (`[listen]`).
    Mcp,
    /// The operators' listener (`[admin]`).
    Admin,
}

/// Accept attempts and failures since start, per listener (index: [`Listening`]).
static ATTEMPTS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static FAILURES: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// How many accepts `listening` attempted since start, and how many of them failed.
pub(crate) fn accept_counts(listening: Listening) -> (u64, u64) {
    let i = listening as usize;
    (ATTEMPTS[i].load(Ordering::Relaxed), FAILURES[i].load(Ordering::Relaxed))
}

/// The first pause after a failed accept, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);
/// Failures of other kinds (a connection aborted before it was accepted: each
/// takes one from the queue) retried at once before the loop pauses for them too.
const RETRIED_AT_ONCE: u32 = 16;

/// What admits connections to one listener: a permit of its global cap, taken
/// before the accept (past the cap a client waits in the kernel's backlog,
/// holding no descriptor of eragate's), and a place within the per-IP cap.
pub(crate) struct Gate {
    listening: Listening,
    connections: Arc<Semaphore>,
    per_ip: PerIp,
}

/// A connection accepted and holding a permit of the global cap.
pub(crate) struct Accepted {
    stream: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
}

/// What a connection holds of its listener's caps until it is dropped.
pub(crate) struct Held {
    _permit: OwnedSemaphorePermit,
    /// Its place in its address's count; none for a peer not capped per address.
    _slot: Option<IpSlot>,
}

/// How a connection past the per-IP cap is answered.
pub(crate) struct Refusal {
    /// The per-IP cap.
    pub(crate) limit: usize,
    /// TLS on the listener, so the refusal is readable.
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// How long the refusal may take.
    pub(crate) within: Duration,
}

impl Gate {
    /// The gate of `listening`, admitting at most `max_connections` at once.
    pub(crate) fn new(listening: Listening, max_connections: usize) -> Gate {
        Gate {
            listening,
            connections: Arc::new(Semaphore::new(max_connections)),
            per_ip: PerIp::default(),
        }
    }

    /// The next connection, once the global cap has room. A failed accept is
    /// retried after a pause (see the module's doc), never in a tight loop.
    pub(crate) async fn accept(&self, listener: &TcpListener) -> Accepted {
        let permit = match self.connections.clone().acquire_owned().await {
            Ok(permit) => permit,
            // The semaphore is never closed.
            Err(_) => return std::future::pending().await,
        };
        let i = self.listening as usize;
        let mut failures = Failures::default();
        loop {
            ATTEMPTS[i].fetch_add(1, Ordering::Relaxed);
            match listener.accept().await {
                Ok((stream, peer)) => {
                    if failures.count > 0 {
                        tracing::info!(listener = ?self.listening, failures = failures.count, "accepting connections again");
                    }
                    return Accepted { stream, peer, permit };
                }
                Err(error) => {
                    FAILURES[i].fetch_add(1, Ordering::Relaxed);
                    if let Some(pause) = failures.next(&error) {
                        if failures.count == 1 || pause == LONGEST_PAUSE && failures.logged_longest() {
                            tracing::warn!(listener = ?self.listening, %error, pause_ms = pause.as_millis() as u64, "accept failed; pausing before the next");
                        } else {
                            tracing::debug!(listener = ?self.listening, %error, pause_ms = pause.as_millis() as u64, "accept failed");
                        }
                        tokio::time::sleep(pause).await;
                    } else {
                        tracing::debug!(listener = ?self.listening, %error, "accept failed; retried at once");
                    }
                }
            }
        }
    }

    /// `accepted` with its place within the per-IP cap (none for a peer
    /// `uncapped` names); past it the connection is answered as `refusal` says
    /// (in a task of its own, holding its global permit: refusals are bounded
    /// like connections) and `None` returned.
    pub(crate) fn admit(
        &self,
        accepted: Accepted,
        refusal: Refusal,
        uncapped: impl Fn(IpAddr) -> bool,
    ) -> Option<(TcpStream, SocketAddr, Held)> {
        let Accepted { stream, peer, permit } = accepted;
        if uncapped(peer.ip()) {
            let held = Held {
                _permit: permit,
                _slot: None,
            };
            return Some((stream, peer, held));
        }
        let Some(slot) = self.per_ip.admit(peer.ip(), refusal.limit) else {
            tracing::debug!(%peer, listener = ?self.listening, "per-IP connection limit reached; answered 503 and closed");
            let Refusal { limit, tls, within } = refusal;
            tokio::spawn(async move {
                let refused = refuse(stream, tls, limit, within);
                if tokio::time::timeout(within, refused).await.is_err() {
                    tracing::debug!(%peer, "refused connection timed out before its answer");
                }
                drop(permit);
            });
            return None;
        };
        let held = Held {
            _permit: permit,
            _slot: Some(slot),
        };
        Some((stream, peer, held))
    }
}

/// The failed accepts of one streak, and the pause they call for.
#[derive(Default)]
struct Failures {
    count: u32,
    others: u32,
    pause: Duration,
    longest_logged: bool,
}

impl Failures {
    /// Counts `error`; the pause before the next attempt, `None` to retry at once.
    fn next(&mut self, error: &std::io::Error) -> Option<Duration> {
        self.count += 1;
        let starved = matches!(
            error.raw_os_error(),
            Some(nix::libc::EMFILE | nix::libc::ENFILE | nix::libc::ENOBUFS | nix::libc::ENOMEM)
        );
        if !starved {
            self.others += 1;
            if self.others <= RETRIED_AT_ONCE {
                return None;
            }
        }
        self.pause = match self.pause {
            Duration::ZERO => FIRST_PAUSE,
            pause => (pause * 2).min(LONGEST_PAUSE),
        };
        Some(self.pause)
    }

    /// `true` the first time the longest pause is reached in this streak (logged once).
    fn logged_longest(&mut self) -> bool {
        !std::mem::replace(&mut self.longest_logged, true)
    }
}

/// One accepted connection, before its protocol is served.
struct Connection {
    frontend: Arc<HttpFrontend>,
    builder: auto::Builder<TokioExecutor>,
    watcher: Watcher,
    peer: SocketAddr,
    /// The time allowed before the first request (also for the TLS handshake),
    /// and between two requests on HTTP/1.1.
    header_read: Duration,
    /// The time allowed with nothing in flight (h2, and HTTP/1.1 when shorter).
    idle: Duration,
}

impl Connection {
    /// Serves HTTP/1.1 or h2 on `io` (plain, or after the TLS handshake) until
    /// it ends, shutdown drains it, or it stays idle too long.
    async fn serve<I>(self, io: I)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let Connection {
            frontend,
            builder,
            watcher,
            peer,
            header_read,
            idle,
        } = self;
        let activity = Arc::new(Activity::new());
        let service = {
            let activity = activity.clone();
            // Kept this small so that hyper's `recv_msg` inlines the closure and builds the
            // request's future in place; a larger one is called out of line and its future
            // copied (bench/NOTES.md, "Instructions per proxied call").
            service_fn(move |request: http::Request<hyper::body::Incoming>| {
                let (frontend, in_flight) = (frontend.clone(), activity.enter(request.version()));
                async move {
                    let response = frontend.handle(request, peer).await;
                    Ok::<_, Infallible>(response.map(|body| Tracked {
                        body,
                        _in_flight: in_flight,
                    }))
                }
            })
        };
        let connection = watcher.watch(builder.serve_connection_with_upgrades(io, service).into_owned());
        tokio::pin!(connection);
        // Erased: nested once more in its full type, the connection made proving this
        // task `Send` overflow the compiler's recursion limit.
        let connection: Pin<&mut (dyn Future<Output = Result<(), _>> + Send)> = connection;
        watched(connection, &activity, header_read, idle, peer).await;
    }
}

/// Serves `connection` until it ends, or until `activity` has been idle too long
/// (see the module's doc), when it is dropped (closed).
pub(crate) async fn watched<E: std::fmt::Display>(
    connection: impl Future<Output = Result<(), E>>,
    activity: &Activity,
    header_read: Duration,
    idle: Duration,
    peer: SocketAddr,
) {
    tokio::select! {
        // The connection first, without the macro's random start (a thread-local
        // RNG on every wake of the connection); the idle timer only ends it.
        biased;
        result = connection => if let Err(error) = result {
            tracing::debug!(%peer, error = %error, "connection ended with an error");
        },
        () = activity.idle(header_read, idle) => tracing::debug!(%peer, "idle connection closed"),
    }
}

/// Answers one request on a connection past the per-IP cap with 503, its
/// JSON-RPC error and `Retry-After`, then closes it, so that a client sees why
/// (over TLS after the handshake). HTTP/1.1 only: an h2 client sees the close.
async fn refuse(stream: tokio::net::TcpStream, tls: Option<tokio_rustls::TlsAcceptor>, limit: usize, within: Duration) {
    let service = service_fn(move |_request| async move {
        let response = crate::edge::respond::rejected(&Rejection::TooManyConnections { limit }, None);
        Ok::<_, Infallible>(response)
    });
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .keep_alive(false)
        .timer(TokioTimer::new())
        .header_read_timeout(within);
    let served = match tls {
        None => http1.serve_connection(TokioIo::new(stream), service).await,
        Some(acceptor) => match acceptor.accept(stream).await {
            Ok(stream) => http1.serve_connection(TokioIo::new(stream), service).await,
            Err(_) => return,
        },
    };
    if let Err(error) = served {
        tracing::debug!(error = %error, "refused connection ended with an error");
    }
}

/// HTTP/1.1, and h2 with a timer for its keep-alive pings. HTTP/1.1's header
/// read timeout is the idle watchdog's (see the module's doc), not hyper's.
pub(crate) fn builder(limits: &LimitsConfig) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().header_read_timeout(None);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.h2_keep_alive_interval.0)
        .keep_alive_timeout(limits.h2_keep_alive_timeout.0);
    builder
}

// === impl PerIp ===

/// Open connections per client IP; an address without any is not kept.
#[derive(Default)]
struct PerIp {
    open: Arc<DashMap<IpAddr, usize>>,
}

/// One connection's place in [`PerIp`]; given back when dropped.
pub(crate) struct IpSlot {
    open: Arc<DashMap<IpAddr, usize>>,
    ip: IpAddr,
}

impl PerIp {
    /// A place for one more connection from `ip`, unless it holds `limit` already.
    fn admit(&self, ip: IpAddr, limit: usize) -> Option<IpSlot> {
        let ip = ip.to_canonical();
        let mut count = self.open.entry(ip).or_insert(0);
        if *count >= limit {
            return None;
        }
        *count += 1;
        drop(count);
        Some(IpSlot {
            open: self.open.clone(),
            ip,
        })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        if let Some(mut count) = self.open.get_mut(&self.ip) {
            *count = count.saturating_sub(1);
        }
        self.open.remove_if(&self.ip, |_, count| *count == 0);
    }
}

// === impl Activity ===

/// Requests in flight on one connection, and since when it has had none.
pub(crate) struct Activity {
    in_flight: AtomicUsize,
    served: AtomicBool,
    /// Whether its requests come over HTTP/1.x (whose next head is read between them).
    http1: AtomicBool,
    idle_since: Mutex<Instant>,
}

/// One request in flight (its handler, then its response body); ends when dropped.
pub(crate) struct InFlight(Arc<Activity>);

impl Activity {
    pub(crate) fn new() -> Activity {
        Activity {
            in_flight: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            http1: AtomicBool::new(false),
            idle_since: Mutex::new(Instant::now()),
        }
    }

    /// A request of `version` comes in (its head has been read whole).
    pub(crate) fn enter(self: &Arc<Self>, version: http::Version) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        if !self.served.load(Ordering::Acquire) {
            self.http1.store(version < http::Version::HTTP_2, Ordering::Release);
            self.served.store(true, Ordering::Release);
        }
        InFlight(self.clone())
    }

    /// Resolves once nothing has been in flight for `idle`, or for `header_read`
    /// before the first request and between two on HTTP/1.x (where the time
    /// with nothing in flight is the time taken by the next head).
    async fn idle(&self, header_read: Duration, idle: Duration) {
        loop {
            let timeout = match (self.served.load(Ordering::Acquire), self.http1.load(Ordering::Acquire)) {
                (false, _) => header_read,
                (true, true) => idle.min(header_read),
                (true, false) => idle,
            };
            let since = *self.idle_since.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let wait = match self.in_flight.load(Ordering::Acquire) {
                0 => timeout.saturating_sub(since.elapsed()),
                _ => timeout,
            };
            if wait.is_zero() {
                return;
            }
            // Polled again only once it has fired, since a sleep's poll registers the
            // waker again and this future is polled on every wake of its connection (the
            // first waker stays good: the connection's one task polls this).
            let sleep = tokio::time::sleep(wait);
            tokio::pin!(sleep);
            let mut armed = false;
            std::future::poll_fn(|cx| {
                if armed && !sleep.is_elapsed() {
                    return Poll::Pending;
                }
                armed = true;
                sleep.as_mut().poll(cx)
            })
            .await;
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // The time first, so the watchdog never sees zero in flight with an old time.
        *self
            .0
            .idle_since
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request in flight until it ends or is dropped.
pub(crate) struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl Tracked {
    /// `body`, keeping `in_flight` until it ends.
    pub(crate) fn new(body: Body, in_flight: InFlight) -> Tracked {
        Tracked {
            body,
            _in_flight: in_flight,
        }
    }
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_ip_slots_are_counted_and_given_back() {
        let per_ip = PerIp::default();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let first = per_ip.admit(ip, 2).unwrap();
        let _second = per_ip.admit(mapped, 2).unwrap();
        assert!(per_ip.admit(ip, 2).is_none(), "a mapped address is the same client");
        assert!(per_ip.admit("10.0.0.1".parse().unwrap(), 2).is_some());
        drop(first);
        assert!(per_ip.admit(ip, 2).is_some());
    }

    #[tokio::test]
    async fn a_request_in_flight_is_never_idle() {
        let activity = Arc::new(Activity::new());
        let in_flight = activity.enter(http::Version::HTTP_2);
        let idle = activity.idle(Duration::from_millis(20), Duration::from_millis(50));
        tokio::pin!(idle);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), &mut idle)
                .await
                .is_err()
        );
        drop(in_flight);
        assert!(tokio::time::timeout(Duration::from_secs(30), &mut idle).await.is_ok());
    }

    #[tokio::test]
    async fn http1_gets_the_header_read_time_between_requests_and_h2_its_idle_time() {
        let (header_read, idle) = (Duration::from_millis(50), Duration::from_secs(3600));
        let http1 = Arc::new(Activity::new());
        drop(http1.enter(http::Version::HTTP_11));
        let closed = tokio::time::timeout(Duration::from_secs(30), http1.idle(header_read, idle)).await;
        assert!(
            closed.is_ok(),
            "an HTTP/1.1 connection waits for its next head no longer than the header read time"
        );

        let h2 = Arc::new(Activity::new());
        drop(h2.enter(http::Version::HTTP_2));
        let closed = tokio::time::timeout(Duration::from_millis(300), h2.idle(header_read, idle)).await;
        assert!(
            closed.is_err(),
            "an h2 connection between requests is idle, not reading a head"
        );
    }
}
