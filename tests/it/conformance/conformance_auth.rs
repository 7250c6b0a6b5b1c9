//! The conformance suite's authorization scenarios that eragate plays a part in.
//!
//! The alpha suite's `auth/*` scenarios test an MCP *client's* OAuth (the suite plays the
//! protected server and its authorization server); none tests a protected resource, which
//! is what eragate is toward its clients (`tests/it/auth/oauth.rs` covers that with oidc-provider and
//! the Python SDK's OAuth client). eragate is an OAuth client toward upstreams with
//! `[upstreams.credentials] kind = "client_credentials"`, so the client-credentials scenario
//! applies: the suite's own server and authorization server, eragate in front of them
//! (`tests/peers/cc_conformance_client.py` configures and starts it, then calls through it).

use crate::common;

use std::process::Command;

use common::*;

#[test]
fn eragate_passes_the_client_credentials_scenario_as_the_oauth_client_of_an_upstream() {
    let peers = peers();
    let out = tempfile::tempdir().expect("tempdir");
    let client = format!("{} {}", peers.python(), peers.script("cc_conformance_client.py"));
    let output = Command::new(peers.node22())
        .arg(peers.get("CONFORMANCE_ALPHA_JS"))
        .args([
            "client",
            "--scenario",
            "auth/client-credentials-basic",
            "--command",
            &client,
        ])
        .arg("-o")
        .arg(out.path())
        .env("NO_COLOR", "1")
        .env("ERAGATE_BIN", env!("CARGO_BIN_EXE_eragate"))
        .output()
        .expect("cannot run the alpha conformance suite");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{text}");
    assert!(text.contains("0 failed"), "{text}");

    // The suite's own verdicts: eragate authenticated with client_secret_basic, got a token,
    // and every request the protected server saw carried it.
    let checks_file = walk(out.path())
        .into_iter()
        .find(|p| p.ends_with("checks.json"))
        .unwrap_or_else(|| panic!("no checks.json in the results\n{text}"));
    let checks: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&checks_file).expect("checks")).expect("json");
    let status_of = |id: &str| -> Vec<String> {
        checks
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["id"] == id)
            .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    for id in [
        "client-credentials-basic-auth",
        "token-request",
        "authorization-server-metadata",
    ] {
        assert_eq!(status_of(id), ["SUCCESS"], "{id}: {checks:#}");
    }
    let bearer = status_of("valid-bearer-token");
    assert!(
        !bearer.is_empty() && bearer.iter().all(|s| s == "SUCCESS"),
        "every MCP request carried eragate's token: {checks:#}"
    );
}

/// Every file below `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
