//! TLS with certificates made in the test (rcgen): the Python SDK client over
//! https (Streamable HTTP and the HTTP+SSE pair), h2 and HTTP/1.1 chosen by
//! ALPN on one port, a certificate rotated while an SSE stream stays open (a
//! bad pair refused first), and eragate in front of an https upstream (the
//! Python SDK fixture under uvicorn) trusting it only through `[upstreams.tls] ca`,
//! the same upstream requiring a client certificate (`[upstreams.tls] cert`/`key`),
//! and an https authorization server (oidc-provider) trusted through `[auth.oauth] ca`.

use crate::common;
use crate::common::oauth;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::tls::*;
use common::*;
use serde_json::Value;

/// eragate over TLS with `cert.pem`/`key.pem` in `dir`, polled every 100 ms, in front of the
/// legacy fixture over stdio.
fn tls_gateway(dir: &Path) -> Eragate {
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    Eragate::start(&format!(
        "[listen]\n[listen.tls]\ncert = \"{}\"\nkey = \"{}\"\nreload_interval = \"100ms\"\n{upstream}",
        dir.join("cert.pem").display(),
        dir.join("key.pem").display()
    ))
}

/// Runs `py_client.py args` trusting only the CA in `ca_file` (httpx reads `SSL_CERT_FILE`).
fn py_client_trusting(ca_file: &Path, args: &[&str]) -> Result<Value, String> {
    let peers = peers();
    let output = Command::new(peers.python())
        .arg(peers.script("py_client.py"))
        .args(args)
        .env("SSL_CERT_FILE", ca_file)
        .output()
        .map_err(|e| format!("cannot run py_client.py: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "py_client.py {args:?} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("py_client.py printed no JSON: {e}"))
}

fn initialize_body(id: u64) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "eragate-tls-test", "version": "0"}}})
    .to_string()
}

#[test]
fn python_sdk_client_over_https_and_h2_or_http1_by_alpn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("eragate test CA");
    let server = ca.localhost("eragate");
    let ca_file = write_file(dir.path(), "ca.pem", &ca.pem());
    write_file(dir.path(), "cert.pem", &server.cert);
    write_file(dir.path(), "key.pem", &server.key);
    let gateway = tls_gateway(dir.path());
    let port = gateway.addr.port();

    // The real SDK client, trusting the test CA, over Streamable HTTP and over HTTP+SSE.
    for (mode, target, url) in [
        ("legacy", "--url", format!("https://localhost:{port}/mcp")),
        ("2026-07-28", "--url", format!("https://127.0.0.1:{port}/mcp")),
        ("legacy", "--sse", format!("https://localhost:{port}/sse")),
    ] {
        let report = py_client_trusting(&ca_file, &["--mode", mode, target, &url, "--scenario", "tools"])
            .unwrap_or_else(|e| panic!("{mode} {url}: {e}\neragate log:\n{}", gateway.log()));
        assert_eq!(report["results"]["call_echo"]["text"], "echo: hi", "{url}: {report}");
    }
    // A client that does not trust the CA is refused at the handshake.
    let untrusted = write_file(dir.path(), "other-ca.pem", &TestCa::new("another CA").pem());
    let url = format!("https://localhost:{port}/mcp");
    assert!(
        py_client_trusting(
            &untrusted,
            &["--mode", "legacy", "--url", &url, "--scenario", "connect"]
        )
        .is_err(),
        "a client trusting another CA connected"
    );

    // One port, both protocols: whatever ALPN picks is what the connection speaks.
    for (alpn, version) in [
        (&b"h2"[..], http::Version::HTTP_2),
        (&b"http/1.1"[..], http::Version::HTTP_11),
    ] {
        let answer = post_over_alpn(gateway.addr, &ca.pem(), alpn, "/mcp", &initialize_body(1))
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", String::from_utf8_lossy(alpn), gateway.log()));
        assert_eq!(answer.alpn.as_deref(), Some(alpn), "{answer:?}");
        assert_eq!(answer.version, version, "{answer:?}");
        assert_eq!(answer.status, 200, "{answer:?}");
        let text = String::from_utf8_lossy(&answer.body);
        assert!(text.contains("\"protocolVersion\""), "{text}");
    }
}

#[test]
fn a_rotated_certificate_reaches_new_connections_while_an_open_stream_continues() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("eragate test CA");
    let (first, second) = (ca.localhost("first"), ca.localhost("second"));
    write_file(dir.path(), "cert.pem", &first.cert);
    write_file(dir.path(), "key.pem", &first.key);
    let gateway = tls_gateway(dir.path());
    let ca_pem = ca.pem();

    // An HTTP+SSE stream opened with the first certificate.
    let stream = connect(gateway.addr, &ca_pem, &[b"http/1.1"]).expect("TLS to eragate");
    assert_eq!(presented(&stream), first.der, "the first certificate is served");
    let (status, mut events) = open_event_stream(stream, "/sse");
    assert_eq!(status, 200, "{}", gateway.log());
    let (event, messages_path) = next_event(&mut events).expect("the endpoint event");
    assert_eq!(event, "endpoint", "{messages_path}");
    // The endpoint may be a path or an absolute URL; the request line takes the path.
    let messages_path = match messages_path.split_once("://") {
        Some((_, rest)) => rest[rest.find('/').unwrap_or(rest.len())..].to_owned(),
        None => messages_path,
    };

    // Half a rotation (the new certificate, the old key) is refused; the old pair stays.
    write_file(dir.path(), "cert.pem", &second.cert);
    wait_until("the refusal to be logged", Duration::from_secs(30), || {
        gateway.log().contains("new TLS certificate refused")
    });
    let during = connect(gateway.addr, &ca_pem, &[b"http/1.1"]).expect("TLS during the bad pair");
    assert_eq!(presented(&during), first.der, "a refused pair is not served");

    // The whole new pair: new connections get it.
    write_file(dir.path(), "key.pem", &second.key);
    wait_until(
        "new connections to get the new certificate",
        Duration::from_secs(30),
        || connect(gateway.addr, &ca_pem, &[b"http/1.1"]).is_ok_and(|s| presented(&s) == second.der),
    );

    // The stream opened before the rotation still carries answers: initialize is posted on
    // a new connection (new certificate) and answered on the old one.
    let mut post = connect(gateway.addr, &ca_pem, &[b"http/1.1"]).expect("TLS after rotation");
    assert_eq!(presented(&post), second.der);
    let (status, body) = http1_post(&mut post, &messages_path, &[], &initialize_body(7));
    assert_eq!(status, 202, "{body}\n{}", gateway.log());
    let answer = std::iter::from_fn(|| next_event(&mut events))
        .find(|(event, _)| event == "message")
        .expect("an answer on the stream opened before the rotation");
    let answer: Value = serde_json::from_str(&answer.1).expect("JSON answer");
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(answer["result"]["protocolVersion"].is_string(), "{answer}");
}

/// `legacy_server.py http` under uvicorn with a certificate from `ca`, plus `extra` arguments.
fn https_fixture(dir: &Path, ca: &TestCa) -> ListeningServer {
    https_fixture_with(dir, ca, &[])
}

fn https_fixture_with(dir: &Path, ca: &TestCa, extra: &[&str]) -> ListeningServer {
    let server = ca.issue("fixture", &["127.0.0.1"]);
    let cert = write_file(dir, "upstream-cert.pem", &server.cert);
    let key = write_file(dir, "upstream-key.pem", &server.key);
    let peers = peers();
    let script = peers.script("legacy_server.py");
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let mut args = vec![
        script.as_str(),
        "http",
        "--port",
        "0",
        "--ssl-certfile",
        &cert,
        "--ssl-keyfile",
        &key,
    ];
    args.extend_from_slice(extra);
    ListeningServer::start("legacy_server.py http (TLS)", peers.python(), &args, &[])
}

#[test]
fn an_https_upstream_is_trusted_only_through_its_configured_ca() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("upstream CA");
    let upstream = https_fixture(dir.path(), &ca);
    assert!(upstream.url.starts_with("https://"), "{}", upstream.url);
    let ca_file = write_file(dir.path(), "upstream-ca.pem", &ca.pem());

    let trusting = Eragate::http(
        &upstream.url,
        &format!("[upstreams.tls]\nca = \"{}\"", ca_file.display()),
    );
    for mode in ["legacy", "2026-07-28"] {
        let report = py_client(&["--mode", mode, "--url", &trusting.url(), "--scenario", "tools"])
            .unwrap_or_else(|e| panic!("{mode}: {e}\neragate log:\n{}", trusting.log()));
        assert_eq!(report["results"]["call_echo"]["text"], "echo: hi", "{report}");
    }

    // Without the CA (the public roots only), the upstream's certificate is not trusted.
    let refusing = Eragate::http(&upstream.url, "handshake_timeout = \"5s\"");
    let outcome = py_client(&["--mode", "legacy", "--url", &refusing.url(), "--scenario", "tools"]);
    assert!(
        outcome.is_err(),
        "an upstream signed by an unknown CA was used: {outcome:?}"
    );
    wait_until("the certificate error in the log", Duration::from_secs(30), || {
        refusing.log().contains("invalid peer certificate")
    });
}

#[test]
fn an_upstream_requiring_a_client_certificate_is_reached_with_the_configured_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("mesh CA");
    let ca_file = write_file(dir.path(), "mesh-ca.pem", &ca.pem());
    let ca_arg = ca_file.display().to_string();
    let upstream = https_fixture_with(dir.path(), &ca, &["--ssl-ca-certs", &ca_arg]);
    let client = ca.issue("eragate", &["eragate.mesh.test"]);
    let cert = write_file(dir.path(), "client-cert.pem", &client.cert);
    let key = write_file(dir.path(), "client-key.pem", &client.key);

    let presenting = Eragate::http(
        &upstream.url,
        &format!(
            "[upstreams.tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"",
            ca_file.display(),
            cert.display(),
            key.display()
        ),
    );
    for mode in ["legacy", "2026-07-28"] {
        let report = py_client(&["--mode", mode, "--url", &presenting.url(), "--scenario", "tools"])
            .unwrap_or_else(|e| panic!("{mode}: {e}\neragate log:\n{}", presenting.log()));
        assert_eq!(report["results"]["call_echo"]["text"], "echo: hi", "{report}");
    }

    // Trusting the upstream but presenting nothing: the upstream ends the handshake.
    let anonymous = Eragate::http(
        &upstream.url,
        &format!(
            "handshake_timeout = \"5s\"\n[upstreams.tls]\nca = \"{}\"",
            ca_file.display()
        ),
    );
    let outcome = py_client(&["--mode", "legacy", "--url", &anonymous.url(), "--scenario", "tools"]);
    assert!(
        outcome.is_err(),
        "an upstream requiring a client certificate was used without one: {outcome:?}"
    );
}

#[test]
fn an_https_authorization_server_is_trusted_through_the_configured_ca() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("private AS CA");
    let server = ca.issue("idp", &["127.0.0.1"]);
    let cert = write_file(dir.path(), "idp-cert.pem", &server.cert);
    let key = write_file(dir.path(), "idp-key.pem", &server.key);
    let ca_file = write_file(dir.path(), "idp-ca.pem", &ca.pem());
    let idp = oauth::Idp::start_tls(&cert.display().to_string(), &key.display().to_string());
    assert!(idp.issuer.starts_with("https://"), "{}", idp.issuer);

    // Discovery and the JWKS over https, trusting only the configured CA: a token is accepted.
    let trusting = oauth::gateway_for(&idp.issuer, &format!("ca = \"{}\"", ca_file.display()));
    let token = idp.token("tester", &trusting.url(), "mcp:read");
    let bearer = format!("Bearer {token}");
    let accepted = oauth::call_with(&trusting.url(), Some(&bearer), "over https");
    assert_eq!(
        accepted.status,
        200,
        "{}\neragate log:\n{}",
        accepted.body,
        trusting.log()
    );
    assert!(accepted.body.contains("echo: over https"), "{}", accepted.body);

    // The public roots only: the authorization server's certificate is not trusted, the token
    // cannot be checked, and the request is refused.
    let refusing = oauth::gateway_for(&idp.issuer, "");
    let refused = oauth::call_with(&refusing.url(), Some(&bearer), "over https");
    assert_ne!(
        refused.status, 200,
        "a token was accepted from an untrusted issuer: {}",
        refused.body
    );
    wait_until("the certificate error in the log", Duration::from_secs(30), || {
        refusing.log().contains("invalid peer certificate")
    });
}
