//! A 2026-07-28 client's `Mcp-Param-*` headers through eragate (issue 34 item 8): in front
//! of a legacy upstream, which cannot check them, eragate checks the ones the tool declares
//! (`x-mcp-header`) against the body as a 2026-07-28 server must (400/-32020) and sends
//! none of them on; in front of a modern upstream, and to a federation's modern member,
//! they are forwarded as they came, undeclared ones too.
//!
//! The fixture is `legacy_server.py --param-headers` over Streamable HTTP with `--trace`: its
//! `regional` tool annotates `region` with `x-mcp-header: Region`, and the trace shows what
//! reached it. Before the fix, `Mcp-Param-Region: evil` with `"region": "good"` reached the
//! legacy upstream as a call and was answered 200.

use crate::common;

use common::*;
use serde_json::{Value, json};

/// The `Mcp-Param-*` headers one case sends.
type ParamsSent = &'static [(&'static str, &'static str)];

/// One `tools/call` of `tool` with `arguments` and the extra `Mcp-Param-*` headers `params`.
fn call_with_params(url: &str, id: u64, tool: &str, arguments: Value, params: &[(&str, &str)]) -> Reply {
    let mut headers = modern_headers("tools/call", Some(tool));
    headers.extend_from_slice(params);
    let body = modern_body(id, "tools/call", json!({"name": tool, "arguments": arguments}));
    send("POST", url, &headers, Some(&body))
}

/// The `mcp-param-*` headers of the `tools/call` requests the upstream received, in order.
fn param_headers_received(upstream: &TracedUpstream) -> Vec<Vec<(String, String)>> {
    upstream
        .posted("tools/call")
        .iter()
        .map(|(headers, _)| {
            headers
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(name, _)| name.to_ascii_lowercase().starts_with("mcp-param-"))
                .map(|(name, value)| (name.to_ascii_lowercase(), value.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .collect()
}

#[track_caller]
fn expect_header_mismatch(reply: &Reply, id: u64) {
    assert_eq!(reply.status, 400, "{reply:?}");
    let message = reply.json();
    assert_eq!(message["id"], id, "{message}");
    assert_eq!(message["error"]["code"], -32020, "{message}");
}

#[test]
fn modern_client_to_legacy_http_upstream_mcp_param_headers_are_checked_and_not_sent_on() {
    let upstream = TracedUpstream::start_with(&["--param-headers"]);
    let gateway = Eragate::http(&upstream.url, "");
    let url = gateway.url();

    // Refused before the upstream sees them: (headers, arguments), each answered 400/-32020.
    let refused: [(ParamsSent, Value); 6] = [
        // The case: the header says one thing, the body another.
        (&[("Mcp-Param-Region", "evil")], json!({"region": "good"})),
        // The body has a value for the annotated argument and no header carries it.
        (&[], json!({"region": "good"})),
        // A header for the annotated argument with no value in the body.
        (&[("Mcp-Param-Region", "good")], json!({"text": "hi"})),
        // Malformed sentinel base64 (padding, then alphabet).
        (
            &[("Mcp-Param-Region", "=?base64?SGVsbG8?=")],
            json!({"region": "Hello"}),
        ),
        (
            &[("Mcp-Param-Region", "=?base64?SGVs!!!bG8=?=")],
            json!({"region": "Hello"}),
        ),
        // Sent twice.
        (
            &[("Mcp-Param-Region", "good"), ("Mcp-Param-Region", "good")],
            json!({"region": "good"}),
        ),
    ];
    for (id, (params, arguments)) in (1..).zip(refused) {
        let reply = call_with_params(&url, id, "regional", arguments, params);
        expect_header_mismatch(&reply, id);
    }
    assert!(
        upstream.posted("tools/call").is_empty(),
        "a refused call reached the upstream:\n{}",
        upstream.raw()
    );

    // Admitted: the declared header mirrors the body (plain, in any case of its name, or
    // sentinel-encoded); an undeclared one is not looked at. None reaches the legacy upstream.
    let admitted: [(ParamsSent, Value, &str); 3] = [
        (
            &[("Mcp-Param-Region", "good"), ("Mcp-Param-Other", "anything")],
            json!({"region": "good", "text": "hi"}),
            "regional: good hi",
        ),
        (
            &[("mcp-param-region", "=?base64?SGVsbG8=?=")],
            json!({"region": "Hello"}),
            "regional: Hello ",
        ),
        (
            &[("MCP-PARAM-REGION", "=?base64?WsO8cmljaA==?=")],
            json!({"region": "Zürich"}),
            "regional: Zürich ",
        ),
    ];
    for (id, (params, arguments, text)) in (10..).zip(admitted) {
        let reply = call_with_params(&url, id, "regional", arguments, params);
        assert_eq!(reply.status, 200, "{params:?}: {reply:?}\n{}", gateway.log());
        assert_eq!(tool_text(&answer(&reply, id)["result"]), text, "{reply:?}");
    }
    // A tool without annotations: its call's Mcp-Param headers are nobody's to check.
    let reply = call_with_params(&url, 20, "echo", json!({"text": "hi"}), &[("Mcp-Param-Other", "x")]);
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(answer(&reply, 20).get("result").is_some(), "{reply:?}");

    let received = param_headers_received(&upstream);
    assert_eq!(received.len(), 4, "{}", upstream.raw());
    assert!(
        received.iter().all(Vec::is_empty),
        "Mcp-Param headers reached the legacy upstream: {received:?}"
    );
}

#[test]
fn modern_client_over_a_federation_mcp_param_headers_checked_for_legacy_forwarded_to_modern() {
    let legacy = TracedUpstream::start_with(&["--param-headers"]);
    let modern = TracedUpstream::start_with(&["--dual-era", "--param-headers"]);
    let config = format!(
        "[[upstreams]]\nname = \"old\"\nprefix_mode = \"always\"\n[upstreams.http]\nurl = \"{}\"\n\
         [[upstreams]]\nname = \"new\"\nera = \"modern\"\n[upstreams.http]\nurl = \"{}\"\n",
        legacy.url, modern.url
    );
    let gateway = Eragate::start(&config);
    let url = gateway.url();

    // The legacy member's tool: checked by eragate, nothing sent on.
    let reply = call_with_params(
        &url,
        1,
        "old_regional",
        json!({"region": "good"}),
        &[("Mcp-Param-Region", "evil")],
    );
    expect_header_mismatch(&reply, 1);
    let params = [("Mcp-Param-Region", "good"), ("Mcp-Param-Other", "x")];
    let reply = call_with_params(&url, 2, "old_regional", json!({"region": "good"}), &params);
    assert_eq!(
        tool_text(&answer(&reply, 2)["result"]),
        "regional: good ",
        "{reply:?}\n{}",
        gateway.log()
    );
    assert_eq!(param_headers_received(&legacy), [vec![]], "{}", legacy.raw());

    // The modern member's tool: every Mcp-Param header forwarded as it came; the member checks
    // them, and its -32020 reaches the client with the 400 the revision ties it to.
    let reply = call_with_params(
        &url,
        4,
        "new_regional",
        json!({"region": "good"}),
        &[("Mcp-Param-Region", "evil")],
    );
    expect_header_mismatch(&reply, 4);
    let reply = call_with_params(&url, 3, "new_regional", json!({"region": "good"}), &params);
    assert_eq!(
        tool_text(&answer(&reply, 3)["result"]),
        "regional: good ",
        "{reply:?}\n{}",
        gateway.log()
    );
    let mut received = param_headers_received(&modern);
    received.iter_mut().for_each(|headers| headers.sort());
    assert_eq!(
        received,
        [
            vec![("mcp-param-region".to_owned(), "evil".to_owned())],
            vec![
                ("mcp-param-other".to_owned(), "x".to_owned()),
                ("mcp-param-region".to_owned(), "good".to_owned())
            ]
        ],
        "{}",
        modern.raw()
    );
}
