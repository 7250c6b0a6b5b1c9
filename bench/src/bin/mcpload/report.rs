//! Writes `bench/RESULTS.md` from the JSON the other commands left in the work
//! folder, the machine facts `run.sh` gathered, and criterion's estimates.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::Options;
use crate::check::{Check, fmt3};
use crate::memory::MemoryResult;
use crate::run::{Comparison, RunResult};

type Env = BTreeMap<String, String>;

fn read_env(path: &Path) -> Result<Env, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect())
}

fn load<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes)
        .map_err(|e| eprintln!("mcpload report: {}: {e}", path.display()))
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

fn min_med_max(values: Vec<f64>) -> Option<(f64, f64, f64)> {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    median(values).map(|m| (min, m, max))
}

impl Comparison {
    fn runs_of(&self, target: &str, c: usize) -> Vec<&RunResult> {
        let mut runs: Vec<&RunResult> = self
            .runs
            .iter()
            .filter(|r| r.target == target && r.concurrency == c)
            .collect();
        runs.sort_by_key(|r| r.round);
        runs
    }

    /// (subject, other) runs of the same round.
    fn pairs(&self, other: &str, c: usize) -> Vec<(&RunResult, &RunResult)> {
        let subject = self.runs_of(&self.subject, c);
        let others = self.runs_of(other, c);
        subject
            .into_iter()
            .filter_map(|s| others.iter().find(|o| o.round == s.round).map(|o| (s, *o)))
            .collect()
    }

    pub(crate) fn throughput_ratio(&self, other: &str, c: usize) -> Option<(f64, f64, f64)> {
        min_med_max(
            self.pairs(other, c)
                .iter()
                .filter(|(_, o)| o.throughput > 0.0)
                .map(|(s, o)| s.throughput / o.throughput)
                .collect(),
        )
    }

    /// Subject CPU per request ÷ other's, per interleaved pair.
    pub(crate) fn cpu_ratio(&self, other: &str, c: usize) -> Option<(f64, f64, f64)> {
        self.ratio_of(other, c, |r| r.cpu_us_per_op)
    }

    /// The upstream's CPU per request behind the subject ÷ behind the other, per pair.
    pub(crate) fn upstream_cpu_ratio(&self, other: &str, c: usize) -> Option<(f64, f64, f64)> {
        self.ratio_of(other, c, |r| r.upstream_cpu_us_per_op)
    }

    fn ratio_of(&self, other: &str, c: usize, f: impl Fn(&RunResult) -> Option<f64>) -> Option<(f64, f64, f64)> {
        min_med_max(
            self.pairs(other, c)
                .iter()
                .filter_map(|(s, o)| Some((f(s)?, f(o).filter(|v| *v > 0.0)?)))
                .map(|(s, o)| s / o)
                .collect(),
        )
    }

    pub(crate) fn added_p50(&self, other: &str, c: usize) -> Option<(f64, f64, f64)> {
        min_med_max(self.pairs(other, c).iter().map(|(s, o)| s.p50_us - o.p50_us).collect())
    }

    pub(crate) fn median_of(&self, target: &str, c: usize, f: impl Fn(&RunResult) -> Option<f64>) -> Option<f64> {
        median(self.runs_of(target, c).into_iter().filter_map(f).collect())
    }
}

fn fmt(value: Option<f64>, decimals: usize) -> String {
    value.map_or("–".to_owned(), |v| format!("{v:.decimals$}"))
}

fn comparison_section(md: &mut String, heading: &str, comparison: Option<&Comparison>, blurb: &str) {
    let _ = writeln!(md, "### {heading}\n\n{blurb}\n");
    let Some(cmp) = comparison else {
        let _ = writeln!(md, "_Not run._\n");
        return;
    };
    let _ = writeln!(
        md,
        "{} round(s) per concurrency, each run {} ms warm-up + {} ms measured; responses {}.\n",
        cmp.rounds,
        cmp.timing.warmup_ms,
        cmp.timing.duration_ms,
        if cmp.sse {
            "as SSE streams (each call asks for progress: one `notifications/progress` event, then the result)"
        } else {
            "as `application/json`"
        }
    );
    let _ = writeln!(
        md,
        "| target | client | c | ops/s | p50 µs | p90 µs | p99 µs | CPU µs/op | upstream CPU µs/op | max RSS MiB | errors |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &c in &cmp.concurrency {
        for target in &cmp.targets {
            let runs = cmp.runs_of(&target.name, c);
            if runs.is_empty() {
                continue;
            }
            let errors: u64 = runs.iter().map(|r| r.errors).sum();
            let first_error = runs.iter().find_map(|r| r.first_error.clone());
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                target.name,
                target.pattern.as_str(),
                c,
                fmt(cmp.median_of(&target.name, c, |r| Some(r.throughput)), 0),
                fmt(cmp.median_of(&target.name, c, |r| Some(r.p50_us)), 0),
                fmt(cmp.median_of(&target.name, c, |r| Some(r.p90_us)), 0),
                fmt(cmp.median_of(&target.name, c, |r| Some(r.p99_us)), 0),
                fmt(cmp.median_of(&target.name, c, |r| r.cpu_us_per_op), 1),
                fmt(cmp.median_of(&target.name, c, |r| r.upstream_cpu_us_per_op), 1),
                fmt(
                    cmp.median_of(&target.name, c, |r| r.rss_max_kib.map(|k| k as f64 / 1024.0)),
                    1
                ),
                if errors == 0 {
                    "0".to_owned()
                } else {
                    format!("{errors} ({})", first_error.unwrap_or_default().replace('|', "/"))
                },
            );
        }
    }
    let _ = writeln!(
        md,
        "\nRatios, {} against each other target, per interleaved pair (min / **median** / max over the rounds):\n",
        cmp.subject
    );
    let _ = writeln!(
        md,
        "| pair | c | throughput ratio | added p50 latency µs | added p99 latency µs (median) | CPU per request ratio | upstream CPU ratio |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
    for &c in &cmp.concurrency {
        for other in cmp.targets.iter().filter(|t| t.name != cmp.subject) {
            let p99 = median(
                cmp.pairs(&other.name, c)
                    .iter()
                    .map(|(s, o)| s.p99_us - o.p99_us)
                    .collect(),
            );
            let _ = writeln!(
                md,
                "| {} / {} | {} | {} | {} | {} | {} | {} |",
                cmp.subject,
                other.name,
                c,
                fmt3(cmp.throughput_ratio(&other.name, c), 2),
                fmt3(cmp.added_p50(&other.name, c), 0),
                fmt(p99, 0),
                fmt3(cmp.cpu_ratio(&other.name, c), 2),
                fmt3(cmp.upstream_cpu_ratio(&other.name, c), 2),
            );
        }
    }
    let _ = writeln!(md);
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**not met**",
        None => "not measured",
    }
}

fn ratio_check(cmp: Option<&Comparison>, other: &str, at: &[usize], goal: f64, what: &str) -> Check {
    let goal_text = format!("≥ {goal} ×");
    let Some(cmp) = cmp else {
        return Check {
            what: what.into(),
            goal: goal_text,
            measured: "–".into(),
            met: None,
            why: String::new(),
        };
    };
    let mut parts = Vec::new();
    let mut worst: Option<f64> = None;
    for &c in at {
        if let Some((_, median, _)) = cmp.throughput_ratio(other, c) {
            parts.push(format!("c{c}: {median:.2} ×"));
            worst = Some(worst.map_or(median, |w: f64| w.min(median)));
        }
    }
    let met = worst.map(|w| w >= goal);
    let why = match (met, worst) {
        (Some(false), Some(w)) => format!("worst median {w:.2} ×, short by {:.0} %", (1.0 - w / goal) * 100.0),
        _ => String::new(),
    };
    Check {
        what: what.into(),
        goal: goal_text,
        measured: parts.join(", "),
        met,
        why,
    }
}

/// Why a throughput ratio is what it is when the server core(s) are the limit:
/// the gateway's and the upstream's CPU per request against the direct rate.
fn cpu_ceiling(cmp: &Comparison, other: &str, c: usize, goal: f64, server_cores: f64) -> Option<String> {
    let gateway = cmp.median_of(&cmp.subject, c, |r| r.cpu_us_per_op)?;
    let upstream = cmp.median_of(other, c, |r| r.cpu_us_per_op)?;
    let direct = cmp.median_of(other, c, |r| Some(r.throughput))?;
    if direct <= 0.0 {
        return None;
    }
    let cap = 1e6 * server_cores / (gateway + upstream);
    let needed = 1e6 * server_cores / (goal * direct) - upstream;
    if cap / direct >= goal {
        return Some(format!(
            "at c{c} eragate's {gateway:.0} µs and the upstream's {upstream:.0} µs of CPU per request alone would allow {:.2} ×: \
             the rest of the shortfall is waiting, not eragate's CPU",
            cap / direct
        ));
    }
    Some(format!(
        "at c{c} the upstream needs {upstream:.0} µs and eragate {gateway:.0} µs of CPU per request on the {server_cores} \
         server core(s): that caps the rate at {cap:.0}/s, {:.2} × the direct {direct:.0}/s; {goal} × would need eragate at {} \
         per request",
        cap / direct,
        if needed > 0.0 {
            format!("≤ {needed:.0} µs")
        } else {
            "less than nothing".to_owned()
        }
    ))
}

fn cpu_check(cmps: &[(&str, Option<&Comparison>, &str)], goal: f64) -> Check {
    let mut parts = Vec::new();
    let mut worst: Option<f64> = None;
    for (label, cmp, target) in cmps {
        let Some(cmp) = cmp else { continue };
        let values: Vec<String> = cmp
            .concurrency
            .iter()
            .filter_map(|&c| {
                let v = cmp.median_of(target, c, |r| r.cpu_us_per_op)?;
                worst = Some(worst.map_or(v, |w: f64| w.max(v)));
                Some(format!("c{c} {v:.1}"))
            })
            .collect();
        if !values.is_empty() {
            parts.push(format!("{label}: {} µs", values.join(", ")));
        }
    }
    let met = worst.map(|w| w <= goal);
    let why = match (met, worst) {
        (Some(false), Some(w)) => format!("worst {w:.1} µs, {:.1} × the goal", w / goal),
        _ => String::new(),
    };
    Check {
        what: "eragate CPU per proxied `tools/call`".into(),
        goal: format!("≤ {goal} µs"),
        measured: parts.join("; "),
        met,
        why,
    }
}

/// The two era-translation targets of one comparison (scenario 2 or 2c): against
/// the per-request handshake and against the established session; `upstream`
/// names the upstream in their titles (empty for the fast one).
fn era_translation_checks(comparison: Option<&Comparison>, upstream: &str, server_cores: f64) -> [Check; 2] {
    let mut handshake = ratio_check(
        comparison,
        "per-request-handshake",
        &[1, 16, 64],
        5.0,
        &format!("Era translation vs per-request handshake ({upstream}JSON)"),
    );
    explain_handshake_ceiling(&mut handshake, comparison);
    let mut established = ratio_check(
        comparison,
        "established-session",
        &[1, 16, 64],
        0.8,
        &format!("Era translation vs established-session limit ({upstream}JSON)"),
    );
    explain_cpu_ceiling(&mut established, comparison, "established-session", server_cores);
    [handshake, established]
}

/// When a throughput ratio against `other` is missed: the ceiling CPU per request sets at c16.
fn explain_cpu_ceiling(check: &mut Check, comparison: Option<&Comparison>, other: &str, server_cores: f64) {
    if check.met == Some(false)
        && let Some(why) = comparison.and_then(|cmp| cpu_ceiling(cmp, other, 16, 0.8, server_cores))
    {
        check.why = format!("{}; {why}", check.why);
    }
}

/// When the handshake ratio is missed: how much faster than a per-request
/// handshake is even the established session, with no gateway at all, on that upstream?
fn explain_handshake_ceiling(check: &mut Check, comparison: Option<&Comparison>) {
    let Some(cmp) = comparison else { return };
    let limits: Vec<String> = cmp
        .concurrency
        .iter()
        .filter_map(|&c| {
            let established = cmp.median_of("established-session", c, |r| Some(r.throughput))?;
            let per_request = cmp.median_of("per-request-handshake", c, |r| Some(r.throughput))?;
            (per_request > 0.0).then(|| format!("c{c} {:.1} ×", established / per_request))
        })
        .collect();
    if check.met == Some(false) && !limits.is_empty() {
        check.why = format!(
            "{}; even the established session without any gateway is only {} the per-request handshake on this upstream",
            check.why,
            limits.join(", ")
        );
    }
}

pub fn write(options: &Options) -> Result<(), String> {
    let work = options.path("work")?;
    let env = read_env(&options.path("env")?)?;
    let out = options.path("out")?;
    let get = |key: &str| env.get(key).cloned().unwrap_or_else(|| "?".to_owned());

    let s1_json: Option<Comparison> = load(&work.join("s1-json.json"));
    let s1_sse: Option<Comparison> = load(&work.join("s1-sse.json"));
    let s2_json: Option<Comparison> = load(&work.join("s2-json.json"));
    let s2_sse: Option<Comparison> = load(&work.join("s2-sse.json"));
    let s2e: Option<Comparison> = load(&work.join("s2e-json.json"));
    let s3: Option<Comparison> = load(&work.join("s3-stdio.json"));
    let mem: Option<MemoryResult> = load(&work.join("memory.json"));
    let s6_modern: Option<Comparison> = load(&work.join("s6-oauth-modern.json"));
    let s6_legacy: Option<Comparison> = load(&work.join("s6-oauth-legacy.json"));

    let mut md = String::new();
    let _ = writeln!(md, "# eragate benchmark results\n");
    let _ = writeln!(
        md,
        "Written by `bench/run.sh{}` on {} in {} s, of which {} s were the (incremental) release build and the peer install check. \
         Every figure below comes from that one run on this machine. Ratios between figures of the same run carry over only to \
         machines that price user-space work against the kernel's alike (an AMD EPYC and an Intel Xeon of the same class differed \
         by about 2 × in user time per instruction: bench/NOTES.md); the instruction and system call counts (\"Counted, not timed\") \
         carry over to other x86-64 machines.\n",
        if get("mode") == "quick" { " --quick" } else { "" },
        get("date"),
        get("elapsed_s"),
        get("setup_s"),
    );
    let _ = writeln!(md, "## Machine and software\n");
    let _ = writeln!(md, "| | |\n|---|---|");
    for (label, key) in [
        ("CPU", "cpu_model"),
        ("cores", "cores"),
        ("memory", "memory"),
        ("kernel", "kernel"),
        ("eragate commit", "commit"),
        ("rustc", "rustc"),
        ("eragate build", "build"),
        ("supergateway", "supergateway"),
        ("server-everything", "everything"),
        ("mcp-proxy", "mcp_proxy"),
        ("node (runs supergateway)", "node"),
        ("python (runs mcp-proxy)", "python"),
        ("CPU pinning", "pinning"),
        ("load average at start (1, 5, 15 min)", "loadavg_start"),
        ("load average at end", "loadavg_end"),
    ] {
        let _ = writeln!(md, "| {label} | {} |", get(key));
    }
    let _ = writeln!(md);

    // Targets first: the reader's question.
    let mut checks = Vec::new();
    checks.push(match &s1_json {
        Some(cmp) => {
            let added = cmp.added_p50("direct", 1);
            let met = added.map(|(_, m, _)| m <= 100.0);
            Check {
                what: "Added latency at concurrency 1 (p50, JSON)".into(),
                goal: "≤ 100 µs".into(),
                measured: fmt3(added, 0).replace("**", "") + " µs (min / median / max)",
                met,
                why: match (met, added) {
                    (Some(false), Some((_, m, _))) => format!("median {:.0} µs over", m - 100.0),
                    _ => String::new(),
                },
            }
        }
        None => Check {
            what: "Added latency at concurrency 1".into(),
            goal: "≤ 100 µs".into(),
            measured: "–".into(),
            met: None,
            why: String::new(),
        },
    });
    let server_cores: f64 = env.get("server_cores").and_then(|v| v.parse().ok()).unwrap_or(1.0);
    let mut passthrough = ratio_check(
        s1_json.as_ref(),
        "direct",
        &[16],
        0.8,
        "Passthrough throughput at concurrency 16 (JSON)",
    );
    explain_cpu_ceiling(&mut passthrough, s1_json.as_ref(), "direct", server_cores);
    checks.push(passthrough);
    checks.extend(era_translation_checks(s2_json.as_ref(), "", server_cores));
    checks.extend(era_translation_checks(
        s2e.as_ref(),
        "server-everything upstream, ",
        server_cores,
    ));
    checks.push(ratio_check(
        s3.as_ref(),
        "supergateway",
        &[1, 16, 64],
        5.0,
        "stdio bridging vs supergateway",
    ));
    checks.push(ratio_check(
        s3.as_ref(),
        "mcp-proxy",
        &[1, 16, 64],
        5.0,
        "stdio bridging vs mcp-proxy",
    ));
    checks.push(match &mem {
        Some(m) => {
            let kib = m.bytes_per_session / 1024.0;
            Check {
                what: format!(
                    "Resident memory per idle legacy session ({} sessions)",
                    m.sessions_opened
                ),
                goal: "≤ 10 KiB".into(),
                measured: format!("{kib:.1} KiB"),
                met: Some(kib <= 10.0),
                why: if kib > 10.0 {
                    format!("{:.1} × the goal", kib / 10.0)
                } else {
                    String::new()
                },
            }
        }
        None => Check {
            what: "Resident memory per idle legacy session".into(),
            goal: "≤ 10 KiB".into(),
            measured: "–".into(),
            met: None,
            why: String::new(),
        },
    });
    checks.push(match &mem {
        Some(m) => {
            let mb = m.rss_idle_kib as f64 * 1024.0 / 1e6;
            Check {
                what: "Resident memory idle".into(),
                goal: "≤ 10 MB".into(),
                measured: format!("{mb:.1} MB ({} KiB)", m.rss_idle_kib),
                met: Some(mb <= 10.0),
                why: {
                    let over = if mb > 10.0 {
                        format!("{:.1} MB over", mb - 10.0)
                    } else {
                        String::new()
                    };
                    match (m.rss_idle_anon_kib, m.rss_idle_file_kib) {
                        (Some(anon), Some(file)) => format!(
                            "{over}{}{:.1} MB anonymous (eragate's heap and stacks) + {:.1} MB file-backed (the executable's clean pages; see bench/NOTES.md)",
                            if over.is_empty() { "" } else { "; " },
                            anon as f64 * 1024.0 / 1e6,
                            file as f64 * 1024.0 / 1e6
                        ),
                        _ => over,
                    }
                },
            }
        }
        None => Check {
            what: "Resident memory idle".into(),
            goal: "≤ 10 MB".into(),
            measured: "–".into(),
            met: None,
            why: String::new(),
        },
    });
    checks.push(cpu_check(
        &[
            ("legacy passthrough", s1_json.as_ref(), "eragate"),
            ("2026-07-28 → legacy", s2_json.as_ref(), "eragate-modern"),
        ],
        50.0,
    ));

    for (cmp, client) in [(&s6_modern, "2026-07-28"), (&s6_legacy, "legacy")] {
        checks.push(ratio_check(
            cmp.as_ref(),
            "eragate",
            &[1, 16, 64],
            0.9,
            &format!("OAuth on vs off, {client} client (issue 12)"),
        ));
    }

    // Issue 17: nginx as the floor (scenarios 1a and 2a carry an `nginx` target).
    checks.extend(crate::floor::checks(s1_json.as_ref(), s2_json.as_ref()));

    let _ = writeln!(md, "## Targets (issues 3, 12 and 17)\n");
    let _ = writeln!(
        md,
        "Ratios are medians of the interleaved pairs; a target over several concurrencies is met only if met at each.\n"
    );
    let _ = writeln!(md, "| target | goal | measured | verdict | by how much |");
    let _ = writeln!(md, "|---|---|---|---|---|");
    for check in &checks {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            check.what,
            check.goal,
            check.measured,
            verdict(check.met),
            check.why
        );
    }
    let met = checks.iter().filter(|c| c.met == Some(true)).count();
    let _ = writeln!(md, "\n{met} of {} targets met.\n", checks.len());
    crate::floor::design_floor_section(&mut md, s1_json.as_ref(), s2_json.as_ref());
    if let Some(counted) = env.get("counted_file").and_then(|p| std::fs::read_to_string(p).ok()) {
        crate::floor::counted_section(&mut md, &counted);
    }
    charts_section(&mut md, out.parent());

    let _ = writeln!(md, "## Setup\n");
    let _ = writeln!(md, "{}\n", get("setup").replace("\\n", "\n"));
    for path in get("configs").split_whitespace() {
        if let Ok(text) = std::fs::read_to_string(path) {
            // Paths inside the checkout, relative to it: the report is committed.
            let text = match env.get("repo") {
                Some(repo) => text.replace(&format!("{repo}/"), ""),
                None => text,
            };
            let name = Path::new(path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let fence = if name.ends_with(".conf") { "nginx" } else { "toml" };
            let _ = writeln!(md, "`{name}`:\n\n```{fence}\n{}```\n", text);
        }
    }

    let _ = writeln!(md, "## 1. Passthrough cost\n");
    let blurb1 = "A legacy client (one session per connection, then `tools/call echo` on it) against the fast upstream directly (`direct`) \
                  through eragate in front of the same upstream over Streamable HTTP (`eragate`), \
                  and through nginx (`nginx`: Debian's package, a keep-alive upstream, no access log, as many workers as eragate has threads), the floor: \
                  what a general-purpose reverse proxy pays for the same two hops. Added latency = eragate's p50 − the other's p50 of the same round. \
                  CPU µs/op and RSS are the watched process's: the fast upstream on `direct` rows, eragate (alone, without the upstream) on `eragate` rows, \
                  nginx's master and workers on `nginx` rows; upstream CPU µs/op is the fast upstream's on every row.";
    comparison_section(&mut md, "1a. JSON responses", s1_json.as_ref(), blurb1);
    comparison_section(&mut md, "1b. SSE responses", s1_sse.as_ref(), blurb1);

    let _ = writeln!(md, "## 2. Era translation\n");
    let blurb2 = "`eragate-modern`: a 2026-07-28 client (every request self-contained: `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `_meta` envelope) \
                  → eragate → the legacy-only fast upstream over HTTP, on eragate's warm pooled upstream session. \
                  `established-session`: a legacy client holding a session directly on the upstream (the limit). \
                  `per-request-handshake`: directly on the upstream, each call is `initialize`, `notifications/initialized`, the call and DELETE \
                  (what a gateway without session pooling pays at least); one op = the whole sequence. \
                  `nginx`: a legacy client through nginx (no translation: the floor of two HTTP hops). \
                  CPU µs/op and RSS: eragate's on the `eragate-modern` row, nginx's on the `nginx` row, the fast upstream's on the others.";
    comparison_section(&mut md, "2a. JSON responses", s2_json.as_ref(), blurb2);
    comparison_section(&mut md, "2b. SSE responses", s2_sse.as_ref(), blurb2);
    let blurb2c = "The same three patterns in front of `@modelcontextprotocol/server-everything` (the TypeScript SDK's reference \
                   server, Streamable HTTP, one SDK server and transport per session) instead of the fast upstream: an upstream whose \
                   `initialize` costs what a real SDK server's costs, which is what the per-request-handshake pattern pays on every call. \
                   Its `echo` tool (argument `message`) is called. CPU µs/op and RSS: eragate's on the `eragate-modern` row, \
                   server-everything's on the others.";
    comparison_section(
        &mut md,
        "2c. A real SDK upstream (server-everything), JSON",
        s2e.as_ref(),
        blurb2c,
    );

    let _ = writeln!(md, "## 3. stdio bridging\n");
    comparison_section(
        &mut md,
        "3. The fast upstream over stdio, exposed over Streamable HTTP",
        s3.as_ref(),
        "The same stdio server (`fast-upstream --stdio`) behind eragate, `supergateway` (stateful Streamable HTTP mode: a child per session) \
         and `mcp-proxy` (Streamable HTTP, one shared child), all driven by the same legacy load (session per connection). \
         eragate gives each legacy session a child of its own, taken from warm spares; `eragate-modern` is 2026-07-28 clients on eragate's \
         one pooled child (peers cannot serve those clients). CPU and RSS are those of the bridge process alone (children excluded).",
    );

    let _ = writeln!(md, "## 4. Memory\n");
    match &mem {
        Some(m) => {
            let _ = writeln!(
                md,
                "eragate in front of the fast upstream over HTTP (each legacy client session holds a dedicated upstream session). \
                 RSS is `VmRSS` from `/proc/PID/status`.\n"
            );
            let _ = writeln!(md, "| state | eragate RSS | |\n|---|---:|---|");
            let split = match (m.rss_idle_anon_kib, m.rss_idle_file_kib) {
                (Some(anon), Some(file)) => format!(
                    "{:.1} MiB anonymous, {:.1} MiB file-backed",
                    anon as f64 / 1024.0,
                    file as f64 / 1024.0
                ),
                _ => String::new(),
            };
            let _ = writeln!(
                md,
                "| idle (warm pooled session, no client) | {:.1} MiB | {split} |",
                m.rss_idle_kib as f64 / 1024.0
            );
            let _ = writeln!(
                md,
                "| {} 2026-07-28 `tools/call sleep({} ms)` in flight, one connection each | {:.1} MiB (max) | peak {} in flight at once; {} ok, {} errors{} |",
                m.inflight,
                m.sleep_ms,
                m.rss_inflight_max_kib as f64 / 1024.0,
                m.inflight_peak,
                m.inflight_ok,
                m.inflight_errors,
                m.inflight_first_error
                    .as_deref()
                    .map(|e| format!(" ({})", e.replace('|', "/")))
                    .unwrap_or_default()
            );
            let _ = writeln!(
                md,
                "| after they finished | {:.1} MiB | |",
                m.rss_after_inflight_kib as f64 / 1024.0
            );
            let _ = writeln!(
                md,
                "| {} idle legacy sessions open | {:.1} MiB | {:.0} bytes ({:.1} KiB) per session (growth over the previous row ÷ sessions); opened in {:.1} s, {} errors |",
                m.sessions_opened,
                m.rss_sessions_kib as f64 / 1024.0,
                m.bytes_per_session,
                m.bytes_per_session / 1024.0,
                m.open_seconds,
                m.session_errors
            );
            let _ = writeln!(
                md,
                "| after DELETE of every session | {:.1} MiB | memory the allocator keeps |",
                m.rss_after_close_kib as f64 / 1024.0
            );
            let mut previous = m.rss_sessions_kib;
            for (round, &rss) in m.rss_reopened_kib.iter().enumerate() {
                let _ = writeln!(
                    md,
                    "| the same number opened again after DELETE (round {}) | {:.1} MiB | {:+.0} bytes per session over the previous lot |",
                    round + 2,
                    rss as f64 / 1024.0,
                    (rss as f64 - previous as f64) * 1024.0 / m.sessions_opened.max(1) as f64
                );
                previous = rss;
            }
            let _ = writeln!(
                md,
                "\nA lot that grows RSS by much less than the first one reuses the memory of ended sessions; a steady growth \
                 round after round would be memory that ended sessions never give back.\n"
            );
        }
        None => {
            let _ = writeln!(md, "_Not run._\n");
        }
    }

    let _ = writeln!(md, "## 5. Micro benchmarks\n");

    micro_section(
        &mut md,
        options.get("criterion").map(Path::new),
        &work.join("micro.log"),
    );

    let _ = writeln!(md, "## 6. OAuth on the request path\n");
    let blurb6 = "The same eragate configuration in front of the same fast upstream, once with `[auth.oauth]` on (`eragate-oauth`: every \
                  request carries `Authorization: Bearer` an EdDSA JWT minted by `bench-issuer`, checked for signature, `iss`, `aud`, \
                  `exp` and the required scope, then remembered by its digest) and once without (`eragate`). Both run at once and are \
                  measured in interleaved rounds. CPU µs/op and RSS are eragate's.";
    comparison_section(&mut md, "6a. A 2026-07-28 client", s6_modern.as_ref(), blurb6);
    comparison_section(&mut md, "6b. A legacy client", s6_legacy.as_ref(), blurb6);

    let _ = writeln!(md, "## How to read this\n");
    let _ = writeln!(
        md,
        "- Each comparison runs its targets interleaved: per concurrency and round, every target once, back to back, the order reversed every \
         other round (A B, B A, …). A ratio is taken within a round, so slow drift of the shared machine cancels out; min / median / max over \
         the rounds show how stable it is.\n\
         - Throughput ratio = subject ops/s ÷ other ops/s (higher is better for the subject). Added latency = subject p50 − other p50 (lower is better).\n\
         - The load is closed-loop: c connections, each sending its next request when the previous one is answered. Latency is per request \
         (per whole sequence for `per-request-handshake`), from a histogram of the measured window only.\n\
         - CPU µs/op = the change in the watched process's user + system time (`/proc/PID/stat`) over the measured window ÷ requests completed. \
         Unlike throughput on a 2-core machine it does not depend on who else was running.\n"
    );
    // The Scale section `bench/scale.sh` spliced into the previous report stays.
    let kept = std::fs::read_to_string(&out)
        .ok()
        .and_then(|old| crate::scale_report::block_of(&old).map(str::to_owned));
    let md = match kept {
        Some(block) => crate::scale_report::splice(&md, &block),
        None => md,
    };
    std::fs::write(&out, md).map_err(|e| format!("{}: {e}", out.display()))
}

/// The charts `bench/charts.py` drew next to the report (`charts/*.png`), when there.
fn charts_section(md: &mut String, dir: Option<&Path>) {
    let charts = [
        (
            "throughput.png",
            "Throughput against concurrency (median of the rounds)",
        ),
        ("p99.png", "p99 latency against concurrency (median of the rounds)"),
        (
            "cpu.png",
            "CPU per request: the proxy's own, the upstream's stacked on it",
        ),
    ];
    let present: Vec<_> = charts
        .iter()
        .filter(|(file, _)| dir.is_some_and(|d| d.join("charts").join(file).exists()))
        .collect();
    if present.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Charts\n");
    for (file, title) in present {
        let _ = writeln!(md, "{title}:\n\n![{title}](charts/{file})\n");
    }
}

fn micro_section(md: &mut String, criterion: Option<&Path>, log: &Path) {
    let mut allocs: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    if let Ok(text) = std::fs::read_to_string(log) {
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            if parts.next() != Some("ALLOC") {
                continue;
            }
            if let (Some(id), Some(n), Some(bytes)) = (parts.next(), parts.next(), parts.next()) {
                allocs.insert(
                    id.to_owned(),
                    (n.parse().unwrap_or(f64::NAN), bytes.parse().unwrap_or(f64::NAN)),
                );
            }
        }
    }
    let mut estimates: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    if let Some(dir) = criterion {
        collect_estimates(dir, &mut estimates);
    }
    if estimates.is_empty() && allocs.is_empty() {
        let _ = writeln!(md, "_Not run._\n");
        return;
    }
    let _ = writeln!(
        md,
        "`cargo bench --bench micro` (criterion, eragate's own functions on realistic messages). Allocations per operation from a counting \
         global allocator in the bench binary.\n"
    );
    let _ = writeln!(
        md,
        "| operation | median ns/op | mean ns/op | allocations/op | bytes allocated/op |\n|---|---:|---:|---:|---:|"
    );
    let mut ids: Vec<&String> = estimates.keys().chain(allocs.keys()).collect();
    ids.sort();
    ids.dedup();
    for id in ids {
        let (median, mean) = estimates
            .get(id)
            .copied()
            .map_or((None, None), |(m, a)| (Some(m), Some(a)));
        let (n, bytes) = allocs
            .get(id)
            .copied()
            .map_or((None, None), |(n, b)| (Some(n), Some(b)));
        let _ = writeln!(
            md,
            "| `{id}` | {} | {} | {} | {} |",
            fmt(median, 0),
            fmt(mean, 0),
            fmt(n, 1),
            fmt(bytes, 0)
        );
    }
    let _ = writeln!(md);
}

fn collect_estimates(dir: &Path, out: &mut BTreeMap<String, (f64, f64)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == "new") {
            let estimates: Option<Value> = load(&path.join("estimates.json"));
            let benchmark: Option<Value> = load(&path.join("benchmark.json"));
            if let (Some(e), Some(b)) = (estimates, benchmark) {
                let id = b.get("full_id").and_then(Value::as_str).unwrap_or("?").to_owned();
                let point = |k: &str| {
                    e.get(k)
                        .and_then(|v| v.get("point_estimate"))
                        .and_then(Value::as_f64)
                        .unwrap_or(f64::NAN)
                };
                out.insert(id, (point("median"), point("mean")));
            }
        } else if path
            .file_name()
            .is_some_and(|n| n != "report" && n != "base" && n != "change")
        {
            collect_estimates(&path, out);
        }
    }
}
