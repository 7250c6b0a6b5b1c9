//! stdio upstreams: spawning and supervising child processes, newline framing
//! in both directions, and the child's stderr in eragate's log.
//!
//! Every child runs in its own process group and is registered with a
//! [`ChildSupervisor`], so that on shutdown (or when its session ends) the whole
//! group is stopped: stdin closed, then SIGTERM, then SIGKILL after a grace period.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::StdioConfig;
use crate::protocol::Message;
use crate::upstream::UpstreamError;
use crate::upstream::session::UpstreamSession;

/// Largest line accepted from a child; a longer one ends the session.
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// Messages queued toward one child before senders wait.
const WRITE_QUEUE: usize = 256;

/// Tracks every child eragate started, for shutdown.
#[derive(Clone, Default)]
pub struct ChildSupervisor {
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

impl ChildSupervisor {
    /// Stops every child (stdin closed, SIGTERM, SIGKILL after the grace) and waits for them.
    pub async fn shutdown(&self, deadline: Duration) {
        self.shutdown.cancel();
        self.tracker.close();
        if tokio::time::timeout(deadline, self.tracker.wait()).await.is_err() {
            tracing::warn!("some upstream children did not stop before the deadline");
        }
    }
}

/// Starts children of one upstream and keeps warm spares.
pub struct StdioSpawner {
    upstream: Arc<str>,
    config: StdioConfig,
    /// One permit per live child: bounds `max_children`.
    limit: Arc<Semaphore>,
    /// A std mutex: held only to push or pop.
    spares: Mutex<VecDeque<SpawnedChild>>,
    supervisor: ChildSupervisor,
}

/// A started child not yet attached to a session.
pub struct SpawnedChild {
    stdin: ChildStdin,
    stdout: ChildStdout,
    pid: u32,
    exited: Arc<AtomicBool>,
    stop: CancellationToken,
    _permit: OwnedSemaphorePermit,
}

impl StdioSpawner {
    /// A spawner for `config`; children are registered with `supervisor`.
    pub fn new(upstream: Arc<str>, config: StdioConfig, supervisor: ChildSupervisor) -> Arc<StdioSpawner> {
        let limit = Arc::new(Semaphore::new(config.max_children));
        Arc::new(StdioSpawner {
            upstream,
            config,
            limit,
            spares: Mutex::new(VecDeque::new()),
            supervisor,
        })
    }

    /// A ready child: a warm spare when one is alive, else a new one. Refills spares in the background.
    pub fn take(self: &Arc<Self>) -> Result<SpawnedChild, UpstreamError> {
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
    pub fn refill(self: &Arc<Self>) {
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
        let unavailable = |reason: String| UpstreamError::Unavailable {
            upstream: self.upstream.to_string(),
            reason,
        };
        if self.supervisor.shutdown.is_cancelled() {
            return Err(unavailable("eragate is shutting down".into()));
        }
        let permit = self
            .limit
            .clone()
            .try_acquire_owned()
            .map_err(|_| UpstreamError::Overloaded {
                upstream: self.upstream.to_string(),
            })?;
        let (program, args) = self
            .config
            .command
            .split_first()
            .ok_or_else(|| unavailable("empty command".into()))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(&self.config.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &self.config.cwd {
            command.current_dir(cwd);
        }
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
        let stop = self.supervisor.shutdown.child_token();
        self.supervisor
            .tracker
            .spawn(log_stderr(self.upstream.clone(), pid, stderr));
        self.supervisor.tracker.spawn(supervise(
            self.upstream.clone(),
            child,
            pid,
            exited.clone(),
            stop.clone(),
            self.config.kill_grace.0,
        ));
        Ok(SpawnedChild {
            stdin,
            stdout,
            pid,
            exited,
            stop,
            _permit: permit,
        })
    }
}

/// Waits for the child; on stop, closes its group down politely, then firmly.
async fn supervise(
    upstream: Arc<str>,
    mut child: Child,
    pid: u32,
    exited: Arc<AtomicBool>,
    stop: CancellationToken,
    grace: Duration,
) {
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

async fn log_stderr(upstream: Arc<str>, pid: u32, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(target: "eragate::upstream::stderr", upstream = %upstream, pid, "{line}");
    }
}

/// The write half and lifetime of one attached child.
pub struct StdioLink {
    writer: mpsc::Sender<Vec<u8>>,
    stop: CancellationToken,
    pid: u32,
}

impl StdioLink {
    /// Attaches a child: its stdout feeds the session that [`StdioReader::start`] is given.
    pub fn attach(child: SpawnedChild) -> (StdioLink, StdioReader) {
        let (writer, queue) = mpsc::channel(WRITE_QUEUE);
        let SpawnedChild {
            stdin,
            stdout,
            pid,
            exited: _,
            stop,
            _permit,
        } = child;
        tokio::spawn(write_lines(stdin, queue));
        (
            StdioLink { writer, stop, pid },
            StdioReader {
                stdout,
                pid,
                permit: _permit,
            },
        )
    }

    pub(crate) async fn send(&self, session: &Arc<UpstreamSession>, message: Message) -> Result<(), UpstreamError> {
        let mut line = message.to_bytes();
        line.push(b'\n');
        self.writer
            .send(line)
            .await
            .map_err(|_| session.closed_error("child's stdin is closed"))
    }

    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

impl Drop for StdioLink {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The read half of an attached child.
pub struct StdioReader {
    stdout: ChildStdout,
    pid: u32,
    /// Held until the child's output ends, so `max_children` counts the child, not the session.
    permit: OwnedSemaphorePermit,
}

impl StdioReader {
    /// Routes every line the child writes into `session` until EOF, then closes it.
    pub fn start(self, session: Weak<UpstreamSession>) {
        tokio::spawn(async move {
            let StdioReader { stdout, pid, permit } = self;
            let mut lines = FramedRead::new(stdout, LinesCodec::new_with_max_length(MAX_LINE_BYTES));
            let reason = loop {
                let Some(line) = lines.next().await else {
                    break "process exited".to_owned();
                };
                let line = match line {
                    Ok(line) => line,
                    Err(error) => break format!("unreadable output: {error}"),
                };
                if line.trim().is_empty() {
                    continue;
                }
                let Some(session) = session.upgrade() else { return };
                match Message::parse(line.as_bytes()) {
                    Ok(message) => session.handle_inbound(message, None),
                    Err(error) => {
                        tracing::warn!(upstream = %session.upstream_name(), pid, error = %error, "non-JSON-RPC line on stdout; skipped")
                    }
                }
            };
            if let Some(session) = session.upgrade() {
                session.mark_closed(&reason);
            }
            drop(permit);
        });
    }
}

async fn write_lines(mut stdin: ChildStdin, mut queue: mpsc::Receiver<Vec<u8>>) {
    while let Some(line) = queue.recv().await {
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}
