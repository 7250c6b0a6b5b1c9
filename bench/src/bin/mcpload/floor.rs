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
    checks
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
