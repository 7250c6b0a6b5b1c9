//! The JSON structure scan (`protocol::scan`) per MiB, against serde_json
//! parsing the same bytes: what the check before every parse costs.
//!
//! `cargo bench --bench scan` runs it with criterion; throughput is reported in
//! bytes, so criterion prints MiB/s (the cost per MiB is its inverse).

use std::hint::black_box;

use criterion::{Criterion, Throughput};
use eragate::protocol::scan::{Bounds, scan};
use serde_json::Value;

const MIB: usize = 1024 * 1024;

/// `[0,0,…]` of one MiB: the worst case for a parser (one value per two bytes).
fn zeros() -> Vec<u8> {
    let n = (MIB - 2) / 2;
    format!("[{}0]", "0,".repeat(n - 1)).into_bytes()
}

/// One MiB of realistic MCP: a `tools/list` result of many tools with schemas.
fn tools_list() -> Vec<u8> {
    let tool = r#"{"name":"search_documents","description":"Search the indexed documents by a free-text query and return the best matches with their scores.","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"what to look for"},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["query"]}}"#;
    let count = MIB / (tool.len() + 1);
    let tools = vec![tool; count].join(",");
    format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"tools":[{tools}]}}}}"#).into_bytes()
}

/// One MiB that is mostly one string (a base64 image in a tool result).
fn one_string() -> Vec<u8> {
    let data = "QUJD".repeat(MIB / 4 - 32);
    format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"image","data":"{data}"}}]}}}}"#).into_bytes()
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let inputs = [
        ("zeros", zeros()),
        ("tools_list", tools_list()),
        ("one_string", one_string()),
    ];
    let mut group = criterion.benchmark_group("scan");
    for (name, bytes) in &inputs {
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(format!("scan/{name}"), |b| {
            b.iter(|| black_box(scan(black_box(bytes), Bounds::default())))
        });
        group.bench_function(format!("serde_json/{name}"), |b| {
            b.iter(|| black_box(serde_json::from_slice::<Value>(black_box(bytes)).is_ok()))
        });
    }
    group.finish();
    criterion.final_summary();
}
