//! What an upstream counts about itself for operators: admission refusals,
//! handshakes saved by pooling, and when a call last succeeded. Also renders
//! the pools' admin view as Prometheus gauges (at scrape time, never per request).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::metrics::{escape, header};

/// Counters one upstream keeps; shared with the requests it serves.
#[derive(Debug)]
pub struct UpstreamStats {
    name: std::sync::Arc<str>,
    admission_rejected: AtomicU64,
    initialize_saved: AtomicU64,
    list_cache_hits: AtomicU64,
    list_cache_misses: AtomicU64,
    read_cache_hits: AtomicU64,
    read_cache_misses: AtomicU64,
    /// Milliseconds since the Unix epoch; 0 = never.
    last_success_ms: AtomicU64,
}

impl UpstreamStats {
    /// Zeroed counters of the upstream `name`.
    pub fn new(name: std::sync::Arc<str>) -> UpstreamStats {
        UpstreamStats {
            name,
            admission_rejected: AtomicU64::new(0),
            initialize_saved: AtomicU64::new(0),
            list_cache_hits: AtomicU64::new(0),
            list_cache_misses: AtomicU64::new(0),
            read_cache_hits: AtomicU64::new(0),
            read_cache_misses: AtomicU64::new(0),
            last_success_ms: AtomicU64::new(0),
        }
    }

    /// The upstream's configured name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The upstream's name, shared (for the spans of its requests).
    pub(crate) fn shared_name(&self) -> std::sync::Arc<str> {
        self.name.clone()
    }

    /// A request was refused admission (in-flight bound and queue full, or queue timeout).
    pub(crate) fn admission_rejected(&self) {
        self.admission_rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// A request was served on a warm pooled session: an `initialize` not sent.
    pub(crate) fn initialize_saved(&self) {
        self.initialize_saved.fetch_add(1, Ordering::Relaxed);
    }

    /// A list request was answered from the pages eragate keeps.
    pub(crate) fn list_cache_hit(&self) {
        self.list_cache_hits.fetch_add(1, Ordering::Relaxed);
    }

    /// A list request had to be sent to the upstream.
    pub(crate) fn list_cache_miss(&self) {
        self.list_cache_misses.fetch_add(1, Ordering::Relaxed);
    }

    /// A `resources/read` was answered from the results eragate keeps.
    pub(crate) fn read_cache_hit(&self) {
        self.read_cache_hits.fetch_add(1, Ordering::Relaxed);
    }

    /// A `resources/read` eragate could have kept had to be sent to the upstream.
    pub(crate) fn read_cache_miss(&self) {
        self.read_cache_misses.fetch_add(1, Ordering::Relaxed);
    }

    /// A call through this upstream succeeded now.
    pub(crate) fn succeeded(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.last_success_ms.store(now, Ordering::Relaxed);
    }

    /// When a call last succeeded (ms since the Unix epoch), if ever.
    pub(crate) fn last_success_ms(&self) -> Option<u64> {
        Some(self.last_success_ms.load(Ordering::Relaxed)).filter(|ms| *ms > 0)
    }

    /// The counters as members of the admin view.
    pub(crate) fn view(&self) -> Value {
        json!({
            "admission_rejected": self.admission_rejected.load(Ordering::Relaxed),
            "initialize_saved": self.initialize_saved.load(Ordering::Relaxed),
            "list_cache_hits": self.list_cache_hits.load(Ordering::Relaxed),
            "list_cache_misses": self.list_cache_misses.load(Ordering::Relaxed),
            "read_cache_hits": self.read_cache_hits.load(Ordering::Relaxed),
            "read_cache_misses": self.read_cache_misses.load(Ordering::Relaxed),
            "last_success_ms": self.last_success_ms(),
        })
    }
}

/// Gauges and counters of every upstream, from the admin view (`/pools`).
pub(crate) fn render_pools(pools: &Value, out: &mut String) {
    let upstreams = pools["upstreams"].as_array().map(Vec::as_slice).unwrap_or_default();
    let per_upstream: [(&str, &str, &str, &str); 10] = [
        (
            "eragate_upstream_in_flight",
            "gauge",
            "in_flight",
            "Requests holding an in-flight slot of the upstream.",
        ),
        (
            "eragate_upstream_queue_depth",
            "gauge",
            "queued",
            "Requests waiting for an in-flight slot.",
        ),
        (
            "eragate_upstream_partitions",
            "gauge",
            "partitions",
            "Partitions of pooled sessions (principal × capability profile).",
        ),
        (
            "eragate_upstream_admission_rejections_total",
            "counter",
            "admission_rejected",
            "Requests refused because the upstream was at capacity.",
        ),
        (
            "eragate_upstream_initialize_saved_total",
            "counter",
            "initialize_saved",
            "Requests served on a warm pooled session: initialize handshakes saved by pooling.",
        ),
        (
            "eragate_list_cache_hits_total",
            "counter",
            "list_cache_hits",
            "List requests answered from the pages eragate keeps.",
        ),
        (
            "eragate_list_cache_misses_total",
            "counter",
            "list_cache_misses",
            "List requests sent to the upstream (nothing current kept).",
        ),
        (
            "eragate_read_cache_hits_total",
            "counter",
            "read_cache_hits",
            "resources/read answered from the results a modern upstream let eragate keep.",
        ),
        (
            "eragate_read_cache_misses_total",
            "counter",
            "read_cache_misses",
            "resources/read of a modern upstream sent to it (nothing current kept).",
        ),
        (
            "eragate_upstream_last_success_timestamp_seconds",
            "gauge",
            "last_success_ms",
            "When a call through the upstream last succeeded.",
        ),
    ];
    header(
        out,
        "eragate_upstream_info",
        "gauge",
        "One per upstream; `era` is the era learned (unknown until probed).",
    );
    for upstream in upstreams {
        let name = escape(upstream["upstream"].as_str().unwrap_or_default());
        let era = upstream["era"].as_str().unwrap_or("unknown");
        let _ = writeln!(out, "eragate_upstream_info{{upstream=\"{name}\",era=\"{era}\"}} 1");
    }
    for (metric, kind, key, help) in per_upstream {
        header(out, metric, kind, help);
        for upstream in upstreams {
            let name = escape(upstream["upstream"].as_str().unwrap_or_default());
            let value = match key {
                "last_success_ms" => upstream[key].as_f64().map_or(0.0, |ms| ms / 1000.0),
                _ => upstream[key].as_f64().unwrap_or(0.0),
            };
            let _ = writeln!(out, "{metric}{{upstream=\"{name}\"}} {value}");
        }
    }
    render_members(upstreams, out);
    header(out, "eragate_client_sessions", "gauge", "Open legacy client sessions.");
    let _ = writeln!(
        out,
        "eragate_client_sessions {}",
        pools["legacy_sessions"].as_u64().unwrap_or(0)
    );
    header(
        out,
        "eragate_suspended_calls",
        "gauge",
        "Upstream calls waiting for a modern client's input.",
    );
    let _ = writeln!(
        out,
        "eragate_suspended_calls {}",
        pools["suspended_calls"].as_u64().unwrap_or(0)
    );
    render_tasks(&pools["tasks"], out);
    render_bounds(pools, out);
}

/// The tasks this replica keeps and has ended (`/pools` `tasks`).
fn render_tasks(tasks: &Value, out: &mut String) {
    let count = |key: &str| tasks[key].as_u64().unwrap_or(0);
    header(
        out,
        "eragate_tasks_live",
        "gauge",
        "Tasks whose upstream call runs or waits for input.",
    );
    let _ = writeln!(out, "eragate_tasks_live {}", count("live"));
    header(
        out,
        "eragate_tasks_kept",
        "gauge",
        "Tasks kept: live, and ended within their ttl.",
    );
    let _ = writeln!(out, "eragate_tasks_kept {}", count("kept"));
    header(out, "eragate_tasks_created_total", "counter", "Tasks created.");
    let _ = writeln!(out, "eragate_tasks_created_total {}", count("created"));
    header(out, "eragate_tasks_ended_total", "counter", "Tasks ended, by status.");
    for status in ["completed", "failed", "cancelled"] {
        let _ = writeln!(
            out,
            "eragate_tasks_ended_total{{status=\"{status}\"}} {}",
            count(status)
        );
    }
}

/// The bounded tables and budgets of `/pools` that are not per upstream: ended session
/// ids, bytes held for upstream messages, and each listener's accepts.
fn render_bounds(pools: &Value, out: &mut String) {
    let single: [(&str, &str, &str, &str, &str); 6] = [
        (
            "eragate_ended_sessions",
            "gauge",
            "ended_sessions",
            "remembered",
            "Ended legacy session ids remembered (as digests).",
        ),
        (
            "eragate_ended_sessions_evicted_total",
            "counter",
            "ended_sessions",
            "evicted",
            "Ended session ids forgotten to keep the bound, before they expired.",
        ),
        (
            "eragate_ended_sessions_visited_total",
            "counter",
            "ended_sessions",
            "visited",
            "Entries visited to keep the bound on ended session ids.",
        ),
        (
            "eragate_upstream_buffered_bytes",
            "gauge",
            "upstream_buffered_bytes",
            "held",
            "Bytes held now for upstream messages being read.",
        ),
        (
            "eragate_upstream_buffered_bytes_peak",
            "gauge",
            "upstream_buffered_bytes",
            "peak",
            "Most bytes held at once for upstream messages being read.",
        ),
        (
            "eragate_upstream_buffered_refused_total",
            "counter",
            "upstream_buffered_bytes",
            "refused",
            "Upstream messages refused because the bytes held for them reached their bound.",
        ),
    ];
    for (metric, kind, table, key, help) in single {
        header(out, metric, kind, help);
        let _ = writeln!(out, "{metric} {}", pools[table][key].as_u64().unwrap_or(0));
    }
    let per_listener: [(&str, &str, &str); 2] = [
        ("eragate_accepts_total", "attempts", "Accept attempts on the listener."),
        (
            "eragate_accept_failures_total",
            "failures",
            "Accepts that failed (out of descriptors, among others); each pauses the loop.",
        ),
    ];
    for (metric, key, help) in per_listener {
        header(out, metric, "counter", help);
        for listener in ["mcp", "admin"] {
            let value = pools["accepts"][listener][key].as_u64().unwrap_or(0);
            let _ = writeln!(out, "{metric}{{listener=\"{listener}\"}} {value}");
        }
    }
}

fn render_members(upstreams: &[Value], out: &mut String) {
    let per_member: [(&str, &str, &str, &str); 5] = [
        (
            "eragate_member_healthy",
            "gauge",
            "healthy",
            "1 while the member is in rotation.",
        ),
        (
            "eragate_member_sessions",
            "gauge",
            "sessions",
            "Live pooled upstream sessions on the member.",
        ),
        (
            "eragate_member_sessions_opened_total",
            "counter",
            "sessions_opened",
            "Upstream sessions opened on the member.",
        ),
        (
            "eragate_member_children",
            "gauge",
            "children",
            "Live stdio child processes of the member.",
        ),
        (
            "eragate_member_restarts_total",
            "counter",
            "restarts",
            "Unexpected child exits (restarts) of the member.",
        ),
    ];
    for (metric, kind, key, help) in per_member {
        header(out, metric, kind, help);
        for upstream in upstreams {
            let name = escape(upstream["upstream"].as_str().unwrap_or_default());
            for member in upstream["members"].as_array().map(Vec::as_slice).unwrap_or_default() {
                let label = escape(member["member"].as_str().unwrap_or_default());
                let value = match &member[key] {
                    Value::Bool(b) => u64::from(*b),
                    other => other.as_u64().unwrap_or(0),
                };
                let _ = writeln!(out, "{metric}{{upstream=\"{name}\",member=\"{label}\"}} {value}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_become_gauges() {
        let pools = json!({
            "upstreams": [{
                "upstream": "files", "era": "legacy", "in_flight": 2, "queued": 1, "partitions": 3,
                "admission_rejected": 4, "initialize_saved": 5, "last_success_ms": 1500,
                "members": [{"member": "a\"b", "healthy": true, "sessions": 2, "sessions_opened": 3, "children": 2, "restarts": 1}],
            }],
            "legacy_sessions": 7,
            "suspended_calls": 0,
        });
        let mut text = String::new();
        render_pools(&pools, &mut text);
        let table = [
            "eragate_upstream_info{upstream=\"files\",era=\"legacy\"} 1",
            "eragate_upstream_queue_depth{upstream=\"files\"} 1",
            "eragate_upstream_admission_rejections_total{upstream=\"files\"} 4",
            "eragate_upstream_initialize_saved_total{upstream=\"files\"} 5",
            "eragate_upstream_last_success_timestamp_seconds{upstream=\"files\"} 1.5",
            "eragate_member_healthy{upstream=\"files\",member=\"a\\\"b\"} 1",
            "eragate_member_children{upstream=\"files\",member=\"a\\\"b\"} 2",
            "eragate_member_restarts_total{upstream=\"files\",member=\"a\\\"b\"} 1",
            "eragate_client_sessions 7",
        ];
        for line in table {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
    }
}
