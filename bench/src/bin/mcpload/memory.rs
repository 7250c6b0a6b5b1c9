//! Resident memory of a gateway: idle, with many requests in flight at once,
//! and with many idle legacy sessions open.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::client::{Conn, Endpoint, sleep_arguments};
use crate::procfs;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemoryResult {
    pub pid: u32,
    pub rss_idle_kib: u64,
    /// `RssAnon` and `RssFile` of the idle RSS (absent from older runs' JSON).
    #[serde(default)]
    pub rss_idle_anon_kib: Option<u64>,
    #[serde(default)]
    pub rss_idle_file_kib: Option<u64>,
    pub inflight: usize,
    pub inflight_peak: usize,
    pub inflight_ok: usize,
    pub inflight_errors: usize,
    pub inflight_first_error: Option<String>,
    pub sleep_ms: u64,
    pub rss_inflight_max_kib: u64,
    pub rss_after_inflight_kib: u64,
    pub sessions: usize,
    pub sessions_opened: usize,
    pub session_errors: u64,
    pub open_seconds: f64,
    pub rss_sessions_kib: u64,
    /// (RSS with the sessions open − RSS before opening them) ÷ sessions.
    pub bytes_per_session: f64,
    pub rss_after_close_kib: u64,
    /// RSS with the same number of sessions open again, after the previous lot
    /// was ended, once per round: steady figures mean the memory of ended
    /// sessions is reused; growth every round means it is not (a leak).
    pub rss_reopened_kib: Vec<u64>,
}

fn rss(pid: u32) -> u64 {
    procfs::rss_kib(pid).unwrap_or_else(|| panic!("cannot read /proc/{pid}/status"))
}

type Opened = Vec<(Vec<String>, Option<Conn>)>;

/// Opens `sessions` legacy sessions over 16 connections and leaves them idle.
async fn open_sessions(endpoint: &Rc<Endpoint>, sessions: usize) -> (Opened, u64) {
    let connections = 16.min(sessions.max(1));
    let mut tasks = Vec::new();
    for worker in 0..connections {
        let share = sessions / connections + usize::from(worker < sessions % connections);
        let endpoint = endpoint.clone();
        tasks.push(tokio::task::spawn_local(async move {
            let mut ids = Vec::with_capacity(share);
            let mut errors = 0u64;
            let mut conn = None;
            while ids.len() < share && errors < 1000 {
                if conn.is_none() {
                    conn = Conn::open(endpoint.clone()).await.ok();
                }
                let Some(c) = conn.as_mut() else {
                    errors += 1;
                    continue;
                };
                match c.handshake().await {
                    Ok(id) => ids.push(id),
                    Err(error) => {
                        if errors == 0 {
                            eprintln!("  [memory] session error: {error}");
                        }
                        errors += 1;
                        conn = None;
                    }
                }
            }
            (ids, errors, conn)
        }));
    }
    let mut opened = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (ids, e, conn) = task.await.expect("session task");
        errors += e;
        opened.push((ids, conn));
    }
    (opened, errors)
}

/// Ends every session with DELETE.
async fn close_sessions(endpoint: &Rc<Endpoint>, opened: Opened) {
    let mut tasks = Vec::new();
    for (ids, conn) in opened {
        let endpoint = endpoint.clone();
        tasks.push(tokio::task::spawn_local(async move {
            let mut conn = conn;
            for id in ids {
                if conn.is_none() {
                    conn = Conn::open(endpoint.clone()).await.ok();
                }
                if let Some(c) = conn.as_mut()
                    && c.delete(&id).await.is_err()
                {
                    conn = None;
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
}

struct InFlight {
    peak: usize,
    ok: usize,
    errors: usize,
    first_error: Option<String>,
    rss_max_kib: u64,
}

/// `n` 2026-07-28 clients, each on its own connection, all calling `sleep` at once.
async fn in_flight(endpoint: &Rc<Endpoint>, pid: u32, n: usize, sleep_ms: u64) -> InFlight {
    let in_flight = Rc::new(Cell::new(0usize));
    let peak = Rc::new(Cell::new(0usize));
    let rss_max = Rc::new(Cell::new(0u64));
    let done = Rc::new(Cell::new(false));
    let sampler = {
        let (in_flight, peak, rss_max, done) = (in_flight.clone(), peak.clone(), rss_max.clone(), done.clone());
        tokio::task::spawn_local(async move {
            let mut ticker = tokio::time::interval(Duration::from_millis(50));
            while !done.get() {
                ticker.tick().await;
                if let Some(rss) = procfs::rss_kib(pid) {
                    rss_max.set(rss_max.get().max(rss));
                }
                peak.set(peak.get().max(in_flight.get()));
            }
        })
    };
    let arguments = sleep_arguments(sleep_ms);
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (endpoint, in_flight, arguments) = (endpoint.clone(), in_flight.clone(), arguments.clone());
        tasks.push(tokio::task::spawn_local(async move {
            let mut conn = Conn::open(endpoint).await?;
            in_flight.set(in_flight.get() + 1);
            let outcome = conn.call(None, "sleep", &arguments, false).await;
            in_flight.set(in_flight.get() - 1);
            outcome
        }));
    }
    let (mut ok, mut errors, mut first_error) = (0, 0, None);
    for task in tasks {
        match task.await.expect("in-flight task") {
            Ok(()) => ok += 1,
            Err(error) => {
                errors += 1;
                first_error.get_or_insert(error);
            }
        }
    }
    done.set(true);
    let _ = sampler.await;
    InFlight {
        peak: peak.get(),
        ok,
        errors,
        first_error,
        rss_max_kib: rss_max.get(),
    }
}

pub async fn measure(url: &str, pid: u32, sessions: usize, inflight: usize, sleep_ms: u64) -> MemoryResult {
    let endpoint = Rc::new(Endpoint::parse(url).unwrap_or_else(|e| panic!("{e}")));
    let settle = || tokio::time::sleep(Duration::from_millis(1000));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_idle_kib = rss(pid);
    let idle_split = procfs::rss_split_kib(pid);
    eprintln!("  [memory] idle RSS {rss_idle_kib} KiB (anonymous, file-backed: {idle_split:?})");

    // Requests in flight, from a clean gateway.
    let flight = in_flight(&endpoint, pid, inflight, sleep_ms).await;
    settle().await;
    let rss_after_inflight_kib = rss(pid);
    eprintln!(
        "  [memory] {inflight} in flight (peak {}): max RSS {} KiB, {} ok, {} errors{}; afterwards {rss_after_inflight_kib} KiB",
        flight.peak,
        flight.rss_max_kib,
        flight.ok,
        flight.errors,
        flight
            .first_error
            .as_deref()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default()
    );

    // Idle legacy sessions.
    let rss_before_sessions = rss(pid);
    let began = Instant::now();
    let (opened, session_errors) = open_sessions(&endpoint, sessions).await;
    let open_seconds = began.elapsed().as_secs_f64();
    let sessions_opened: usize = opened.iter().map(|(ids, _)| ids.len()).sum();
    settle().await;
    let rss_sessions_kib = rss(pid);
    let bytes_per_session =
        (rss_sessions_kib as f64 - rss_before_sessions as f64) * 1024.0 / sessions_opened.max(1) as f64;
    eprintln!(
        "  [memory] {sessions_opened} sessions in {open_seconds:.1} s: RSS {rss_sessions_kib} KiB, {bytes_per_session:.0} B/session"
    );
    close_sessions(&endpoint, opened).await;
    settle().await;
    let rss_after_close_kib = rss(pid);
    let mut rss_reopened_kib = Vec::new();
    for _ in 0..2 {
        let (reopened, _) = open_sessions(&endpoint, sessions).await;
        settle().await;
        rss_reopened_kib.push(rss(pid));
        close_sessions(&endpoint, reopened).await;
        settle().await;
    }
    eprintln!(
        "  [memory] sessions closed: RSS {rss_after_close_kib} KiB; the same number opened again, twice: {rss_reopened_kib:?} KiB"
    );

    MemoryResult {
        pid,
        rss_idle_kib,
        rss_idle_anon_kib: idle_split.map(|(anon, _)| anon),
        rss_idle_file_kib: idle_split.map(|(_, file)| file),
        inflight,
        inflight_peak: flight.peak,
        inflight_ok: flight.ok,
        inflight_errors: flight.errors,
        inflight_first_error: flight.first_error,
        sleep_ms,
        rss_inflight_max_kib: flight.rss_max_kib,
        rss_after_inflight_kib,
        sessions,
        sessions_opened,
        session_errors,
        open_seconds,
        rss_sessions_kib,
        bytes_per_session,
        rss_after_close_kib,
        rss_reopened_kib,
    }
}
