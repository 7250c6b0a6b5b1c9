//! The rate-limit check on the hot path: what one request pays for
//! `[rate_limits]` before it is dispatched. `cargo bench --bench rate`.
//!
//! - `none`: nothing configured (the default): the check is skipped;
//! - `principal`: one local GCRA bucket per principal (governor, keyed);
//! - `principal+tool+upstream`: the three local limits a `tools/call` can spend;
//! - `many principals`: the same over 10 000 principals (a larger keyed table);
//! - `shared names`: a shared limit, which only names its Redis count here.

use std::hint::black_box;

use criterion::Criterion;
use eragate::config::RateLimitsConfig;
use eragate::policy::rate::{RateLimits, Request};

/// Limits far above what the bench sends, so every check passes (the common case).
fn limits(text: &str) -> RateLimits {
    let config: RateLimitsConfig = toml::from_str(text).expect("rate limits");
    RateLimits::new(&config)
}

fn benches(c: &mut Criterion) {
    let huge = "{ requests = 1000000000, per = \"1s\" }";
    let cases = [
        ("none", String::new()),
        ("principal", format!("per_principal = {huge}")),
        (
            "principal+tool+upstream",
            format!("per_principal = {huge}\ntools.echo = {huge}\nupstreams.files = {huge}"),
        ),
        (
            "shared names",
            "per_principal = { requests = 10, shared = true }\n[redis]\naddress = \"127.0.0.1:6379\"".to_owned(),
        ),
    ];
    let mut group = c.benchmark_group("rate_check");
    for (name, text) in &cases {
        let limits = limits(text);
        let request = Request {
            principal: "https://issuer.example#alice",
            upstream: "files",
            tool: Some("echo"),
        };
        group.bench_function(*name, |b| {
            b.iter(|| black_box(limits.check(black_box(&request)).is_ok()))
        });
    }
    let limits = limits(&format!("per_principal = {huge}"));
    let principals: Vec<String> = (0..10_000).map(|i| format!("principal-{i}")).collect();
    let mut next = 0;
    group.bench_function("many principals", |b| {
        b.iter(|| {
            next = (next + 1) % principals.len();
            let request = Request {
                principal: &principals[next],
                upstream: "files",
                tool: None,
            };
            black_box(limits.check(&request).is_ok())
        })
    });
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion);
    criterion.final_summary();
}
