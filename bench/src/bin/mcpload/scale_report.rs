//! Writes the "Scale" section (`bench/SCALE.md`, issue 17's scale curves and
//! issue 16's list-cache figure) from what `bench/scale.sh` left in its work
//! folder, and keeps that section in `bench/RESULTS.md` between markers, so
//! that `mcpload report` (a full `run.sh`) carries it over.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::Options;
use crate::run::Comparison;
use crate::scale::{Curve, Fit, LINEAR_BAND, Unit};

pub const BEGIN: &str = "<!-- scale.sh: begin -->";
pub const END: &str = "<!-- scale.sh: end -->";

fn load<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes)
        .map_err(|e| eprintln!("mcpload scale-report: {}: {e}", path.display()))
        .ok()
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// Median over the rounds of one figure of `target` at concurrency `c`.
fn med(
    cmp: &Comparison,
    target: &str,
    c: usize,
    figure: impl Fn(&crate::run::RunResult) -> Option<f64>,
) -> Option<f64> {
    median(
        cmp.runs
            .iter()
            .filter(|r| r.target == target && r.concurrency == c)
            .filter_map(figure)
            .collect(),
    )
}

fn opt(value: Option<f64>, decimals: usize) -> String {
    value.map_or("–".to_owned(), |v| format!("{v:.decimals$}"))
}

fn fit_sentence(fit: Option<&Fit>, per: &str, scale: f64, unit: &str) -> String {
    match fit {
        None => "no fit (fewer than two sizes measured)".to_owned(),
        Some(f) => {
            let marginal: Vec<String> = f.marginal.iter().map(|m| format!("{:.0}", m / scale)).collect();
            format!(
                "**{:.0} {unit} per {per}** (least squares over every size, R² = {:.4}); between consecutive sizes {} {unit} per {per}: {}",
                f.slope / scale,
                f.r2,
                marginal.join(" → "),
                if f.linear {
                    format!(
                        "**linear** (every step within {:.2}–{:.2} × the fitted constant)",
                        LINEAR_BAND.0, LINEAR_BAND.1
                    )
                } else {
                    format!(
                        "**not linear** (a step outside {:.2}–{:.2} × the fitted constant)",
                        LINEAR_BAND.0, LINEAR_BAND.1
                    )
                }
            )
        }
    }
}

fn curve_table(md: &mut String, curve: &Curve, what: &str) {
    let _ = writeln!(
        md,
        "| {what} | RSS MiB | bytes per unit over the previous size | gateway CPU µs per unit opened | idle gateway CPU µs/s ({} s window) | alive | errors |",
        curve.idle_window_s
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(md, "| 0 | {:.1} | | | | | |", curve.rss_base_kib as f64 / 1024.0);
    let mut previous = (0usize, curve.rss_base_kib);
    for step in &curve.steps {
        let marginal = (step.rss_kib as f64 - previous.1 as f64) * 1024.0 / (step.count - previous.0).max(1) as f64;
        let _ = writeln!(
            md,
            "| {} | {:.1} | {:.0} | {:.1} | {:.0} | {} / {} | {}{} |",
            step.count,
            step.rss_kib as f64 / 1024.0,
            marginal,
            step.open_cpu_us_per_unit,
            step.idle_cpu_us_per_s,
            step.alive,
            step.checked,
            step.errors,
            step.first_error
                .as_deref()
                .map(|e| format!(" ({})", e.chars().take(80).collect::<String>()))
                .unwrap_or_default()
        );
        previous = (step.count, step.rss_kib);
    }
    let _ = writeln!(md);
}

/// CPU per unit opened as a curve: does opening one more cost the same at every size?
fn open_cpu_fit(curve: &Curve) -> Option<Fit> {
    // Cumulative CPU to open `count` units, from the per-step figures.
    let mut total = 0.0;
    let mut previous = 0usize;
    let mut points = vec![(0.0, 0.0)];
    for step in &curve.steps {
        total += step.open_cpu_us_per_unit * (step.count - previous) as f64;
        previous = step.count;
        points.push((step.count as f64, total));
    }
    crate::scale::fit(&points)
}

fn curve_section(md: &mut String, curve: Option<&Curve>, heading: &str, blurb: &str, what: &str) {
    let _ = writeln!(md, "### {heading}\n");
    let Some(curve) = curve else {
        let _ = writeln!(md, "Not measured in this run.\n");
        return;
    };
    let _ = writeln!(md, "{blurb}\n");
    curve_table(md, curve, what);
    let per = match curve.unit {
        Unit::Session => "idle session",
        Unit::Get => "open GET stream",
        Unit::Listen => "open listen",
    };
    let _ = writeln!(
        md,
        "- Resident memory: {}.",
        fit_sentence(curve.rss_fit().as_ref(), per, 1.0, "bytes")
    );
    let _ = writeln!(
        md,
        "- CPU to open: {}.",
        fit_sentence(open_cpu_fit(curve).as_ref(), per, 1.0, "µs")
    );
    let alive_all = curve.steps.iter().all(|s| s.alive == s.checked);
    let _ = writeln!(
        md,
        "- Still alive after each idle window: {}.\n",
        if alive_all {
            "every unit checked".to_owned()
        } else {
            "**not all** (see the alive column: an ended session answers 404, an ended stream is counted out)"
                .to_owned()
        }
    );
}

fn pool_section(md: &mut String, pool: Option<&Comparison>, children: &str) {
    let _ = writeln!(md, "### A stdio pool under 1,000 concurrent calls\n");
    let Some(pool) = pool else {
        let _ = writeln!(md, "Not measured in this run.\n");
        return;
    };
    let _ = writeln!(
        md,
        "One eragate per pool size in front of `fast-upstream --stdio` (`[upstreams.pool] size` = 1, 4, 16), 2026-07-28 clients \
         (every request on the shared pooled children), closed loop at concurrency {}, {} round(s) of {} ms after {} ms of warm-up, \
         interleaved. Medians over the rounds. Children CPU is the pooled children's together, found when the window opens.\n",
        pool.concurrency
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        pool.rounds,
        pool.timing.duration_ms,
        pool.timing.warmup_ms
    );
    let _ = writeln!(
        md,
        "| pool size | c | calls/s | p50 µs | p99 µs | eragate CPU µs per call | children CPU µs per call | max RSS MiB | errors |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut per_call = Vec::new();
    for target in &pool.targets {
        let size: f64 = target
            .name
            .strip_prefix("pool-")
            .and_then(|n| n.parse().ok())
            .unwrap_or(f64::NAN);
        for &c in &pool.concurrency {
            let cpu = med(pool, &target.name, c, |r| r.cpu_us_per_op);
            let errors: u64 = pool
                .runs
                .iter()
                .filter(|r| r.target == target.name && r.concurrency == c)
                .map(|r| r.errors)
                .sum();
            if let Some(cpu) = cpu {
                per_call.push((size, cpu));
            }
            let _ = writeln!(
                md,
                "| {size} | {c} | {} | {} | {} | {} | {} | {} | {errors} |",
                opt(med(pool, &target.name, c, |r| Some(r.throughput)), 0),
                opt(med(pool, &target.name, c, |r| Some(r.p50_us)), 0),
                opt(med(pool, &target.name, c, |r| Some(r.p99_us)), 0),
                opt(cpu, 1),
                opt(med(pool, &target.name, c, |r| r.upstream_cpu_us_per_op), 1),
                opt(
                    med(pool, &target.name, c, |r| r.rss_max_kib.map(|k| k as f64 / 1024.0)),
                    1
                ),
            );
        }
    }
    let _ = writeln!(md);
    if !children.is_empty() {
        let _ = writeln!(
            md,
            "- Children each eragate ran when the calls ended (pool size: live children, spares included): {children}."
        );
    }
    if let (Some(min), Some(max)) = (
        per_call.iter().map(|p| p.1).min_by(f64::total_cmp),
        per_call.iter().map(|p| p.1).max_by(f64::total_cmp),
    ) {
        let flat = max <= min * LINEAR_BAND.1;
        let _ = writeln!(
            md,
            "- eragate's CPU per call ranges {min:.1}–{max:.1} µs over the pool sizes: {} The cost of a call does not depend on \
             how many children share the load when that holds, so total CPU grows linearly with calls at any pool size.\n",
            if flat {
                format!("**flat** (max ≤ {:.2} × min).", LINEAR_BAND.1)
            } else {
                format!("**not flat** (max > {:.2} × min).", LINEAR_BAND.1)
            }
        );
    }
}

fn list_section(md: &mut String, list: Option<&Comparison>) {
    let _ = writeln!(md, "### The list cache's hit path (issue 16)\n");
    let Some(list) = list else {
        let _ = writeln!(md, "Not measured in this run.\n");
        return;
    };
    let _ = writeln!(
        md,
        "One eragate in front of the fast upstream over Streamable HTTP with the list cache on (`[upstreams.cache] relist_interval`), \
         2026-07-28 clients: `cached-list` repeats `tools/list` (every answer after the first comes from eragate's copy), `call` \
         repeats a proxied `tools/call echo`. Interleaved, {} round(s) of {} ms, medians. The upstream's CPU is shown beside: a hit \
         should cost it nothing.\n",
        list.rounds, list.timing.duration_ms
    );
    let _ = writeln!(
        md,
        "| target | c | requests/s | p50 µs | eragate CPU µs per request | upstream CPU µs per request | errors |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
    let mut verdicts = Vec::new();
    for &c in &list.concurrency {
        for target in &list.targets {
            let errors: u64 = list
                .runs
                .iter()
                .filter(|r| r.target == target.name && r.concurrency == c)
                .map(|r| r.errors)
                .sum();
            let _ = writeln!(
                md,
                "| {} | {c} | {} | {} | {} | {} | {errors} |",
                target.name,
                opt(med(list, &target.name, c, |r| Some(r.throughput)), 0),
                opt(med(list, &target.name, c, |r| Some(r.p50_us)), 0),
                opt(med(list, &target.name, c, |r| r.cpu_us_per_op), 1),
                opt(med(list, &target.name, c, |r| r.upstream_cpu_us_per_op), 1),
            );
        }
        let hit = med(list, "cached-list", c, |r| r.cpu_us_per_op);
        let call = med(list, "call", c, |r| r.cpu_us_per_op);
        if let (Some(hit), Some(call)) = (hit, call) {
            verdicts.push(format!("c{c}: {hit:.1} vs {call:.1} µs ({:.2} ×)", hit / call));
        }
    }
    let met = !verdicts.is_empty()
        && list.concurrency.iter().all(|&c| {
            match (
                med(list, "cached-list", c, |r| r.cpu_us_per_op),
                med(list, "call", c, |r| r.cpu_us_per_op),
            ) {
                (Some(hit), Some(call)) => hit < call,
                _ => false,
            }
        });
    let _ = writeln!(
        md,
        "\nTarget (issue 16): a cached `tools/list` costs eragate less CPU than a proxied `tools/call`: {}; {}.\n",
        verdicts.join(", "),
        if met { "**met**" } else { "**not met**" }
    );
}

fn section(work: &Path, env: &BTreeMap<String, String>) -> String {
    let get = |key: &str| env.get(key).cloned().unwrap_or_else(|| "?".to_owned());
    let idle: Option<Curve> = load(&work.join("idle.json"));
    let get_streams: Option<Curve> = load(&work.join("get.json"));
    let listens: Option<Curve> = load(&work.join("listen.json"));
    let pool: Option<Comparison> = load(&work.join("pool.json"));
    let list: Option<Comparison> = load(&work.join("list.json"));
    let mut md = String::new();
    let _ = writeln!(md, "{BEGIN}");
    let _ = writeln!(md, "## Scale (issue 17)\n");
    let _ = writeln!(
        md,
        "Written by `bench/scale.sh{}` on {} in {} s, eragate {} (release build). {}\n",
        if get("mode") == "quick" { " --quick" } else { "" },
        get("date"),
        get("elapsed_s"),
        get("commit"),
        if get("shared") == "yes" {
            "**The machine was shared** (other builds and tests ran; see the load averages): the CPU figures carry that caveat \
             (CPU time counts only the gateway's own work, but caches and frequency suffer); the RSS figures hold."
        } else {
            "The machine was quiet (load averages below)."
        }
    );
    let _ = writeln!(md, "| | |\n|---|---|");
    for (label, key) in [
        ("CPU", "cpu_model"),
        ("cores", "cores"),
        ("memory", "memory"),
        ("kernel", "kernel"),
        ("CPU pinning", "pinning"),
        ("open-file limit", "nofile"),
        ("load average at start (1, 5, 15 min)", "loadavg_start"),
        ("load average at end", "loadavg_end"),
    ] {
        let _ = writeln!(md, "| {label} | {} |", get(key));
    }
    let _ = writeln!(md);
    if get("chart") == "yes" {
        let _ = writeln!(
            md,
            "![RSS against idle sessions and open streams, CPU per call against pool size](charts/scale.png)\n"
        );
    }
    curve_section(
        &mut md,
        idle.as_ref(),
        "Idle legacy sessions",
        "A fresh eragate in front of the fast upstream over Streamable HTTP (each legacy session holds a dedicated upstream \
         session, no connection). Sessions are opened over 16 keep-alive connections (`initialize` + `notifications/initialized`), \
         then the connections are closed and the sessions left idle; sizes are cumulative. RSS is read 1.5 s after the last \
         session of a size opened. Alive = sessions of an even sample that still answer `ping` (not 404) after the idle window.",
        "sessions",
    );
    curve_section(
        &mut md,
        get_streams.as_ref(),
        "Open legacy GET streams",
        "The same setup; first every session is opened (the base RSS includes them), then each session's GET stream is opened \
         on a connection of its own and held open (its keep-alive comments read). Per unit: the client connection, the stream, \
         and whatever eragate keeps for the upstream's side (the fast upstream answers its GET with 405).",
        "GET streams",
    );
    curve_section(
        &mut md,
        listens.as_ref(),
        "Open `subscriptions/listen` streams",
        "A fresh eragate, 2026-07-28 clients: each `subscriptions/listen` (tools list changes) on a connection of its own, its \
         acknowledgement read, then held open. They share eragate's pooled upstream session.",
        "listens",
    );
    pool_section(
        &mut md,
        pool.as_ref(),
        env.get("pool_children").map_or("", String::as_str),
    );
    list_section(&mut md, list.as_ref());
    let _ = writeln!(md, "{END}");
    md
}

/// `text` with the scale block replaced by `block` (or `block` put before the
/// closing "How to read this" section, else at the end, when it had none).
pub fn splice(text: &str, block: &str) -> String {
    if let (Some(begin), Some(end)) = (text.find(BEGIN), text.find(END))
        && begin < end
    {
        let after = &text[end + END.len()..];
        let after = after.strip_prefix('\n').unwrap_or(after);
        return format!("{}{block}{after}", &text[..begin]);
    }
    match text.find("\n## How to read this") {
        Some(at) => format!("{}\n{block}{}", &text[..at], &text[at..]),
        None => format!("{text}\n{block}"),
    }
}

/// The scale block of `text` (with the line end after it), when it has one.
pub fn block_of(text: &str) -> Option<&str> {
    let begin = text.find(BEGIN)?;
    let mut end = text.find(END)? + END.len();
    if text[end..].starts_with('\n') {
        end += 1;
    }
    (begin < end).then(|| &text[begin..end])
}

pub fn write(options: &Options) -> Result<(), String> {
    let work = options.path("work")?;
    let env_path = options.path("env")?;
    let env: BTreeMap<String, String> = std::fs::read_to_string(&env_path)
        .map_err(|e| format!("{}: {e}", env_path.display()))?
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let block = section(&work, &env);
    let out = options.path("out")?;
    std::fs::write(&out, &block).map_err(|e| format!("{}: {e}", out.display()))?;
    if let Some(results) = options.get("results") {
        let text = std::fs::read_to_string(results).unwrap_or_default();
        std::fs::write(results, splice(&text, &block)).map_err(|e| format!("{results}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_inserts_or_appends_the_block() {
        let block = format!("{BEGIN}\nnew\n{END}\n");
        // (results before, results after)
        let cases = [
            (
                format!("# r\n\n{BEGIN}\nold\n{END}\n## How to read this\n"),
                format!("# r\n\n{BEGIN}\nnew\n{END}\n## How to read this\n"),
            ),
            (
                "# r\n\n## How to read this\n".to_owned(),
                format!("# r\n\n{BEGIN}\nnew\n{END}\n\n## How to read this\n"),
            ),
            ("# r\n".to_owned(), format!("# r\n\n{BEGIN}\nnew\n{END}\n")),
        ];
        for (before, after) in cases {
            assert_eq!(splice(&before, &block), after, "{before:?}");
            assert_eq!(block_of(&after), Some(block.as_str()), "{after:?}");
        }
        assert_eq!(block_of("# r\n"), None);
    }
}
