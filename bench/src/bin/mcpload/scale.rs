//! The scale curves (issue 17): a gateway's RSS and CPU as idle legacy
//! sessions or open SSE streams (legacy GET streams, 2026-07-28
//! `subscriptions/listen`) pile up, step by step, and the least-squares fit
//! that turns the steps into a cost per unit and a verdict on linearity.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::client::{Conn, Endpoint};
use crate::procfs;

/// What piles up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// An idle legacy session (`initialize` + `notifications/initialized`, no connection kept).
    Session,
    /// A legacy session's open GET stream, each on a connection of its own.
    Get,
    /// A 2026-07-28 `subscriptions/listen` stream, each on a connection of its own.
    Listen,
}

impl Unit {
    pub fn parse(text: &str) -> Result<Unit, String> {
        match text {
            "session" => Ok(Unit::Session),
            "get" => Ok(Unit::Get),
            "listen" => Ok(Unit::Listen),
            other => Err(format!("unknown unit {other:?} (session, get, listen)")),
        }
    }
}

/// The gateway with `count` units open.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Step {
    pub count: usize,
    pub rss_kib: u64,
    /// The gateway's CPU to open the units of this step, per unit opened.
    pub open_cpu_us_per_unit: f64,
    pub open_seconds: f64,
    /// The gateway's CPU per second of the idle window that follows (keep-alive comments, timers).
    pub idle_cpu_us_per_s: f64,
    /// Units still alive at the end of the idle window: sessions answering `ping`
    /// (of a sample), streams not ended (all of them).
    pub alive: usize,
    /// How many were checked for `alive`.
    pub checked: usize,
    pub errors: u64,
    pub first_error: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Curve {
    pub unit: Unit,
    pub pid: u32,
    /// RSS before the first unit (for streams: with their sessions already open).
    pub rss_base_kib: u64,
    pub idle_window_s: f64,
    pub steps: Vec<Step>,
}

fn rss(pid: u32) -> Result<u64, String> {
    procfs::rss_kib(pid).ok_or_else(|| format!("cannot read /proc/{pid}/status"))
}

fn cpu(pid: u32) -> Result<f64, String> {
    procfs::cpu_us(pid).ok_or_else(|| format!("cannot read /proc/{pid}/stat"))
}

/// Errors of the workers of one step.
#[derive(Default)]
struct Errors {
    count: Cell<u64>,
    first: std::cell::RefCell<Option<String>>,
}

impl Errors {
    fn note(&self, error: String) {
        if self.count.get() == 0 {
            eprintln!("  [scale] error: {error}");
        }
        self.count.set(self.count.get() + 1);
        self.first.borrow_mut().get_or_insert(error);
    }
}

/// Opens `n` legacy sessions over `connections` keep-alive connections (closed afterwards).
async fn open_sessions(endpoint: &Rc<Endpoint>, n: usize, connections: usize, errors: &Rc<Errors>) -> Vec<String> {
    let connections = connections.clamp(1, n.max(1));
    let mut tasks = Vec::new();
    for worker in 0..connections {
        let share = n / connections + usize::from(worker < n % connections);
        let (endpoint, errors) = (endpoint.clone(), errors.clone());
        tasks.push(tokio::task::spawn_local(async move {
            let mut ids = Vec::with_capacity(share);
            let mut conn: Option<Conn> = None;
            let mut failures = 0;
            while ids.len() < share && failures < 100 {
                if conn.is_none() {
                    match Conn::open(endpoint.clone()).await {
                        Ok(c) => conn = Some(c),
                        Err(e) => {
                            errors.note(e);
                            failures += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                    }
                }
                let Some(c) = conn.as_mut() else { continue };
                match c.handshake().await {
                    Ok(id) => ids.push(id),
                    Err(e) => {
                        errors.note(e);
                        failures += 1;
                        conn = None;
                    }
                }
            }
            ids
        }));
    }
    let mut ids = Vec::with_capacity(n);
    for task in tasks {
        if let Ok(mut part) = task.await {
            ids.append(&mut part);
        }
    }
    ids
}

/// `ping` on up to `sample` sessions spread over `ids`: how many answered (alive).
async fn alive_sessions(endpoint: &Rc<Endpoint>, ids: &[String], sample: usize, errors: &Errors) -> (usize, usize) {
    let mut conn = match Conn::open(endpoint.clone()).await {
        Ok(c) => c,
        Err(e) => {
            errors.note(e);
            return (0, 0);
        }
    };
    let stride = (ids.len() / sample.max(1)).max(1);
    let (mut alive, mut checked) = (0, 0);
    for id in ids.iter().step_by(stride).take(sample) {
        checked += 1;
        match conn.ping(id).await {
            Ok(true) => alive += 1,
            Ok(false) => {}
            Err(e) => {
                errors.note(e);
                match Conn::open(endpoint.clone()).await {
                    Ok(c) => conn = c,
                    Err(_) => break,
                }
            }
        }
    }
    (alive, checked)
}

/// Open streams: each held by a detached task reading its events until it
/// ends (they end with the process).
struct Streams {
    open: Rc<Cell<usize>>,
}

/// Opens one stream on a new connection: a GET on `session`, or a listen when `session` is `None`.
/// For a listen, waits for its first event (the acknowledgement).
async fn open_stream(endpoint: Rc<Endpoint>, session: Option<String>, open: Rc<Cell<usize>>) -> Result<(), String> {
    let mut conn = Conn::open(endpoint).await?;
    let mut body = match &session {
        Some(session) => conn.get_stream(session).await?,
        None => {
            let mut body = conn.listen().await?;
            let first = tokio::time::timeout(Duration::from_secs(30), body.frame())
                .await
                .map_err(|_| "subscriptions/listen: no acknowledgement within 30 s".to_owned())?;
            match first {
                Some(Ok(frame)) => {
                    let data = frame.into_data().unwrap_or_default();
                    if !crate::client::contains(&data, b"notifications/subscriptions/acknowledged") {
                        return Err(format!(
                            "subscriptions/listen: first event is not the acknowledgement: {}",
                            crate::client::excerpt(&data)
                        ));
                    }
                }
                Some(Err(e)) => return Err(format!("subscriptions/listen: {e}")),
                None => return Err("subscriptions/listen: the stream ended at once".into()),
            }
            body
        }
    };
    open.set(open.get() + 1);
    tokio::task::spawn_local(async move {
        // Hold the connection and read keep-alive comments until the stream ends.
        let _conn = conn;
        while let Some(Ok(_)) = body.frame().await {}
        open.set(open.get() - 1);
    });
    Ok(())
}

/// Opens `n` streams, at most `parallel` being opened at once.
async fn open_streams(
    endpoint: &Rc<Endpoint>,
    sessions: Option<&[String]>,
    n: usize,
    parallel: usize,
    streams: &Streams,
    errors: &Rc<Errors>,
) {
    let next = Rc::new(Cell::new(0usize));
    let sessions: Option<Rc<Vec<String>>> = sessions.map(|s| Rc::new(s.to_vec()));
    let mut workers = Vec::new();
    for _ in 0..parallel.clamp(1, n.max(1)) {
        let (endpoint, next, errors, open, sessions) = (
            endpoint.clone(),
            next.clone(),
            errors.clone(),
            streams.open.clone(),
            sessions.clone(),
        );
        workers.push(tokio::task::spawn_local(async move {
            loop {
                let i = next.get();
                if i >= n {
                    break;
                }
                next.set(i + 1);
                let session = sessions.as_ref().and_then(|s| s.get(i).cloned());
                if sessions.is_some() && session.is_none() {
                    break;
                }
                if let Err(e) = open_stream(endpoint.clone(), session, open.clone()).await {
                    errors.note(e);
                }
            }
        }));
    }
    for worker in workers {
        let _ = worker.await;
    }
}

/// Plan of one curve.
pub struct Plan {
    pub url: String,
    pub pid: u32,
    pub unit: Unit,
    /// Cumulative counts, ascending.
    pub steps: Vec<usize>,
    pub idle_window: Duration,
    /// Sessions checked with `ping` per step.
    pub sample: usize,
}

pub async fn measure(plan: Plan) -> Result<Curve, String> {
    let endpoint = Rc::new(Endpoint::parse(&plan.url)?);
    let settle = || tokio::time::sleep(Duration::from_millis(1500));
    let top = plan.steps.iter().copied().max().unwrap_or(0);
    // GET streams need their sessions first: opened before the base is read.
    let mut sessions: Vec<String> = Vec::new();
    if plan.unit == Unit::Get {
        let errors = Rc::new(Errors::default());
        sessions = open_sessions(&endpoint, top, 16, &errors).await;
        if sessions.len() < top {
            return Err(format!(
                "opened {} of the {top} sessions for GET streams ({} errors: {})",
                sessions.len(),
                errors.count.get(),
                errors.first.borrow().as_deref().unwrap_or("")
            ));
        }
        eprintln!("  [scale] {top} sessions open for the GET streams");
    }
    settle().await;
    let rss_base_kib = rss(plan.pid)?;
    eprintln!("  [scale] {:?}: base RSS {rss_base_kib} KiB", plan.unit);
    let streams = Streams {
        open: Rc::new(Cell::new(0)),
    };
    let mut opened_sessions: Vec<String> = Vec::new();
    let mut count = 0usize;
    let mut steps = Vec::new();
    for &target in &plan.steps {
        let add = target.saturating_sub(count);
        let errors = Rc::new(Errors::default());
        let cpu_before = cpu(plan.pid)?;
        let began = Instant::now();
        match plan.unit {
            Unit::Session => {
                let mut ids = open_sessions(&endpoint, add, 16, &errors).await;
                opened_sessions.append(&mut ids);
            }
            Unit::Get => {
                let slice = &sessions[count..target];
                open_streams(&endpoint, Some(slice), add, 64, &streams, &errors).await;
            }
            Unit::Listen => open_streams(&endpoint, None, add, 64, &streams, &errors).await,
        }
        let open_seconds = began.elapsed().as_secs_f64();
        let open_cpu = cpu(plan.pid)? - cpu_before;
        count = target;
        settle().await;
        let rss_kib = rss(plan.pid)?;
        let idle_before = cpu(plan.pid)?;
        tokio::time::sleep(plan.idle_window).await;
        let idle_cpu_us_per_s = (cpu(plan.pid)? - idle_before) / plan.idle_window.as_secs_f64();
        let (alive, checked) = match plan.unit {
            Unit::Session => alive_sessions(&endpoint, &opened_sessions, plan.sample, &errors).await,
            Unit::Get | Unit::Listen => (streams.open.get(), count),
        };
        let step = Step {
            count,
            rss_kib,
            open_cpu_us_per_unit: open_cpu / add.max(1) as f64,
            open_seconds,
            idle_cpu_us_per_s,
            alive,
            checked,
            errors: errors.count.get(),
            first_error: errors.first.borrow().clone(),
        };
        eprintln!(
            "  [scale] {:?} × {count}: RSS {rss_kib} KiB, open {open_seconds:.1} s at {:.1} µs CPU each, idle {idle_cpu_us_per_s:.0} µs CPU/s, {alive}/{checked} alive, {} errors",
            plan.unit, step.open_cpu_us_per_unit, step.errors
        );
        steps.push(step);
    }
    Ok(Curve {
        unit: plan.unit,
        pid: plan.pid,
        rss_base_kib,
        idle_window_s: plan.idle_window.as_secs_f64(),
        steps,
    })
}

/// A least-squares line through (count, value) points and whether the points lie on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// Value per unit (the constant).
    pub slope: f64,
    pub intercept: f64,
    /// Coefficient of determination of the line (1 = every point on it).
    pub r2: f64,
    /// The slope between each pair of consecutive points (the marginal cost at that size).
    pub marginal: Vec<f64>,
    /// Every marginal slope within [`LINEAR_BAND`] of the overall slope.
    pub linear: bool,
}

/// How far a marginal slope may stray from the fitted one (as a ratio) for the growth to count as linear.
pub const LINEAR_BAND: (f64, f64) = (0.67, 1.5);

pub fn fit(points: &[(f64, f64)]) -> Option<Fit> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let ss_tot: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    let ss_res: f64 = points.iter().map(|p| (p.1 - intercept - slope * p.0).powi(2)).sum();
    let r2 = if ss_tot == 0.0 { 1.0 } else { 1.0 - ss_res / ss_tot };
    let marginal: Vec<f64> = points
        .windows(2)
        .filter(|w| w[1].0 != w[0].0)
        .map(|w| (w[1].1 - w[0].1) / (w[1].0 - w[0].0))
        .collect();
    let linear = slope > 0.0
        && marginal
            .iter()
            .all(|m| *m >= slope * LINEAR_BAND.0 && *m <= slope * LINEAR_BAND.1);
    Some(Fit {
        slope,
        intercept,
        r2,
        marginal,
        linear,
    })
}

impl Curve {
    /// Bytes of RSS per unit: the fit through the base and every step.
    pub fn rss_fit(&self) -> Option<Fit> {
        let mut points = vec![(0.0, self.rss_base_kib as f64 * 1024.0)];
        points.extend(self.steps.iter().map(|s| (s.count as f64, s.rss_kib as f64 * 1024.0)));
        fit(&points)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points of a curve, the constant the fit must find, and whether the growth is linear.
    type Case<'a> = (&'a [(f64, f64)], f64, bool);

    #[test]
    fn fit_finds_the_constant_and_tells_linear_from_not() {
        let cases: [Case<'_>; 5] = [
            // RSS of a base plus 4,600 bytes per session.
            (
                &[(0.0, 9e6), (1e3, 9e6 + 4.6e6), (1e4, 9e6 + 4.6e7), (1e5, 9e6 + 4.6e8)],
                4600.0,
                true,
            ),
            // Two points always lie on a line.
            (&[(0.0, 1.0), (10.0, 21.0)], 2.0, true),
            // A cost per unit that grows with the count (quadratic total): not linear.
            (&[(0.0, 0.0), (1e3, 1e6), (1e4, 1e8), (1e5, 1e10)], 102_652.6, false),
            // Flat: nothing per unit, so no constant worth calling linear.
            (&[(0.0, 5.0), (1e3, 5.0), (1e4, 5.0)], 0.0, false),
            // Noise within the band around 1 per unit.
            (
                &[(0.0, 0.0), (100.0, 120.0), (200.0, 190.0), (300.0, 300.0)],
                0.97,
                true,
            ),
        ];
        for (points, slope, linear) in cases {
            let f = fit(points).expect("a fit");
            assert!(
                (f.slope - slope).abs() <= slope.abs() * 0.01 + 1e-9,
                "{points:?}: {f:?}"
            );
            assert_eq!(f.linear, linear, "{points:?}: {f:?}");
        }
    }

    #[test]
    fn fit_needs_two_distinct_counts() {
        assert_eq!(fit(&[]), None);
        assert_eq!(fit(&[(1.0, 2.0)]), None);
        assert_eq!(fit(&[(1.0, 2.0), (1.0, 3.0)]), None);
    }
}
