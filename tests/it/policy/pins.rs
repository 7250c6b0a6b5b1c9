//! Issue 37, definition pinning: the real binary in front of the Python SDK fixture
//! (`legacy_server.py --drift FILE`), whose `rug_pull` tool changes `echo`'s description, adds
//! `exfiltrate` and sends `notifications/tools/list_changed`, driven by the Python SDK client
//! in both eras and by the real `eragate pins` command line.
//! - `hide`: the drifted tools leave every list and their calls fail like unknown names, the
//!   rest goes on working; the drift is logged, counted in /metrics and shown in
//!   /status.json; `eragate pins approve` with the digest `diff` showed brings them back, and
//!   a restart keeps the approved pins;
//! - `warn`: the drift is served as the upstream says, and logged and counted (a reload
//!   changing the mode is logged as needing a restart and changes nothing); its hidden
//!   HTML comment is flagged, and stripped from what clients see with `sanitize = true`;
//! - `block`: every request is refused until approved, and a second eragate sharing the pin
//!   store agrees, before and after the approval made on the first;
//! - a federation's member is pinned under its own names, before prefixes: `hide` leaves its
//!   drifted tools out of the merged list and refuses their calls, the other member's go on;
//! - the same against the TypeScript SDK v2 fixture (`ts2_server.mjs --drift`), a modern upstream;
//! - the status page in headless Chromium lists the pending drift;
//! - a garbled store refuses to start, naming the file;
//! - with `store = "redis"` (a redis-server the test starts), two replicas and a third
//!   started later share the pins and the approval; a garbled entry or an unreachable
//!   server refuses the start, naming what is wrong.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

/// Both eras of the Python SDK client.
const ERAS: [&str; 2] = ["legacy", "2026-07-28"];

/// An eragate with an admin listener in front of the drifting fixture, pinned in `mode` to `store`.
struct Pinned {
    eragate: Eragate,
    admin: String,
}

impl Pinned {
    fn start(mode: &str, store: &Path, drift: &Path) -> Pinned {
        let admin = format!("127.0.0.1:{}", free_port());
        let eragate = Eragate::start(&pinned_config(&admin, mode, store, drift));
        Pinned { eragate, admin }
    }

    /// As [`Pinned::start`], the pins in the redis-server on `port`.
    fn in_redis(mode: &str, port: u16, drift: &Path) -> Pinned {
        let admin = format!("127.0.0.1:{}", free_port());
        let eragate = Eragate::start(&redis_pinned_config(&admin, mode, port, drift));
        Pinned { eragate, admin }
    }

    /// As [`Pinned::start`], with `sanitize = true`.
    fn sanitizing(mode: &str, store: &Path, drift: &Path) -> Pinned {
        let admin = format!("127.0.0.1:{}", free_port());
        let eragate = Eragate::start(&format!(
            "{}sanitize = true\n",
            pinned_config(&admin, mode, store, drift)
        ));
        Pinned { eragate, admin }
    }

    /// The drifting fixture pinned in `mode` federated on one path with an unpinned fixture, `other`.
    fn federated(mode: &str, store: &Path, drift: &Path) -> Pinned {
        let admin = format!("127.0.0.1:{}", free_port());
        let other = serde_json::to_string(&legacy_stdio_command()).expect("json");
        let config = format!(
            "{}\n[[upstreams]]\nname = \"other\"\n[upstreams.stdio]\ncommand = {other}\nkill_grace = \"200ms\"\n",
            pinned_config(&admin, mode, store, drift)
        );
        let eragate = Eragate::start(&config);
        Pinned { eragate, admin }
    }

    /// The Python SDK client in `era` running `plan`: each step's result.
    fn plan(&self, era: &str, plan: Value) -> Vec<Value> {
        let plan = plan.to_string();
        let url = self.eragate.url();
        let args = ["--mode", era, "--url", &url, "--scenario", "plan", "--plan", &plan];
        let report = py_client(&args).unwrap_or_else(|e| panic!("{e}\nlog:\n{}", self.eragate.log()));
        let results = report["results"].as_object().cloned().unwrap_or_default();
        let mut steps: Vec<(usize, Value)> = results
            .into_iter()
            .filter_map(|(key, value)| Some((key.split(':').next()?.parse().ok()?, value)))
            .collect();
        steps.sort_by_key(|(i, _)| *i);
        steps.into_iter().map(|(_, v)| v).collect()
    }

    fn admin_get(&self, path: &str) -> Reply {
        send("GET", &format!("http://{}{path}", self.admin), &[], None)
    }

    /// `eragate pins ACTION --admin … ARGS`: exit success, stdout, stderr.
    fn cli(&self, action: &str, args: &[&str]) -> (bool, String, String) {
        let admin = format!("http://{}", self.admin);
        let output = Command::new(env!("CARGO_BIN_EXE_eragate"))
            .args(["pins", action, "--admin", &admin])
            .env_remove("ERAGATE_ADMIN_TOKEN")
            .args(args)
            .output()
            .expect("run eragate pins");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// `eragate pins diff` then `eragate pins approve` with the digest it showed.
    fn approve_all(&self) -> Value {
        let (ok, diff, err) = self.cli("diff", &["--upstream", "fixture"]);
        assert!(ok, "pins diff failed: {err}");
        let diff: Value = serde_json::from_str(&diff).expect("diff is JSON");
        let digest = diff["upstreams"][0]["digest"].as_str().expect("a digest").to_owned();
        let (ok, approved, err) = self.cli("approve", &["--upstream", "fixture", "--digest", &digest]);
        assert!(ok, "pins approve failed: {err}\n{}", self.eragate.log());
        serde_json::from_str(&approved).expect("approve answers JSON")
    }

    fn drift_count(&self) -> Option<u64> {
        let metrics = self.admin_get("/metrics").body;
        metrics
            .lines()
            .find(|l| l.starts_with("eragate_pin_drifts_total{upstream=\"fixture\",kind=\"tool\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }
}

/// A directory of its own, with the paths of a pin store and of the fixture's drift
/// file in it (neither written yet).
fn pin_files() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let (store, drift) = (dir.path().join("pins.json"), dir.path().join("drifted"));
    (dir, store, drift)
}

fn pinned_config(admin: &str, mode: &str, store: &Path, drift: &Path) -> String {
    let mut command = legacy_stdio_command();
    command.extend(["--drift".to_owned(), drift.display().to_string()]);
    let pins = format!("[upstreams.pins]\nmode = \"{mode}\"\nstore = \"{}\"\n", store.display());
    format!(
        "[admin]\naddress = \"{admin}\"\n\n{}{pins}",
        stdio_upstream_toml(&command, "", "")
    )
}

/// Every step of `plan`, on each of `gateways` in both eras, is refused as blocked.
fn assert_blocked(gateways: &[&Pinned], plan: &Value) {
    for gateway in gateways {
        for era in ERAS {
            let steps = gateway.plan(era, plan.clone());
            for step in &steps {
                let message = step["error"]["message"].as_str().unwrap_or_default();
                assert!(message.contains("upstream fixture is blocked"), "{era}: {steps:?}");
            }
        }
    }
}

fn redis_pinned_config(admin: &str, mode: &str, port: u16, drift: &Path) -> String {
    let config = pinned_config(admin, mode, Path::new("redis"), drift);
    format!("{config}\n[redis]\nurl = \"redis://127.0.0.1:{port}\"\n")
}

/// Runs `eragate run` with `config` (written to `dir`) expecting it to refuse to start:
/// its stderr.
fn refused_start(dir: &Path, config: &str) -> String {
    let path = dir.join("eragate.toml");
    let listen = format!("[listen]\naddress = \"127.0.0.1:{}\"\n", free_port());
    std::fs::write(&path, listen + config).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_eragate"))
        .args(["run", "--config"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run eragate");
    let exited = poll_until(Duration::from_secs(20), || matches!(child.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = child.kill();
    }
    let output = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(exited && !output.status.success(), "it started: {stderr}");
    stderr
}

fn names(step: &Value) -> Vec<String> {
    step["names"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn listed(step: &Value, name: &str) -> bool {
    names(step).iter().any(|n| n == name)
}

const LIST_AND_CALL: &str = r#"[["list_tools"], ["call", "echo", {"text": "hi"}], ["call", "exfiltrate", {"text": "secrets"}], ["call", "add", {"a": 2, "b": 3}]]"#;

#[test]
fn hide_leaves_out_a_drifted_tool_until_approved_in_both_eras_and_a_restart_keeps_the_pins() {
    let (_dir, store, drift) = pin_files();
    let gateway = Pinned::start("hide", &store, &drift);
    let plan: Value = serde_json::from_str(LIST_AND_CALL).expect("plan");
    for era in ERAS {
        let steps = gateway.plan(era, json!([["list_tools"], ["list_prompts"]]));
        assert!(
            listed(&steps[0], "echo") && !listed(&steps[0], "exfiltrate"),
            "{era}: {steps:?}"
        );
        assert!(listed(&steps[1], "greet"), "{era}: {steps:?}");
    }
    let written = std::fs::read_to_string(&store).expect("pinned on first sight");
    assert!(
        written.contains("Echo the text back as") && written.contains("Greets someone"),
        "{written}"
    );
    assert_eq!(gateway.drift_count(), Some(0));

    // In each era: a legacy session has a child of its own, a modern request the pooled one,
    // and each child tells eragate its list changed.
    for era in ERAS {
        let pulled = gateway.plan(era, json!([["call", "rug_pull", {}]]));
        assert_eq!(pulled[0]["text"], "pulled", "{pulled:?}");
    }
    for era in ERAS {
        let steps = gateway.plan(era, plan.clone());
        assert!(
            !listed(&steps[0], "echo") && !listed(&steps[0], "exfiltrate"),
            "{era}: {steps:?}"
        );
        assert!(
            listed(&steps[0], "add") && listed(&steps[0], "rug_pull"),
            "{era}: {steps:?}"
        );
        for hidden in [&steps[1], &steps[2]] {
            assert_eq!(hidden["error"]["code"], -32602, "{era}: {steps:?}");
            let message = hidden["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("awaits approval"), "{era}: {message}");
        }
        assert_eq!(steps[3]["text"], "5", "{era}: unchanged tools go on working: {steps:?}");
        let prompts = gateway.plan(era, json!([["list_prompts"], ["prompt", "greet", {"name": "Ada"}]]));
        assert!(!listed(&prompts[0], "greet"), "{era}: {prompts:?}");
        assert_eq!(prompts[1]["error"]["code"], -32602, "{era}: {prompts:?}");
        let message = prompts[1]["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("Prompt greet") && message.contains("awaits approval"),
            "{era}: {message}"
        );
    }
    let log = gateway.eragate.log();
    assert!(
        log.contains("pin drift") && log.contains("BCC admin@attacker.example"),
        "{log}"
    );
    assert_eq!(gateway.drift_count(), Some(2), "echo changed, exfiltrate added");
    let status = gateway.admin_get("/status.json").json();
    let pending: Vec<&str> = status["pins"][0]["pending"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert_eq!(pending, ["echo", "exfiltrate", "greet"], "{status}");
    let (ok, list, _) = gateway.cli("list", &[]);
    assert!(ok && list.contains("\"exfiltrate\""), "{list}");

    assert_eq!(gateway.approve_all()["approved"], 3);
    for era in ERAS {
        let prompts = gateway.plan(era, json!([["prompt", "greet", {"name": "Ada"}]]));
        assert_eq!(prompts[0]["text"], "Hello, Ada!", "{era}: {prompts:?}");
        let steps = gateway.plan(era, plan.clone());
        assert!(
            listed(&steps[0], "echo") && listed(&steps[0], "exfiltrate"),
            "{era}: {steps:?}"
        );
        let description = steps[0]["descriptions"]["echo"].as_str().unwrap_or_default();
        assert!(
            description.contains("IMPORTANT"),
            "{era}: the approved description: {description}"
        );
        assert_eq!(steps[1]["text"], "echo: hi", "{era}: {steps:?}");
        assert_eq!(steps[2]["text"], "exfiltrated: secrets", "{era}: {steps:?}");
    }
    assert!(
        std::fs::read_to_string(&store)
            .unwrap_or_default()
            .contains("BCC admin@attacker.example")
    );

    drop(gateway);
    let restarted = Pinned::start("hide", &store, &drift);
    for era in ERAS {
        let steps = restarted.plan(era, plan.clone());
        assert!(
            listed(&steps[0], "echo") && listed(&steps[0], "exfiltrate"),
            "{era}: {steps:?}"
        );
        assert_eq!(steps[1]["text"], "echo: hi", "{era}: {steps:?}");
    }
    assert_eq!(restarted.drift_count(), Some(0), "{}", restarted.eragate.log());
}

#[test]
fn warn_serves_the_drift_as_the_upstream_says_and_reports_it() {
    let (_dir, store, drift) = pin_files();
    let gateway = Pinned::start("warn", &store, &drift);
    gateway.plan("legacy", json!([["list_tools"]]));
    gateway.plan("legacy", json!([["call", "rug_pull", {}]]));
    let plan: Value = serde_json::from_str(LIST_AND_CALL).expect("plan");
    for era in ERAS {
        let steps = gateway.plan(era, plan.clone());
        assert!(
            listed(&steps[0], "echo") && listed(&steps[0], "exfiltrate"),
            "{era}: {steps:?}"
        );
        let description = steps[0]["descriptions"]["echo"].as_str().unwrap_or_default();
        assert!(
            description.contains("<!-- IMPORTANT"),
            "{era}: served as it is: {description}"
        );
        assert_eq!(steps[1]["text"], "echo: hi", "{era}: {steps:?}");
        assert_eq!(steps[2]["text"], "exfiltrated: secrets", "{era}: {steps:?}");
    }
    assert!(gateway.eragate.log().contains("pin drift"));
    assert_eq!(
        gateway.drift_count(),
        Some(2),
        "each drift counted once, however often listed"
    );
    // The mode is read at start: a reload that changes it says so and changes nothing.
    let path = gateway.eragate.config_path();
    let config = std::fs::read_to_string(&path).expect("config");
    std::fs::write(&path, config.replace("mode = \"warn\"", "mode = \"hide\"")).expect("rewrite");
    wait_until("the reload's restart notice", Duration::from_secs(15), || {
        gateway.eragate.log().contains("[upstreams.pins] changed")
    });
    let steps = gateway.plan("legacy", json!([["list_tools"]]));
    assert!(listed(&steps[0], "exfiltrate"), "{steps:?}");
}

#[test]
fn hidden_content_is_flagged_and_stripped_when_sanitizing() {
    let (_dir, store, drift) = pin_files();
    let gateway = Pinned::sanitizing("warn", &store, &drift);
    gateway.plan("legacy", json!([["list_tools"]]));
    gateway.plan("legacy", json!([["call", "rug_pull", {}]]));
    for era in ERAS {
        let steps = gateway.plan(era, json!([["list_tools"]]));
        let description = steps[0]["descriptions"]["echo"].as_str().unwrap_or_default();
        assert_eq!(description, "Echo the text back.", "{era}: {steps:?}");
    }
    let (ok, list, err) = gateway.cli("list", &["--upstream", "fixture"]);
    assert!(ok, "{err}");
    let list: Value = serde_json::from_str(&list).expect("list is JSON");
    let flagged = &list["upstreams"][0]["hidden_content"];
    assert_eq!(
        flagged,
        &json!([{"kind": "tool", "name": "echo", "hidden": ["html_comment"]}]),
        "{list}"
    );
    let metrics = gateway.admin_get("/metrics").body;
    assert!(
        metrics.contains("eragate_pin_hidden_content{upstream=\"fixture\",kind=\"tool\"} 1"),
        "{metrics}"
    );
}

#[test]
fn block_refuses_the_upstream_until_approved_and_a_replica_sharing_the_store_agrees() {
    let (_dir, store, drift) = pin_files();
    let first = Pinned::start("block", &store, &drift);
    let steps = first.plan("legacy", json!([["list_tools"]]));
    assert!(listed(&steps[0], "echo"), "{steps:?}");
    let second = Pinned::start("block", &store, &drift);
    first.plan("legacy", json!([["call", "rug_pull", {}]]));
    let plan = json!([["list_tools"], ["call", "add", {"a": 2, "b": 3}]]);
    assert_blocked(&[&first, &second], &plan);
    first.approve_all();
    wait_until("the replica reads the approval", Duration::from_secs(10), || {
        let steps = second.plan("legacy", plan.clone());
        listed(&steps[0], "exfiltrate") && steps[1]["text"] == "5"
    });
    for era in ERAS {
        let steps = first.plan(era, plan.clone());
        assert!(
            listed(&steps[0], "exfiltrate") && steps[1]["text"] == "5",
            "{era}: {steps:?}"
        );
    }
}

#[test]
fn hide_holds_in_front_of_the_typescript_sdk_fixture_too() {
    let (_dir, store, drift) = pin_files();
    let upstream = ts2_http_server_with(&["--drift", drift.to_str().expect("utf-8 path")]);
    let admin = format!("127.0.0.1:{}", free_port());
    let pins = format!("[upstreams.pins]\nmode = \"hide\"\nstore = \"{}\"\n", store.display());
    let config = format!(
        "[admin]\naddress = \"{admin}\"\n\n{}{pins}",
        remote_upstream_toml("http", &upstream.url, "")
    );
    let gateway = Pinned {
        eragate: Eragate::start(&config),
        admin,
    };
    for era in ERAS {
        let steps = gateway.plan(era, json!([["list_tools"]]));
        assert!(
            listed(&steps[0], "echo") && !listed(&steps[0], "exfiltrate"),
            "{era}: {steps:?}"
        );
    }
    let pulled = gateway.plan("2026-07-28", json!([["call", "rug_pull", {}]]));
    assert_eq!(pulled[0]["text"], "pulled", "{pulled:?}");
    let plan: Value = serde_json::from_str(LIST_AND_CALL).expect("plan");
    for era in ERAS {
        let steps = gateway.plan(era, plan.clone());
        assert!(
            !listed(&steps[0], "echo") && !listed(&steps[0], "exfiltrate"),
            "{era}: {steps:?}"
        );
        let message = steps[1]["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("awaits approval"), "{era}: {steps:?}");
        assert_eq!(steps[3]["text"], "5", "{era}: {steps:?}");
    }
    assert_eq!(gateway.drift_count(), Some(2), "{}", gateway.eragate.log());
    assert_eq!(gateway.approve_all()["approved"], 2);
    for era in ERAS {
        let steps = gateway.plan(era, plan.clone());
        assert!(
            listed(&steps[0], "echo") && listed(&steps[0], "exfiltrate"),
            "{era}: {steps:?}"
        );
        assert_eq!(steps[2]["text"], "exfiltrated: secrets", "{era}: {steps:?}");
    }
}

#[test]
fn the_status_page_lists_the_pending_drift_in_chromium() {
    let (dir, store, drift) = pin_files();
    let gateway = Pinned::start("warn", &store, &drift);
    gateway.plan("legacy", json!([["list_tools"]]));
    gateway.plan("legacy", json!([["call", "rug_pull", {}], ["list_tools"]]));
    let screenshot = dir.path().join("status-pins.png");
    let peers = peers();
    let output = Command::new(peers.node20())
        .arg(peers.script("status_page.mjs"))
        .args([
            format!("http://{}/", gateway.admin).as_str(),
            screenshot.to_str().expect("utf-8 path"),
            "fixture",
        ])
        .env("BROWSER_DIR", peers.get("BROWSER_DIR"))
        .output()
        .expect("run status_page.mjs");
    assert!(
        output.status.success(),
        "status_page.mjs failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let shown: Value = serde_json::from_slice(&output.stdout).expect("status_page.mjs JSON");
    let rows: Vec<Vec<String>> = serde_json::from_value(shown["pins"].clone()).expect("rows");
    let drift_rows: Vec<[&str; 3]> = rows
        .iter()
        .filter_map(|r| Some([r.get(2)?.as_str(), r.get(3)?.as_str(), r.get(4)?.as_str()]))
        .collect();
    assert_eq!(
        drift_rows,
        [["tool", "echo", "changed"], ["tool", "exfiltrate", "added"]],
        "{shown}"
    );
    assert!(
        rows.iter()
            .all(|r| r.first().map(String::as_str) == Some("fixture") && r.get(1).map(String::as_str) == Some("warn")),
        "{shown}"
    );
}

#[test]
fn a_federation_member_is_pinned_under_its_own_names() {
    let (_dir, store, drift) = pin_files();
    let gateway = Pinned::federated("hide", &store, &drift);
    for era in ERAS {
        let steps = gateway.plan(era, json!([["list_tools"]]));
        assert!(
            listed(&steps[0], "fixture_echo") && listed(&steps[0], "other_echo"),
            "{era}: {steps:?}"
        );
    }
    let written = std::fs::read_to_string(&store).expect("pinned on first sight");
    assert!(
        written.contains("\"rug_pull\"") && !written.contains("fixture_echo"),
        "{written}"
    );
    for era in ERAS {
        let pulled = gateway.plan(era, json!([["call", "fixture_rug_pull", {}]]));
        assert_eq!(pulled[0]["text"], "pulled", "{pulled:?}");
    }
    let plan =
        json!([["list_tools"], ["call", "fixture_echo", {"text": "hi"}], ["call", "other_echo", {"text": "hi"}]]);
    for era in ERAS {
        let steps = gateway.plan(era, plan.clone());
        assert!(
            !listed(&steps[0], "fixture_echo") && !listed(&steps[0], "fixture_exfiltrate"),
            "{era}: {steps:?}"
        );
        assert!(
            listed(&steps[0], "other_echo") && listed(&steps[0], "fixture_add"),
            "{era}: {steps:?}"
        );
        let message = steps[1]["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("awaits approval"), "{era}: {steps:?}");
        assert_eq!(steps[2]["text"], "echo: hi", "{era}: {steps:?}");
    }
    assert_eq!(gateway.approve_all()["approved"], 2);
    for era in ERAS {
        let steps = gateway.plan(era, plan.clone());
        assert!(
            listed(&steps[0], "fixture_echo") && listed(&steps[0], "fixture_exfiltrate"),
            "{era}: {steps:?}"
        );
        assert_eq!(steps[1]["text"], "echo: hi", "{era}: {steps:?}");
    }
}

#[test]
fn the_pins_endpoints_and_command_need_the_admin_token() {
    let (_dir, store, drift) = pin_files();
    let token = "pins-admin-token";
    let admin = format!("127.0.0.1:{}", free_port());
    let config = pinned_config(&admin, "warn", &store, &drift).replacen(
        "[admin]\n",
        "[admin]\ntoken_env = \"ERAGATE_TEST_ADMIN_TOKEN\"\n",
        1,
    );
    let eragate = Eragate::start_with_env(&config, &[], &[("ERAGATE_TEST_ADMIN_TOKEN", token)]);
    let gateway = Pinned { eragate, admin };
    let without = send(
        "POST",
        &format!("http://{}/pins/reset?upstream=fixture", gateway.admin),
        &[],
        None,
    );
    assert_eq!(without.status, 401, "{}", without.body);
    let (ok, _, err) = gateway.cli("list", &[]);
    assert!(!ok && err.contains("401"), "{err}");
    let admin_url = format!("http://{}", gateway.admin);
    let output = Command::new(env!("CARGO_BIN_EXE_eragate"))
        .args(["pins", "list", "--admin", &admin_url])
        .env("ERAGATE_ADMIN_TOKEN", token)
        .output()
        .expect("run eragate pins");
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    assert_eq!(listed["upstreams"][0]["upstream"], "fixture", "{listed}");
    assert_eq!(listed["upstreams"][0]["mode"], "warn", "{listed}");
}

#[test]
fn a_garbled_pin_store_refuses_to_start_naming_the_file() {
    let (dir, store, drift) = pin_files();
    std::fs::write(&store, "{\"version\": 1, \"upstreams\": {\"fixture\": [").expect("write");
    let admin = format!("127.0.0.1:{}", free_port());
    let stderr = refused_start(dir.path(), &pinned_config(&admin, "warn", &store, &drift));
    assert!(
        stderr.contains(&store.display().to_string()) && stderr.contains("not JSON"),
        "{stderr}"
    );
}

#[test]
fn pins_in_redis_are_shared_by_replicas_and_kept_for_the_next_one() {
    let redis = common::redis::RedisServer::start();
    let (_dir, _, drift) = pin_files();
    // Both replicas start with no pins and see the tools first: one write wins, the other
    // replica's is refused as stale and it adopts the pins stored.
    let first = Pinned::in_redis("block", redis.port, &drift);
    let second = Pinned::in_redis("block", redis.port, &drift);
    for gateway in [&first, &second] {
        let steps = gateway.plan("legacy", json!([["list_tools"]]));
        assert!(listed(&steps[0], "echo"), "{steps:?}");
    }
    wait_until("the first sight reaches redis", Duration::from_secs(10), || {
        redis.cli(0, &["HGET", "eragate:pins:fixture", "version"]) == ["1"]
    });
    let stored = redis.cli(0, &["HGET", "eragate:pins:fixture", "pins"]).join("\n");
    assert!(
        stored.contains("\"echo\"") && !stored.contains("\"exfiltrate\""),
        "{stored}"
    );
    let pins_listed = |gateway: &Pinned| -> Value {
        let listed: Value = serde_json::from_str(&gateway.cli("list", &[]).1).expect("list is JSON");
        listed["upstreams"][0].clone()
    };
    let (one, other) = (pins_listed(&first), pins_listed(&second));
    assert!(one["store"].as_str().is_some_and(|s| s.starts_with("redis")), "{one}");
    assert_eq!(one["pins"], other["pins"]);
    first.plan("legacy", json!([["call", "rug_pull", {}]]));
    let plan = json!([["list_tools"], ["call", "add", {"a": 2, "b": 3}]]);
    assert_blocked(&[&first, &second], &plan);
    let approved = second.approve_all();
    assert_eq!(approved["approved"], 2, "{approved}");
    assert_eq!(redis.cli(0, &["HGET", "eragate:pins:fixture", "version"]), ["2"]);
    wait_until("the first replica reads the approval", Duration::from_secs(10), || {
        let steps = first.plan("legacy", plan.clone());
        listed(&steps[0], "exfiltrate") && steps[1]["text"] == "5"
    });
    drop((first, second));
    // A replica started later reads the approved pins: the drifted definitions are no drift.
    let third = Pinned::in_redis("block", redis.port, &drift);
    for era in ERAS {
        let steps = third.plan(era, plan.clone());
        assert!(
            listed(&steps[0], "exfiltrate") && steps[1]["text"] == "5",
            "{era}: {steps:?}\n{}",
            third.eragate.log()
        );
    }
    assert!(
        !third.eragate.log().contains("pinned on first sight"),
        "{}",
        third.eragate.log()
    );
}

#[test]
fn a_garbled_or_unreachable_redis_pin_store_refuses_to_start() {
    let redis = common::redis::RedisServer::start();
    let (dir, _, drift) = pin_files();
    let admin = format!("127.0.0.1:{}", free_port());
    redis.cli(
        0,
        &["HSET", "eragate:pins:fixture", "version", "3", "pins", "{\"tool\": ["],
    );
    let stderr = refused_start(dir.path(), &redis_pinned_config(&admin, "hide", redis.port, &drift));
    assert!(
        stderr.contains("redis key eragate:pins:fixture") && stderr.contains("never re-trusts"),
        "{stderr}"
    );
    let closed = free_port();
    let stderr = refused_start(dir.path(), &redis_pinned_config(&admin, "hide", closed, &drift));
    assert!(stderr.contains("pin store redis"), "{stderr}");
}

/// A configuration file in `dir` pinning the drifting fixture in `mode` to `store`, with no
/// listener or admin address of its own (seeding serves nothing).
fn seed_config(dir: &Path, mode: &str, store: &Path, drift: &Path) -> PathBuf {
    let mut command = legacy_stdio_command();
    command.extend(["--drift".to_owned(), drift.display().to_string()]);
    let pins = format!("[upstreams.pins]\nmode = \"{mode}\"\nstore = \"{}\"\n", store.display());
    let path = dir.join("seed.toml");
    std::fs::write(&path, format!("{}{pins}", stdio_upstream_toml(&command, "", ""))).expect("write config");
    path
}

/// `eragate pins seed --config FILE ARGS`: exit code, stdout as JSON (Null if not), stderr.
fn seed(config: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_eragate"))
        .args(["pins", "seed", "--config"])
        .arg(config)
        .args(args)
        .output()
        .expect("run eragate pins seed");
    let stdout = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (
        output.status.code(),
        stdout,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The process ids whose command line mentions `needle` (our fixture children, by their
/// drift file's unique path).
fn processes_naming(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(needle))
        })
        .collect()
}

/// The pins of `kind` the store holds for the fixture: name → digest.
fn stored(store: &Path, kind: &str) -> std::collections::BTreeMap<String, String> {
    let text = std::fs::read_to_string(store).unwrap_or_default();
    let file: Value = serde_json::from_str(&text).unwrap_or_default();
    file["upstreams"]["fixture"][kind]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(name, pin)| Some((name.clone(), pin["digest"].as_str()?.to_owned())))
        .collect()
}

#[test]
fn seed_writes_the_pins_ahead_of_time_and_never_overwrites_them() {
    let (dir, store, drift) = pin_files();
    let config = seed_config(dir.path(), "block", &store, &drift);
    let (code, summary, stderr) = seed(&config, &[]);
    assert_eq!(code, Some(0), "{summary}\n{stderr}");
    let fixture = &summary["upstreams"][0];
    assert_eq!(fixture["upstream"], "fixture", "{summary}");
    let tools = stored(&store, "tool");
    for name in ["echo", "add", "rug_pull"] {
        assert!(tools.contains_key(name), "{name} pinned: {tools:?}");
    }
    assert!(!tools.contains_key("exfiltrate"), "{tools:?}");
    assert_eq!(
        fixture["kinds"]["tool"],
        json!({"pinned": tools.len(), "status": "written"}),
        "{summary}"
    );
    assert_eq!(
        fixture["kinds"]["prompt"],
        json!({"pinned": 1, "status": "written"}),
        "{summary}"
    );
    assert_eq!(
        fixture["kinds"]["resource_template"],
        json!({"pinned": 1, "status": "written"}),
        "{summary}"
    );
    assert!(stored(&store, "prompt").contains_key("greet"));
    assert!(stored(&store, "resource_template").contains_key("test://items/{id}"));
    let drift_path = drift.display().to_string();
    assert!(
        poll_until(Duration::from_secs(3), || processes_naming(&drift_path).is_empty()),
        "seed left its upstream children running: {:?}",
        processes_naming(&drift_path)
    );
    let seeded = std::fs::read(&store).expect("the store");

    // A gateway started afterwards in `block` mode serves from the seeded pins: no drift.
    let gateway = Pinned::start("block", &store, &drift);
    let steps = gateway.plan("legacy", json!([["list_tools"], ["call", "add", {"a": 2, "b": 3}]]));
    assert!(listed(&steps[0], "echo"), "{steps:?}");
    assert_eq!(steps[1]["text"], "5", "{steps:?}");
    assert_eq!(gateway.drift_count(), Some(0), "{}", gateway.eragate.log());
    assert!(!gateway.eragate.log().contains("pinned on first sight"));
    drop(gateway);
    assert_eq!(std::fs::read(&store).expect("the store"), seeded);

    // Seeding again finds everything pinned already.
    let (code, summary, stderr) = seed(&config, &[]);
    assert_eq!(code, Some(0), "{summary}\n{stderr}");
    for kind in ["tool", "prompt", "resource_template"] {
        assert_eq!(
            summary["upstreams"][0]["kinds"][kind]["status"], "already_pinned",
            "{summary}"
        );
    }
    assert_eq!(std::fs::read(&store).expect("the store"), seeded);

    // The upstream's definitions differ now: seed names the drift, exits 1, writes nothing.
    std::fs::write(&drift, "drifted\n").expect("drift");
    let (code, summary, stderr) = seed(&config, &[]);
    assert_eq!(code, Some(1), "{summary}\n{stderr}");
    let drifts = &summary["upstreams"][0]["drifts"];
    assert!(
        drifts.as_array().is_some_and(
            |d| d.contains(&json!({"kind": "tool", "name": "echo", "change": "changed"}))
                && d.contains(&json!({"kind": "tool", "name": "exfiltrate", "change": "added"}))
        ),
        "{summary}"
    );
    assert_eq!(
        summary["upstreams"][0]["kinds"]["tool"]["status"], "drifted",
        "{summary}"
    );
    assert!(stderr.contains("nothing was overwritten"), "{stderr}");
    assert_eq!(
        std::fs::read(&store).expect("the store"),
        seeded,
        "seed left the pins byte-identical"
    );
    assert!(poll_until(Duration::from_secs(3), || processes_naming(&drift_path).is_empty()));
}

#[test]
fn seed_exits_2_on_a_bad_config_naming_the_problem() {
    let (dir, store, drift) = pin_files();
    let config = seed_config(dir.path(), "block", &store, &drift);
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, text.replace(&format!("store = \"{}\"\n", store.display()), "")).expect("write");
    let (code, _, stderr) = seed(&config, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("1 problem(s)") && stderr.contains("store"), "{stderr}");

    let config = seed_config(dir.path(), "warn", &store, &drift);
    let (code, _, stderr) = seed(&config, &["--upstream", "nosuch"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("no upstream named nosuch"), "{stderr}");
    let config = seed_config(dir.path(), "off", &store, &drift);
    let (code, _, stderr) = seed(&config, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(!store.exists());
}

#[test]
fn reset_by_name_forgets_only_that_name_and_retrusts_its_next_listing() {
    let (_dir, store, drift) = pin_files();
    let gateway = Pinned::start("hide", &store, &drift);
    gateway.plan("legacy", json!([["list_tools"], ["list_prompts"]]));
    let before = stored(&store, "tool");
    assert!(before.contains_key("echo") && before.contains_key("add"), "{before:?}");
    let prompts = stored(&store, "prompt");
    assert!(prompts.contains_key("greet"), "{prompts:?}");
    gateway.plan("legacy", json!([["call", "rug_pull", {}]]));
    let steps = gateway.plan("legacy", json!([["list_tools"]]));
    assert!(
        !listed(&steps[0], "echo") && !listed(&steps[0], "exfiltrate"),
        "{steps:?}"
    );

    let (ok, out, err) = gateway.cli("reset", &["--upstream", "fixture", "--name", "echo"]);
    assert!(ok, "{err}");
    let answer: Value = serde_json::from_str(&out).expect("reset answers JSON");
    assert_eq!(answer["forgotten"], 1, "{answer}");
    let mut others = before.clone();
    others.remove("echo");
    assert_eq!(stored(&store, "tool"), others, "only echo's pin is gone");
    assert_eq!(stored(&store, "prompt"), prompts);
    let (ok, _, err) = gateway.cli("reset", &["--upstream", "fixture", "--name", "nosuch"]);
    assert!(!ok && err.contains("404"), "{err}");

    // The next listing trusts echo's (drifted) definition; exfiltrate stays hidden.
    let steps = gateway.plan(
        "legacy",
        json!([["list_tools"], ["call", "echo", {"text": "hi"}], ["call", "exfiltrate", {"text": "x"}]]),
    );
    assert!(
        listed(&steps[0], "echo") && !listed(&steps[0], "exfiltrate"),
        "{steps:?}"
    );
    assert_eq!(steps[1]["text"], "echo: hi", "{steps:?}");
    assert_eq!(steps[2]["error"]["code"], -32602, "{steps:?}");
    let after = stored(&store, "tool");
    assert!(
        after.get("echo").is_some_and(|d| Some(d) != before.get("echo")),
        "{after:?}"
    );
    let mut unchanged = after.clone();
    unchanged.remove("echo");
    assert_eq!(unchanged, others, "the other pins are unchanged");
    assert_eq!(stored(&store, "prompt"), prompts);
    let text = std::fs::read_to_string(&store).unwrap_or_default();
    assert!(text.contains("BCC admin@attacker.example"), "{text}");
}

#[test]
fn seed_writes_the_pins_into_redis_before_it_exits() {
    let redis = common::redis::RedisServer::start();
    let (dir, _, drift) = pin_files();
    let config = seed_config(dir.path(), "block", Path::new("redis"), &drift);
    let text = std::fs::read_to_string(&config).expect("read")
        + &format!("\n[redis]\nurl = \"redis://127.0.0.1:{}\"\n", redis.port);
    std::fs::write(&config, text).expect("write");
    let (code, summary, stderr) = seed(&config, &[]);
    assert_eq!(code, Some(0), "{summary}\n{stderr}");
    assert_eq!(
        summary["upstreams"][0]["kinds"]["tool"]["status"], "written",
        "{summary}"
    );
    // Every kind's first sight is stored by the time seed exits (first sights made while a
    // write is under way may go together, so the writes are not counted).
    let version = redis.cli(0, &["HGET", "eragate:pins:fixture", "version"]);
    assert!(
        matches!(version.as_slice(), [v] if v.parse::<u32>().is_ok_and(|v| v >= 1)),
        "{version:?}"
    );
    let stored = redis.cli(0, &["HGET", "eragate:pins:fixture", "pins"]).join("\n");
    for name in ["\"echo\"", "\"greet\"", "\"test://items/{id}\""] {
        assert!(stored.contains(name), "{name}: {stored}");
    }
    let (code, summary, _) = seed(&config, &[]);
    assert_eq!(code, Some(0), "{summary}");
    assert_eq!(
        summary["upstreams"][0]["kinds"]["tool"]["status"], "already_pinned",
        "{summary}"
    );
    assert_eq!(
        redis.cli(0, &["HGET", "eragate:pins:fixture", "version"]),
        version,
        "a second seed writes nothing"
    );
}
