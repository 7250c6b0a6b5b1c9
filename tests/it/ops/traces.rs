//! OpenTelemetry traces checked by a real OTLP/HTTP receiver
//! (`tests/peers/otlp_receiver.py`, decoding with PyPI `opentelemetry-proto`):
//! one span per client request and per upstream call, their attributes, the
//! client's `_meta.traceparent` as the request span's parent, and the context
//! forwarded to a 2026-07-28 HTTP upstream in its header and in `_meta`; the
//! `traceparent` header as the parent of each item of a 2025-03-26 batch and
//! of a message POSTed on the HTTP+SSE edge, and the stdio edge's requests.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// The OTLP receiver, on a free port.
struct Receiver {
    _server: ListeningServer,
    url: String,
}

impl Receiver {
    fn start() -> Receiver {
        let peers = peers();
        let script = peers.script("otlp_receiver.py");
        let server = ListeningServer::start("otlp_receiver.py", peers.python(), &[script.as_str(), "0"], &[]);
        let url = server.url.clone();
        Receiver { _server: server, url }
    }

    fn spans(&self) -> Vec<Value> {
        http_client()
            .get(format!("{}/spans", self.url))
            .send()
            .and_then(|r| r.text())
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    /// Waits until spans named `names` arrived (the batch processor exports every few seconds).
    fn wait_for(&self, names: &[&str]) -> Vec<Value> {
        let mut spans = Vec::new();
        wait_until("the spans at the OTLP receiver", Duration::from_secs(30), || {
            spans = self.spans();
            names.iter().all(|n| spans.iter().any(|s| s["name"] == *n))
        });
        spans
    }
}

fn telemetry_toml(receiver: &Receiver) -> String {
    format!(
        "[telemetry]\notlp_endpoint = \"{}/v1/traces\"\nservice_name = \"eragate-under-test\"\n",
        receiver.url
    )
}

fn traced_call(url: &str) -> Reply {
    let params = json!({
        "name": "echo",
        "arguments": {"text": "traced"},
        "_meta": {"traceparent": format!("00-{TRACE_ID}-{CLIENT_SPAN}-01")},
    });
    post_modern(url, 7, "tools/call", Some("echo"), params)
}

fn span<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no span {name} in {spans:#?}"))
}

/// OpenTelemetry's standard variables alone (no `[telemetry]`) send spans where other
/// instrumented services would: endpoint, headers, service name, resource attributes, sampler.
#[test]
fn the_standard_otel_variables_alone_configure_the_traces() {
    let receiver = Receiver::start();
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s%3Dcret,x-tenant=blue"),
        ("OTEL_SERVICE_NAME", "eragate-from-env"),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=test,service.name=ignored",
        ),
        ("OTEL_TRACES_SAMPLER", "parentbased_always_on"),
    ];
    let eragate = Eragate::start_with_env(&upstream, &[], &env);
    let reply = traced_call(&eragate.url());
    assert_eq!(reply.status, 200, "{reply:?}");
    let spans = receiver.wait_for(&["tools/call"]);
    let request = span(&spans, "tools/call");
    assert_eq!(request["trace_id"], TRACE_ID, "the client's trace goes on");
    assert_eq!(request["service"], "eragate-from-env");
    assert_eq!(request["resource"]["deployment.environment"], "test", "{request:#}");
    assert_eq!(request["headers"]["x-api-key"], "s=cret", "{request:#}");
    assert_eq!(request["headers"]["x-tenant"], "blue", "{request:#}");

    // The file wins where both say something; OTEL_SDK_DISABLED turns traces off.
    let file = format!(
        "[telemetry]\notlp_endpoint = \"{}/v1/traces\"\nservice_name = \"eragate-from-file\"\n{upstream}",
        receiver.url
    );
    let eragate = Eragate::start_with_env(&file, &[], &env);
    let parent = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let params = json!({"name": "echo", "arguments": {"text": "x"}, "_meta": {"traceparent": parent}});
    assert_eq!(
        post_modern(&eragate.url(), 8, "tools/call", Some("echo"), params).status,
        200
    );
    wait_until("the file's service name", Duration::from_secs(30), || {
        receiver.spans().iter().any(|s| s["service"] == "eragate-from-file")
    });
    let off = [
        ("OTEL_SDK_DISABLED", "true"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
    ];
    let mut eragate = Eragate::start_with_env(&upstream, &[], &off);
    let before = receiver.spans().len();
    assert_eq!(traced_call(&eragate.url()).status, 200);
    // Stopping flushes whatever was queued: nothing was.
    assert!(eragate.proc.terminate(Duration::from_secs(15)), "eragate stops");
    assert_eq!(receiver.spans().len(), before, "OTEL_SDK_DISABLED=true: no spans");
}

#[test]
fn a_modern_call_to_a_legacy_upstream_makes_a_request_span_under_the_clients_and_an_upstream_span() {
    let receiver = Receiver::start();
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let eragate = Eragate::start(&format!("{}{upstream}", telemetry_toml(&receiver)));
    let reply = traced_call(&eragate.url());
    assert_eq!(reply.status, 200, "{reply:?}");
    let spans = receiver.wait_for(&["tools/call", "upstream tools/call"]);

    let request = span(&spans, "tools/call");
    assert_eq!(request["trace_id"], TRACE_ID, "the client's trace goes on");
    assert_eq!(
        request["parent_span_id"], CLIENT_SPAN,
        "the client's span is the parent"
    );
    assert_eq!(request["service"], "eragate-under-test");
    assert_eq!(request["kind"], 2, "SPAN_KIND_SERVER");
    let attributes = &request["attributes"];
    for (key, value) in [
        ("eragate.era", "modern"),
        ("eragate.revision", "2026-07-28"),
        ("mcp.method.name", "tools/call"),
        ("eragate.target", "echo"),
        ("eragate.upstream", "fixture"),
        ("eragate.outcome", "ok"),
    ] {
        assert_eq!(attributes[key], value, "{key} in {request:#}");
    }

    let call = span(&spans, "upstream tools/call");
    assert_eq!(call["trace_id"], TRACE_ID);
    assert_eq!(
        call["parent_span_id"], request["span_id"],
        "the upstream call is the request's child"
    );
    assert_eq!(call["kind"], 3, "SPAN_KIND_CLIENT");
    for (key, value) in [
        ("eragate.upstream", "fixture"),
        ("eragate.member", "stdio"),
        ("eragate.session_kind", "pooled"),
        ("eragate.upstream_revision", "2025-11-25"),
        ("eragate.outcome", "ok"),
    ] {
        assert_eq!(call["attributes"][key], value, "{key} in {call:#}");
    }
}

#[test]
fn the_trace_context_reaches_a_modern_http_upstream_in_its_header_and_meta() {
    let receiver = Receiver::start();
    let upstream = TracedUpstream::start_with(&["--dual-era"]);
    let config = format!(
        "{}{}",
        telemetry_toml(&receiver),
        remote_upstream_toml("http", &upstream.url, "")
    );
    let eragate = Eragate::start(&config);
    let reply = traced_call(&eragate.url());
    assert_eq!(reply.status, 200, "{reply:?}");
    let spans = receiver.wait_for(&["tools/call", "upstream tools/call"]);
    let call = span(&spans, "upstream tools/call");
    let expected = format!("00-{TRACE_ID}-{}-01", call["span_id"].as_str().expect("span id"));
    let sent = upstream
        .requests()
        .into_iter()
        .find(|r| r.body.as_ref().is_some_and(|b| b["method"] == "tools/call"))
        .unwrap_or_else(|| panic!("the upstream saw no tools/call: {}", upstream.raw()));
    assert_eq!(sent.headers["traceparent"], expected.as_str(), "{sent:?}");
    let body = sent.body.expect("body");
    assert_eq!(body["params"]["_meta"]["traceparent"], expected.as_str(), "{body}");
    assert_eq!(call["attributes"]["eragate.session_kind"], "pooled");
    assert_eq!(call["attributes"]["eragate.upstream_revision"], "2026-07-28");
}

#[test]
fn a_request_without_a_parent_starts_its_own_trace() {
    let receiver = Receiver::start();
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let eragate = Eragate::start(&format!("{}{upstream}", telemetry_toml(&receiver)));
    let reply = modern_call(&eragate.url(), 1, "echo", json!({"text": "untraced client"}));
    assert_eq!(reply.status, 200, "{reply:?}");
    let spans = receiver.wait_for(&["tools/call"]);
    let request = span(&spans, "tools/call");
    assert_eq!(request["parent_span_id"], "", "a root span");
    assert_ne!(request["trace_id"], TRACE_ID);
}

#[test]
fn a_legacy_clients_traceparent_header_parents_its_request_on_a_dedicated_session() {
    let receiver = Receiver::start();
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let eragate = Eragate::start(&format!("{}{upstream}", telemetry_toml(&receiver)));
    let url = eragate.url();
    let (session, _) = legacy_initialize(&url, "2025-06-18");
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let mut headers = legacy_headers(&session, "2025-06-18");
    headers.push(("traceparent", traceparent.as_str()));
    let body = request_body(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "legacy"}}),
    );
    let reply = send("POST", &url, &headers, Some(&body));
    assert_eq!(reply.status, 200, "{reply:?}");
    let spans = receiver.wait_for(&["tools/call", "upstream tools/call"]);
    let request = spans
        .iter()
        .find(|s| s["name"] == "tools/call" && s["parent_span_id"] == CLIENT_SPAN)
        .unwrap_or_else(|| panic!("no tools/call span under the header's parent: {spans:#?}"));
    assert_eq!(request["trace_id"], TRACE_ID);
    assert_eq!(request["attributes"]["eragate.era"], "legacy");
    assert_eq!(request["attributes"]["eragate.revision"], "2025-06-18");
    let call = span(&spans, "upstream tools/call");
    assert_eq!(call["parent_span_id"], request["span_id"]);
    assert_eq!(call["attributes"]["eragate.session_kind"], "dedicated");
}

/// Waits until `count` spans named `name` under the client's span arrived; returns them.
fn wait_for_children(receiver: &Receiver, name: &str, count: usize) -> Vec<Value> {
    let mut found = Vec::new();
    let arrived = poll_until(Duration::from_secs(30), || {
        found = receiver
            .spans()
            .into_iter()
            .filter(|s| s["name"] == name && s["parent_span_id"] == CLIENT_SPAN)
            .collect();
        found.len() >= count
    });
    assert!(
        arrived,
        "{count} {name} span(s) under the client's span: {:#?}",
        receiver.spans()
    );
    found
}

#[test]
fn each_item_of_a_2025_03_26_batch_takes_the_traceparent_header_as_its_parent() {
    let receiver = Receiver::start();
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let eragate = Eragate::start(&format!("{}{upstream}", telemetry_toml(&receiver)));
    let url = eragate.url();
    let (session, _) = legacy_initialize(&url, "2025-03-26");
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let mut headers = legacy_headers(&session, "2025-03-26");
    headers.push(("traceparent", traceparent.as_str()));
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "one"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "two"}}},
    ]);
    let reply = send("POST", &url, &headers, Some(&batch.to_string()));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.json().as_array().map(Vec::len), Some(2), "{}", reply.body);
    for span in wait_for_children(&receiver, "tools/call", 2) {
        assert_eq!(span["trace_id"], TRACE_ID, "{span:#}");
        assert_eq!(span["attributes"]["eragate.revision"], "2025-03-26", "{span:#}");
    }
}

#[test]
fn a_request_posted_on_the_http_sse_edge_takes_the_traceparent_header_as_its_parent() {
    use std::io::{BufRead, BufReader};
    let receiver = Receiver::start();
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let eragate = Eragate::start(&format!("{}{upstream}", telemetry_toml(&receiver)));
    let stream = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
        .get(format!("http://{}/sse", eragate.addr))
        .header("accept", "text/event-stream")
        .send()
        .expect("GET /sse");
    assert_eq!(stream.status(), 200);
    let mut lines = BufReader::new(stream).lines();
    let endpoint = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("data: ").map(str::to_owned))
        .expect("the endpoint event");
    let messages = format!("http://{}{endpoint}", eragate.addr);
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let headers = [
        ("content-type", "application/json"),
        ("traceparent", traceparent.as_str()),
    ];
    let initialize = request_body(
        0,
        "initialize",
        json!({"protocolVersion": "2024-11-05",
        "capabilities": {}, "clientInfo": {"name": "traces", "version": "0"}}),
    );
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let call = request_body(3, "tools/call", json!({"name": "echo", "arguments": {"text": "sse"}}));
    for body in [initialize, initialized, call] {
        let posted = send("POST", &messages, &headers, Some(&body));
        assert_eq!(posted.status, 202, "{posted:?}\n{}", eragate.log());
    }
    let span = &wait_for_children(&receiver, "tools/call", 1)[0];
    assert_eq!(span["trace_id"], TRACE_ID, "{span:#}");
    assert_eq!(span["attributes"]["eragate.era"], "legacy", "{span:#}");
    // The answer came on the stream, which stayed open until now.
    assert!(
        lines.map_while(Result::ok).any(|line| line.contains("echo: sse")),
        "the answer on the stream"
    );
}

#[test]
fn each_request_on_the_stdio_edge_gets_a_span_under_its_meta_traceparent() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("eragate.toml");
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    std::fs::write(&config, format!("{}{upstream}", telemetry_toml(&receiver))).expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_eragate"))
        .args(["stdio", "--config"])
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("eragate stdio");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut answers = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let initialize = request_body(
        0,
        "initialize",
        json!({"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "traces", "version": "0"}}),
    );
    writeln!(stdin, "{initialize}").expect("write");
    let first = answers.next().expect("an answer").expect("a line");
    assert!(first.contains("\"protocolVersion\""), "{first}");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .expect("write");
    for (id, text) in [(1, "one"), (2, "two")] {
        let call = request_body(
            id,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": text},
            "_meta": {"traceparent": traceparent}}),
        );
        writeln!(stdin, "{call}").expect("write");
        let answer = answers.next().expect("an answer").expect("a line");
        assert!(answer.contains(&format!("echo: {text}")), "{answer}");
    }
    // Closing stdin ends eragate, which flushes its spans on the way out.
    drop(stdin);
    let _ = child.wait();
    for span in wait_for_children(&receiver, "tools/call", 2) {
        assert_eq!(span["trace_id"], TRACE_ID, "{span:#}");
        assert_eq!(span["attributes"]["eragate.era"], "legacy", "{span:#}");
    }
}

#[test]
fn a_reload_changes_the_sampling_ratio_and_the_service_name() {
    let receiver = Receiver::start();
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let traces = |ratio: &str, service: &str| {
        format!(
            "[listen]\n[telemetry]\notlp_endpoint = \"{}/v1/traces\"\nservice_name = \"{service}\"\nsample_ratio = {ratio}\n{upstream}",
            receiver.url
        )
    };
    let eragate = Eragate::start(&traces("0.0", "eragate-unsampled"));
    // Sampled at 0: the client sends no trace context, so nothing is recorded.
    let listed = post_modern(&eragate.url(), 1, "tools/list", None, json!({}));
    assert_eq!(listed.status, 200, "{listed:?}");

    let text =
        traces("1.0", "eragate-reloaded").replacen("[listen]", &format!("[listen]\naddress = \"{}\"", eragate.addr), 1);
    let path = eragate.config_path();
    std::fs::write(path.with_extension("partial"), text).expect("write config");
    std::fs::rename(path.with_extension("partial"), &path).expect("rename config");
    wait_until("the [telemetry] reload", Duration::from_secs(60), || {
        eragate.log().contains("[telemetry] reloaded")
    });
    assert!(!eragate.log().contains("restart eragate"), "{}", eragate.log());

    let reply = modern_call(&eragate.url(), 2, "echo", json!({"text": "sampled now"}));
    assert_eq!(reply.status, 200, "{reply:?}");
    let spans = receiver.wait_for(&["tools/call", "upstream tools/call"]);
    let request = span(&spans, "tools/call");
    assert_eq!(request["service"], "eragate-reloaded", "{request:#}");
    assert!(
        spans.iter().all(|s| s["name"] != "tools/list"),
        "the call made at ratio 0 was exported: {spans:#?}"
    );
}
