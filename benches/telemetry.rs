//! The request path's telemetry cost: opening and closing one request's record
//! with metrics only (always on), and with traces sampled at 1 % and at 100 %.
//! A span's export runs on the export task, off the request path; here the OTLP
//! endpoint is a closed port, so what is measured is what a request pays: the
//! sampling draw, the span, its attributes and the hand-off to the export queue.
//!
//! `cargo bench --bench telemetry`; per-call figures to compare with eragate's
//! whole CPU per call are in `bench/telemetry.sh`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::Criterion;
use eragate::config::Config;
use eragate::protocol::{Era, Revision};
use eragate::telemetry::{MethodLabel, Outcome, Telemetry, UpstreamStats};

fn telemetry(sample_ratio: Option<f64>) -> Arc<Telemetry> {
    let mut config = Config::default();
    if let Some(ratio) = sample_ratio {
        config.telemetry.otlp_endpoint = Some("http://127.0.0.1:9/v1/traces".into());
        config.telemetry.sample_ratio = Some(ratio);
    }
    Arc::new(Telemetry::new(&config).expect("telemetry"))
}

fn one_request(telemetry: &Arc<Telemetry>, stats: &Arc<UpstreamStats>) {
    let mut exchange = telemetry.begin(MethodLabel::of("tools/call"), stats, None);
    exchange.classified(Era::Modern, Some(Revision::V2026_07_28));
    exchange.count_revision();
    exchange.names(|| Some("echo".to_owned()));
    exchange.finish(Outcome::Ok, 200, None);
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    // The export task is a task of the runtime the telemetry is built in.
    let _entered = runtime.enter();
    let stats = Arc::new(UpstreamStats::new(Arc::from("fast")));
    let mut criterion = Criterion::default().configure_from_args();
    for (name, ratio) in [
        ("request record, metrics only", None),
        ("request record, metrics + traces sampled 1%", Some(0.01)),
        ("request record, metrics + traces sampled 100%", Some(1.0)),
    ] {
        let telemetry = telemetry(ratio);
        criterion.bench_function(name, |b| b.iter(|| one_request(black_box(&telemetry), &stats)));
    }
    criterion.final_summary();
}
