//! The tool-search benchmark's evaluator (bench/disclosure/README.md): ranks the live
//! catalogue (`list_tools.py`'s output) against `queries.toml` with eragate's ranker
//! ([`eragate::disclosure::ToolIndex`]) and with a naive BM25 over name and
//! description, and reports recall@1 and recall@5 of both, overall and on the
//! held-out quarter.
//!
//! ```sh
//! cargo run --release --example disclosure_eval -- --tuning   # tuning queries only, printed
//! cargo run --release --example disclosure_eval               # every query, RESULTS.md written
//! cargo run --release --example disclosure_eval -- --explain 'merge my PR'   # one ranking
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use eragate::disclosure::{ToolEntry, ToolIndex};
use serde::Deserialize;
use serde_json::Value;

/// How deep each ranking is looked at (recall@5 needs 5; the table shows up to 10).
const DEPTH: usize = 10;

#[derive(Deserialize)]
struct Catalogue {
    servers: Vec<Server>,
}

#[derive(Deserialize)]
struct Server {
    name: String,
    tools: Vec<Value>,
}

#[derive(Deserialize)]
struct Queries {
    query: Vec<Query>,
}

#[derive(Deserialize)]
struct Query {
    text: String,
    expect: Vec<String>,
    #[serde(default)]
    held_out: bool,
}

struct Args {
    catalogue: PathBuf,
    queries: PathBuf,
    out: PathBuf,
    tuning: bool,
    explain: Option<String>,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("disclosure_eval: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let catalogue: Catalogue = serde_json::from_slice(
        &std::fs::read(&args.catalogue)
            .map_err(|e| format!("{}: {e} (run bench/disclosure/run.sh)", args.catalogue.display()))?,
    )
    .map_err(|e| format!("{}: {e}", args.catalogue.display()))?;
    let queries: Queries = toml::from_str(
        &std::fs::read_to_string(&args.queries).map_err(|e| format!("{}: {e}", args.queries.display()))?,
    )
    .map_err(|e| format!("{}: {e}", args.queries.display()))?;

    let entries: Vec<(String, &str, &Value)> = catalogue
        .servers
        .iter()
        .flat_map(|s| {
            s.tools.iter().map(move |t| {
                let name = t.get("name").and_then(Value::as_str).unwrap_or("");
                (format!("{}/{name}", s.name), s.name.as_str(), t)
            })
        })
        .collect();
    let ids: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, (id, _, _))| (id.as_str(), i))
        .collect();
    for query in &queries.query {
        for expected in &query.expect {
            if !ids.contains_key(expected.as_str()) {
                return Err(format!(
                    "query {:?} expects {expected}, which no server listed",
                    query.text
                ));
            }
        }
    }

    let index = ToolIndex::build(entries.iter().map(|&(_, member, tool)| ToolEntry { member, tool }));
    let naive = NaiveBm25::build(entries.iter().map(|&(_, _, tool)| tool));

    if let Some(query) = &args.explain {
        for hit in index.search(query, DEPTH) {
            println!("{:8.3}  {}", hit.score, entries[hit.tool].0);
        }
        return Ok(());
    }
    let ranks: Vec<Ranks> = queries
        .query
        .iter()
        .map(|q| {
            let expected: Vec<usize> = q.expect.iter().map(|e| ids[e.as_str()]).collect();
            let ours: Vec<usize> = index.search(&q.text, DEPTH).iter().map(|h| h.tool).collect();
            let naive = naive.search(&q.text, DEPTH);
            Ranks {
                ours: rank(&ours, &expected),
                naive: rank(&naive, &expected),
                ours_top: ours.first().map(|&t| entries[t].0.clone()),
            }
        })
        .collect();

    if args.tuning {
        print_tuning(&queries.query, &ranks);
        return Ok(());
    }
    let report = report(&catalogue, &entries, &queries.query, &ranks);
    std::fs::write(&args.out, report).map_err(|e| format!("{}: {e}", args.out.display()))?;
    println!("wrote {}", args.out.display());
    Ok(())
}

fn parse_args() -> Result<Args, String> {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cache = std::env::var_os("ERAGATE_DISCLOSURE")
        .map(PathBuf::from)
        .unwrap_or_else(|| here.join(".cache/disclosure"));
    let mut args = Args {
        catalogue: cache.join("catalogue.json"),
        queries: here.join("bench/disclosure/queries.toml"),
        out: here.join("bench/disclosure/RESULTS.md"),
        tuning: false,
        explain: None,
    };
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        let mut value = || argv.next().map(PathBuf::from).ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--catalogue" => args.catalogue = value()?,
            "--queries" => args.queries = value()?,
            "--out" => args.out = value()?,
            "--tuning" => args.tuning = true,
            "--explain" => args.explain = Some(value()?.display().to_string()),
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    Ok(args)
}

/// Where a query's first acceptable tool came in each ranking (1-based).
struct Ranks {
    ours: Option<usize>,
    naive: Option<usize>,
    ours_top: Option<String>,
}

fn rank(ranking: &[usize], expected: &[usize]) -> Option<usize> {
    ranking.iter().position(|t| expected.contains(t)).map(|p| p + 1)
}

/// recall@k over the queries `which` selects.
fn recall(ranks: &[Ranks], queries: &[Query], k: usize, which: impl Fn(&Query) -> bool, ours: bool) -> (f64, usize) {
    let chosen: Vec<&Ranks> = ranks
        .iter()
        .zip(queries)
        .filter(|(_, q)| which(q))
        .map(|(r, _)| r)
        .collect();
    let found = chosen
        .iter()
        .filter(|r| if ours { r.ours } else { r.naive }.is_some_and(|rank| rank <= k))
        .count();
    (found as f64 / chosen.len().max(1) as f64, chosen.len())
}

fn print_tuning(queries: &[Query], ranks: &[Ranks]) {
    let tuning = |q: &Query| !q.held_out;
    for ours in [true, false] {
        let (r1, n) = recall(ranks, queries, 1, tuning, ours);
        let (r5, _) = recall(ranks, queries, 5, tuning, ours);
        let who = if ours { "eragate" } else { "naive  " };
        println!("{who} tuning ({n} queries): recall@1 {r1:.3}  recall@5 {r5:.3}");
    }
    for (q, r) in queries.iter().zip(ranks) {
        if q.held_out || r.ours == Some(1) {
            continue;
        }
        let top = r.ours_top.as_deref().unwrap_or("-");
        println!(
            "  rank {:>4}  {:<62} want {:?}, top {top}",
            fmt_rank(r.ours),
            q.text,
            q.expect
        );
    }
}

fn fmt_rank(rank: Option<usize>) -> String {
    rank.map_or_else(|| format!(">{DEPTH}"), |r| r.to_string())
}

fn report(catalogue: &Catalogue, entries: &[(String, &str, &Value)], queries: &[Query], ranks: &[Ranks]) -> String {
    let listing_bytes: usize = catalogue
        .servers
        .iter()
        .flat_map(|s| &s.tools)
        .map(|t| serde_json::to_vec(t).map_or(0, |v| v.len()))
        .sum();
    let mut out = String::new();
    let held = queries.iter().filter(|q| q.held_out).count();
    let _ = writeln!(out, "# Tool search: results\n");
    let _ = writeln!(
        out,
        "Written by `cargo run --release --example disclosure_eval` (bench/disclosure/README.md) \
         from the catalogue listed live by `list_tools.py` and the {} queries of `queries.toml` \
         ({held} held out while the ranker was tuned).\n",
        queries.len()
    );
    let _ = writeln!(
        out,
        "**Catalogue:** {} tools from {} servers, {} bytes of definitions as listed.\n",
        entries.len(),
        catalogue.servers.len(),
        listing_bytes
    );
    let meta_bytes = |with_session: bool| {
        serde_json::to_vec(&eragate::disclosure::meta_tool_definitions(with_session)).map_or(0, |v| v.len())
    };
    let (modern, legacy) = (meta_bytes(false), meta_bytes(true));
    let share = |bytes: usize| 100.0 * bytes as f64 / listing_bytes.max(1) as f64;
    let _ = writeln!(
        out,
        "**Listed with `[[disclosure]] mode = \"search\"`** (`always = []`): the meta-tools only, \
         {modern} bytes for a 2026-07-28 client ({:.1} % of the full listing) and {legacy} bytes with \
         `load_tools` for a client with a session ({:.1} %).\n",
        share(modern),
        share(legacy)
    );
    let _ = writeln!(out, "| server | tools |\n|---|---:|");
    for server in &catalogue.servers {
        let _ = writeln!(out, "| {} | {} |", server.name, server.tools.len());
    }
    let _ = writeln!(out, "\n## Recall\n");
    let _ = writeln!(
        out,
        "A query is found at k when one of its acceptable tools is among the first k results.\n"
    );
    let _ = writeln!(out, "| ranker | queries | recall@1 | recall@5 |\n|---|---|---:|---:|");
    for (name, ours) in [("eragate (BM25F)", true), ("naive BM25, name + description", false)] {
        for set in [Set::All, Set::HeldOut, Set::Tuning] {
            let which = |q: &Query| set.holds(q);
            let (r1, n) = recall(ranks, queries, 1, which, ours);
            let (r5, _) = recall(ranks, queries, 5, which, ours);
            let _ = writeln!(out, "| {name} | {set} ({n}) | {r1:.3} | {r5:.3} |");
        }
    }
    let _ = writeln!(out, "\n## Every query\n");
    let _ = writeln!(
        out,
        "Rank of the first acceptable tool (>{DEPTH}: not in the first {DEPTH}); H: held out.\n"
    );
    let _ = writeln!(
        out,
        "| query | acceptable | eragate | naive | |\n|---|---|---:|---:|---|"
    );
    for (q, r) in queries.iter().zip(ranks) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            q.text,
            q.expect.join(", "),
            fmt_rank(r.ours),
            fmt_rank(r.naive),
            if q.held_out { "H" } else { "" }
        );
    }
    out
}

/// The queries a line of the table counts.
#[derive(Clone, Copy)]
enum Set {
    All,
    HeldOut,
    Tuning,
}

impl Set {
    fn holds(self, query: &Query) -> bool {
        match self {
            Set::All => true,
            Set::HeldOut => query.held_out,
            Set::Tuning => !query.held_out,
        }
    }
}

impl std::fmt::Display for Set {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Set::All => "all",
            Set::HeldOut => "held out",
            Set::Tuning => "tuning",
        })
    }
}

/// The baseline: plain BM25 (k1 = 1.2, b = 0.75) over one field, the tool's name and
/// description joined, lowercased and split on anything not a letter or digit; no
/// stemming, no stop words, no camelCase splitting.
struct NaiveBm25 {
    docs: Vec<HashMap<String, f64>>,
    lengths: Vec<f64>,
    df: HashMap<String, usize>,
    average: f64,
}

impl NaiveBm25 {
    fn build<'a>(tools: impl Iterator<Item = &'a Value>) -> Self {
        let mut docs = Vec::new();
        let mut lengths = Vec::new();
        let mut df: HashMap<String, usize> = HashMap::new();
        for tool in tools {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
            let description = tool.get("description").and_then(Value::as_str).unwrap_or("");
            let words = naive_words(&format!("{name} {description}"));
            let mut tf: HashMap<String, f64> = HashMap::new();
            for w in &words {
                *tf.entry(w.clone()).or_default() += 1.0;
            }
            for w in tf.keys() {
                *df.entry(w.clone()).or_default() += 1;
            }
            lengths.push(words.len() as f64);
            docs.push(tf);
        }
        let average = lengths.iter().sum::<f64>() / lengths.len().max(1) as f64;
        Self {
            docs,
            lengths,
            df,
            average,
        }
    }

    fn search(&self, query: &str, limit: usize) -> Vec<usize> {
        let (k1, b) = (1.2, 0.75);
        let n = self.docs.len() as f64;
        let mut words = naive_words(query);
        words.sort();
        words.dedup();
        let mut scored: Vec<(usize, f64)> = self
            .docs
            .iter()
            .enumerate()
            .map(|(i, tf)| {
                let score = words
                    .iter()
                    .filter_map(|w| {
                        let f = *tf.get(w)?;
                        let df = self.df[w] as f64;
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        Some(idf * f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * self.lengths[i] / self.average)))
                    })
                    .sum::<f64>();
                (i, score)
            })
            .filter(|&(_, s)| s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.into_iter().take(limit).map(|(i, _)| i).collect()
    }
}

fn naive_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}
