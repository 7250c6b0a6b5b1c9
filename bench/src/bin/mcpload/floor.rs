//! The floor: the targets of issue 17, eragate against nginx (a general-purpose
//! reverse proxy with a keep-alive upstream, the physical cost of two HTTP hops)
//! in the same run, as ratios of interleaved pairs.

use crate::check::{Check, fmt3};
use crate::run::Comparison;

/// One ratio of the subject to nginx, per concurrency: met when every median is ≤ `goal`.
type Ratio = fn(&Comparison, &str, usize) -> Option<(f64, f64, f64)>;

/// The issue 17 targets measured in `s1` (legacy passthrough) and `s2` (2026-07-28 → legacy);
/// each comparison holds an `nginx` target.
pub(crate) fn checks(s1: Option<&Comparison>, s2: Option<&Comparison>) -> Vec<Check> {
    let cpu: Ratio = Comparison::cpu_ratio;
    let upstream_cpu: Ratio = Comparison::upstream_cpu_ratio;
    let mut checks = vec![
        at_most(s1, cpu, &[16, 64], 1.2, "Legacy passthrough CPU per request ÷ nginx's"),
        at_most(s2, cpu, &[16, 64], 1.5, "2026-07-28 → legacy CPU per request ÷ nginx's"),
        throughput(s1),
        added_latency(s1),
        at_most(
            s1,
            upstream_cpu,
            &[16, 64],
            1.0,
            "The upstream's CPU per request behind eragate ÷ behind nginx",
        ),
    ];
    for check in &mut checks {
        if check.met.is_none() && check.measured == "–" {
            check.why = "no nginx in this run".into();
        }
    }
    // A CPU ratio missed: how far the relay (the same parts, forwarding only) was from nginx in
    // the same rounds, so the verdict says what of the distance is the parts and what eragate's.
    for (check, scenario) in checks.iter_mut().take(2).zip([s1, s2]) {
        if check.met == Some(false)
            && let Some(relay) = scenario.and_then(|cmp| relay_over_nginx(cmp, &[16, 64]))
        {
            check
                .why
                .push_str(&format!("; the bare relay ran at {relay} nginx's in the same rounds"));
        }
    }
    checks
}

/// "c16: 1.05 ×, c64: 1.07 ×": [`relay_cpu_over_nginx`] at each of `at`, or `None` when the
/// run had no relay.
fn relay_over_nginx(cmp: &Comparison, at: &[usize]) -> Option<String> {
    let parts: Vec<String> = at
        .iter()
        .filter_map(|&c| Some(format!("c{c}: {:.2} ×", relay_cpu_over_nginx(cmp, c)?)))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The relay's median CPU per request over nginx's at concurrency `c`.
fn relay_cpu_over_nginx(cmp: &Comparison, c: usize) -> Option<f64> {
    let cpu = |r: &crate::run::RunResult| r.cpu_us_per_op;
    Some(cmp.median_of(RELAY, c, cpu)? / cmp.median_of("nginx", c, cpu)?)
}

/// The counts of `bench/floor.sh` (written by `bench/run.sh` in a full run): instructions and
/// system calls per call, which do not move with the host as the timings above do.
pub(crate) fn counted_section(md: &mut String, counted: &str) {
    use std::fmt::Write as _;
    let _ = writeln!(md, "### Counted, not timed: instructions and system calls per call\n");
    let _ = writeln!(
        md,
        "`bench/floor.sh`, run by `bench/run.sh` after the timed scenarios, on the release builds of this commit: \
         callgrind counts the instructions each proxy executes per legacy `tools/call` (one client, after a warm-up), \
         groups the relay's and eragate's by function (`bench/cost_groups.py`: self cost, each function in the first \
         group its name matches), counts the fast upstream's instructions per request behind the relay and behind \
         eragate (16 clients), and `strace -c` counts each proxy's system calls per request. The timings above are \
         what this host charged for that work, and their ratios to nginx move with its price of user-space work \
         against the kernel's; these counts do not. eragate's work beyond the relay is the last column of the second \
         table: what understanding MCP costs on this design (bench/NOTES.md says where, stage by stage).\n"
    );
    let _ = writeln!(md, "{}\n", counted.trim_end());
}

fn unmeasured(what: &str, goal: String) -> Check {
    Check {
        what: what.into(),
        goal,
        measured: "–".into(),
        met: None,
        why: String::new(),
    }
}

/// Met when the median of `ratio` is at most `goal` at each of `at`.
fn at_most(cmp: Option<&Comparison>, ratio: Ratio, at: &[usize], goal: f64, what: &str) -> Check {
    let goal_text = format!("≤ {goal} ×");
    let Some(cmp) = cmp else {
        return unmeasured(what, goal_text);
    };
    let mut parts = Vec::new();
    let mut worst: Option<f64> = None;
    for &c in at {
        if let Some((_, median, _)) = ratio(cmp, "nginx", c) {
            parts.push(format!("c{c}: {median:.2} ×"));
            worst = Some(worst.map_or(median, |w: f64| w.max(median)));
        }
    }
    let met = worst.map(|w| w <= goal);
    Check {
        what: what.into(),
        goal: goal_text,
        measured: if parts.is_empty() {
            "–".into()
        } else {
            parts.join(", ")
        },
        met,
        why: match (met, worst) {
            (Some(false), Some(w)) => format!("worst median {w:.2} ×, {:.0} % over", (w / goal - 1.0) * 100.0),
            _ => String::new(),
        },
    }
}

/// Throughput ≥ 0.85 × nginx's at c16 and c64.
fn throughput(cmp: Option<&Comparison>) -> Check {
    const GOAL: f64 = 0.85;
    let what = "Legacy passthrough throughput ÷ nginx's";
    let Some(cmp) = cmp else {
        return unmeasured(what, format!("≥ {GOAL} ×"));
    };
    let medians: Vec<(usize, f64)> = [16, 64]
        .into_iter()
        .filter_map(|c| Some((c, cmp.throughput_ratio("nginx", c)?.1)))
        .collect();
    let worst = medians.iter().map(|(_, m)| *m).reduce(f64::min);
    let met = worst.map(|w| w >= GOAL);
    Check {
        what: what.into(),
        goal: format!("≥ {GOAL} ×"),
        measured: medians
            .iter()
            .map(|(c, m)| format!("c{c}: {m:.2} ×"))
            .collect::<Vec<_>>()
            .join(", "),
        met,
        why: match (met, worst) {
            (Some(false), Some(w)) => format!("worst median {w:.2} ×, short by {:.0} %", (1.0 - w / GOAL) * 100.0),
            _ => String::new(),
        },
    }
}

/// Added p50 at c1 within nginx's + 20 µs: eragate's p50 − nginx's p50 ≤ 20 µs.
fn added_latency(cmp: Option<&Comparison>) -> Check {
    const GOAL_US: f64 = 20.0;
    let what = "Added p50 latency at c1, beyond nginx's";
    let goal = format!("≤ {GOAL_US} µs");
    let Some(added) = cmp.and_then(|cmp| cmp.added_p50("nginx", 1)) else {
        return unmeasured(what, goal);
    };
    let met = added.1 <= GOAL_US;
    Check {
        what: what.into(),
        goal,
        measured: fmt3(Some(added), 0).replace("**", "") + " µs (min / median / max)",
        met: Some(met),
        why: if met {
            String::new()
        } else {
            format!("median {:.0} µs over", added.1 - GOAL_US)
        },
    }
}

/// The target that forwards with eragate's own parts and nothing else (`hyper-relay`).
const RELAY: &str = "hyper-relay";

/// Where the distance to nginx lies: eragate, the bare hyper relay and nginx side by side
/// per concurrency, from the same interleaved rounds of scenarios 1a and 2a. The relay's
/// share is what tokio and hyper cost for two hops; eragate's share above the relay is
/// what understanding MCP costs.
pub(crate) fn design_floor_section(md: &mut String, s1: Option<&Comparison>, s2: Option<&Comparison>) {
    use std::fmt::Write as _;
    let Some(s1) = s1.filter(|cmp| cmp.runs.iter().any(|r| r.target == RELAY)) else {
        return;
    };
    let _ = writeln!(md, "### The floor of this design: a bare hyper relay\n");
    let _ = writeln!(
        md,
        "`hyper-relay` (bench/src/bin/hyper_relay.rs) forwards with the parts eragate is made of (tokio's runtime, \
         chosen as eragate's is: one thread on one CPU, else a pool of workers; hyper's HTTP/1.1 server and client connections, kept alive in a list of idle connections as eragate's \
         upstream client keeps them), reading each message whole as eragate \
         does, and nothing else: no JSON, no session, no task per request. It ran in the same interleaved rounds as eragate \
         and nginx (scenarios 1a and 2a). Medians per concurrency; CPU is µs per request of the proxy alone (user space and the \
         kernel's work for it; the user-space part apart, from /proc's utime), upstream CPU the fast upstream's per request \
         behind that proxy.\n"
    );
    let _ = writeln!(
        md,
        "| c | CPU nginx | CPU hyper-relay | CPU eragate, legacy | CPU eragate, 2026-07-28 | of which user space: nginx / relay / eragate legacy / eragate 2026-07-28 | relay ÷ nginx | eragate legacy ÷ relay | eragate 2026-07-28 ÷ relay | upstream CPU behind nginx / relay / eragate | p50 nginx / relay / eragate (µs) | rps nginx / relay / eragate |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---|---|");
    let cpu = |r: &crate::run::RunResult| r.cpu_us_per_op;
    let up = |r: &crate::run::RunResult| r.upstream_cpu_us_per_op;
    let f1 = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1}"));
    let f2 = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.2} ×"));
    let f0 = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.0}"));
    for c in [1, 16, 64] {
        let nginx = s1.median_of("nginx", c, cpu);
        let relay = s1.median_of(RELAY, c, cpu);
        let legacy = s1.median_of(&s1.subject, c, cpu);
        let modern = s2.and_then(|s2| s2.median_of(&s2.subject, c, cpu));
        let relay_over_nginx = relay_cpu_over_nginx(s1, c);
        let legacy_over_relay = s1.cpu_ratio(RELAY, c).map(|(_, m, _)| m);
        let modern_over_relay = s2.and_then(|s2| s2.cpu_ratio(RELAY, c)).map(|(_, m, _)| m);
        let upstream = [
            s1.median_of("nginx", c, up),
            s1.median_of(RELAY, c, up),
            s1.median_of(&s1.subject, c, up),
        ];
        let user = |cmp: &Comparison, t: &str| cmp.median_of(t, c, |r| r.user_cpu_us_per_op);
        let users = [
            user(s1, "nginx"),
            user(s1, RELAY),
            user(s1, &s1.subject),
            s2.and_then(|s2| user(s2, &s2.subject)),
        ];
        let p50 = |t: &str| s1.median_of(t, c, |r| Some(r.p50_us));
        let rps = |t: &str| s1.median_of(t, c, |r| Some(r.throughput));
        let _ = writeln!(
            md,
            "| {c} | {} | {} | {} | {} | {} / {} / {} / {} | {} | {} | {} | {} / {} / {} | {} / {} / {} | {} / {} / {} |",
            f1(nginx),
            f1(relay),
            f1(legacy),
            f1(modern),
            f1(users[0]),
            f1(users[1]),
            f1(users[2]),
            f1(users[3]),
            f2(relay_over_nginx),
            f2(legacy_over_relay),
            f2(modern_over_relay),
            f1(upstream[0]),
            f1(upstream[1]),
            f1(upstream[2]),
            f0(p50("nginx")),
            f0(p50(RELAY)),
            f0(p50(&s1.subject)),
            f0(rps("nginx")),
            f0(rps(RELAY)),
            f0(rps(&s1.subject)),
        );
    }
    let _ = writeln!(md);
}
