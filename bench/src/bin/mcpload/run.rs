//! Closed-loop load: C workers, each on its own keep-alive connection, each
//! sending its next request when the previous one is answered. A warm-up whose
//! results are discarded, then a measured window; latencies go into an HDR
//! histogram, and the watched process's CPU time and RSS are read from /proc.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::client::{Conn, Endpoint, Pattern, echo_arguments_named};
use crate::procfs;

/// One side of a comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    pub name: String,
    pub pattern: Pattern,
    pub url: String,
    /// The processes whose CPU and memory are reported, summed (a gateway or
    /// bridge; nginx's master and workers).
    #[serde(default)]
    pub pids: Vec<u32>,
    /// The upstream's processes, whose CPU per request is reported beside.
    #[serde(default)]
    pub upstream_pids: Vec<u32>,
    /// A process whose children are the upstream (a gateway's stdio children),
    /// found when the measured window opens and added to `upstream_pids` then.
    #[serde(default)]
    pub upstream_children_of: Option<u32>,
    /// The echo tool's name (`echo` unless given).
    #[serde(default = "default_tool")]
    pub tool: String,
    /// Its argument carrying the text (`text` unless given; server-everything's is `message`).
    #[serde(default = "default_arg")]
    pub arg: String,
    /// A file holding the bearer token every request carries (none unless given).
    #[serde(default)]
    pub token_file: Option<String>,
}

/// `PID[+PID…]`.
fn parse_pids(value: &str) -> Result<Vec<u32>, String> {
    value
        .split('+')
        .map(|p| p.parse().map_err(|_| format!("bad pid {p:?}")))
        .collect()
}

/// CPU time of every process of `pids` together, in microseconds (`None` if one is gone).
fn cpu_us_of(pids: &[u32]) -> Option<f64> {
    pids.iter().map(|&pid| procfs::cpu_us(pid)).sum()
}

/// User-space CPU time of every process of `pids` together, in microseconds.
fn user_cpu_us_of(pids: &[u32]) -> Option<f64> {
    pids.iter()
        .map(|&pid| procfs::cpu_user_system_us(pid).map(|(user, _)| user))
        .sum()
}

fn default_tool() -> String {
    "echo".into()
}

fn default_arg() -> String {
    "text".into()
}

impl Target {
    /// `name=N,pattern=P,url=U[,pid=PID[+PID…]][,upstream=PID[+PID…]][,upstream_children=PID][,tool=T][,arg=A][,token_file=F]`
    pub fn parse(spec: &str) -> Result<Target, String> {
        let (mut name, mut pattern, mut url) = (None, None, None);
        let (mut pids, mut upstream_pids, mut upstream_children_of) = (Vec::new(), Vec::new(), None);
        let (mut tool, mut arg, mut token_file) = (default_tool(), default_arg(), None);
        for part in spec.split(',') {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("bad target part {part:?} in {spec:?}"))?;
            match key {
                "name" => name = Some(value.to_owned()),
                "pattern" => pattern = Some(Pattern::parse(value)?),
                "url" => url = Some(value.to_owned()),
                "pid" => pids = parse_pids(value)?,
                "upstream" => upstream_pids = parse_pids(value)?,
                "upstream_children" => {
                    upstream_children_of = Some(value.parse().map_err(|_| format!("bad pid {value:?}"))?)
                }
                "tool" => tool = value.to_owned(),
                "arg" => arg = value.to_owned(),
                "token_file" => token_file = Some(value.to_owned()),
                other => return Err(format!("unknown target key {other:?}")),
            }
        }
        Ok(Target {
            name: name.ok_or("target needs name=")?,
            pattern: pattern.ok_or("target needs pattern=")?,
            url: url.ok_or("target needs url=")?,
            pids,
            upstream_pids,
            upstream_children_of,
            tool,
            arg,
            token_file,
        })
    }
}

/// The figures of one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    pub target: String,
    pub concurrency: usize,
    pub round: usize,
    pub ops: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub seconds: f64,
    pub throughput: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    /// CPU time of the watched process per completed operation.
    pub cpu_us_per_op: Option<f64>,
    /// CPU time of the upstream per completed operation (when its pid was given).
    #[serde(default)]
    pub upstream_cpu_us_per_op: Option<f64>,
    /// The user-space part of `cpu_us_per_op` (the rest is the kernel's work for it).
    #[serde(default)]
    pub user_cpu_us_per_op: Option<f64>,
    /// Largest RSS of the watched process seen during the window.
    pub rss_max_kib: Option<u64>,
}

/// Timing of every run of a comparison.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Timing {
    pub warmup_ms: u64,
    pub duration_ms: u64,
}

struct WorkerOutcome {
    histogram: Histogram<u64>,
    errors: u64,
    first_error: Option<String>,
}

/// Runs `concurrency` workers against `target` and measures.
pub async fn run(target: &Target, sse: bool, concurrency: usize, round: usize, timing: Timing) -> RunResult {
    let endpoint = Endpoint::parse(&target.url)
        .and_then(|e| e.with_token_file(target.token_file.as_deref()))
        .unwrap_or_else(|e| panic!("{e}"));
    let endpoint = Rc::new(endpoint);
    let start = Instant::now() + Duration::from_millis(20);
    let measure_from = start + Duration::from_millis(timing.warmup_ms);
    let deadline = measure_from + Duration::from_millis(timing.duration_ms);
    let rss_max = Rc::new(Cell::new(None::<u64>));
    // CPU seconds (before, after) of the watched processes and of the upstream's.
    let cpu = Rc::new(Cell::new((None::<f64>, None::<f64>)));
    let upstream_cpu = Rc::new(Cell::new((None::<f64>, None::<f64>)));
    let user_cpu = Rc::new(Cell::new((None::<f64>, None::<f64>)));
    // The upstream processes measured, once the window opens (children found then).
    let measured_upstream = Rc::new(std::cell::RefCell::new(target.upstream_pids.clone()));
    let watched = !target.pids.is_empty() || !target.upstream_pids.is_empty() || target.upstream_children_of.is_some();
    let watcher = watched.then(|| {
        let (rss_max, cpu, upstream_cpu, user_cpu) =
            (rss_max.clone(), cpu.clone(), upstream_cpu.clone(), user_cpu.clone());
        let pids = target.pids.clone();
        let (measured_upstream, children_of) = (measured_upstream.clone(), target.upstream_children_of);
        tokio::task::spawn_local(async move {
            tokio::time::sleep_until(measure_from).await;
            if let Some(parent) = children_of {
                measured_upstream.borrow_mut().extend(procfs::children(parent));
            }
            let upstream_pids = measured_upstream.borrow().clone();
            cpu.set((cpu_us_of(&pids), None));
            user_cpu.set((user_cpu_us_of(&pids), None));
            upstream_cpu.set((cpu_us_of(&upstream_pids), None));
            let mut ticker = tokio::time::interval(Duration::from_millis(100));
            while Instant::now() < deadline {
                ticker.tick().await;
                let rss: Option<u64> = pids.iter().map(|&pid| procfs::rss_kib(pid)).sum();
                if let Some(rss) = rss.filter(|_| !pids.is_empty()) {
                    rss_max.set(Some(rss_max.get().map_or(rss, |m| m.max(rss))));
                }
            }
            tokio::time::sleep_until(deadline).await;
            cpu.set((cpu.get().0, cpu_us_of(&pids)));
            user_cpu.set((user_cpu.get().0, user_cpu_us_of(&pids)));
            upstream_cpu.set((upstream_cpu.get().0, cpu_us_of(&upstream_pids)));
        })
    });
    let call = Rc::new(EchoCall {
        tool: target.tool.clone(),
        arguments: echo_arguments_named(&target.arg),
    });
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            tokio::task::spawn_local(worker(
                endpoint.clone(),
                target.pattern,
                call.clone(),
                sse,
                start,
                measure_from,
                deadline,
            ))
        })
        .collect();
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 120_000_000_000, 3).expect("histogram bounds");
    let (mut errors, mut first_error) = (0, None);
    for worker in workers {
        let outcome = worker.await.expect("worker panicked");
        let _ = histogram.add(&outcome.histogram);
        errors += outcome.errors;
        first_error = first_error.or(outcome.first_error);
    }
    if let Some(watcher) = watcher {
        let _ = watcher.await;
    }
    let seconds = timing.duration_ms as f64 / 1000.0;
    let ops = histogram.len();
    let us = |ns: u64| ns as f64 / 1000.0;
    let per_op = |pids: &[u32], (before, after): (Option<f64>, Option<f64>)| match (before, after) {
        (Some(before), Some(after)) if ops > 0 && !pids.is_empty() => Some((after - before) / ops as f64),
        _ => None,
    };
    let cpu_us_per_op = per_op(&target.pids, cpu.get());
    let user_cpu_us_per_op = per_op(&target.pids, user_cpu.get());
    let upstream_pids = measured_upstream.borrow().clone();
    let upstream_cpu_us_per_op = per_op(&upstream_pids, upstream_cpu.get());
    RunResult {
        target: target.name.clone(),
        concurrency,
        round,
        ops,
        errors,
        first_error,
        seconds,
        throughput: ops as f64 / seconds,
        mean_us: histogram.mean() / 1000.0,
        p50_us: us(histogram.value_at_quantile(0.50)),
        p90_us: us(histogram.value_at_quantile(0.90)),
        p99_us: us(histogram.value_at_quantile(0.99)),
        cpu_us_per_op,
        upstream_cpu_us_per_op,
        user_cpu_us_per_op,
        rss_max_kib: rss_max.get(),
    }
}

/// The `tools/call` every worker of a run sends.
struct EchoCall {
    tool: String,
    arguments: String,
}

async fn worker(
    endpoint: Rc<Endpoint>,
    pattern: Pattern,
    call: Rc<EchoCall>,
    sse: bool,
    start: Instant,
    measure_from: Instant,
    deadline: Instant,
) -> WorkerOutcome {
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 120_000_000_000, 3).expect("histogram bounds");
    let (mut errors, mut first_error) = (0u64, None::<String>);
    let mut conn: Option<Conn> = None;
    let mut session: Option<String> = None;
    tokio::time::sleep_until(start).await;
    while Instant::now() < deadline {
        // (Re)connect, and for legacy clients hold one session per connection.
        if conn.is_none() {
            match Conn::open(endpoint.clone()).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    note(&mut errors, &mut first_error, e);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        if pattern == Pattern::Legacy && session.is_none() {
            match c.handshake().await {
                Ok(s) => session = Some(s),
                Err(e) => {
                    note(&mut errors, &mut first_error, e);
                    conn = None;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            }
        }
        let began = Instant::now();
        let outcome = match pattern {
            Pattern::Legacy => c.call(session.as_deref(), &call.tool, &call.arguments, sse).await,
            Pattern::Modern => c.call(None, &call.tool, &call.arguments, sse).await,
            Pattern::Handshake => per_request_handshake(c, &call.tool, &call.arguments, sse).await,
            Pattern::List => c.list_tools().await,
        };
        let ended = Instant::now();
        match outcome {
            Ok(()) => {
                if began >= measure_from && ended <= deadline {
                    let _ = histogram.record((ended - began).as_nanos().max(1) as u64);
                }
            }
            Err(e) => {
                if began >= measure_from {
                    note(&mut errors, &mut first_error, e);
                }
                conn = None;
                session = None;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    if let (Some(c), Some(s)) = (conn.as_mut(), session.as_deref()) {
        let _ = c.delete(s).await;
    }
    WorkerOutcome {
        histogram,
        errors,
        first_error,
    }
}

/// What a gateway without session pooling pays at least per call.
async fn per_request_handshake(c: &mut Conn, tool: &str, arguments: &str, sse: bool) -> Result<(), String> {
    let session = c.handshake().await?;
    c.call(Some(&session), tool, arguments, sse).await?;
    c.delete(&session).await
}

fn note(errors: &mut u64, first: &mut Option<String>, error: String) {
    *errors += 1;
    if first.is_none() {
        *first = Some(error);
    }
}

/// A whole comparison: every concurrency, every round, the targets interleaved.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Comparison {
    pub name: String,
    pub title: String,
    pub subject: String,
    pub sse: bool,
    pub targets: Vec<Target>,
    pub concurrency: Vec<usize>,
    pub rounds: usize,
    pub timing: Timing,
    pub runs: Vec<RunResult>,
}

pub async fn compare(mut comparison: Comparison) -> Comparison {
    for &c in &comparison.concurrency.clone() {
        for round in 0..comparison.rounds {
            // A, B, A, B …: the order of the targets alternates every round, so
            // that a drift of the machine during a round favours neither side.
            let mut order: Vec<&Target> = comparison.targets.iter().collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for target in order {
                let result = run(target, comparison.sse, c, round, comparison.timing).await;
                eprintln!(
                    "  [{}] {:<22} c={:<3} round {} {:>9.0} ops/s  p50 {:>8.1} µs  p99 {:>8.1} µs{}{}",
                    comparison.name,
                    result.target,
                    c,
                    round + 1,
                    result.throughput,
                    result.p50_us,
                    result.p99_us,
                    result
                        .cpu_us_per_op
                        .map(|v| format!("  cpu {v:.1} µs/op"))
                        .unwrap_or_default()
                        + &result
                            .upstream_cpu_us_per_op
                            .map(|v| format!("  upstream {v:.1} µs/op"))
                            .unwrap_or_default(),
                    if result.errors > 0 {
                        format!(
                            "  ERRORS {} ({})",
                            result.errors,
                            result.first_error.as_deref().unwrap_or("")
                        )
                    } else {
                        String::new()
                    },
                );
                comparison.runs.push(result);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    comparison
}
