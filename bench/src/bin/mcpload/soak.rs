//! `mcpload soak`: a steady rate of calls for a long time, every answer checked
//! against its request, while a child of the gateway is killed now and then and
//! the gateway's RSS is sampled.
//!
//! Each call carries a fresh id and a nonce the upstream echoes (`sleep`'s
//! `text`, after a few milliseconds so that calls are in flight when a child
//! dies). An answer is:
//! - **ok**: one JSON-RPC response, our id, our nonce;
//! - **failed with an error**: an HTTP error status or a JSON-RPC error for our id
//!   (calls in flight on a killed child legitimately end so);
//! - **crossed**: another id, or another request's nonce;
//! - **duplicated**: a nonce answered before, or two responses in one answer;
//! - **lost**: no answer at all: the timeout passed, or the connection closed
//!   without a response.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde::Serialize;
use serde_json::Value;
use tokio::time::{Instant, MissedTickBehavior};

use crate::client::{Conn, Endpoint, LEGACY_VERSION, MODERN_VERSION, Pattern, Reply, excerpt};
use crate::procfs;
use crate::run::Target;

/// What one soak is asked to do.
pub struct Plan {
    pub targets: Vec<Target>,
    /// Calls per second over every target together.
    pub rate: f64,
    pub duration: Duration,
    /// Connections (workers) per target.
    pub workers: usize,
    /// The gateway: its RSS is sampled, its children killed.
    pub pid: u32,
    pub rss_every: Duration,
    /// Zero: never kill.
    pub kill_every: Duration,
    pub timeout: Duration,
    /// Samples before this are the warm-up (left out of the slope).
    pub warmup: Duration,
}

/// The counts of one target.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counts {
    pub sent: u64,
    pub ok: u64,
    pub failed_with_error: u64,
    pub lost_timeout: u64,
    pub lost_connection: u64,
    pub crossed: u64,
    pub duplicated: u64,
    /// Legacy sessions opened (the first per connection, then after each lost one).
    pub handshakes: u64,
    /// Why calls failed, by kind, with a count.
    pub errors: BTreeMap<String, u64>,
    /// The first few crossed, duplicated or lost calls, for the report.
    pub anomalies: Vec<String>,
}

impl Counts {
    fn lost(&self) -> u64 {
        self.lost_timeout + self.lost_connection
    }

    fn error(&mut self, kind: String) {
        self.failed_with_error += 1;
        *self.errors.entry(kind).or_default() += 1;
    }

    fn anomaly(&mut self, text: String) {
        if self.anomalies.len() < 20 {
            self.anomalies.push(text);
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Kill {
    pub at_s: f64,
    pub pid: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    pub at_s: f64,
    pub rss_kib: u64,
    pub children: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct SoakResult {
    pub rate: f64,
    pub duration_s: f64,
    pub workers: usize,
    pub achieved_rate: f64,
    pub targets: BTreeMap<String, Counts>,
    pub kills: Vec<Kill>,
    pub samples: Vec<Sample>,
    /// Least-squares slope of RSS after the warm-up, KiB per minute.
    pub rss_slope_kib_per_min: f64,
    pub warmup_s: f64,
    pub lost: u64,
    pub crossed: u64,
    pub duplicated: u64,
}

/// Runs the plan; the result says whether anything was lost, crossed or duplicated.
pub async fn soak(plan: Plan) -> SoakResult {
    let start = Instant::now();
    let end = start + plan.duration;
    let answered: Rc<RefCell<HashSet<String>>> = Rc::default();
    let per_worker = plan.rate / (plan.targets.len() * plan.workers).max(1) as f64;
    let period = Duration::from_secs_f64(1.0 / per_worker.max(0.001));
    let mut tasks = Vec::new();
    for (t, target) in plan.targets.iter().enumerate() {
        for w in 0..plan.workers {
            let worker = Worker {
                target: target.clone(),
                endpoint: Rc::new(Endpoint::parse(&target.url).unwrap_or_else(|e| panic!("{e}"))),
                tag: format!("{}-{w}", target.name),
                answered: answered.clone(),
                timeout: plan.timeout,
                seed: Cell::new(0x9E37_79B9_7F4A_7C15 ^ ((t as u64) << 32 | w as u64) ^ nanos()),
            };
            // Spread the workers' first calls over one period.
            let offset = period.mul_f64((t * plan.workers + w) as f64 / (plan.targets.len() * plan.workers) as f64);
            tasks.push(tokio::task::spawn_local(worker.run(start + offset, period, end)));
        }
    }
    let (samples, kills) = watch(&plan, start, end).await;
    let mut targets: BTreeMap<String, Counts> = BTreeMap::new();
    for task in tasks {
        if let Ok((name, counts)) = task.await {
            merge(targets.entry(name).or_default(), counts);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let sent: u64 = targets.values().map(|c| c.sent).sum();
    SoakResult {
        rate: plan.rate,
        duration_s: elapsed,
        workers: plan.workers,
        achieved_rate: sent as f64 / plan.duration.as_secs_f64(),
        lost: targets.values().map(Counts::lost).sum(),
        crossed: targets.values().map(|c| c.crossed).sum(),
        duplicated: targets.values().map(|c| c.duplicated).sum(),
        rss_slope_kib_per_min: slope(&samples, plan.warmup.as_secs_f64()) * 60.0,
        warmup_s: plan.warmup.as_secs_f64(),
        targets,
        kills,
        samples,
    }
}

fn merge(into: &mut Counts, from: Counts) {
    into.sent += from.sent;
    into.ok += from.ok;
    into.failed_with_error += from.failed_with_error;
    into.lost_timeout += from.lost_timeout;
    into.lost_connection += from.lost_connection;
    into.crossed += from.crossed;
    into.duplicated += from.duplicated;
    into.handshakes += from.handshakes;
    for (kind, n) in from.errors {
        *into.errors.entry(kind).or_default() += n;
    }
    for anomaly in from.anomalies {
        into.anomaly(anomaly);
    }
}

fn nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos().into())
}

/// Samples RSS every `rss_every` and kills one child every `kill_every` until `end`.
async fn watch(plan: &Plan, start: Instant, end: Instant) -> (Vec<Sample>, Vec<Kill>) {
    let (mut samples, mut kills) = (Vec::new(), Vec::new());
    let mut next_sample = start;
    let mut next_kill = (!plan.kill_every.is_zero()).then(|| start + plan.kill_every);
    let mut turn = 0usize;
    while Instant::now() < end {
        let now = Instant::now();
        if now >= next_sample {
            samples.push(Sample {
                at_s: now.duration_since(start).as_secs_f64(),
                rss_kib: procfs::rss_kib(plan.pid).unwrap_or(0),
                children: procfs::children(plan.pid).len(),
            });
            next_sample += plan.rss_every;
        }
        if let Some(at) = next_kill
            && now >= at
        {
            let pids = procfs::children(plan.pid);
            if !pids.is_empty() {
                // Turn by turn through whichever children live now.
                let pid = pids[turn % pids.len()];
                turn += 1;
                let killed = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status()
                    .is_ok_and(|s| s.success());
                if killed {
                    kills.push(Kill {
                        at_s: now.duration_since(start).as_secs_f64(),
                        pid,
                    });
                }
            }
            next_kill = Some(at + plan.kill_every);
        }
        let wake = next_kill.map_or(next_sample, |k| k.min(next_sample)).min(end);
        tokio::time::sleep_until(wake).await;
    }
    (samples, kills)
}

/// Least-squares slope of RSS (KiB per second) over the samples after `warmup_s`.
fn slope(samples: &[Sample], warmup_s: f64) -> f64 {
    let points: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.at_s >= warmup_s && s.rss_kib > 0)
        .map(|s| (s.at_s, s.rss_kib as f64))
        .collect();
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

/// One connection sending calls at a steady period.
struct Worker {
    target: Target,
    endpoint: Rc<Endpoint>,
    tag: String,
    answered: Rc<RefCell<HashSet<String>>>,
    timeout: Duration,
    seed: Cell<u64>,
}

/// What one call's answer was.
enum Verdict {
    Ok,
    Error(String),
    /// The legacy session is gone (404): the call failed and the session must be redone.
    SessionGone,
    Crossed(String),
    Duplicated(String),
}

impl Worker {
    async fn run(self, first: Instant, period: Duration, end: Instant) -> (String, Counts) {
        let mut counts = Counts::default();
        let mut ticks = tokio::time::interval_at(first, period);
        // A slow call delays the next one rather than causing a burst after it.
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut conn: Option<Conn> = None;
        let mut session: Option<String> = None;
        let mut seq = 0u64;
        loop {
            ticks.tick().await;
            if Instant::now() >= end {
                break;
            }
            if conn.is_none() {
                conn = Conn::open(self.endpoint.clone()).await.ok();
                session = None;
            }
            let Some(c) = conn.as_mut() else {
                counts.sent += 1;
                counts.error("connect".into());
                continue;
            };
            if self.target.pattern == Pattern::Legacy && session.is_none() {
                counts.handshakes += 1;
                match tokio::time::timeout(self.timeout, c.handshake()).await {
                    Ok(Ok(id)) => session = Some(id),
                    Ok(Err(e)) => {
                        counts.sent += 1;
                        counts.error(format!("handshake: {}", first_words(&e)));
                        conn = None;
                        continue;
                    }
                    Err(_) => {
                        counts.sent += 1;
                        counts.lost_timeout += 1;
                        counts.anomaly(format!("{}: handshake got no answer", self.tag));
                        conn = None;
                        continue;
                    }
                }
            }
            seq += 1;
            counts.sent += 1;
            let nonce = format!("{}-{seq}-{:016x}", self.tag, self.random());
            let sse = seq.is_multiple_of(4);
            let ms = self.random() % 20;
            let (headers, body) = self.request(seq, &nonce, ms, sse, session.as_deref());
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let reply = tokio::time::timeout(self.timeout, c.send(Method::POST, &headers, Bytes::from(body))).await;
            match reply {
                Err(_) => {
                    counts.lost_timeout += 1;
                    counts.anomaly(format!(
                        "{}: call {seq} ({nonce}) got no answer in {:?}",
                        self.tag, self.timeout
                    ));
                    conn = None;
                }
                Ok(Err(e)) => {
                    counts.lost_connection += 1;
                    counts.anomaly(format!("{}: call {seq} ({nonce}): {e}", self.tag));
                    conn = None;
                }
                Ok(Ok(reply)) => match self.judge(&reply, seq, &nonce) {
                    Verdict::Ok => counts.ok += 1,
                    Verdict::Error(kind) => counts.error(kind),
                    Verdict::SessionGone => {
                        counts.error("HTTP 404 (session ended)".into());
                        session = None;
                    }
                    Verdict::Crossed(why) => {
                        counts.crossed += 1;
                        counts.anomaly(format!("{}: call {seq} crossed: {why}", self.tag));
                    }
                    Verdict::Duplicated(why) => {
                        counts.duplicated += 1;
                        counts.anomaly(format!("{}: call {seq} duplicated: {why}", self.tag));
                    }
                },
            }
        }
        if let (Some(c), Some(s)) = (conn.as_mut(), session.as_deref()) {
            let _ = tokio::time::timeout(Duration::from_secs(2), c.delete(s)).await;
        }
        (self.target.name.clone(), counts)
    }

    /// xorshift64*: enough for nonces and delays.
    fn random(&self) -> u64 {
        let mut x = self.seed.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.seed.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A `sleep` call (the upstream echoes `text`) in the target's era.
    fn request(
        &self,
        id: u64,
        nonce: &str,
        ms: u64,
        sse: bool,
        session: Option<&str>,
    ) -> (Vec<(&'static str, String)>, String) {
        let arguments = format!(r#"{{"ms":{ms},"{}":"{nonce}"}}"#, self.target.arg);
        let progress = if sse {
            format!(r#""progressToken":"p-{nonce}""#)
        } else {
            String::new()
        };
        match session {
            Some(session) => {
                let meta = if sse {
                    format!(r#","_meta":{{{progress}}}"#)
                } else {
                    String::new()
                };
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sleep","arguments":{arguments}{meta}}}}}"#
                );
                let headers = vec![
                    ("mcp-session-id", session.to_owned()),
                    ("mcp-protocol-version", LEGACY_VERSION.to_owned()),
                ];
                (headers, body)
            }
            None => {
                let extra = if sse { format!(",{progress}") } else { String::new() };
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sleep","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN_VERSION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"mcpload-soak","version":"0"}}{extra}}}}}}}"#
                );
                let headers = vec![
                    ("mcp-protocol-version", MODERN_VERSION.to_owned()),
                    ("mcp-method", "tools/call".to_owned()),
                    ("mcp-name", "sleep".to_owned()),
                ];
                (headers, body)
            }
        }
    }

    fn judge(&self, reply: &Reply, id: u64, nonce: &str) -> Verdict {
        if reply.status == StatusCode::NOT_FOUND && self.target.pattern == Pattern::Legacy {
            return Verdict::SessionGone;
        }
        let responses: Vec<Value> = messages(reply)
            .into_iter()
            .filter(|m| m.get("id").is_some() && m.get("method").is_none())
            .collect();
        if reply.status != StatusCode::OK && responses.is_empty() {
            return Verdict::Error(format!("HTTP {}", reply.status.as_u16()));
        }
        let [response] = &responses[..] else {
            return if responses.is_empty() {
                Verdict::Error(format!(
                    "HTTP {} without a response: {}",
                    reply.status.as_u16(),
                    excerpt(&reply.body)
                ))
            } else {
                Verdict::Duplicated(format!("{} responses in one answer", responses.len()))
            };
        };
        if response.get("id").and_then(Value::as_u64) != Some(id) {
            return Verdict::Crossed(format!("id {} for request {id}", response["id"]));
        }
        if let Some(error) = response.get("error") {
            let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
            return Verdict::Error(format!("HTTP {} JSON-RPC {code}", reply.status.as_u16()));
        }
        let text = response
            .pointer("/result/content/0/text")
            .and_then(Value::as_str)
            .unwrap_or("");
        if text != nonce {
            return if self.answered.borrow().contains(text) {
                Verdict::Duplicated(format!("nonce {text} answered before"))
            } else {
                Verdict::Crossed(format!("nonce {text:?} for {nonce}"))
            };
        }
        if !self.answered.borrow_mut().insert(nonce.to_owned()) {
            return Verdict::Duplicated(format!("nonce {nonce} answered twice"));
        }
        Verdict::Ok
    }
}

/// The JSON-RPC messages of an answer: the JSON body, or each SSE `data:`.
fn messages(reply: &Reply) -> Vec<Value> {
    let event_stream = reply
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !event_stream {
        return serde_json::from_slice(&reply.body).map_or_else(|_| Vec::new(), |v| vec![v]);
    }
    String::from_utf8_lossy(&reply.body)
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim_start()).ok())
        .collect()
}

fn first_words(error: &str) -> String {
    error.split(':').take(2).collect::<Vec<_>>().join(":")
}

/// The soak's figures as Markdown: counts per target, kills, RSS samples.
pub fn markdown(result: &SoakResult) -> String {
    use std::fmt::Write as _;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| target | sent | ok | failed with an error | lost | crossed | duplicated | legacy handshakes |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (name, c) in &result.targets {
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {} | {} | {} | {} |",
            c.sent,
            c.ok,
            c.failed_with_error,
            c.lost(),
            c.crossed,
            c.duplicated,
            c.handshakes
        );
    }
    let _ = writeln!(md, "\nErrors by kind:\n");
    for (name, c) in &result.targets {
        for (kind, n) in &c.errors {
            let _ = writeln!(md, "- {name}: {kind} × {n}");
        }
    }
    let anomalies: Vec<&String> = result.targets.values().flat_map(|c| &c.anomalies).collect();
    if !anomalies.is_empty() {
        let _ = writeln!(md, "\nFirst anomalies:\n");
        for a in anomalies {
            let _ = writeln!(md, "- {a}");
        }
    }
    let _ = writeln!(
        md,
        "\n{} children killed (kill -9), at {} s.\n",
        result.kills.len(),
        result
            .kills
            .iter()
            .map(|k| format!("{:.0}", k.at_s))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        md,
        "RSS slope after the {:.0} s warm-up: **{:+.1} KiB/min** (least squares over {} samples).\n",
        result.warmup_s,
        result.rss_slope_kib_per_min,
        result.samples.iter().filter(|s| s.at_s >= result.warmup_s).count()
    );
    let _ = writeln!(md, "| t (s) | eragate RSS (MiB) | children |\n|---:|---:|---:|");
    // About a row a minute.
    let every = (result.samples.len() / 12).max(1);
    for (i, s) in result.samples.iter().enumerate() {
        if i.is_multiple_of(every) || i + 1 == result.samples.len() {
            let _ = writeln!(
                md,
                "| {:.0} | {:.1} | {} |",
                s.at_s,
                s.rss_kib as f64 / 1024.0,
                s.children
            );
        }
    }
    md
}
