//! The built-in authorization server's login and consent pages driven in headless
//! Chromium (Debian's `chromium` through playwright-core, `tests/peers/auth_pages.mjs`)
//! with JavaScript off, as a person would: labelled fields, a wrong password first, then
//! the right one, Allow; the browser lands on the client's redirect URI with a code that
//! then buys a token. Screenshots of both pages are kept in `target/artifacts/`.

use crate::common;
use crate::common::auth_server;

use auth_server::*;
use common::*;
use serde_json::Value;

/// A loopback listener answering every request with 200 (the native app's callback): its port.
fn callback_listener() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\ncallback");
        }
    });
    port
}

#[test]
fn login_and_consent_pages_in_chromium() {
    let gateway = gateway("");
    let origin = format!("http://{}", gateway.addr);
    let client_id = register_public(&origin);
    let (verifier, challenge) = pkce();
    // Chromium never loads port 9 (ERR_UNSAFE_PORT): the registered loopback redirect, on
    // a port of our own that answers (RFC 8252 §7.3 lets the port vary), as a native app does.
    let redirect_uri = format!("http://127.0.0.1:{}/callback", callback_listener());
    let redirect_uri = redirect_uri.as_str();
    let authorize = Authorize {
        client_id: &client_id,
        redirect_uri,
        challenge: &challenge,
        resource: &gateway.url(),
        scope: None,
        state: "from-chromium",
    };
    let artifacts = repo_root().join("target").join("artifacts");
    std::fs::create_dir_all(&artifacts).expect("target/artifacts");
    let (login_shot, consent_shot) = (artifacts.join("auth-login.png"), artifacts.join("auth-consent.png"));
    for shot in [&login_shot, &consent_shot] {
        let _ = std::fs::remove_file(shot);
    }
    let peers = peers();
    let output = std::process::Command::new(peers.node20())
        .arg(peers.script("auth_pages.mjs"))
        .arg(authorize.url(&origin))
        .args([USER, PASSWORD])
        .arg(&login_shot)
        .arg(&consent_shot)
        .env("BROWSER_DIR", peers.get("BROWSER_DIR"))
        .output()
        .expect("run auth_pages.mjs (node, chromium and playwright-core come from tests/peers/install.sh)");
    assert!(
        output.status.success(),
        "auth_pages.mjs failed:\n{}\n{}\neragate log:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        gateway.log()
    );
    let shown: Value = serde_json::from_slice(&output.stdout).expect("auth_pages.mjs JSON");
    assert_eq!(shown["login_title"], "Sign in");
    assert_eq!(shown["labels"], serde_json::json!(["Username", "Password"]));
    assert!(
        shown["wrong_password_alert"]
            .as_str()
            .unwrap_or_default()
            .contains("not right"),
        "{shown}"
    );
    assert_eq!(shown["consent_title"], "Allow access?");
    let consent = shown["consent_text"].as_str().unwrap_or_default();
    assert!(
        consent.contains("hand-driven client") && consent.contains(USER),
        "{consent}"
    );
    // Where the code goes, and that the client named itself.
    let callback = url::Url::parse(redirect_uri).expect("url");
    let destination = format!("127.0.0.1:{}", callback.port().expect("a port"));
    assert!(
        consent.contains(&destination) && consent.contains("name not verified"),
        "{consent}"
    );
    let redirect = url::Url::parse(shown["redirect"].as_str().expect("redirected")).expect("url");
    let params: std::collections::HashMap<_, _> = redirect.query_pairs().into_owned().collect();
    assert_eq!(params["state"], "from-chromium");
    assert_eq!(params["iss"], origin);
    let tokens = post_form(
        &format!("{origin}/oauth/token"),
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("code", &params["code"]),
            ("redirect_uri", redirect_uri),
            ("code_verifier", &verifier),
        ],
        None,
    );
    assert_eq!(tokens.status, 200, "{tokens:?}");
    for shot in [&login_shot, &consent_shot] {
        assert!(
            std::fs::metadata(shot).is_ok_and(|m| m.len() > 5_000),
            "no screenshot at {}",
            shot.display()
        );
    }
}
