//! stdio upstreams: supervising child processes (started by [`super::child`]),
//! spares and restarts, and newline framing in both directions.
//!
//! Every child runs in its own process group and is registered with a
//! [`ChildSupervisor`], so that on shutdown (or when its session ends) the whole
//! group is stopped: stdin closed, then SIGTERM, then SIGKILL after a grace period.
//! Lines are handed to the session through [`Inbound`]; nothing here looks inside
//! them, but for the top-level `id` of a line refused ([`super::refusal`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::refusal::{Found, Held, IdFinder, Refused, fail_answered};
use super::{Inbound, child};
use crate::config::{RestartConfig, StdioConfig};
use crate::protocol::Message;
use crate::upstream::error::UpstreamError;

/// Largest line accepted from a child; a longer one is dropped as it comes,
/// and the request it answers fails.
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// Messages queued toward one child before senders wait.
const WRITE_QUEUE: usize = 256;

/// Tracks every child eragate started, for shutdown.
#[derive(Clone, Default)]
pub(crate) struct ChildSupervisor {
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// Environment variables holding eragate's secrets (token and client-secret
    /// variables of the configuration): no `inherit_env` pattern matches them.
    protected_env: Arc<[String]>,
}

impl ChildSupervisor {
    /// A supervisor whose children never inherit `protected_env` through a pattern.
    pub(crate) fn new(protected_env: Vec<String>) -> ChildSupervisor {
        ChildSupervisor {
            protected_env: protected_env.into(),
            ..ChildSupervisor::default()
        }
    }

    /// Stops every child (stdin closed, SIGTERM, SIGKILL after the grace) and waits for them.
    pub(crate) async fn shutdown(&self, deadline: Duration) {
        self.shutdown.cancel();
        self.tracker.close();
        if tokio::time::timeout(deadline, self.tracker.wait()).await.is_err() {
            tracing::warn!("some upstream children did not stop before the deadline");
        }
    }
}

/// Starts children of one upstream and keeps warm spares.
pub(crate) struct StdioSpawner {
    upstream: Arc<str>,
    config: StdioConfig,
    /// One permit per live child: bounds `max_children`.
    limit: Arc<Semaphore>,
    /// A std mutex: held only to push or pop.
    spares: Mutex<VecDeque<SpawnedChild>>,
    supervisor: ChildSupervisor,
    crashes: Arc<CrashTracker>,
}

/// Crash accounting: exponential backoff with jitter between restarts, and a
/// crash loop reported rather than restarted in a tight loop.
pub(crate) struct CrashTracker {
    config: RestartConfig,
    consecutive: AtomicU32,
    restarts: AtomicU64,
    /// A std mutex: read or written in one step.
    not_before: Mutex<Option<Instant>>,
    upstream: Arc<str>,
}

impl CrashTracker {
    fn new(upstream: Arc<str>, config: RestartConfig) -> CrashTracker {
        CrashTracker {
            config,
            consecutive: AtomicU32::new(0),
            restarts: AtomicU64::new(0),
            not_before: Mutex::new(None),
            upstream,
        }
    }

    /// Records a child's exit; `unexpected` when eragate did not ask it to stop.
    fn record_exit(&self, lived: Duration, unexpected: bool) {
        if !unexpected {
            return;
        }
        self.restarts.fetch_add(1, Ordering::Relaxed);
        if lived >= self.config.crash_window.0 {
            self.consecutive.store(0, Ordering::Relaxed);
            return;
        }
        let crashes = self.consecutive.fetch_add(1, Ordering::Relaxed) + 1;
        let wait = backoff(&self.config, crashes, rand::random::<f64>());
        *self.not_before.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + wait);
        if crashes >= self.config.crash_loop_after {
            tracing::error!(upstream = %self.upstream, crashes, wait_ms = wait.as_millis() as u64, "upstream child is crash-looping");
        } else {
            tracing::warn!(upstream = %self.upstream, crashes, wait_ms = wait.as_millis() as u64, "upstream child crashed; restarting after a backoff");
        }
    }

    /// How long until a child may be started again, if it must wait.
    fn wait_left(&self) -> Option<Duration> {
        let not_before = (*self.not_before.lock().unwrap_or_else(|e| e.into_inner()))?;
        not_before.checked_duration_since(Instant::now())
    }
}

/// The wait before restart number `crashes` (1-based): `initial · 2^(crashes-1)`,
/// capped at `max`, scaled by a jitter factor in [0.5, 1.0) drawn from `unit` ∈ [0, 1).
pub(crate) fn backoff(config: &RestartConfig, crashes: u32, unit: f64) -> Duration {
    let exponent = crashes.saturating_sub(1).min(30);
    let raw = config.backoff_initial.0.saturating_mul(1u32 << exponent);
    let capped = raw.min(config.backoff_max.0);
    capped.mul_f64(0.5 + unit.clamp(0.0, 1.0) * 0.5)
}

/// A started child not yet attached to a session.
pub(crate) struct SpawnedChild {
    upstream: Arc<str>,
    stdin: ChildStdin,
    stdout: ChildStdout,
    exited: Arc<AtomicBool>,
    /// Set when the child's output ended before eragate asked it to stop.
    ended_first: Arc<AtomicBool>,
    stop: CancellationToken,
    _permit: OwnedSemaphorePermit,
}

impl StdioSpawner {
    /// A spawner for `config`; children are registered with `supervisor`.
    pub(crate) fn new(
        upstream: Arc<str>,
        config: StdioConfig,
        restart: RestartConfig,
        supervisor: ChildSupervisor,
    ) -> Arc<StdioSpawner> {
        let limit = Arc::new(Semaphore::new(config.max_children));
        let crashes = Arc::new(CrashTracker::new(upstream.clone(), restart));
        Arc::new(StdioSpawner {
            upstream,
            config,
            limit,
            spares: Mutex::new(VecDeque::new()),
            supervisor,
            crashes,
        })
    }

    /// Stops the warm spares (shutdown): their stdin closes, so they exit on EOF.
    pub(crate) fn stop_spares(&self) {
        let spares: Vec<SpawnedChild> = self
            .spares
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for spare in spares {
            spare.stop.cancel();
        }
    }

    /// Children alive now (spares included).
    pub(crate) fn live_children(&self) -> usize {
        self.config.max_children.saturating_sub(self.limit.available_permits())
    }

    /// Unexpected child exits so far.
    pub(crate) fn restarts(&self) -> u64 {
        self.crashes.restarts.load(Ordering::Relaxed)
    }

    /// Whether the last `crash_loop_after` children all crashed right after starting.
    pub(crate) fn crash_looping(&self) -> bool {
        self.crashes.consecutive.load(Ordering::Relaxed) >= self.crashes.config.crash_loop_after
    }

    /// A ready child: a warm spare when one is alive, else a new one. Refills
    /// spares in the background. After a crash the restart backoff is waited
    /// out; in a crash loop the request fails at once instead.
    pub(crate) async fn take(self: &Arc<Self>) -> Result<SpawnedChild, UpstreamError> {
        if let Some(wait) = self.crashes.wait_left()
            && !self.crash_looping()
        {
            tokio::time::sleep(wait).await;
        }
        let spare = {
            let mut spares = self.spares.lock().unwrap_or_else(|e| e.into_inner());
            spares.retain(|c| !c.exited.load(Ordering::Acquire));
            spares.pop_front()
        };
        let child = match spare {
            Some(child) => child,
            None => self.spawn()?,
        };
        self.refill();
        Ok(child)
    }

    /// Starts spares until `spares` are waiting (or `max_children` is reached).
    pub(crate) fn refill(self: &Arc<Self>) {
        let spawner = self.clone();
        tokio::spawn(async move {
            loop {
                let have = spawner.spares.lock().unwrap_or_else(|e| e.into_inner()).len();
                if have >= spawner.config.spares || spawner.supervisor.shutdown.is_cancelled() {
                    return;
                }
                match spawner.spawn() {
                    Ok(child) => spawner
                        .spares
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push_back(child),
                    Err(error) => {
                        tracing::debug!(error = %error, "no spare child started");
                        return;
                    }
                }
            }
        });
    }

    fn spawn(&self) -> Result<SpawnedChild, UpstreamError> {
        let unavailable = |reason: String| UpstreamError::unavailable(&self.upstream, reason);
        let permit = self.may_start()?;
        let mut command = child::command(&self.config, &self.supervisor.protected_env).map_err(unavailable)?;
        let program = self.config.command.first().map_or("", String::as_str);
        let mut child = command
            .spawn()
            .map_err(|e| unavailable(format!("cannot start {program:?}: {e}")))?;
        let pid = child.id().ok_or_else(|| unavailable("child exited at once".into()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(unavailable("child pipes missing".into()));
        };
        tracing::info!(upstream = %self.upstream, pid, "started upstream child");
        let exited = Arc::new(AtomicBool::new(false));
        let ended_first = Arc::new(AtomicBool::new(false));
        let stop = self.supervisor.shutdown.child_token();
        self.supervisor
            .tracker
            .spawn(child::log_stderr(self.upstream.clone(), pid, stderr));
        let watch = Watch {
            upstream: self.upstream.clone(),
            pid,
            exited: exited.clone(),
            ended_first: ended_first.clone(),
            stop: stop.clone(),
            grace: self.config.kill_grace.0,
            crashes: self.crashes.clone(),
        };
        self.supervisor.tracker.spawn(supervise(child, watch));
        Ok(SpawnedChild {
            upstream: self.upstream.clone(),
            stdin,
            stdout,
            exited,
            ended_first,
            stop,
            _permit: permit,
        })
    }

    /// A permit for one more child, unless eragate is stopping, a crash
    /// backoff is running, or `max_children` are alive.
    fn may_start(&self) -> Result<OwnedSemaphorePermit, UpstreamError> {
        if self.supervisor.shutdown.is_cancelled() {
            return Err(UpstreamError::unavailable(&self.upstream, "eragate is shutting down"));
        }
        if let Some(wait) = self.crashes.wait_left() {
            return Err(UpstreamError::unavailable(
                &self.upstream,
                format!("restarting after crashes; next start in {} ms", wait.as_millis()),
            ));
        }
        self.limit
            .clone()
            .try_acquire_owned()
            .map_err(|_| UpstreamError::Overloaded {
                upstream: self.upstream.to_string(),
            })
    }
}

/// What supervising one child shares with the rest of eragate.
struct Watch {
    upstream: Arc<str>,
    pid: u32,
    /// Set once the child is gone (spares check it).
    exited: Arc<AtomicBool>,
    /// Set by the reader when the child's output ended before any stop.
    ended_first: Arc<AtomicBool>,
    stop: CancellationToken,
    grace: Duration,
    crashes: Arc<CrashTracker>,
}

/// Waits for the child; on stop, closes its group down politely, then firmly.
async fn supervise(mut child: Child, watch: Watch) {
    let Watch {
        upstream,
        pid,
        exited,
        ended_first,
        stop,
        grace,
        crashes,
    } = watch;
    let started = Instant::now();
    let status = tokio::select! {
        status = child.wait() => status,
        () = stop.cancelled() => {
            // stdin is closed by now (the writer is gone); give the child a moment to exit on EOF.
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    signal_group(pid, Signal::SIGTERM);
                    match tokio::time::timeout(grace, child.wait()).await {
                        Ok(status) => status,
                        Err(_) => {
                            signal_group(pid, Signal::SIGKILL);
                            child.wait().await
                        }
                    }
                }
            }
        }
    };
    // Grandchildren (npx → node) may outlive the leader; the group goes with it.
    signal_group(pid, Signal::SIGKILL);
    exited.store(true, Ordering::Release);
    // The child ended on its own (a crash, when soon after start) unless eragate
    // asked it to stop before its output ended: a child whose death closed its
    // session (and so led to the stop) ended on its own too.
    crashes.record_exit(
        started.elapsed(),
        ended_first.load(Ordering::Acquire) || !stop.is_cancelled(),
    );
    match status {
        Ok(status) => tracing::info!(upstream = %upstream, pid, %status, "upstream child exited"),
        Err(error) => tracing::warn!(upstream = %upstream, pid, error = %error, "lost track of upstream child"),
    }
}

/// Signals a child's process group. Its group id is its pid (`process_group(0)`);
/// 0 and 1 would address eragate's own group or init, so they are never used.
fn signal_group(pid: u32, signal: Signal) {
    if let Ok(pid) = i32::try_from(pid)
        && pid > 1
    {
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}

/// The write half and lifetime of one attached child.
pub(crate) struct StdioLink {
    upstream: Arc<str>,
    /// Taken (closing the child's stdin) when the link stops; a std mutex, never held across `.await`.
    writer: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    stop: CancellationToken,
}

impl StdioLink {
    /// Attaches a child: its stdout feeds the session that [`StdioReader::start`] is given.
    pub(crate) fn attach(child: SpawnedChild) -> (StdioLink, StdioReader) {
        let (writer, queue) = mpsc::channel(WRITE_QUEUE);
        let SpawnedChild {
            upstream,
            stdin,
            stdout,
            exited: _,
            ended_first,
            stop,
            _permit,
        } = child;
        tokio::spawn(write_lines(stdin, queue));
        let reader = StdioReader {
            upstream: upstream.clone(),
            stdout,
            ended_first,
            stop: stop.clone(),
            permit: _permit,
        };
        (
            StdioLink {
                upstream,
                writer: Mutex::new(Some(writer)),
                stop,
            },
            reader,
        )
    }

    pub(crate) async fn send(&self, message: Message) -> Result<(), UpstreamError> {
        let mut line = message.to_bytes();
        line.push(b'\n');
        let closed = || UpstreamError::closed(&self.upstream, "child's stdin is closed");
        // Clone the sender out of the lock: it is never held across `.await`.
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(writer) = writer else {
            return Err(closed());
        };
        writer.send(line).await.map_err(|_| closed())
    }

    /// Closes the child's stdin (a well-behaved server exits on EOF) and starts
    /// the stop sequence: SIGTERM after the grace period, then SIGKILL.
    pub(crate) fn stop(&self) {
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.stop.cancel();
    }
}

impl Drop for StdioLink {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The read half of an attached child.
pub(crate) struct StdioReader {
    upstream: Arc<str>,
    stdout: ChildStdout,
    ended_first: Arc<AtomicBool>,
    stop: CancellationToken,
    /// Held until the child's output ends, so `max_children` counts the child, not the session.
    permit: OwnedSemaphorePermit,
}

impl StdioReader {
    /// Routes every line the child writes into `session` until EOF, then closes it.
    /// A line refused (too long, too many values, or past the bound on bytes held
    /// for upstream messages) fails the request it answers at once.
    pub(crate) fn start<S: Inbound>(self, session: Weak<S>) {
        tokio::spawn(async move {
            let StdioReader {
                upstream,
                stdout,
                ended_first,
                stop,
                permit,
            } = self;
            let mut lines = Lines::new(stdout);
            let reason = loop {
                let line = match lines.next().await {
                    Ok(Some(Line::Whole(line))) => line,
                    Ok(Some(Line::Refused(refused, found))) => {
                        let Some(session) = session.upgrade() else { return };
                        fail_answered(&*session, &upstream, &refused, &found);
                        continue;
                    }
                    Ok(None) => break "process exited".to_owned(),
                    Err(error) => break format!("unreadable output: {error}"),
                };
                if line.trim_ascii().is_empty() {
                    continue;
                }
                let Some(session) = session.upgrade() else { return };
                match Message::parse_within(&line, super::message_bounds()) {
                    Ok(message) => session.handle_message(message, None),
                    Err(error) => {
                        let mut finder = IdFinder::default();
                        finder.feed(&line);
                        let refused = Refused::Unreadable(error.to_string());
                        fail_answered(&*session, &upstream, &refused, &finder.finish());
                    }
                }
                drop(line);
                lines.handed_over();
            };
            if !stop.is_cancelled() {
                ended_first.store(true, Ordering::Release);
            }
            if let Some(session) = session.upgrade() {
                session.handle_closed(&reason);
            }
            drop(permit);
        });
    }
}

/// Bytes asked of a child's stdout at a time (a pipe's capacity).
const READ_CHUNK: usize = 64 * 1024;

/// One line of a child's stdout, or why it was not kept.
enum Line {
    /// A whole line, without its end.
    Whole(BytesMut),
    /// A line dropped as it came, and what its bytes said of the request it answered.
    Refused(Refused, Found),
}

/// Newline framing of a child's stdout, within [`MAX_LINE_BYTES`] a line and
/// the shared bound on bytes held for upstream messages ([`Held`]). A line past
/// either is dropped as it comes, read only for its top-level `id` ([`IdFinder`]).
struct Lines {
    stdout: ChildStdout,
    buffer: BytesMut,
    /// Bytes at the front of `buffer` known to hold no line end.
    scanned: usize,
    held: Held,
}

impl Lines {
    fn new(stdout: ChildStdout) -> Lines {
        Lines {
            stdout,
            buffer: BytesMut::new(),
            scanned: 0,
            held: Held::default(),
        }
    }

    /// The next line; `None` at the end of the output.
    async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            if let Some(end) = self.buffer[self.scanned..].iter().position(|b| *b == b'\n') {
                let mut line = self.buffer.split_to(self.scanned + end + 1);
                self.scanned = 0;
                line.truncate(line.len() - 1);
                if line.last() == Some(&b'\r') {
                    line.truncate(line.len() - 1);
                }
                if line.len() > MAX_LINE_BYTES {
                    // Its end came in the read that took it past the bound.
                    let mut finder = IdFinder::default();
                    finder.feed(&line);
                    let refused = Refused::TooLarge { limit: MAX_LINE_BYTES };
                    return Ok(Some(Line::Refused(refused, finder.finish())));
                }
                return Ok(Some(Line::Whole(line)));
            }
            self.scanned = self.buffer.len();
            if self.buffer.len() > MAX_LINE_BYTES {
                let refused = Refused::TooLarge { limit: MAX_LINE_BYTES };
                return self.drop_line(refused).await.map(Some);
            }
            // What is held now (the next read adds at most a chunk, counted on the next turn).
            if let Err(exhausted) = self.held.fit(self.buffer.len()) {
                return self.drop_line(exhausted.into()).await.map(Some);
            }
            self.buffer.reserve(READ_CHUNK);
            if self.stdout.read_buf(&mut self.buffer).await? == 0 {
                if self.buffer.is_empty() {
                    return Ok(None);
                }
                // The last line, without its end.
                self.scanned = 0;
                return Ok(Some(Line::Whole(self.buffer.split())));
            }
        }
    }

    /// The line being read was handed over: what it held is given back, and a
    /// large buffer left behind by it is let go.
    fn handed_over(&mut self) {
        if self.buffer.capacity() > 4 * READ_CHUNK {
            self.buffer = BytesMut::from(&self.buffer[..]);
        }
        // Never more than it holds now, which was counted already: this cannot fail.
        let _ = self.held.fit(self.buffer.len());
    }

    /// Drops the line begun in the buffer and the rest of it as it comes,
    /// reading its top-level `id` on the way.
    async fn drop_line(&mut self, refused: Refused) -> std::io::Result<Line> {
        let mut finder = IdFinder::default();
        finder.feed(&self.buffer);
        self.buffer = BytesMut::new();
        self.scanned = 0;
        self.held.release();
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            let n = self.stdout.read(&mut chunk).await?;
            if n == 0 {
                return Ok(Line::Refused(refused, finder.finish()));
            }
            if let Some(end) = chunk[..n].iter().position(|b| *b == b'\n') {
                finder.feed(&chunk[..end]);
                self.buffer.extend_from_slice(&chunk[end + 1..n]);
                return Ok(Line::Refused(refused, finder.finish()));
            }
            finder.feed(&chunk[..n]);
        }
    }
}

async fn write_lines(mut stdin: ChildStdin, mut queue: mpsc::Receiver<Vec<u8>>) {
    while let Some(line) = queue.recv().await {
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Humantime;

    #[test]
    fn backoff_doubles_caps_and_jitters_within_bounds() {
        let config = RestartConfig {
            backoff_initial: Humantime(Duration::from_millis(100)),
            backoff_max: Humantime(Duration::from_secs(2)),
            ..RestartConfig::default()
        };
        let table = [(1, 100), (2, 200), (3, 400), (5, 1600), (6, 2000), (40, 2000)];
        for (crashes, full_ms) in table {
            assert_eq!(
                backoff(&config, crashes, 1.0),
                Duration::from_millis(full_ms),
                "{crashes}"
            );
            assert_eq!(
                backoff(&config, crashes, 0.0),
                Duration::from_millis(full_ms / 2),
                "{crashes}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn backoff_stays_within_bounds(crashes in 0u32..100, unit in 0.0f64..1.0) {
            let config = RestartConfig::default();
            let wait = backoff(&config, crashes, unit);
            proptest::prop_assert!(wait <= config.backoff_max.0);
            proptest::prop_assert!(wait >= config.backoff_initial.0 / 2);
        }
    }
}
