//! OAuth on the command line and in `check-config`: `run --stdio CMD --oauth-issuer URL
//! [--public-url URL] [--scope S]…` (and `--http URL`, `--sse URL`), `check-config` naming a bad issuer
//! and scope typos, and warning (not failing) when the issuer cannot be reached; `run`
//! starting while the issuer is down, answering 503 for tokens (401 without one), and
//! picking the issuer up by itself once it is there.

use crate::common;
use crate::common::oauth;

use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;
use oauth::*;
use serde_json::json;

fn eragate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_eragate"))
}

fn check_config(toml: &str) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("eragate.toml");
    std::fs::write(&path, toml).expect("write");
    eragate().arg("check-config").arg(&path).output().expect("check-config")
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn upstream() -> String {
    stdio_upstream_toml(&legacy_stdio_command(), "", "")
}

/// `eragate run` with `args`, its log in a temp file; waits until it listens.
struct Run {
    proc: Proc,
    addr: SocketAddr,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    fn start(args: &[&str]) -> Run {
        let dir = tempfile::tempdir().expect("tempdir");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        let log = dir.path().join("eragate.log");
        let mut command = eragate();
        command
            .args(["run", "--listen", &addr.to_string()])
            .args(args)
            .env("ERAGATE_LOG", "info,eragate=debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"));
        let proc = Proc::spawn("eragate", &mut command);
        let run = Run {
            proc,
            addr,
            log,
            _dir: dir,
        };
        assert!(
            listening(addr, Duration::from_secs(20)),
            "not listening:\n{}",
            run.log()
        );
        run
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

#[test]
fn check_config_names_a_bad_issuer_and_scope_typos() {
    let toml = format!(
        "[auth.oauth]\nissuer = \"http://auth.example.com\"\nscopes_supported = [\"mcp:read\", \"offline_access\"]\nrequired_scopes = [\"mcp:raed\"]\nalgorithms = [\"HS256\"]\n{}",
        upstream()
    );
    let output = check_config(&toml);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    for expected in [
        "auth.oauth.issuer: must be https:// (http:// only on a loopback host)",
        "auth.oauth.scopes_supported[1]: offline_access",
        "auth.oauth.required_scopes[0]: \"mcp:raed\" is not in scopes_supported (did you mean \"mcp:read\"?)",
        "auth.oauth.algorithms[0]:",
    ] {
        assert!(stderr.contains(expected), "{expected:?} missing:\n{}", text(&output));
    }
    let introspection =
        "[auth.oauth.introspection]\nclient_id = \"eragate\"\nclient_secret_env = \"ERAGATE_TEST_SURELY_UNSET_SECRET\"";
    let output = check_config(&format!(
        "[auth.oauth]\nissuer = \"https://a.example\"\n{introspection}\n{}",
        upstream()
    ));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(
            "auth.oauth.introspection.client_secret_env: environment variable ERAGATE_TEST_SURELY_UNSET_SECRET is not set"
        ),
        "{}",
        text(&output)
    );
    let output = check_config(&format!("[auth.oauth]\nissuer = \"not a url\"\n{}", upstream()));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("auth.oauth.issuer: \"not a url\" is not a URL"),
        "{}",
        text(&output)
    );
}

#[test]
fn check_config_warns_about_an_unreachable_issuer_and_confirms_a_reachable_one() {
    let down = format!("http://127.0.0.1:{}", free_port());
    let output = check_config(&format!("[auth.oauth]\nissuer = \"{down}\"\n{}", upstream()));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("warning: auth.oauth.issuer") && stderr.contains("retries"),
        "{}",
        text(&output)
    );

    let idp = Idp::start();
    let output = check_config(&format!("[auth.oauth]\nissuer = \"{}\"\n{}", idp.issuer, upstream()));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("metadata and keys found"),
        "{}",
        text(&output)
    );
}

#[test]
fn run_stdio_with_oauth_flags() {
    let idp = Idp::start();
    let command = legacy_stdio_command().join(" ");
    let run = Run::start(&[
        "--stdio",
        &command,
        "--oauth-issuer",
        &idp.issuer,
        "--public-url",
        "https://mcp.example.com/",
        "--scope",
        "mcp:read",
    ]);
    let reply = call_with(&run.url(), None, "x");
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.header("www-authenticate"),
        Some(
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:read""#
        )
    );
    let metadata = send(
        "GET",
        &format!("http://{}/.well-known/oauth-protected-resource", run.addr),
        &[],
        None,
    );
    assert_eq!(
        metadata.json(),
        json!({"resource": "https://mcp.example.com/mcp", "authorization_servers": [idp.issuer],
               "scopes_supported": ["mcp:read"], "bearer_methods_supported": ["header"]})
    );
    // Tokens are for the public name, not the listener's.
    let token = idp.token("tester", "https://mcp.example.com/mcp", "mcp:read");
    let reply = call_as(&run.url(), &token, "public");
    assert_eq!(reply.status, 200, "{reply:?}\n{}", run.log());
    let narrow = idp.token("tester", "https://mcp.example.com/mcp", "mcp:write");
    assert_eq!(call_as(&run.url(), &narrow, "narrow").status, 403);
}

#[test]
fn run_http_with_oauth_flags() {
    let idp = Idp::start();
    let upstream = TracedUpstream::start();
    let run = Run::start(&["--http", &upstream.url, "--oauth-issuer", &idp.issuer]);
    let token = idp.token("tester", &run.url(), "mcp:read");
    let reply = call_as(&run.url(), &token, "over http");
    assert_eq!(reply.status, 200, "{reply:?}\n{}", run.log());
    assert!(!upstream.raw().to_ascii_lowercase().contains("authorization"));
}

#[test]
fn run_sse_with_oauth_flags() {
    let idp = Idp::start();
    let upstream = legacy_sse_server(&[]);
    let run = Run::start(&[
        "--sse",
        &upstream.url,
        "--oauth-issuer",
        &idp.issuer,
        "--scope",
        "mcp:read",
    ]);
    let token = idp.token("tester", &run.url(), "mcp:read");
    let reply = call_as(&run.url(), &token, "over sse");
    assert_eq!(reply.status, 200, "{reply:?}\n{}", run.log());
    assert_eq!(tool_text(&answer(&reply, 1)["result"]), "echo: over sse");
    assert_eq!(call_with(&run.url(), None, "anonymous").status, 401);
    let narrow = idp.token("tester", &run.url(), "mcp:write");
    assert_eq!(call_as(&run.url(), &narrow, "narrow").status, 403);
}

#[test]
fn run_starts_while_the_issuer_is_down_and_picks_it_up_later() {
    let port = free_port();
    let issuer = format!("http://127.0.0.1:{port}");
    let command = legacy_stdio_command().join(" ");
    let run = Run::start(&["--stdio", &command, "--oauth-issuer", &issuer]);
    assert_eq!(
        send("GET", &format!("http://{}/healthz", run.addr), &[], None).status,
        200
    );
    assert_eq!(call_with(&run.url(), None, "x").status, 401);
    let reply = call_as(&run.url(), "eyJhbGciOiJFUzI1NiJ9.e30.c2ln", "x");
    assert_eq!(reply.status, 503, "{reply:?}");
    wait_until("a warning about the issuer", Duration::from_secs(10), || {
        run.log().contains("authorization server not usable")
    });

    let idp = Idp::start_on(port);
    let token = idp.token("tester", &run.url(), "");
    wait_until("the issuer is picked up", Duration::from_secs(20), || {
        call_as(&run.url(), &token, "late").status == 200
    });
    drop(run.proc);
}
