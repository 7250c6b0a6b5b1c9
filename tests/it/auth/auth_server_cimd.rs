//! Client ID Metadata Documents at eragate's built-in authorization server: the
//! Python SDK client (`mcp` 2.3.0) whose `client_id` is an https URL does the whole
//! flow and calls a tool; the documents are served over TLS on loopback by
//! `tests/peers/https_static.py` with a certificate from a CA made here and trusted
//! only by this eragate (`client_metadata_ca`), on a port of its own, which the
//! fetch's `Host` names. The consent page names the document's URL. The SSRF guard
//! refuses the same document without the test allowlist, and a document whose
//! `client_id` is not its URL.

use crate::common;
use crate::common::auth_server;
use crate::common::oauth;

use std::process::{Command, Stdio};
use std::time::Duration;

use auth_server::*;
use common::tls::{TestCa, write_file};
use common::*;
use serde_json::json;

/// The HTTPS document server and its files.
struct Documents {
    _proc: Proc,
    port: u16,
    ca: std::path::PathBuf,
    /// The server's request log (`https_static: GET /client.json Host: …`).
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Documents {
    fn start() -> Documents {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let base = format!("https://localhost:{port}");
        let ca = TestCa::new("cimd test CA");
        let issued = ca.localhost("documents");
        let ca_path = write_file(dir.path(), "ca.pem", &ca.pem());
        let cert = write_file(dir.path(), "cert.pem", &issued.cert);
        let key = write_file(dir.path(), "key.pem", &issued.key);
        let docs = dir.path().join("docs");
        std::fs::create_dir(&docs).expect("docs");
        let good = json!({
            "client_id": format!("{base}/client.json"),
            "client_name": "A client with a metadata document",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        });
        std::fs::write(docs.join("client.json"), good.to_string()).expect("write");
        let liar = json!({
            "client_id": format!("{base}/client.json"),
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
        });
        std::fs::write(docs.join("liar.json"), liar.to_string()).expect("write");
        let log = dir.path().join("requests.log");
        let peers = peers();
        let mut command = Command::new(peers.python());
        command
            .arg(peers.script("https_static.py"))
            .args(["--port", &port.to_string(), "--dir"])
            .arg(&docs)
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(Stdio::null());
        let proc = Proc::spawn("https_static", &mut command);
        assert!(
            listening(("127.0.0.1", port), Duration::from_secs(20)),
            "the document server did not start"
        );
        Documents {
            _proc: proc,
            port,
            ca: ca_path,
            log,
            _dir: dir,
        }
    }

    /// The requests it answered so far, one line each.
    fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn url(&self, file: &str) -> String {
        format!("https://localhost:{}/{file}", self.port)
    }

    /// `[auth.server]` keys trusting the test CA; `allow` lets localhost through the guard.
    fn keys(&self, allow: bool) -> String {
        let hosts = if allow { "[\"localhost\"]" } else { "[]" };
        format!(
            "client_metadata_ca = {:?}\nclient_metadata_private_hosts = {hosts}\n",
            self.ca.display().to_string()
        )
    }
}

#[test]
fn gap_client_id_metadata_documents_with_the_python_sdk() {
    let documents = Documents::start();
    let gateway = gateway(&documents.keys(true));
    let client_id = documents.url("client.json");
    let out = run_driver(
        peers().python(),
        &peers().script("py_oauth_client.py"),
        &[
            "--url",
            &gateway.url(),
            "--login",
            &format!("{USER}:{PASSWORD}"),
            "--client-metadata-url",
            &client_id,
        ],
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", gateway.log()));
    assert_eq!(out["text"], "echo: hello through oauth", "{out}");
    assert_eq!(out["client_id"], client_id.as_str());
    let requests = out["requests"].to_string();
    assert!(!requests.contains("/oauth/register"), "no registration: {requests}");
    let (_, claims, _) = oauth::split_jwt(out["access_token"].as_str().expect("token"));
    assert_eq!(claims["client_id"], client_id.as_str());
    // The consent page named the client as its document does.
    let origin = format!("http://{}", gateway.addr);
    let (_, challenge) = pkce();
    let authorize = Authorize {
        client_id: &client_id,
        redirect_uri: REDIRECT,
        challenge: &challenge,
        resource: &gateway.url(),
        scope: None,
        state: "s",
    };
    let page = get(&authorize.url(&origin));
    assert!(page.body.contains("A client with a metadata document"), "{}", page.body);
    // The document was asked of the host and port its URL names (RFC 9110 §7.2).
    let requests = documents.requests();
    let host = format!("GET /client.json Host: localhost:{}", documents.port);
    assert!(requests.lines().any(|l| l.ends_with(&host)), "{requests}");
    // The consent page names the document: who describes the client (a scope not
    // consented to yet, so that it asks).
    let authorize = Authorize {
        scope: Some("not-yet-granted"),
        ..authorize
    };
    let page = get(&authorize.url(&origin));
    let (fields, cookie) = form_fields(&page);
    let consent = post_form(
        &format!("{origin}/oauth/login"),
        &[
            ("txn", &fields["txn"]),
            ("csrf", &fields["csrf"]),
            ("username", USER),
            ("password", PASSWORD),
        ],
        cookie.as_deref(),
    );
    assert!(consent.body.contains("Allow access?"), "{}", consent.body);
    assert!(consent.body.contains(&client_id), "{}", consent.body);
    assert!(consent.body.contains("name not verified"), "{}", consent.body);
}

#[test]
fn cimd_refusals_private_address_and_a_lying_document() {
    let documents = Documents::start();
    let origin_of = |g: &Eragate| format!("http://{}", g.addr);
    let (verifier, challenge) = pkce();
    // Without the allowlist, localhost resolves to loopback: the SSRF guard refuses.
    let guarded = gateway(&documents.keys(false));
    let client_id = documents.url("client.json");
    let authorize = Authorize {
        client_id: &client_id,
        redirect_uri: REDIRECT,
        challenge: &challenge,
        resource: &guarded.url(),
        scope: None,
        state: "s",
    };
    let page = get(&authorize.url(&origin_of(&guarded)));
    assert_eq!((page.status, page.header("location")), (400, None), "{page:?}");
    let log = guarded.log();
    assert!(log.contains("SSRF guard"), "{log}");
    // The token endpoint names the RFC's code for a client it cannot accept.
    let token = exchange(&origin_of(&guarded), &client_id, "any", &verifier);
    assert_eq!(
        (token.status, token.json()["error"].clone()),
        (401, json!("invalid_client"))
    );

    // A document whose client_id is not its URL.
    let open = gateway(&documents.keys(true));
    let liar = documents.url("liar.json");
    let authorize = Authorize {
        client_id: &liar,
        resource: &open.url(),
        ..authorize
    };
    let page = get(&authorize.url(&origin_of(&open)));
    assert_eq!((page.status, page.header("location")), (400, None), "{page:?}");
    assert!(open.log().contains("client_id is not its URL"), "{}", open.log());
    // http client ids are not documents: an unknown client.
    let http_id = format!("http://localhost:{}/client.json", documents.port);
    let authorize = Authorize {
        client_id: &http_id,
        ..authorize
    };
    assert_eq!(get(&authorize.url(&origin_of(&open))).status, 400);
}
