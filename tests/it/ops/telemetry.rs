//! Telemetry seen from outside: `/metrics` scraped after real traffic from
//! Python SDK clients of both eras and parsed by prometheus-client's own
//! parser; the JSON access log; `server/discover` as a live self-test; the
//! admin token. The upstream is the legacy Python fixture over stdio.

use crate::common;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// eragate with an admin listener in front of the legacy fixture; `extra` is more TOML.
struct Observed {
    eragate: Eragate,
    admin: String,
}

impl Observed {
    fn start(extra: &str, args: &[&str], env: &[(&str, &str)]) -> Observed {
        let admin = format!("127.0.0.1:{}", free_port());
        let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
        let config = format!("[admin]\naddress = \"{admin}\"\n{extra}\n{upstream}");
        let eragate = Eragate::start_with_env(&config, args, env);
        let admin = format!("http://{admin}");
        wait_until("the admin listener", Duration::from_secs(10), || {
            admin_get(&admin, "/healthz", None).0 == 200
        });
        Observed { eragate, admin }
    }

    fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        admin_get(&self.admin, path, token)
    }

    /// `/metrics`, parsed by prometheus-client.
    fn scrape(&self) -> Scrape {
        let (status, text) = self.get("/metrics", None);
        assert_eq!(status, 200, "/metrics: {text}");
        Scrape::parse(&text)
    }
}

fn admin_get(admin: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut request = http_client().get(format!("{admin}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    match request.send() {
        Ok(response) => (response.status().as_u16(), response.text().unwrap_or_default()),
        Err(_) => (0, String::new()),
    }
}

/// Samples from prometheus-client's parser (`tests/peers/parse_metrics.py`).
struct Scrape {
    families: BTreeMap<String, String>,
    samples: Vec<Value>,
}

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let peers = peers();
        let mut child = Command::new(peers.python())
            .arg(peers.script("parse_metrics.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run parse_metrics.py (tests/peers/install.sh installs prometheus-client)");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write metrics");
        let output = child.wait_with_output().expect("parse_metrics.py");
        assert!(
            output.status.success(),
            "prometheus-client refused /metrics: {}\n{text}",
            String::from_utf8_lossy(&output.stderr)
        );
        let parsed: Value = serde_json::from_slice(&output.stdout).expect("parser JSON");
        let families = parsed["families"]
            .as_object()
            .expect("families")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect();
        let samples = parsed["samples"].as_array().expect("samples").clone();
        Scrape { families, samples }
    }

    /// The value of the sample `name` whose labels include `labels` (0 when absent).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| s["name"] == name)
            .filter(|s| labels.iter().all(|(k, v)| s["labels"][*k] == *v))
            .map(|s| s["value"].as_f64().unwrap_or(0.0))
            .sum()
    }
}

fn py(args: &[&str]) -> Value {
    py_client(args).unwrap_or_else(|e| panic!("python client failed: {e}"))
}

#[test]
fn metrics_count_both_eras_by_revision_method_and_outcome() {
    let gateway = Observed::start("", &[], &[]);
    let before = gateway.scrape();
    let url = gateway.eragate.url();
    for _ in 0..2 {
        let report = py(&[
            "--mode",
            "legacy",
            "--url",
            &url,
            "--scenario",
            "tools",
            "--offer-version",
            "2025-06-18",
        ]);
        assert_eq!(report["protocol_version"], "2025-06-18", "{report}");
    }
    let report = py(&["--mode", "2026-07-28", "--url", &url, "--scenario", "tools"]);
    assert!(report["results"].is_object(), "{report}");
    let after = gateway.scrape();

    let requests = "eragate_requests_total";
    assert_eq!(
        after.families.get("eragate_requests").map(String::as_str),
        Some("counter")
    );
    assert_eq!(
        after
            .families
            .get("eragate_request_duration_seconds")
            .map(String::as_str),
        Some("histogram")
    );
    let legacy = [("era", "legacy"), ("revision", "2025-06-18")];
    let modern = [("era", "modern"), ("revision", "2026-07-28")];
    let moved = |labels: &[(&str, &str)]| after.value(requests, labels) - before.value(requests, labels);
    assert_eq!(
        moved(&[legacy[0], legacy[1], ("method", "initialize"), ("outcome", "ok")]),
        2.0
    );
    assert!(moved(&[legacy[0], legacy[1], ("method", "tools/call"), ("outcome", "ok")]) >= 2.0);
    assert!(moved(&[legacy[0], legacy[1], ("method", "tools/list"), ("outcome", "ok")]) >= 2.0);
    assert!(moved(&[modern[0], modern[1], ("method", "tools/call"), ("outcome", "ok")]) >= 1.0);
    assert_eq!(moved(&[("era", "modern"), ("revision", "2025-06-18")]), 0.0);
    // The one metric answering "which revision does each client negotiate?".
    let revisions = "eragate_client_revisions_total";
    assert_eq!(after.value(revisions, &legacy), 2.0);
    assert!(after.value(revisions, &modern) >= 2.0);
    assert_eq!(after.value(revisions, &[("revision", "2025-11-25")]), 0.0);
    let count = "eragate_request_duration_seconds_count";
    assert!(after.value(count, &[("era", "modern"), ("method", "tools/call")]) >= 1.0);
    assert!(
        after.value(
            "eragate_request_duration_seconds_bucket",
            &[("era", "modern"), ("method", "tools/call"), ("le", "+Inf")]
        ) >= 1.0
    );
    // The upstream: learned era, a healthy member, pooling saving handshakes for modern calls.
    let upstream = [("upstream", "fixture")];
    assert_eq!(
        after.value("eragate_upstream_info", &[("upstream", "fixture"), ("era", "legacy")]),
        1.0
    );
    assert_eq!(after.value("eragate_member_healthy", &upstream), 1.0);
    assert!(after.value("eragate_member_children", &upstream) >= 1.0);
    assert!(after.value("eragate_upstream_initialize_saved_total", &upstream) >= 1.0);
    assert_eq!(
        after.value("eragate_upstream_admission_rejections_total", &upstream),
        0.0
    );
    assert!(after.value("eragate_upstream_last_success_timestamp_seconds", &upstream) > 1.0e9);
    assert_eq!(after.value("eragate_upstream_queue_depth", &upstream), 0.0);
    // The bounds of issue 34 beside the pools: accepts per listener, ended ids, upstream bytes.
    let accepted = |listener| after.value("eragate_accepts_total", &[("listener", listener)]);
    assert!(accepted("mcp") >= 3.0 && accepted("admin") >= 1.0);
    assert_eq!(after.value("eragate_accept_failures_total", &[]), 0.0);
    for (family, kind) in [
        ("eragate_ended_sessions", "gauge"),
        ("eragate_ended_sessions_evicted", "counter"),
        ("eragate_ended_sessions_visited", "counter"),
        ("eragate_upstream_buffered_bytes", "gauge"),
        ("eragate_upstream_buffered_bytes_peak", "gauge"),
        ("eragate_upstream_buffered_refused", "counter"),
    ] {
        assert_eq!(after.families.get(family).map(String::as_str), Some(kind), "{family}");
    }
}

#[test]
fn a_method_name_from_a_client_never_becomes_a_label() {
    let gateway = Observed::start("", &[], &[]);
    let url = gateway.eragate.url();
    for i in 0..5 {
        let method = format!("made/up/{i}");
        let reply = post_modern(&url, i, &method, None, json!({}));
        assert_ne!(reply.status, 200, "{reply:?}");
    }
    let scrape = gateway.scrape();
    assert!(
        !scrape
            .samples
            .iter()
            .any(|s| s["labels"].to_string().contains("made/up")),
        "a client's method became a label"
    );
    let rejected = scrape.value(
        "eragate_requests_total",
        &[("era", "modern"), ("method", "other"), ("outcome", "rejected")],
    );
    assert_eq!(rejected, 5.0);
}

#[test]
fn json_access_log_has_one_line_per_request_without_secrets() {
    let gateway = Observed::start("", &["--log-format", "json"], &[]);
    let url = gateway.eragate.url();
    let (session, _) = legacy_initialize(&url, "2025-03-26");
    let listed = legacy_request(&url, &session, "2025-03-26", 1, "tools/list", json!({}));
    assert_eq!(listed.status, 200);
    let called = modern_call(&url, 2, "echo", json!({"text": "hello"}));
    assert_eq!(called.status, 200, "{called:?}");
    let fingerprint = eragate::seal::fingerprint(&session);
    let mut access = Vec::new();
    wait_until("three access-log lines", Duration::from_secs(10), || {
        access = gateway
            .eragate
            .log()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["target"] == "eragate::access")
            .collect();
        access.len() >= 4
    });
    let log = gateway.eragate.log();
    assert!(!log.contains(&session), "the raw session id is in the log");
    let find = |method: &str| {
        access
            .iter()
            .find(|l| l["method"] == method)
            .unwrap_or_else(|| panic!("no access line for {method}: {access:?}"))
    };
    let initialize = find("initialize");
    assert_eq!(initialize["era"], "legacy");
    assert_eq!(initialize["revision"], "2025-03-26");
    assert_eq!(initialize["session"], fingerprint.as_str());
    let listed = find("tools/list");
    assert_eq!(
        (
            &listed["outcome"],
            &listed["status"],
            &listed["session"],
            &listed["upstream"]
        ),
        (&json!("ok"), &json!(200), &json!(fingerprint), &json!("fixture"))
    );
    assert_eq!(find("notifications/initialized")["outcome"], "accepted");
    let call = find("tools/call");
    assert_eq!(
        (&call["era"], &call["revision"]),
        (&json!("modern"), &json!("2026-07-28"))
    );
    assert!(call["duration_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{call}");
    assert!(call.get("session").is_none_or(Value::is_null), "{call}");
}

#[test]
fn discover_carries_a_live_summary_only_when_asked() {
    let live = Observed::start("[telemetry]\nlive_discover = true", &[], &[]);
    let called = modern_call(&live.eragate.url(), 1, "echo", json!({"text": "hi"}));
    assert_eq!(called.status, 200, "{called:?}");
    let reply = post_modern(&live.eragate.url(), 2, "server/discover", None, json!({}));
    let result = answer(&reply, 2)["result"].clone();
    let summary = &result["_meta"]["io.eragate/upstream"];
    assert_eq!(summary["upstream"], "fixture", "{result}");
    assert_eq!(summary["era"], "legacy");
    assert_eq!(summary["members"], json!({"healthy": 1, "total": 1}));
    assert!(
        summary["lastSuccessUnixMs"]
            .as_u64()
            .is_some_and(|ms| ms > 1_600_000_000_000),
        "{summary}"
    );
    assert!(
        result["supportedVersions"].is_array(),
        "the discover result itself is intact: {result}"
    );
    // The Python SDK's own discover (auto mode) reads the decorated answer as any other.
    let report = py(&["--mode", "auto", "--url", &live.eragate.url(), "--scenario", "connect"]);
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");

    let plain = Observed::start("", &[], &[]);
    let reply = post_modern(&plain.eragate.url(), 2, "server/discover", None, json!({}));
    let result = answer(&reply, 2)["result"].clone();
    assert!(result["_meta"].get("io.eragate/upstream").is_none(), "{result}");
}

#[test]
fn the_admin_token_guards_everything_but_the_probes() {
    let token = "admin-secret-3f9a";
    let gateway = Observed::start(
        "token_env = \"ERAGATE_TEST_ADMIN_TOKEN\"",
        &[],
        &[("ERAGATE_TEST_ADMIN_TOKEN", token)],
    );
    for path in ["/metrics", "/pools", "/status.json", "/"] {
        assert_eq!(gateway.get(path, None).0, 401, "{path} without the token");
        assert_eq!(
            gateway.get(path, Some("admin-secret-3f9b")).0,
            401,
            "{path} with a wrong token"
        );
        assert_eq!(gateway.get(path, Some(token)).0, 200, "{path} with the token");
    }
    assert_eq!(gateway.get(&format!("/status.json?token={token}"), None).0, 200);
    assert_eq!(gateway.get("/healthz", None).0, 200);
    let (status, _) = gateway.get("/readyz", None);
    assert!(status == 200 || status == 503);
}
