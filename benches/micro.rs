//! Micro benchmarks of eragate's per-request pure functions (bench/run.sh's scenario 5):
//! classify + validate a 2026-07-28 `tools/call`, translate it for a legacy
//! upstream, translate the result back, the `Mcp-Name` sentinel codec, SSE frame
//! parsing and JSON-RPC parsing.
//!
//! `cargo bench --bench micro` runs them with criterion. Before criterion, every
//! operation is run under a counting global allocator and one line per
//! operation is printed: `ALLOC <id> <allocations/op> <bytes/op>`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{BatchSize, Criterion};
use eragate::protocol::headers::{decode_value, encode_value};
use eragate::protocol::sse::SseParser;
use eragate::protocol::{Message, ModernMethod};
use eragate::translate::classify::classify;
use eragate::translate::down::modern_params_for_legacy;
use eragate::translate::up::result_for_modern;
use eragate::translate::{CachePolicy, Classification, HeaderField, RoutingHeaders};
use serde_json::{Value, json};

/// Counts every allocation (and reallocation) made through the global allocator.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes through `alloc` above).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: as for `alloc`; `ptr` and `layout` come from an earlier allocation.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A 2026-07-28 `tools/call` as a client sends it.
const MODERN_CALL: &str = r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"mcpload says hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpload","version":"0"},"progressToken":42}}}"#;

/// The legacy upstream's answer to it.
const LEGACY_RESULT: &str =
    r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"mcpload says hello"}],"isError":false}}"#;

/// An upstream SSE answer: one progress event, then the result.
const SSE_STREAM: &[u8] = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":7,\"progress\":1,\"total\":1}}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"mcpload says hello\"}],\"isError\":false}}\n\n";

fn modern_params() -> Value {
    let value: Value = serde_json::from_str(MODERN_CALL).expect("valid JSON");
    value["params"].clone()
}

fn routing() -> RoutingHeaders<'static> {
    RoutingHeaders::Http {
        protocol_version: HeaderField::One("2026-07-28"),
        method: HeaderField::One("tools/call"),
        name: HeaderField::One("echo"),
    }
}

fn legacy_result() -> Value {
    let value: Value = serde_json::from_str(LEGACY_RESULT).expect("valid JSON");
    value["result"].clone()
}

fn server_info() -> Value {
    json!({"name": "fast-upstream", "version": "0.0.0"})
}

fn classify_once(params: &Value) -> Classification {
    classify("tools/call", Some(params), true, routing())
}

fn parse_sse(stream: &[u8]) -> usize {
    let mut parser = SseParser::new(1 << 20);
    parser.push(stream);
    let mut events = 0;
    while let Ok(Some(event)) = parser.next_event() {
        black_box(event);
        events += 1;
    }
    events
}

/// Allocations and bytes per call of `op`, over `n` calls (after one warm-up call).
fn allocations(id: &str, n: u64, mut op: impl FnMut()) {
    op();
    let (a0, b0) = (ALLOCATIONS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed));
    for _ in 0..n {
        op();
    }
    let (a1, b1) = (ALLOCATIONS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed));
    println!(
        "ALLOC {id} {:.1} {:.0}",
        (a1 - a0) as f64 / n as f64,
        (b1 - b0) as f64 / n as f64
    );
}

/// Allocation counts of the operations only: inputs are prepared outside the counted region.
fn count_allocations() {
    const N: u64 = 1000;
    let params = modern_params();
    let result = legacy_result();
    let info = server_info();
    allocations("translate/classify_modern_tools_call", N, || {
        black_box(classify_once(black_box(&params)));
    });
    let inputs: Vec<Value> = (0..=N).map(|_| params.clone()).collect();
    let mut inputs = inputs.into_iter();
    allocations("translate/down_modern_params_for_legacy", N, || {
        black_box(modern_params_for_legacy(inputs.next().expect("input")));
    });
    let results: Vec<Value> = (0..=N).map(|_| result.clone()).collect();
    let mut results = results.into_iter();
    allocations("translate/up_result_for_modern", N, || {
        black_box(result_for_modern(
            results.next().expect("input"),
            ModernMethod::ToolsCall,
            &info,
            CachePolicy::default(),
        ));
    });
    allocations("headers/encode_plain", N, || {
        black_box(encode_value(black_box("echo")));
    });
    allocations("headers/encode_sentinel", N, || {
        black_box(encode_value(black_box("Hello, 世界")));
    });
    allocations("headers/decode_plain", N, || {
        let _ = black_box(decode_value(black_box("echo")));
    });
    allocations("headers/decode_sentinel", N, || {
        let _ = black_box(decode_value(black_box("=?base64?SGVsbG8sIOS4lueVjA==?=")));
    });
    allocations("sse/parse_progress_and_result", N, || {
        black_box(parse_sse(black_box(SSE_STREAM)));
    });
    allocations("jsonrpc/parse_modern_tools_call", N, || {
        let _ = black_box(Message::parse(black_box(MODERN_CALL.as_bytes())));
    });
    allocations("jsonrpc/parse_legacy_result", N, || {
        let _ = black_box(Message::parse(black_box(LEGACY_RESULT.as_bytes())));
    });
}

fn benches(c: &mut Criterion) {
    let params = modern_params();
    let result = legacy_result();
    let info = server_info();

    let mut group = c.benchmark_group("translate");
    group.bench_function("classify_modern_tools_call", |b| {
        b.iter(|| classify_once(black_box(&params)))
    });
    group.bench_function("down_modern_params_for_legacy", |b| {
        b.iter_batched(|| params.clone(), modern_params_for_legacy, BatchSize::SmallInput)
    });
    group.bench_function("up_result_for_modern", |b| {
        b.iter_batched(
            || result.clone(),
            |r| result_for_modern(r, ModernMethod::ToolsCall, &info, CachePolicy::default()),
            BatchSize::SmallInput,
        )
    });
    group.finish();

    let mut group = c.benchmark_group("headers");
    group.bench_function("encode_plain", |b| b.iter(|| encode_value(black_box("echo")).len()));
    group.bench_function("encode_sentinel", |b| {
        b.iter(|| encode_value(black_box("Hello, 世界")).len())
    });
    group.bench_function("decode_plain", |b| {
        b.iter(|| decode_value(black_box("echo")).map(|v| v.len()))
    });
    group.bench_function("decode_sentinel", |b| {
        b.iter(|| decode_value(black_box("=?base64?SGVsbG8sIOS4lueVjA==?=")).map(|v| v.len()))
    });
    group.finish();

    let mut group = c.benchmark_group("sse");
    group.bench_function("parse_progress_and_result", |b| {
        b.iter(|| parse_sse(black_box(SSE_STREAM)))
    });
    group.finish();

    let mut group = c.benchmark_group("jsonrpc");
    group.bench_function("parse_modern_tools_call", |b| {
        b.iter(|| Message::parse(black_box(MODERN_CALL.as_bytes())))
    });
    group.bench_function("parse_legacy_result", |b| {
        b.iter(|| Message::parse(black_box(LEGACY_RESULT.as_bytes())))
    });
    group.finish();
}

fn main() {
    // Sanity: the inputs are what the benchmark claims they are.
    assert!(
        matches!(classify_once(&modern_params()), Classification::Modern(_)),
        "the modern call must classify as modern"
    );
    assert_eq!(parse_sse(SSE_STREAM), 2, "the SSE stream holds two events");
    count_allocations();
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion);
    criterion.final_summary();
}
