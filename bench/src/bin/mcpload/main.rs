//! mcpload: the load generator and report writer of eragate's benchmark.
//!
//! ```text
//! mcpload probe   --url URL --pattern legacy|modern [--sse] [--tool echo] [--arg text] [--token-file F]
//! mcpload compare --name S --title T --subject NAME --target name=..,pattern=..,url=..[,pid=P[+P..]][,upstream=P[+P..]][,tool=..][,arg=..][,token_file=..] ...
//!                 [--sse] [--concurrency 1,16,64] [--rounds N] [--warmup-ms N] [--duration-ms N] --out FILE
//! mcpload memory  --url URL --pid PID [--sessions N] [--inflight N] [--sleep-ms N] --out FILE
//! mcpload report  --work DIR --env FILE --criterion DIR --out FILE
//! mcpload scale   --url URL --pid PID --unit session|get|listen [--steps 1000,10000,100000] [--idle-s 5] [--sample 200] --out FILE
//! mcpload scale-report --work DIR --env FILE --out SCALE.md [--results RESULTS.md]
//! mcpload soak    --target name=..,pattern=legacy|modern,url=.. ... --pid PID [--rate 200] [--duration 600]
//!                 [--workers 4] [--rss-every 5] [--kill-every 30] [--warmup 60] [--timeout-ms 30000]
//!                 --out FILE.json [--md FILE.md]
//! ```
//!
//! Everything runs on one thread (a current-thread tokio runtime), so the load
//! generator can be pinned to one core apart from what it measures.

mod check;
mod client;
mod floor;
mod memory;
mod procfs;
mod report;
mod run;
mod scale;
mod scale_report;
mod soak;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::client::Pattern;
use crate::run::{Comparison, Target, Timing};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        return usage();
    };
    let options = match Options::parse(&args[1..]) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("mcpload: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    let outcome = local.block_on(&runtime, async move {
        match command.as_str() {
            "probe" => probe(&options).await,
            "compare" => compare(&options).await,
            "memory" => memory(&options).await,
            "report" => report::write(&options),
            "scale" => scale(&options).await,
            "scale-report" => scale_report::write(&options),
            "soak" => soak(&options).await,
            _ => Err(format!("unknown command {command:?}")),
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mcpload: {error}");
            ExitCode::FAILURE
        }
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: mcpload probe|compare|memory|report|scale|scale-report|soak [options]  (see the source's header)"
    );
    ExitCode::from(2)
}

/// `--key value` pairs (repeatable) and `--flag`s.
pub struct Options {
    pairs: Vec<(String, String)>,
    flags: Vec<String>,
}

const FLAGS: [&str; 1] = ["sse"];

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let (mut pairs, mut flags) = (Vec::new(), Vec::new());
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            let key = arg
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {arg:?}"))?;
            if FLAGS.contains(&key) {
                flags.push(key.to_owned());
                continue;
            }
            let value = iter.next().ok_or_else(|| format!("--{key} needs a value"))?;
            pairs.push((key.to_owned(), value.clone()));
        }
        Ok(Options { pairs, flags })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn require(&self, key: &str) -> Result<&str, String> {
        self.get(key).ok_or_else(|| format!("--{key} is required"))
    }

    fn all(&self, key: &str) -> impl Iterator<Item = &str> {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> bool {
        self.flags.iter().any(|f| f == key)
    }

    fn number<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{key}: not a number: {v:?}")),
        }
    }

    pub fn path(&self, key: &str) -> Result<PathBuf, String> {
        self.require(key).map(PathBuf::from)
    }
}

async fn probe(options: &Options) -> Result<(), String> {
    let endpoint = client::Endpoint::parse(options.require("url")?)?.with_token_file(options.get("token-file"))?;
    let endpoint = std::rc::Rc::new(endpoint);
    let pattern = Pattern::parse(options.get("pattern").unwrap_or("legacy"))?;
    let sse = options.flag("sse");
    let mut conn = client::Conn::open(endpoint).await?;
    let tool = options.get("tool").unwrap_or("echo");
    let arguments = client::echo_arguments_named(options.get("arg").unwrap_or("text"));
    match pattern {
        Pattern::Legacy | Pattern::Handshake => {
            let session = conn.handshake().await?;
            conn.call(Some(&session), tool, &arguments, sse).await?;
            conn.delete(&session).await?;
        }
        Pattern::Modern => conn.call(None, tool, &arguments, sse).await?,
        Pattern::List => conn.list_tools().await?,
    }
    Ok(())
}

async fn compare(options: &Options) -> Result<(), String> {
    let targets = options
        .all("target")
        .map(Target::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if targets.len() < 2 {
        return Err("a comparison needs at least two --target".into());
    }
    let subject = options.require("subject")?.to_owned();
    if !targets.iter().any(|t| t.name == subject) {
        return Err(format!("--subject {subject} is not a target"));
    }
    let concurrency = options
        .get("concurrency")
        .unwrap_or("1,16,64")
        .split(',')
        .map(|c| c.trim().parse::<usize>().map_err(|_| format!("bad concurrency {c:?}")))
        .collect::<Result<Vec<_>, _>>()?;
    let comparison = Comparison {
        name: options.require("name")?.to_owned(),
        title: options.get("title").unwrap_or("").to_owned(),
        subject,
        sse: options.flag("sse"),
        targets,
        concurrency,
        rounds: options.number("rounds", 3)?,
        timing: Timing {
            warmup_ms: options.number("warmup-ms", 500)?,
            duration_ms: options.number("duration-ms", 2000)?,
        },
        runs: Vec::new(),
    };
    let out = options.path("out")?;
    let comparison = run::compare(comparison).await;
    let json = serde_json::to_vec_pretty(&comparison).map_err(|e| e.to_string())?;
    std::fs::write(&out, json).map_err(|e| format!("{}: {e}", out.display()))
}

async fn scale(options: &Options) -> Result<(), String> {
    let steps = options
        .get("steps")
        .unwrap_or("1000,10000,100000")
        .split(',')
        .map(|c| c.trim().parse::<usize>().map_err(|_| format!("bad step {c:?}")))
        .collect::<Result<Vec<_>, _>>()?;
    let plan = scale::Plan {
        url: options.require("url")?.to_owned(),
        pid: options.number("pid", 0u32)?,
        unit: scale::Unit::parse(options.require("unit")?)?,
        steps,
        idle_window: std::time::Duration::from_secs_f64(options.number("idle-s", 5.0)?),
        sample: options.number("sample", 200)?,
    };
    let curve = scale::measure(plan).await?;
    let out = options.path("out")?;
    let json = serde_json::to_vec_pretty(&curve).map_err(|e| e.to_string())?;
    std::fs::write(&out, json).map_err(|e| format!("{}: {e}", out.display()))
}

async fn memory(options: &Options) -> Result<(), String> {
    let result = memory::measure(
        options.require("url")?,
        options.number("pid", 0u32)?,
        options.number("sessions", 10_000)?,
        options.number("inflight", 1_000)?,
        options.number("sleep-ms", 1_500)?,
    )
    .await;
    let out = options.path("out")?;
    let json = serde_json::to_vec_pretty(&result).map_err(|e| e.to_string())?;
    std::fs::write(&out, json).map_err(|e| format!("{}: {e}", out.display()))
}

async fn soak(options: &Options) -> Result<(), String> {
    let targets = options
        .all("target")
        .map(Target::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if targets.is_empty() {
        return Err("a soak needs at least one --target".into());
    }
    let seconds = |key: &str, default: f64| -> Result<std::time::Duration, String> {
        let value: f64 = options.number(key, default)?;
        std::time::Duration::try_from_secs_f64(value).map_err(|_| format!("--{key}: not a duration: {value}"))
    };
    let plan = soak::Plan {
        targets,
        rate: options.number("rate", 200.0)?,
        duration: seconds("duration", 600.0)?,
        workers: options.number("workers", 4)?,
        pid: options
            .require("pid")?
            .parse()
            .map_err(|_| "--pid: not a pid".to_owned())?,
        rss_every: seconds("rss-every", 5.0)?,
        kill_every: seconds("kill-every", 30.0)?,
        timeout: std::time::Duration::from_millis(options.number("timeout-ms", 30_000)?),
        warmup: seconds("warmup", 60.0)?,
    };
    let result = soak::soak(plan).await;
    let out = options.path("out")?;
    let json = serde_json::to_vec_pretty(&result).map_err(|e| e.to_string())?;
    std::fs::write(&out, json).map_err(|e| format!("{}: {e}", out.display()))?;
    let markdown = soak::markdown(&result);
    match options.get("md") {
        Some(md) => std::fs::write(md, &markdown).map_err(|e| format!("{md}: {e}"))?,
        None => print!("{markdown}"),
    }
    if result.lost + result.crossed + result.duplicated > 0 {
        return Err(format!(
            "{} lost, {} crossed, {} duplicated (each must be 0)",
            result.lost, result.crossed, result.duplicated
        ));
    }
    Ok(())
}
