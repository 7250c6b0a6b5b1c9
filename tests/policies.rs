//! `[[policies]]`: what each principal sees and calls on a path, with real peers. A
//! federation on `/mcp` of the Python SDK fixture (`legacy_server.py`, Streamable HTTP,
//! legacy) and the TypeScript SDK v2 fixture (`ts2_server.mjs`, 2026-07-28), and the
//! fixture alone on `/solo`; alice and bob hold static tokens (bob by a `[groups]`
//! entry). The Python SDK client of both eras lists and calls as each; raw 2026-07-28
//! requests check what the SDK does not show (descriptions, `cacheScope`).

mod common;

use common::tokens::{ALICE, BOB, auth_toml};
use common::*;
use serde_json::{Value, json};

struct Served {
    eragate: Eragate,
    _py: LegacyHttpServer,
    _ts2: ListeningServer,
}

impl Served {
    fn start() -> Served {
        let py = LegacyHttpServer::start(&[]);
        let ts2 = ts2_http_server();
        let config = format!(
            r#"
{auth}

[groups]
readers = ["bob"]

[[policies]]
path = "/mcp"
subjects = ["alice"]
[policies.tools]
deny = ["*_add"]
rename = {{ py_echo = "say" }}
descriptions = {{ py_echo = "Says it back, for alice." }}
[policies.prompts]
allow = ["ts2_*"]
[policies.resources]
deny = ["py+*"]

[[policies]]
path = "/mcp"
groups = ["readers"]
[policies.tools]
allow = ["ts2_*"]

[[policies]]
path = "/solo"
subjects = ["bob"]
[policies.tools]
deny = ["echo"]

[[upstreams]]
name = "py"
request_timeout = "10s"
[upstreams.http]
url = "{py}"

[[upstreams]]
name = "ts2"
[upstreams.http]
url = "{ts2}"

[[upstreams]]
name = "solo"
path = "/solo"
[upstreams.http]
url = "{py}"
"#,
            auth = auth_toml(),
            py = py.url,
            ts2 = ts2.url,
        );
        Served {
            eragate: Eragate::start(&config),
            _py: py,
            _ts2: ts2,
        }
    }

    fn url(&self, path: &str) -> String {
        self.eragate.url().replace("/mcp", path)
    }

    /// The Python SDK client in `mode` as the bearer of `token`, running `plan` on `path`.
    fn plan(&self, path: &str, token: &str, mode: &str, plan: Value) -> Value {
        let plan = plan.to_string();
        let url = self.url(path);
        let header = format!("Authorization: Bearer {token}");
        let args = [
            "--mode",
            mode,
            "--url",
            &url,
            "--header",
            &header,
            "--scenario",
            "plan",
            "--plan",
            &plan,
        ];
        py_client(&args).unwrap_or_else(|e| panic!("{e}\nlog:\n{}", self.eragate.log()))
    }

    /// A raw 2026-07-28 request on `path` as the bearer of `token`: its JSON-RPC answer.
    fn modern(&self, path: &str, token: &str, id: u64, method: &str, name: Option<&str>, params: Value) -> Value {
        let bearer = format!("Bearer {token}");
        let mut headers = modern_headers(method, name);
        headers.push(("authorization", &bearer));
        let reply = send(
            "POST",
            &self.url(path),
            &headers,
            Some(&modern_body(id, method, params)),
        );
        answer(&reply, id)
    }
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn each_principal_sees_and_calls_what_its_policy_allows_on_a_federated_path() {
    let served = Served::start();
    for mode in ["legacy", "2026-07-28"] {
        let alice = served.plan(
            "/mcp",
            ALICE,
            mode,
            json!([
                ["list_tools"],
                ["call", "say", {"text": "hi"}],
                ["call", "py_echo", {"text": "hi"}],
                ["call", "ts2_add", {"a": 1, "b": 2}],
                ["call", "ts2_echo", {"text": "t"}],
                ["list_prompts"],
                ["prompt", "py_greet", {"name": "Ada"}],
                ["prompt", "ts2_greet", {"name": "Bo"}],
                ["list_resources"],
                ["read", "py+test://static/hello"],
            ]),
        );
        let results = &alice["results"];
        let tools = names(&results["0:list_tools"]["names"]);
        assert!(tools.contains(&"say".to_owned()), "{mode}: renamed: {tools:?}");
        assert!(tools.contains(&"ts2_echo".to_owned()), "{mode}: {tools:?}");
        for hidden in ["py_echo", "py_add", "ts2_add"] {
            assert!(
                !tools.contains(&hidden.to_owned()),
                "{mode}: {hidden} hidden: {tools:?}"
            );
        }
        assert_eq!(
            results["1:call"]["text"], "echo: hi",
            "{mode}: the new name routes back: {alice}"
        );
        for step in ["2:call", "3:call"] {
            let error = &results[step]["error"];
            assert_eq!(
                error["code"], -32602,
                "{mode}: {step} fails like an unknown tool: {alice}"
            );
            assert!(
                error["message"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("Unknown tool"),
                "{mode}: {alice}"
            );
        }
        assert_eq!(results["4:call"]["text"], "echo: t", "{mode}: {alice}");
        let prompts = names(&results["5:list_prompts"]["names"]);
        assert_eq!(prompts, ["ts2_greet"], "{mode}: only the allowed prompts: {alice}");
        assert_eq!(results["6:prompt"]["error"]["code"], -32602, "{mode}: {alice}");
        assert_eq!(results["7:prompt"]["text"], "Hello, Bo!", "{mode}: {alice}");
        let uris = names(&results["8:list_resources"]["uris"]);
        assert!(
            !uris.is_empty() && uris.iter().all(|u| !u.starts_with("py+")),
            "{mode}: {uris:?}"
        );
        assert_eq!(results["9:read"]["error"]["code"], -32002, "{mode}: {alice}");

        let bob = served.plan(
            "/mcp",
            BOB,
            mode,
            json!([["list_tools"], ["call", "py_echo", {"text": "x"}], ["call", "say", {"text": "x"}], ["call", "ts2_add", {"a": 2, "b": 3}], ["read", "py+test://static/hello"]]),
        );
        let results = &bob["results"];
        let tools = names(&results["0:list_tools"]["names"]);
        assert!(
            !tools.is_empty() && tools.iter().all(|t| t.starts_with("ts2_")),
            "{mode}: bob's group sees ts2 only: {tools:?}"
        );
        assert!(tools.contains(&"ts2_add".to_owned()), "{mode}: {tools:?}");
        assert_eq!(results["1:call"]["error"]["code"], -32602, "{mode}: {bob}");
        assert_eq!(
            results["2:call"]["error"]["code"], -32602,
            "{mode}: alice's names are not bob's: {bob}"
        );
        assert_eq!(results["3:call"]["text"], "5", "{mode}: {bob}");
        assert_eq!(
            results["4:read"]["text"], "hello world",
            "{mode}: no resource rule for bob: {bob}"
        );
    }

    // What the SDK does not show: the description alice's policy gives, and private lists.
    let listed = served.modern("/mcp", ALICE, 1, "tools/list", None, json!({}));
    let tools = listed["result"]["tools"].as_array().cloned().unwrap_or_default();
    let say = tools
        .iter()
        .find(|t| t["name"] == "say")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(say["description"], "Says it back, for alice.", "{listed}");
    assert!(
        say.get("inputSchema").is_some(),
        "the rest of the tool passes: {listed}"
    );
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");
    for (id, method) in [
        (2, "prompts/list"),
        (3, "resources/list"),
        (4, "resources/templates/list"),
    ] {
        let listed = served.modern("/mcp", BOB, id, method, None, json!({}));
        assert_eq!(listed["result"]["cacheScope"], "private", "{method}: {listed}");
    }
    let called = served.modern(
        "/mcp",
        ALICE,
        5,
        "tools/call",
        Some("say"),
        json!({"name": "say", "arguments": {"text": "raw"}}),
    );
    assert_eq!(called["result"]["content"][0]["text"], "echo: raw", "{called}");
}

#[test]
fn a_policy_narrows_a_single_upstream_path_and_check_config_checks_it() {
    let served = Served::start();
    for mode in ["legacy", "2026-07-28"] {
        let bob = served.plan(
            "/solo",
            BOB,
            mode,
            json!([["list_tools"], ["call", "echo", {"text": "x"}], ["call", "add", {"a": 1, "b": 1}]]),
        );
        let tools = names(&bob["results"]["0:list_tools"]["names"]);
        assert!(
            !tools.contains(&"echo".to_owned()) && tools.contains(&"add".to_owned()),
            "{mode}: {tools:?}"
        );
        assert_eq!(bob["results"]["1:call"]["error"]["code"], -32602, "{mode}: {bob}");
        assert_eq!(bob["results"]["2:call"]["text"], "2", "{mode}: {bob}");

        // No entry names alice on /solo: she sees everything.
        let alice = served.plan(
            "/solo",
            ALICE,
            mode,
            json!([["list_tools"], ["call", "echo", {"text": "y"}]]),
        );
        let tools = names(&alice["results"]["0:list_tools"]["names"]);
        assert!(tools.contains(&"echo".to_owned()), "{mode}: {tools:?}");
        assert_eq!(alice["results"]["1:call"]["text"], "echo: y", "{mode}: {alice}");
    }
    // ... but privately: another principal's list on this path differs.
    let listed = served.modern("/solo", ALICE, 1, "tools/list", None, json!({}));
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("check.toml");
    let text = "[[upstreams]]\nname = \"a\"\nstdio.command = [\"x\"]\n\n[[policies]]\npath = \"/elsewhere\"\n\
                groups = [\"nobody\"]\n[policies.tools]\nrename = { a = \"c\", b = \"c\" }\n";
    std::fs::write(&path, text).expect("write");
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_eragate"))
        .arg("check-config")
        .arg(&path)
        .output()
        .expect("check-config");
    assert_eq!(checked.status.code(), Some(2), "{checked:?}");
    let stderr = String::from_utf8_lossy(&checked.stderr);
    for key in ["policies[0].path", "policies[0].groups", "policies[0].tools.rename.b"] {
        assert!(stderr.contains(key), "{key} in {stderr}");
    }
}
