//! The SSE parser on a large `data:` line trickled in small chunks: the line-end
//! search resumes where it stopped, so the time per byte must stay flat as the
//! line grows (a parser that rescans the buffer per chunk is quadratic).
//!
//! `cargo bench --bench sse` runs it with criterion; compare the per-byte
//! throughput of the sizes: linear parsing keeps them equal.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput};
use eragate::protocol::sse::SseParser;

/// Bytes per pushed chunk: a slow upstream's small TCP segments.
const CHUNK: usize = 256;

/// Pushes one `data:` line of `size` bytes in [`CHUNK`]-byte pieces, asking for
/// an event after each, then ends it; returns the event's length.
fn trickle(size: usize) -> usize {
    let mut parser = SseParser::new(size + 1024);
    parser.push(b"data: ");
    let piece = [b'x'; CHUNK];
    let mut sent = 0;
    while sent < size {
        let n = CHUNK.min(size - sent);
        parser.push(&piece[..n]);
        sent += n;
        assert!(matches!(parser.next_event(), Ok(None)));
    }
    parser.push(b"\n\n");
    match parser.next_event() {
        Ok(Some(event)) => event.data.len(),
        _ => 0,
    }
}

fn trickled_line(c: &mut Criterion) {
    let mut group = c.benchmark_group("sse_trickled_data_line");
    group.sample_size(10);
    for mib in [1usize, 4, 16] {
        let size = mib << 20;
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(format!("{mib}MiB")), &size, |b, &size| {
            b.iter(|| black_box(trickle(size)))
        });
    }
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    trickled_line(&mut criterion);
    criterion.final_summary();
}
