//! The admin status page in a real browser: Debian's chromium, driven by
//! playwright-core (`tests/peers/status_page.mjs`), opens the page behind the
//! admin token and must show the live upstream, its member and the revisions
//! clients negotiated. A screenshot is kept in `target/artifacts/`.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

#[test]
fn the_status_page_shows_the_live_upstream_in_chromium() {
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: tests/system-deps.sh installs it (apt-get install chromium)"
    );
    let token = "status-page-token";
    let admin = format!("127.0.0.1:{}", free_port());
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let config = format!("[admin]\naddress = \"{admin}\"\ntoken_env = \"ERAGATE_TEST_ADMIN_TOKEN\"\n{upstream}");
    let eragate = Eragate::start_with_env(&config, &[], &[("ERAGATE_TEST_ADMIN_TOKEN", token)]);
    let url = eragate.url();
    let report = py_client(&[
        "--mode",
        "legacy",
        "--url",
        &url,
        "--scenario",
        "tools",
        "--offer-version",
        "2025-06-18",
    ])
    .unwrap_or_else(|e| panic!("python client: {e}"));
    assert_eq!(report["protocol_version"], "2025-06-18");
    assert_eq!(modern_call(&url, 1, "echo", json!({"text": "hi"})).status, 200);

    let artifacts = repo_root().join("target").join("artifacts");
    std::fs::create_dir_all(&artifacts).expect("target/artifacts");
    let screenshot = artifacts.join("status-page.png");
    let _ = std::fs::remove_file(&screenshot);
    let page = format!("http://{admin}/?token={token}");
    let peers = peers();
    let output = std::process::Command::new(peers.node20())
        .arg(peers.script("status_page.mjs"))
        .args([page.as_str(), screenshot.to_str().expect("utf-8 path"), "fixture"])
        .env("BROWSER_DIR", peers.get("BROWSER_DIR"))
        .output()
        .expect("run status_page.mjs");
    assert!(
        output.status.success(),
        "status_page.mjs failed:\n{}\n{}\neragate log:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        eragate.log()
    );
    let shown: Value = serde_json::from_slice(&output.stdout).expect("status_page.mjs JSON");
    assert_eq!(shown["title"], "eragate status");
    assert_eq!(shown["ready"], "ready", "{shown}");
    let upstream = &shown["upstreams"][0];
    assert_eq!(upstream["name"], "fixture", "{shown}");
    assert_eq!(upstream["era"], "legacy era");
    assert_eq!(upstream["health"], "1/1 healthy");
    let member = &upstream["members"][0];
    assert_eq!(member[1], "healthy", "{shown}");
    let revisions = shown["revisions"].as_array().expect("revisions");
    let seen = |revision: &str, era: &str| {
        revisions
            .iter()
            .any(|r| r["revision"] == revision && r["era"] == era && r["count"].as_u64() >= Some(1))
    };
    assert!(seen("2025-06-18", "legacy clients"), "{shown}");
    assert!(seen("2026-07-28", "modern clients"), "{shown}");
    assert!(
        std::fs::metadata(&screenshot).is_ok_and(|m| m.len() > 10_000),
        "no screenshot at {}",
        screenshot.display()
    );
    // Without the token, the page's data is refused.
    let refused = http_client()
        .get(format!("http://{admin}/status.json"))
        .timeout(Duration::from_secs(5))
        .send()
        .expect("status.json");
    assert_eq!(refused.status().as_u16(), 401);
}
