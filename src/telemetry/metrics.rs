//! Request metrics kept in fixed arrays of atomics and rendered as Prometheus
//! text: counting a request is a few relaxed increments at indexes computed
//! from bounded labels ([`super::labels`]); nothing is allocated or hashed.
//!
//! Why not the `metrics` crate: its macros look a key up in a registry on
//! every call (a hash of the name and labels); the label space here is small
//! and fixed, so plain arrays are both leaner and simpler.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::labels::{ERAS, METHOD_COUNT, METHODS, Outcome, REVISIONS};

/// Upper bounds of the latency buckets, in microseconds (the last bucket is `+Inf`).
const BUCKETS_US: [u64; 13] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 10_000_000,
];
const OUTCOMES: usize = Outcome::ALL.len();

/// Where one finished request is counted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cell {
    /// [`super::labels::era_index`].
    pub(crate) era: usize,
    /// [`super::labels::revision_index`].
    pub(crate) revision: usize,
    /// [`super::labels::MethodLabel::index`].
    pub(crate) method: usize,
    /// How it ended.
    pub(crate) outcome: Outcome,
}

/// Every request counter and latency histogram of one gateway.
pub(crate) struct Metrics {
    /// `[era][revision][method][outcome]`, flattened.
    requests: Box<[AtomicU64]>,
    /// `[era][method]`, flattened.
    latency: Box<[Histogram]>,
    /// `[era][revision]`: legacy sessions negotiated, modern requests declared.
    revisions: Box<[AtomicU64]>,
}

struct Histogram {
    buckets: [AtomicU64; BUCKETS_US.len()],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let eras = ERAS.len();
        Metrics {
            requests: zeros(eras * REVISIONS.len() * METHOD_COUNT * OUTCOMES),
            latency: (0..eras * METHOD_COUNT).map(|_| Histogram::default()).collect(),
            revisions: zeros(eras * REVISIONS.len()),
        }
    }
}

impl Metrics {
    /// Counts one finished request that took `took`.
    pub(crate) fn record(&self, cell: Cell, took: Duration) {
        let index = ((cell.era * REVISIONS.len() + cell.revision) * METHOD_COUNT + cell.method) * OUTCOMES
            + cell.outcome.index();
        if let Some(counter) = self.requests.get(index) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(histogram) = self.latency.get(cell.era * METHOD_COUNT + cell.method) {
            histogram.observe(took);
        }
    }

    /// Counts a client revision: a legacy session negotiated, or a modern request declaring it.
    pub(crate) fn record_revision(&self, era: usize, revision: usize) {
        if let Some(counter) = self.revisions.get(era * REVISIONS.len() + revision) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The client revisions counted so far, `{era: {revision: count}}` (the status page's view).
    pub(crate) fn revisions_view(&self) -> serde_json::Value {
        let mut eras = serde_json::Map::new();
        for (era, era_name) in ERAS.iter().enumerate() {
            let mut revisions = serde_json::Map::new();
            for (revision, revision_name) in REVISIONS.iter().enumerate() {
                let value = self.revisions[era * REVISIONS.len() + revision].load(Ordering::Relaxed);
                if value > 0 {
                    revisions.insert((*revision_name).into(), value.into());
                }
            }
            eras.insert((*era_name).into(), revisions.into());
        }
        eras.into()
    }

    /// Appends the request metrics in Prometheus text format (series that never moved are left out).
    pub(crate) fn render(&self, out: &mut String) {
        self.render_requests(out);
        self.render_revisions(out);
        self.render_latency(out);
    }

    fn render_requests(&self, out: &mut String) {
        header(
            out,
            "eragate_requests_total",
            "counter",
            "Client requests by client era, negotiated revision, method and outcome.",
        );
        for (era, era_name) in ERAS.iter().enumerate() {
            for (revision, revision_name) in REVISIONS.iter().enumerate() {
                for (method, method_name) in METHODS.iter().enumerate() {
                    for outcome in Outcome::ALL {
                        let index =
                            ((era * REVISIONS.len() + revision) * METHOD_COUNT + method) * OUTCOMES + outcome.index();
                        let value = self.requests[index].load(Ordering::Relaxed);
                        if value > 0 {
                            let _ = writeln!(
                                out,
                                "eragate_requests_total{{era=\"{era_name}\",revision=\"{revision_name}\",method=\"{method_name}\",outcome=\"{}\"}} {value}",
                                outcome.as_str()
                            );
                        }
                    }
                }
            }
        }
    }

    fn render_revisions(&self, out: &mut String) {
        header(
            out,
            "eragate_client_revisions_total",
            "counter",
            "The revision each client speaks: one per legacy session negotiated (initialize), one per modern request.",
        );
        for (era, era_name) in ERAS.iter().enumerate() {
            for (revision, revision_name) in REVISIONS.iter().enumerate() {
                let value = self.revisions[era * REVISIONS.len() + revision].load(Ordering::Relaxed);
                if value > 0 {
                    let _ = writeln!(
                        out,
                        "eragate_client_revisions_total{{era=\"{era_name}\",revision=\"{revision_name}\"}} {value}"
                    );
                }
            }
        }
    }

    fn render_latency(&self, out: &mut String) {
        header(
            out,
            "eragate_request_duration_seconds",
            "histogram",
            "Time from a client request's dispatch to its response, by client era and method.",
        );
        for (era, era_name) in ERAS.iter().enumerate() {
            for (method, method_name) in METHODS.iter().enumerate() {
                let histogram = &self.latency[era * METHOD_COUNT + method];
                let count = histogram.count.load(Ordering::Relaxed);
                if count == 0 {
                    continue;
                }
                let labels = format!("era=\"{era_name}\",method=\"{method_name}\"");
                let mut cumulative = 0;
                for (bound, bucket) in BUCKETS_US.iter().zip(&histogram.buckets) {
                    cumulative += bucket.load(Ordering::Relaxed);
                    let le = *bound as f64 / 1e6;
                    let _ = writeln!(
                        out,
                        "eragate_request_duration_seconds_bucket{{{labels},le=\"{le}\"}} {cumulative}"
                    );
                }
                let _ = writeln!(
                    out,
                    "eragate_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {count}"
                );
                let sum = histogram.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
                let _ = writeln!(out, "eragate_request_duration_seconds_sum{{{labels}}} {sum}");
                let _ = writeln!(out, "eragate_request_duration_seconds_count{{{labels}}} {count}");
            }
        }
    }
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    fn observe(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        // Past the last bound only `count` grows: that is the `+Inf` bucket.
        if let Some(bucket) = BUCKETS_US.iter().position(|bound| us <= *bound) {
            self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        }
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

/// `# HELP` and `# TYPE` of one metric.
pub(crate) fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value escaped for the text format (`\`, `"` and newlines).
pub(crate) fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn zeros(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::labels::MethodLabel;

    #[test]
    fn counts_land_on_their_own_series() {
        let metrics = Metrics::default();
        let call = Cell {
            era: 1,
            revision: 4,
            method: MethodLabel::of("tools/call").index(),
            outcome: Outcome::Ok,
        };
        metrics.record(call, Duration::from_millis(3));
        metrics.record(call, Duration::from_millis(3));
        metrics.record(
            Cell {
                outcome: Outcome::Error,
                ..call
            },
            Duration::from_secs(60),
        );
        metrics.record_revision(0, 2);
        let mut text = String::new();
        metrics.render(&mut text);
        let table = [
            "eragate_requests_total{era=\"modern\",revision=\"2026-07-28\",method=\"tools/call\",outcome=\"ok\"} 2",
            "eragate_requests_total{era=\"modern\",revision=\"2026-07-28\",method=\"tools/call\",outcome=\"error\"} 1",
            "eragate_client_revisions_total{era=\"legacy\",revision=\"2025-06-18\"} 1",
            "eragate_request_duration_seconds_bucket{era=\"modern\",method=\"tools/call\",le=\"0.0025\"} 0",
            "eragate_request_duration_seconds_bucket{era=\"modern\",method=\"tools/call\",le=\"0.005\"} 2",
            "eragate_request_duration_seconds_bucket{era=\"modern\",method=\"tools/call\",le=\"10\"} 2",
            "eragate_request_duration_seconds_bucket{era=\"modern\",method=\"tools/call\",le=\"+Inf\"} 3",
            "eragate_request_duration_seconds_count{era=\"modern\",method=\"tools/call\"} 3",
        ];
        for line in table {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
        assert!(!text.contains("method=\"tools/list\""), "{text}");
    }

    #[test]
    fn label_values_are_escaped() {
        let table = [("a", "a"), ("a\"b", "a\\\"b"), ("a\\b", "a\\\\b"), ("a\nb", "a\\nb")];
        for (raw, escaped) in table {
            assert_eq!(escape(raw), escaped);
        }
    }
}
