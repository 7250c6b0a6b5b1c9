//! OAuth test parts: the real authorization server (`oidc_provider.mjs` on oidc-provider
//! 9.13.3, Node 22), tokens minted from it by client credentials, eragate configured as its
//! protected resource, and requests carrying a bearer token.

use std::process::Command;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::common::*;

/// A running `oidc_provider.mjs`.
pub struct Idp {
    pub server: ListeningServer,
    /// `http://127.0.0.1:PORT`, its issuer identifier (`https://` with TLS).
    pub issuer: String,
    /// Where the test's own requests go: the issuer, or its plain HTTP port when it serves TLS.
    pub plain: String,
}

impl Idp {
    /// A provider on a free port.
    pub fn start() -> Idp {
        Idp::start_on(0)
    }

    /// A provider on `port` (0: any), with a fresh signing key.
    pub fn start_on(port: u16) -> Idp {
        Idp::start_with(port, &[])
    }

    /// A provider on `port` (0: any) with extra arguments (`--format opaque`).
    pub fn start_with(port: u16, extra: &[&str]) -> Idp {
        let peers = peers();
        let port = port.to_string();
        let mut command = Command::new(peers.node22());
        command
            .arg(peers.script("oidc_provider.mjs"))
            .args(["--port", &port])
            .args(extra)
            .env("OIDC_DIR", peers.get("OIDC_DIR"))
            .stderr(std::process::Stdio::null());
        let server = ListeningServer::spawn("oidc-provider", &mut command);
        let issuer = server.url.clone();
        Idp {
            server,
            plain: issuer.clone(),
            issuer,
        }
    }

    /// A provider serving HTTPS with `cert` and `key` (PEM files), and plain HTTP for the test.
    pub fn start_tls(cert: &str, key: &str) -> Idp {
        let plain_port = free_port().to_string();
        let mut idp = Idp::start_with(0, &["--tls-cert", cert, "--tls-key", key, "--plain-port", &plain_port]);
        idp.plain = format!("http://127.0.0.1:{plain_port}");
        idp
    }

    /// An access token for `resource` with `scope`, by client credentials as `client`
    /// (`tester`, `other` or `short-lived`; the secret is `<first word>-secret`).
    pub fn token(&self, client: &str, resource: &str, scope: &str) -> String {
        let secret = format!("{}-secret", client.split('-').next().unwrap_or(client));
        let basic = STANDARD.encode(format!("{client}:{secret}"));
        let form = format!(
            "grant_type=client_credentials&resource={}&scope={}",
            form_encode(resource),
            form_encode(scope)
        );
        let reply = send(
            "POST",
            &format!("{}/token", self.plain),
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("authorization", &format!("Basic {basic}")),
            ],
            Some(&form),
        );
        assert_eq!(reply.status, 200, "token request: {reply:?}");
        reply.json()["access_token"].as_str().expect("access_token").to_owned()
    }
}

fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `[auth.oauth]` for `issuer` requiring `mcp:read`, no leeway and a fast refetch, plus `extra` lines.
pub fn oauth_toml(issuer: &str, extra: &str) -> String {
    format!(
        "[auth.oauth]\nissuer = \"{issuer}\"\nscopes_supported = [\"mcp:read\", \"mcp:write\"]\nrequired_scopes = [\"mcp:read\"]\nleeway = \"0s\"\njwks_min_refetch = \"200ms\"\n{extra}\n"
    )
}

/// eragate with `[auth.oauth]` for `issuer` in front of the legacy stdio fixture.
pub fn gateway_for(issuer: &str, extra_oauth: &str) -> Eragate {
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    Eragate::start(&format!("{}\n{upstream}", oauth_toml(issuer, extra_oauth)))
}

/// A 2026-07-28 `tools/call echo` carrying `authorization` (if any) and no other credential.
pub fn call_with(url: &str, authorization: Option<&str>, text: &str) -> Reply {
    let mut headers = modern_headers("tools/call", Some("echo"));
    if let Some(value) = authorization {
        headers.push(("authorization", value));
    }
    let body = modern_body(1, "tools/call", json!({"name": "echo", "arguments": {"text": text}}));
    send("POST", url, &headers, Some(&body))
}

/// [`call_with`] a bearer token.
pub fn call_as(url: &str, token: &str, text: &str) -> Reply {
    call_with(url, Some(&format!("Bearer {token}")), text)
}

/// The `resource_metadata` and `error` of a reply's challenge.
pub fn challenge(reply: &Reply) -> (Option<String>, Option<String>) {
    let value = reply.header("www-authenticate").unwrap_or_default().to_owned();
    let field = |name: &str| {
        let start = value.find(&format!("{name}=\""))? + name.len() + 2;
        let end = value[start..].find('"')? + start;
        Some(value[start..end].to_owned())
    };
    (field("resource_metadata"), field("error"))
}

/// A JWT's three segments, the first two decoded.
pub fn split_jwt(token: &str) -> (Value, Value, String) {
    let mut parts = token.split('.');
    let mut decode = || {
        let segment = parts.next().expect("segment");
        serde_json::from_slice::<Value>(&URL_SAFE_NO_PAD.decode(segment).expect("base64url")).expect("json")
    };
    let header = decode();
    let claims = decode();
    let signature = token.rsplit('.').next().expect("signature").to_owned();
    (header, claims, signature)
}

/// A JWT from `header`, `claims` and `signature` (not re-signed).
pub fn join_jwt(header: &Value, claims: &Value, signature: &str) -> String {
    format!(
        "{}.{}.{signature}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}
