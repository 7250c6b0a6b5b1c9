//! Micro benchmarks of the per-request pieces of a legacy session and of the list
//! cache that no other bench covers: opening a sealed `Mcp-Session-Id` (XChaCha20-Poly1305
//! plus the claims' JSON, on every legacy request), minting one (every `initialize`), the
//! digest kept of an ended id, and the digest of a `tools/list` result the list cache
//! compares on every re-list.
//!
//! `cargo bench --bench session` runs them with criterion.

use std::hint::black_box;

use criterion::Criterion;
use eragate::bridge::sessions::{SessionClaims, SessionStore};
use eragate::config::SessionsConfig;
use eragate::seal::{self, SealKey};
use eragate::translate::cache::list_digest;
use serde_json::{Value, json};

/// What a legacy client of the fast upstream gets sealed into its id: the SDK
/// clients' usual capabilities and `clientInfo`, an upstream session id (a UUID), a member.
fn claims() -> SessionClaims {
    SessionClaims {
        rev: "2025-11-25".into(),
        caps: json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {}}),
        info: json!({"name": "claude-code", "version": "2.1.0"}),
        prn: String::new(),
        ups: "fast".into(),
        usid: Some("4f6b2a52-0c1e-4f8e-9d55-5b7f3f0a8c11".into()),
        mem: Some("http://127.0.0.1:18701/mcp".into()),
        own: None,
        exp: 0,
    }
}

/// A `tools/list` result of `n` tools with schemas, as the list cache digests it.
fn tools_list(n: usize) -> Value {
    let tools: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "name": format!("search_documents_{i}"),
                "description": "Search the indexed documents by a free-text query and return the best matches with their scores.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "what to look for"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100}
                    },
                    "required": ["query"]
                }
            })
        })
        .collect();
    json!({"tools": tools, "ttlMs": 60000, "cacheScope": "public", "_meta": {}})
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let store = SessionStore::new(
        SessionsConfig {
            key: Some(SealKey::random()),
            ..SessionsConfig::default()
        },
        1000,
    );
    let id = store.mint(claims(), false);
    assert!(store.open(&id).is_some(), "a freshly minted id opens");

    let mut group = criterion.benchmark_group("session");
    group.bench_function("open_sealed_id", |b| b.iter(|| black_box(store.open(black_box(&id)))));
    group.bench_function("mint_sealed_id", |b| {
        b.iter(|| black_box(store.mint(black_box(claims()), false)))
    });
    group.bench_function("digest_of_ended_id", |b| {
        b.iter(|| black_box(seal::digest(black_box(&id))))
    });
    group.finish();

    let mut group = criterion.benchmark_group("list_cache");
    for n in [2, 50] {
        let list = tools_list(n);
        group.bench_function(format!("digest_tools_list/{n}_tools"), |b| {
            b.iter(|| black_box(list_digest(black_box(&list))))
        });
    }
    group.finish();
    criterion.final_summary();
}
