//! Credentials toward upstreams, against real parts: a protected upstream built on the
//! Python SDK's own resource-server support (`protected_server.py`: MCPServer with a
//! TokenVerifier checking oidc-provider's JWTs for its own URL) and the authorization
//! server `oidc_provider.mjs`. eragate reaches it with a static header, with its own token
//! by client credentials (a configured client, and one it registers itself, RFC 7591), and
//! never with the client's token; misconfigured or unreachable credentials are a clear
//! error to the client, not a hang.

use crate::common;
use crate::common::oauth;

use std::path::Path;
use std::time::Duration;

use common::*;
use oauth::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A running `protected_server.py` and the file its request log goes to.
struct Protected {
    server: ListeningServer,
    events: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Protected {
    fn start(issuer: &str, extra: &[&str]) -> Protected {
        let dir = tempfile::tempdir().expect("tempdir");
        let events = dir.path().join("events.jsonl");
        let peers = peers();
        let script = peers.script("protected_server.py");
        let events_arg = events.display().to_string();
        let mut args = vec![script.as_str(), "--issuer", issuer, "--events", &events_arg];
        args.extend_from_slice(extra);
        let server = ListeningServer::start("protected-upstream", peers.python(), &args, &[]);
        Protected {
            server,
            events,
            _dir: dir,
        }
    }

    fn url(&self) -> &str {
        &self.server.url
    }

    /// The digest of the bearer token of every HTTP request the upstream received.
    fn seen(&self) -> Vec<(String, Option<String>)> {
        std::fs::read_to_string(&self.events)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|event| {
                let method = event["method"].as_str().unwrap_or_default().to_owned();
                (method, event["token_sha256"].as_str().map(str::to_owned))
            })
            .collect()
    }
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn secret_file(dir: &Path, secret: &str) -> String {
    let path = dir.join("secret");
    std::fs::write(&path, format!("{secret}\n")).expect("secret file");
    path.display().to_string()
}

/// `[upstreams.credentials]` exchanging principals' tokens at `issuer` as the client
/// `tester` (its secret in a file under `dir`), with `extra` lines.
fn token_exchange(issuer: &str, dir: &Path, extra: &str) -> String {
    format!(
        "kind = \"token_exchange\"\nissuer = \"{issuer}\"\nclient_id = \"tester\"\nclient_secret_file = \"{}\"\n{extra}",
        secret_file(dir, "tester-secret")
    )
}

/// eragate in front of `upstream` with `credentials` (the lines of `[upstreams.credentials]`),
/// as a protected resource of `issuer` itself when given.
fn gateway(upstream: &str, credentials: &str, issuer: Option<&str>) -> Eragate {
    gateway_of_era(upstream, credentials, issuer, "era = \"legacy\"")
}

/// As [`gateway`], with `era` (a line of `[[upstreams]]`, or empty to have eragate probe).
fn gateway_of_era(upstream: &str, credentials: &str, issuer: Option<&str>, era: &str) -> Eragate {
    let front = issuer.map(|issuer| oauth_toml(issuer, "")).unwrap_or_default();
    let upstream = remote_upstream_toml("http", upstream, &format!("{era}\nrequest_timeout = \"20s\""));
    Eragate::start(&format!(
        "{front}\n{upstream}\n[upstreams.credentials]\n{credentials}\n"
    ))
}

/// A 2026-07-28 `tools/call whoami`, with `token` (if any) as the client's own.
fn whoami(url: &str, token: Option<&str>) -> Reply {
    let mut headers = modern_headers("tools/call", Some("whoami"));
    let bearer = token.map(|t| format!("Bearer {t}"));
    if let Some(value) = &bearer {
        headers.push(("authorization", value));
    }
    let body = modern_body(1, "tools/call", json!({"name": "whoami", "arguments": {}}));
    send("POST", url, &headers, Some(&body))
}

/// What the upstream said of the token it received.
fn claims_seen(reply: &Reply, gateway: &Eragate) -> Value {
    assert_eq!(reply.status, 200, "{reply:?}\n{}", gateway.log());
    let result = answer(reply, 1);
    assert!(result.get("result").is_some(), "{result}\n{}", gateway.log());
    serde_json::from_str(tool_text(&result["result"])).expect("whoami JSON")
}

/// A legacy client of `version` with `token`: `initialize`, `notifications/initialized`,
/// then `tools/call whoami` on its session; what the upstream said of the token it received.
fn legacy_whoami(gateway: &Eragate, token: &str, version: &str) -> Value {
    let url = gateway.url();
    let bearer = format!("Bearer {token}");
    let mut headers = PLAIN.to_vec();
    headers.push(("authorization", &bearer));
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "legacy", "version": "0"}}});
    let reply = send("POST", &url, &headers, Some(&initialize.to_string()));
    assert_eq!(reply.status, 200, "{reply:?}\n{}", gateway.log());
    let session = reply.header("mcp-session-id").expect("Mcp-Session-Id").to_owned();
    let mut on_session = legacy_headers(&session, version);
    on_session.push(("authorization", &bearer));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    assert_eq!(send("POST", &url, &on_session, Some(&initialized)).status, 202);
    let call = request_body(1, "tools/call", json!({"name": "whoami", "arguments": {}}));
    claims_seen(&send("POST", &url, &on_session, Some(&call)), gateway)
}

/// The JSON-RPC error message of a reply (its text, whatever the status).
fn error_text(reply: &Reply) -> String {
    reply
        .messages()
        .iter()
        .find_map(|m| m["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{reply:?}"))
}

#[test]
fn client_credentials_reach_a_protected_upstream_and_the_clients_token_never_does() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let credentials = format!(
        "kind = \"client_credentials\"\nissuer = \"{}\"\nclient_id = \"tester\"\nclient_secret_file = \"{}\"\nscope = \"mcp:read\"",
        idp.issuer,
        secret_file(dir.path(), "tester-secret")
    );
    let gateway = gateway(upstream.url(), &credentials, Some(&idp.issuer));
    let url = gateway.url();
    // The client is `other`, with a token for eragate.
    let client_token = idp.token("other", &url, "mcp:read");

    let first = claims_seen(&whoami(&url, Some(&client_token)), &gateway);
    assert_eq!(first["client_id"], "tester", "{first}");
    assert_eq!(first["aud"], upstream.url(), "{first}");
    assert_ne!(first["token_sha256"], sha256_hex(&client_token), "{first}");
    // Cached: the same token serves the next request.
    let second = claims_seen(&whoami(&url, Some(&client_token)), &gateway);
    assert_eq!(second["token_sha256"], first["token_sha256"]);

    let seen = upstream.seen();
    assert!(seen.iter().any(|(method, _)| method == "POST"), "{seen:?}");
    for (method, token) in &seen {
        assert_eq!(
            token.as_deref(),
            first["token_sha256"].as_str(),
            "{method} carried {token:?}: {seen:?}"
        );
    }
}

#[test]
fn without_a_client_id_eragate_registers_itself_once() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &[]);
    let credentials = format!("kind = \"client_credentials\"\nissuer = \"{}\"", idp.issuer);
    let gateway = gateway(upstream.url(), &credentials, None);
    let claims = claims_seen(&whoami(&gateway.url(), None), &gateway);
    let client_id = claims["client_id"].as_str().unwrap_or_default().to_owned();
    assert!(!client_id.is_empty() && client_id != "tester", "{claims}");
    assert_eq!(claims["aud"], upstream.url(), "{claims}");
    let again = claims_seen(&whoami(&gateway.url(), None), &gateway);
    assert_eq!(again["client_id"], client_id.as_str());
    assert_eq!(
        gateway.log().matches("registered eragate as an OAuth client").count(),
        1
    );
}

#[test]
fn tokens_are_replaced_when_they_expire() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    // `short-lived` tokens live 1 s.
    let credentials = format!(
        "kind = \"client_credentials\"\nissuer = \"{}\"\nclient_id = \"short-lived\"\nclient_secret_file = \"{}\"",
        idp.issuer,
        secret_file(dir.path(), "short-secret")
    );
    let gateway = gateway(upstream.url(), &credentials, None);
    let first = claims_seen(&whoami(&gateway.url(), None), &gateway);
    let replaced = poll_until(Duration::from_secs(20), || {
        let reply = whoami(&gateway.url(), None);
        reply.status == 200
            && answer(&reply, 1).get("result").is_some()
            && claims_seen(&reply, &gateway)["token_sha256"] != first["token_sha256"]
    });
    assert!(replaced, "the token was never replaced\n{}", gateway.log());
}

#[test]
fn a_static_header_reaches_the_upstream() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &["--static-token", "static-upstream-key"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let credentials = format!(
        "kind = \"header\"\nvalue_file = \"{}\"\nprefix = \"Bearer \"",
        secret_file(dir.path(), "static-upstream-key")
    );
    let gateway = gateway(upstream.url(), &credentials, None);
    let claims = claims_seen(&whoami(&gateway.url(), None), &gateway);
    assert_eq!(claims["sub"], "static", "{claims}");
    assert_eq!(claims["token_sha256"], sha256_hex("static-upstream-key"));
}

#[test]
fn bad_secrets_and_unreachable_servers_are_clear_errors() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let closed = format!("http://127.0.0.1:{}", free_port());
    // (issuer, secret, what the client's error says): a refusal names the server's own error.
    let cases = [
        (
            idp.issuer.clone(),
            "wrong-secret",
            ["the token request failed", "(invalid_client"],
        ),
        (closed, "tester-secret", ["the authorization server's metadata", ""]),
    ];
    for (issuer, secret, expected) in cases {
        let credentials = format!(
            "kind = \"client_credentials\"\nissuer = \"{issuer}\"\nclient_id = \"tester\"\nclient_secret_file = \"{}\"",
            secret_file(dir.path(), secret)
        );
        let gateway = gateway(upstream.url(), &credentials, None);
        let reply = whoami(&gateway.url(), None);
        let text = error_text(&reply);
        assert!(
            expected.iter().all(|e| text.contains(e)),
            "{issuer}: {text}\n{}",
            gateway.log()
        );
    }
}

#[test]
fn token_exchange_refuses_a_principal_without_an_oauth_token() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let credentials = token_exchange(&idp.issuer, dir.path(), "");
    let gateway = gateway(upstream.url(), &credentials, None);
    let text = error_text(&whoami(&gateway.url(), None));
    assert!(
        text.contains("needs an OAuth access token"),
        "{text}\n{}",
        gateway.log()
    );
    assert!(
        upstream.seen().iter().all(|(_, token)| token.is_none()),
        "{:?}",
        upstream.seen()
    );
}

#[test]
fn token_exchange_gives_the_upstream_the_principals_own_token_for_it() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let credentials = token_exchange(&idp.issuer, dir.path(), "scope = \"mcp:read\"");
    let gateway = gateway(upstream.url(), &credentials, Some(&idp.issuer));
    let url = gateway.url();
    // Two principals: `other` and `tester` (client-credentials tokens: `sub` is the client).
    let others = idp.token("other", &url, "mcp:read");
    let testers = idp.token("tester", &url, "mcp:read");

    let seen_for_other = claims_seen(&whoami(&url, Some(&others)), &gateway);
    assert_eq!(seen_for_other["sub"], "other", "{seen_for_other}");
    assert_eq!(seen_for_other["aud"], upstream.url(), "{seen_for_other}");
    assert_eq!(seen_for_other["client_id"], "tester", "{seen_for_other}");
    assert_ne!(seen_for_other["token_sha256"], sha256_hex(&others));

    let seen_for_tester = claims_seen(&whoami(&url, Some(&testers)), &gateway);
    assert_eq!(seen_for_tester["sub"], "tester", "{seen_for_tester}");
    assert_ne!(seen_for_tester["token_sha256"], seen_for_other["token_sha256"]);
    // Cached per principal.
    let again = claims_seen(&whoami(&url, Some(&others)), &gateway);
    assert_eq!(again["token_sha256"], seen_for_other["token_sha256"]);

    let clients = [sha256_hex(&others), sha256_hex(&testers)];
    for (method, token) in upstream.seen() {
        assert!(
            token.is_none_or(|t| !clients.contains(&t)),
            "{method} carried a client's token"
        );
    }
}

#[test]
fn a_token_the_upstream_refuses_is_replaced_and_the_request_retried() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let credentials = format!(
        "kind = \"client_credentials\"\nissuer = \"{}\"\nclient_id = \"tester\"\nclient_secret_file = \"{}\"",
        idp.issuer,
        secret_file(dir.path(), "tester-secret")
    );
    let gateway = gateway(upstream.url(), &credentials, None);
    let before = claims_seen(&whoami(&gateway.url(), None), &gateway);

    // The upstream stops accepting eragate's token, unexpired by eragate's clock (revoked):
    // the next request meets a 401, and goes through again with a fresh token.
    let body = modern_body(2, "tools/call", json!({"name": "revoke", "arguments": {}}));
    let reply = send(
        "POST",
        &gateway.url(),
        &modern_headers("tools/call", Some("revoke")),
        Some(&body),
    );
    assert_eq!(tool_text(&answer(&reply, 2)["result"]), "revoked", "{reply:?}");
    let after = claims_seen(&whoami(&gateway.url(), None), &gateway);
    assert_ne!(after["token_sha256"], before["token_sha256"]);
    assert_eq!(after["client_id"], "tester");
    assert!(
        gateway.log().contains("refused eragate's access token"),
        "{}",
        gateway.log()
    );
}

#[test]
fn a_legacy_clients_own_session_presents_its_exchanged_token() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let credentials = token_exchange(&idp.issuer, dir.path(), "");
    let gateway = gateway(upstream.url(), &credentials, Some(&idp.issuer));
    let url = gateway.url();
    let token = idp.token("other", &url, "mcp:read");
    // A 2025-06-18 client: initialize, then tools/call on its (dedicated) session.
    let claims = legacy_whoami(&gateway, &token, "2025-06-18");
    assert_eq!(claims["sub"], "other", "{claims}");
    assert_eq!(claims["aud"], upstream.url(), "{claims}");
    assert_ne!(claims["token_sha256"], sha256_hex(&token));
}

/// The protected server is dual-era: with no `era` pinned, eragate learns it is a
/// 2026-07-28 server (probing with the asking principal's exchanged token) and keeps
/// a stateless partition per principal, so each request presents its own principal's token.
#[test]
fn token_exchange_reaches_a_modern_upstream_with_each_principals_own_token() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let credentials = token_exchange(&idp.issuer, dir.path(), "");
    let gateway = gateway_of_era(upstream.url(), &credentials, Some(&idp.issuer), "");
    let url = gateway.url();
    let others = idp.token("other", &url, "mcp:read");
    let testers = idp.token("tester", &url, "mcp:read");

    let for_other = claims_seen(&whoami(&url, Some(&others)), &gateway);
    assert_eq!(for_other["sub"], "other", "{for_other}");
    assert_eq!(for_other["aud"], upstream.url(), "{for_other}");
    assert!(
        gateway.log().contains("learned the upstream's era") && gateway.log().contains("Modern"),
        "{}",
        gateway.log()
    );
    let for_tester = claims_seen(&whoami(&url, Some(&testers)), &gateway);
    assert_eq!(for_tester["sub"], "tester", "{for_tester}");
    assert_ne!(for_tester["token_sha256"], for_other["token_sha256"]);
    // Interleaved again: each principal's connection still presents its own token.
    let again = claims_seen(&whoami(&url, Some(&others)), &gateway);
    assert_eq!(again["sub"], "other", "{again}");

    // A 2025-11-25 client in front of the modern upstream: its session's requests
    // go out stateless, with its principal's exchanged token.
    let claims = legacy_whoami(&gateway, &testers, "2025-11-25");
    assert_eq!(claims["sub"], "tester", "{claims}");

    let clients = [sha256_hex(&others), sha256_hex(&testers)];
    for (method, token) in upstream.seen() {
        let token = token.unwrap_or_else(|| panic!("{method} carried no token"));
        assert!(!clients.contains(&token), "{method} carried a client's token");
    }
}

#[test]
fn without_credentials_the_upstream_sees_no_token_at_all() {
    let idp = Idp::start();
    let upstream = Protected::start(&idp.issuer, &[]);
    let gateway = gateway(upstream.url(), "kind = \"none\"", Some(&idp.issuer));
    let url = gateway.url();
    let token = idp.token("other", &url, "mcp:read");
    let reply = whoami(&url, Some(&token));
    assert!(error_text(&reply).contains("401"), "{reply:?}\n{}", gateway.log());
    let seen = upstream.seen();
    assert!(!seen.is_empty() && seen.iter().all(|(_, t)| t.is_none()), "{seen:?}");
}
