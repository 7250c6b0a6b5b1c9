//! Tool search (`disclosure::ToolIndex`) over 1,000 tools: what rebuilding the index
//! costs when a listing changes (issue 36's bound: 20 ms) and what one search costs
//! (bound: 200 µs).
//!
//! `cargo bench --bench disclosure` runs it with criterion. The tools are made here,
//! shaped like real ones (bench/disclosure's live catalogue averages 1.2 KB, 14 words
//! of description and 3 parameters a tool; these are larger: about 40 words and 4
//! parameters with descriptions), from a vocabulary that grows with the catalogue.

use std::hint::black_box;

use criterion::Criterion;
use eragate::disclosure::{ToolEntry, ToolIndex};
use serde_json::{Value, json};

const TOOLS: usize = 1000;

const VERBS: &[&str] = &[
    "create", "list", "get", "update", "delete", "search", "read", "write", "move", "merge", "fork", "push", "close",
    "open", "send", "post", "reply", "fetch", "convert", "navigate", "click", "type", "upload", "download", "query",
    "append", "retrieve", "add", "remove", "rename",
];
const NOUNS: &[&str] = &[
    "file",
    "directory",
    "issue",
    "pull_request",
    "branch",
    "commit",
    "repository",
    "comment",
    "review",
    "message",
    "channel",
    "thread",
    "reaction",
    "user",
    "profile",
    "page",
    "block",
    "database",
    "entity",
    "relation",
    "observation",
    "place",
    "route",
    "elevation",
    "screenshot",
    "tab",
    "dialog",
    "form",
    "event",
    "calendar",
    "invoice",
    "customer",
    "ticket",
    "deployment",
    "secret",
    "bucket",
    "table",
    "record",
    "webhook",
    "label",
];
const FILLER: &[&str] = &[
    "the",
    "given",
    "with",
    "optional",
    "filters",
    "and",
    "returns",
    "details",
    "about",
    "each",
    "matching",
    "item",
    "in",
    "a",
    "paginated",
    "list",
    "use",
    "this",
    "when",
    "you",
    "need",
    "to",
    "inspect",
    "or",
    "change",
    "state",
    "of",
    "workspace",
    "project",
    "account",
    "results",
    "are",
    "sorted",
    "by",
    "most",
    "recent",
    "first",
    "limit",
    "defaults",
    "100",
];

/// Deterministic words (a small xorshift), so every run indexes the same tools.
struct Words(u64);

impl Words {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        from[(self.0 % from.len() as u64) as usize]
    }

    fn sentence(&mut self, words: usize, noun: &str) -> String {
        let mut out = Vec::with_capacity(words);
        for i in 0..words {
            out.push(if i % 5 == 2 {
                noun.replace('_', " ")
            } else {
                self.pick(FILLER).to_owned()
            });
        }
        out.join(" ")
    }
}

fn catalogue() -> Vec<(String, Value)> {
    let mut words = Words(0x9e37_79b9_7f4a_7c15);
    (0..TOOLS)
        .map(|i| {
            let (verb, noun) = (words.pick(VERBS), words.pick(NOUNS));
            let member = format!("member{}", i % 25);
            // Every tool brings a word of its own (`v<i>`), so the vocabulary grows with it.
            let name = format!("{verb}_{noun}_v{i}");
            let mut properties = serde_json::Map::new();
            for p in 0..4 {
                let param = format!("{}{}", words.pick(NOUNS), if p == 0 { "Id" } else { "Name" });
                properties.insert(
                    param,
                    json!({"type": "string", "description": words.sentence(10, noun)}),
                );
            }
            let tool = json!({
                "name": name,
                "description": format!("{} {noun}. {}", capital(verb), words.sentence(40, noun)),
                "inputSchema": {"type": "object", "properties": properties},
            });
            (member, tool)
        })
        .collect()
}

fn capital(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let tools = catalogue();
    let entries = || tools.iter().map(|(member, tool)| ToolEntry { member, tool });
    let index = ToolIndex::build(entries());
    let queries = [
        "merge the pull request",
        "which of my open pull requests still need a review from someone on the team",
        "upload a screenshot of the page to the ticket",
        "zzz unknown words only",
    ];

    let mut group = criterion.benchmark_group("disclosure");
    group.bench_function("build/1000", |b| b.iter(|| black_box(ToolIndex::build(entries()))));
    for (i, query) in queries.iter().enumerate() {
        group.bench_function(format!("search/1000/q{i}"), |b| {
            b.iter(|| black_box(index.search(black_box(query), 5)))
        });
    }
    group.finish();
    criterion.final_summary();
}
