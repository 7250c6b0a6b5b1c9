//! The command line: `check-config` (exit codes, every mistake named by its key path, every
//! shipped example in `config/` valid, every key it accepts documented in
//! `docs/configuration.md`), `version`, and `run --stdio` splitting its one string like a shell.

use crate::common;
mod config_keys;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn eragate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_eragate"))
}

fn check_config(path: &Path) -> Output {
    check_config_in(path, &repo_root())
}

/// `check-config` run from `cwd` (relative certificate paths are relative to it).
fn check_config_in(path: &Path, cwd: &Path) -> Output {
    eragate()
        .current_dir(cwd)
        .arg("check-config")
        .arg(path)
        // config/auth.toml and config/upstream-credentials.toml read secrets from the
        // environment, as their comments say to run them.
        .env("ERAGATE_TOKEN", "example-token")
        .env("ERAGATE_SEARCH_KEY", "example-key")
        .output()
        .expect("run eragate check-config")
}

fn describe(output: &Output) -> String {
    format!(
        "exit: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Asserts that stderr has a `<path>: ` problem line for each key path.
#[track_caller]
fn assert_paths_reported(output: &Output, paths: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    for path in paths {
        assert!(
            stderr.contains(&format!("{path}: ")),
            "{path} not reported: {}",
            describe(output)
        );
    }
}

/// Writes `text` as a config file and runs `check-config` on it.
fn check_config_text(text: &str) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("eragate.toml");
    std::fs::write(&path, text).expect("write config");
    check_config(&path)
}

const GOOD: &str = r#"
[listen]
address = "127.0.0.1:8080"
allowed_origins = ["http://localhost:5173"]
sse_keep_alive = "10s"
stream_after = "1500ms"

[sessions]
idle_timeout = "15m"
max_sessions = 10

[[upstreams]]
name = "local"
path = "/local"
request_timeout = "30s"
handshake_timeout = "5s"
max_in_flight = 8

[upstreams.stdio]
command = ["python3", "server.py", "stdio"]
env = { A = "1" }
spares = 0
max_children = 4
kill_grace = "250ms"

[[upstreams]]
name = "remote"
path = "/remote"

[upstreams.http]
url = "http://127.0.0.1:3001/mcp"

[upstreams.cache]
ttl_ms = 60000
scope = "public"
"#;

#[test]
fn check_config_accepts_a_good_file_with_exit_0() {
    let output = check_config_text(GOOD);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("ok"), "{}", describe(&output));
    assert!(
        output.stderr.is_empty(),
        "a good file should print no problems: {}",
        describe(&output)
    );
}

/// Each mistake, the key path the explanation must name, and a word it must contain.
const MISTAKES: &[(&str, &str, &str, &str)] = &[
    (
        "a listener that takes no connection",
        "[listen]\nmax_connections = 0\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
        "listen.max_connections",
        "greater than 0",
    ),
    (
        "a key of another kind of credential with kind = none",
        "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n[upstreams.credentials]\nkind = \"none\"\nvalue_env = \"K\"\n",
        "upstreams[0].credentials",
        "value_env",
    ),
    (
        "no worker threads",
        "[runtime]\nworkers = 0\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
        "runtime.workers",
        "between 1 and",
    ),
    (
        "workers with one thread for everything",
        "[runtime]\nworkers = 2\nsingle_thread = true\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
        "runtime.workers",
        "single_thread",
    ),
    (
        "unknown key",
        "[listen]\nadress = \"127.0.0.1:1\"\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
        "listen.adress",
        "unknown field",
    ),
    (
        "unknown key in a nested table",
        "[[upstreams]]\nname = \"e\"\n[upstreams.stdio]\ncomand = [\"x\"]\n",
        "upstreams[0].stdio.comand",
        "unknown field",
    ),
    (
        "unknown key in the second upstream",
        "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n[[upstreams]]\nname = \"f\"\npath = \"/f\"\nretries = 3\nstdio.command = [\"x\"]\n",
        "upstreams[1].retries",
        "unknown field",
    ),
    (
        "bad duration",
        "[[upstreams]]\nname = \"e\"\nrequest_timeout = \"soon\"\nstdio.command = [\"x\"]\n",
        "upstreams[0].request_timeout",
        "duration",
    ),
    (
        "bad duration in [sessions]",
        "[sessions]\nidle_timeout = \"half an hour\"\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
        "sessions.idle_timeout",
        "duration",
    ),
    (
        "bad duration in [upstreams.stdio]",
        "[[upstreams]]\nname = \"e\"\n[upstreams.stdio]\ncommand = [\"x\"]\nkill_grace = \"2 parsecs\"\n",
        "upstreams[0].stdio.kill_grace",
        "duration",
    ),
    (
        "missing transport",
        "[[upstreams]]\nname = \"e\"\n",
        "upstreams[0].stdio",
        "transport",
    ),
    (
        "two transports",
        "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\nhttp.url = \"http://127.0.0.1:1/mcp\"\n",
        "upstreams[0].http",
        "transport",
    ),
    (
        "duplicate name",
        "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n[[upstreams]]\nname = \"e\"\npath = \"/b\"\nstdio.command = [\"x\"]\n",
        "upstreams[1].name",
        "unique",
    ),
    (
        "a federation's members disagree on the prefix mode",
        "[[upstreams]]\nname = \"e\"\nprefix_mode = \"never\"\nstdio.command = [\"x\"]\n[[upstreams]]\nname = \"f\"\nprefix_mode = \"always\"\nstdio.command = [\"x\"]\n",
        "upstreams[1].prefix_mode",
        "share one mode",
    ),
    (
        "a federation's members share a prefix",
        "[[upstreams]]\nname = \"e\"\ntool_prefix = \"p\"\nstdio.command = [\"x\"]\n[[upstreams]]\nname = \"f\"\ntool_prefix = \"p\"\nstdio.command = [\"x\"]\n",
        "upstreams[1].tool_prefix",
        "distinct prefixes",
    ),
    (
        "bad URL scheme",
        "[[upstreams]]\nname = \"e\"\nhttp.url = \"ftp://x/\"\n",
        "upstreams[0].http.url",
        "http://",
    ),
    (
        "relative URL",
        "[[upstreams]]\nname = \"e\"\nhttp.url = \"/mcp\"\n",
        "upstreams[0].http.url",
        "http://",
    ),
    (
        "unparsable URL",
        "[[upstreams]]\nname = \"e\"\nhttp.url = \"http://exa mple/\"\n",
        "upstreams[0].http.url",
        "URL",
    ),
    (
        "bad listen address",
        "[listen]\naddress = \"nowhere\"\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n",
        "listen.address",
        "address",
    ),
    (
        "no upstream",
        "[listen]\naddress = \"127.0.0.1:8080\"\n",
        "upstreams",
        "[[upstreams]]",
    ),
    (
        "empty command",
        "[[upstreams]]\nname = \"e\"\nstdio.command = []\n",
        "upstreams[0].stdio.command",
        "program",
    ),
    (
        "path without a slash",
        "[[upstreams]]\nname = \"e\"\npath = \"mcp\"\nstdio.command = [\"x\"]\n",
        "upstreams[0].path",
        "/",
    ),
    (
        "bad cache scope",
        "[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\ncache.scope = \"world\"\n",
        "upstreams[0].cache.scope",
        "private",
    ),
    (
        "spares above max_children",
        "[[upstreams]]\nname = \"e\"\n[upstreams.stdio]\ncommand = [\"x\"]\nspares = 5\nmax_children = 2\n",
        "upstreams[0].stdio.spares",
        "max_children",
    ),
    (
        "zero max_in_flight",
        "[[upstreams]]\nname = \"e\"\nmax_in_flight = 0\nstdio.command = [\"x\"]\n",
        "upstreams[0].max_in_flight",
        "greater than 0",
    ),
    (
        "wrong type",
        "[[upstreams]]\nname = 5\nstdio.command = [\"x\"]\n",
        "upstreams[0].name",
        "string",
    ),
];

#[test]
fn check_config_explains_each_mistake_with_its_key_path_and_exit_2() {
    let mut failures = Vec::new();
    for (what, text, path, word) in MISTAKES {
        let output = check_config_text(text);
        let stderr = String::from_utf8_lossy(&output.stderr);
        // The problem line: `  <key path>: <explanation>`.
        let explained = stderr.lines().any(|l| {
            l.trim_start()
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with(": ") && rest.contains(word))
        });
        if output.status.code() != Some(2) || !explained {
            failures.push(format!(
                "{what}: expected exit 2 and a `{path}: ...{word}...` line; got {}",
                describe(&output)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} mistakes not explained:\n{}",
        failures.len(),
        MISTAKES.len(),
        failures.join("\n\n")
    );
}

#[test]
fn check_config_lists_every_validation_problem_at_once() {
    let text = "[listen]\nmax_body_bytes = 0\n\
        [[upstreams]]\nname = \"\"\npath = \"mcp\"\nmax_in_flight = 0\nstdio.command = []\n\
        [[upstreams]]\nname = \"x\"\nstdio.command = [\"a\"]\nstdio.spares = 5\nstdio.max_children = 2\n\
        [[upstreams]]\nname = \"x\"\nhttp.url = \"http://127.0.0.1:1/\"\n";
    let output = check_config_text(text);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert_paths_reported(
        &output,
        &[
            "listen.max_body_bytes",
            "upstreams[0].name",
            "upstreams[0].path",
            "upstreams[0].stdio.command",
            "upstreams[0].max_in_flight",
            "upstreams[1].stdio.spares",
            "upstreams[2].name",
        ],
    );
}

/// `check-config` promises to "explain every mistake": a file with an unknown key and a
/// duplicate upstream name has two.
#[test]
fn check_config_reports_a_typo_and_a_validation_problem_together() {
    let text = "[listen]\nadress = \"127.0.0.1:1\"\n\
        [[upstreams]]\nname = \"e\"\nrequest_timeout = \"soon\"\nstdio.command = [\"x\"]\n\
        [[upstreams]]\nname = \"e\"\npath = \"/b\"\nstdio.command = [\"x\"]\n";
    let output = check_config_text(text);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert_paths_reported(
        &output,
        &["listen.adress", "upstreams[0].request_timeout", "upstreams[1].name"],
    );
}

#[test]
fn check_config_rejects_toml_syntax_errors_and_missing_files_with_exit_2() {
    let output = check_config_text("[[upstreams]\nname = \"e\"\n");
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("line 1"),
        "the syntax error should give its line: {}",
        describe(&output)
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("absent.toml");
    let output = check_config(&missing);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("absent.toml"),
        "{}",
        describe(&output)
    );
}

/// Every example shipped in `config/` is valid (new files are covered automatically).
#[test]
fn every_shipped_config_file_passes_check_config() {
    let dir = repo_root().join("config");
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    let mut files: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    // config/tls.toml names tls/cert.pem and tls/key.pem relative to where eragate runs, as
    // its comment says to create them: here a fresh pair from a test CA.
    let cwd = tempfile::tempdir().expect("tempdir");
    let tls_dir = cwd.path().join("tls");
    std::fs::create_dir(&tls_dir).expect("tls dir");
    let server = common::tls::TestCa::new("config test CA").localhost("eragate");
    common::tls::write_file(&tls_dir, "cert.pem", &server.cert);
    common::tls::write_file(&tls_dir, "key.pem", &server.key);
    let mut failures = Vec::new();
    for file in &files {
        let output = check_config_in(file, cwd.path());
        if output.status.code() != Some(0) {
            failures.push(format!("{}: {}", file.display(), describe(&output)));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} config files are invalid:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// The configuration reference is in step with the code: every key and section the loader
/// accepts has a row or a heading in `docs/configuration.md`, and every key documented in a
/// section the loader knows is one it accepts. The keys come from the loader itself
/// (`tests/it/ops/cli/config_keys.rs`), so a field added to `src/config/` fails here until it is documented.
#[test]
fn every_key_check_config_accepts_is_in_the_configuration_reference() {
    let accepted = config_keys::accepted_keys();
    assert!(accepted.problems.is_empty(), "{}", accepted.problems.join("\n"));
    // The probe itself works: a few keys it must find.
    for (section, key) in [
        ("", "upstreams"),
        ("listen", "address"),
        ("upstreams", "name"),
        ("upstreams.pool", "size"),
        ("upstreams.credentials", "kind"),
        ("upstreams.credentials", "value_env"),
        ("rate_limits.tools.NAME", "requests"),
        ("auth.tokens", "principal"),
        ("policies.tools", "rename"),
    ] {
        assert!(
            accepted
                .sections
                .get(section)
                .is_some_and(|keys| keys.contains_key(key)),
            "the probe did not find [{section}] {key}: {:?}",
            accepted.sections.keys().collect::<Vec<_>>()
        );
    }
    let path = repo_root().join("docs/configuration.md");
    let reference = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let differences = config_keys::differences(&accepted, &reference);
    assert!(
        differences.is_empty(),
        "docs/configuration.md is out of step with what check-config accepts:\n{}",
        Vec::from_iter(differences).join("\n")
    );
}

/// `check-config` loads every TLS file: an unreadable or malformed file, a key that does not
/// match its certificate, half a client certificate, TLS on a stdio upstream.
#[test]
fn check_config_loads_the_tls_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = common::tls::TestCa::new("check-config CA");
    let (one, two) = (ca.localhost("one"), ca.localhost("two"));
    let file = |name: &str, text: &str| common::tls::write_file(dir.path(), name, text).display().to_string();
    let (cert, key, other_key) = (
        file("cert.pem", &one.cert),
        file("key.pem", &one.key),
        file("key2.pem", &two.key),
    );
    let ca_file = file("ca.pem", &ca.pem());
    let not_pem = file("notes.txt", "not a certificate");
    let absent = dir.path().join("absent.pem").display().to_string();
    let listen = |cert: &str, key: &str| {
        format!(
            "[listen.tls]\ncert = \"{cert}\"\nkey = \"{key}\"\n[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n"
        )
    };
    let upstream = |tls: &str| {
        format!("[[upstreams]]\nname = \"e\"\nhttp.url = \"https://127.0.0.1:1/mcp\"\n[upstreams.tls]\n{tls}\n")
    };
    let good = [
        listen(&cert, &key),
        upstream(&format!("ca = \"{ca_file}\"\ncert = \"{cert}\"\nkey = \"{key}\"")),
    ];
    for text in &good {
        let output = check_config_text(text);
        assert_eq!(output.status.code(), Some(0), "{text}\n{}", describe(&output));
    }
    // (what, file, the key path named, a word the explanation contains)
    let mistakes = [
        (
            "unreadable certificate",
            listen(&absent, &key),
            "listen.tls.cert",
            "cannot read",
        ),
        ("not PEM", listen(&not_pem, &key), "listen.tls.cert", "CERTIFICATE"),
        (
            "key of another certificate",
            listen(&cert, &other_key),
            "listen.tls.key",
            "cannot serve",
        ),
        (
            "unreadable key",
            listen(&cert, &absent),
            "listen.tls.key",
            "cannot read",
        ),
        (
            "unreadable CA",
            upstream(&format!("ca = \"{absent}\"")),
            "upstreams[0].tls.ca",
            "cannot read",
        ),
        (
            "CA not PEM",
            upstream(&format!("ca = \"{not_pem}\"")),
            "upstreams[0].tls.ca",
            "CERTIFICATE",
        ),
        (
            "client cert without key",
            upstream(&format!("cert = \"{cert}\"")),
            "upstreams[0].tls.key",
            "both",
        ),
        (
            "client key of another cert",
            upstream(&format!("cert = \"{cert}\"\nkey = \"{other_key}\"")),
            "upstreams[0].tls.key",
            "cannot serve",
        ),
        (
            "TLS on a stdio upstream",
            format!("[[upstreams]]\nname = \"e\"\nstdio.command = [\"x\"]\n[upstreams.tls]\nca = \"{ca_file}\"\n"),
            "upstreams[0].tls",
            "only http and sse",
        ),
    ];
    for (what, text, path, word) in &mistakes {
        let output = check_config_text(text);
        assert_eq!(output.status.code(), Some(2), "{what}: {}", describe(&output));
        assert_paths_reported(&output, &[path]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(word), "{what}: {word:?} missing: {}", describe(&output));
    }
}

#[test]
fn version_prints_the_version() {
    for args in [&["version"][..], &["--version"][..]] {
        let output = eragate().args(args).output().expect("run eragate");
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", describe(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            stdout.trim(),
            format!("eragate {}", env!("CARGO_PKG_VERSION")),
            "{args:?}: {}",
            describe(&output)
        );
    }
}

/// `run --stdio "..."` splits its one string like a shell: quotes keep spaces, backslashes
/// escape. The upstream records the argv it got, then becomes the legacy fixture so a real
/// client call proves the whole path works.
#[test]
fn run_stdio_splits_its_command_like_a_shell() {
    let peers = peers();
    let dir = tempfile::tempdir().expect("tempdir");
    let spaced = dir.path().join("dir with space");
    std::fs::create_dir(&spaced).expect("mkdir");
    let script = spaced.join("record argv.py");
    let argv_file = spaced.join("argv out.json");
    std::fs::write(
        &script,
        format!(
            "import json, os, sys\n\
             out = sys.argv[1]\n\
             with open(out + '.tmp', 'w') as f:\n    json.dump(sys.argv[1:], f)\n\
             os.replace(out + '.tmp', out)\n\
             legacy = {legacy:?}\n\
             os.execv(sys.executable, [sys.executable, legacy, 'stdio'])\n",
            legacy = peers.script("legacy_server.py")
        ),
    )
    .expect("write script");
    let line = format!(
        r#"'{python}' "{script}" '{out}' 'hello world' plain "double \"quoted\"" back\ slash"#,
        python = peers.python(),
        script = script.display(),
        out = argv_file.display()
    );

    let port = free_port();
    let log = dir.path().join("eragate.log");
    let mut command = eragate();
    command
        .args(["run", "--listen", &format!("127.0.0.1:{port}"), "--stdio", &line])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"));
    let _gateway = Proc::spawn("eragate run --stdio", &mut command);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        listening(("127.0.0.1", port), Duration::from_secs(20)),
        "eragate did not listen; log:\n{}",
        log_text()
    );

    let url = format!("http://127.0.0.1:{port}/mcp");
    let report = py_client(&[
        "--mode",
        "2026-07-28",
        "--url",
        &url,
        "--scenario",
        "tools",
        "--timeout",
        "20",
    ])
    .unwrap_or_else(|e| panic!("{e}\neragate log:\n{}", log_text()));
    assert_eq!(report["results"]["call_echo"]["text"], "echo: hi", "{report}");

    let argv: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(&argv_file).expect("the upstream recorded its argv"))
            .expect("argv JSON");
    assert_eq!(
        argv,
        [
            argv_file.display().to_string(),
            "hello world".into(),
            "plain".into(),
            "double \"quoted\"".into(),
            "back slash".into()
        ],
        "--stdio {line}"
    );
}

#[test]
fn run_stdio_with_an_unbalanced_quote_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("stderr");
    let mut command = eragate();
    command
        .args([
            "run",
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
            "--stdio",
            "python3 'unterminated",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"));
    let mut gateway = Proc::spawn("eragate run --stdio", &mut command);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = gateway.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "eragate started instead of refusing the command line"
        );
        std::thread::sleep(Duration::from_millis(25));
    };
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "{status}: {stderr}");
    assert!(stderr.contains("--stdio"), "the error should name --stdio: {stderr}");
}

/// `eragate health URL`, the container's health check: 0 and one line on stdout for a 2xx,
/// 1 and one line on stderr saying why otherwise (a non-2xx answer, a closed port).
#[test]
fn health_checks_an_endpoint_and_explains_a_failure_in_one_line() {
    // An upstream that never answers: eragate is up (/healthz) but not ready (/readyz).
    let closed = free_port();
    let gateway = Eragate::http(&format!("http://127.0.0.1:{closed}/mcp"), "");
    let health = |url: &str| {
        eragate()
            .args(["health", url, "--timeout", "2s"])
            .output()
            .expect("run eragate health")
    };

    let up = health(&format!("http://{}/healthz", gateway.addr));
    assert!(up.status.success(), "{}", describe(&up));
    assert!(
        String::from_utf8_lossy(&up.stdout).contains(": 200 OK"),
        "{}",
        describe(&up)
    );

    let not_ready = health(&format!("http://{}/readyz", gateway.addr));
    assert_eq!(not_ready.status.code(), Some(1), "{}", describe(&not_ready));
    let stderr = String::from_utf8_lossy(&not_ready.stderr);
    assert!(stderr.contains("answered 503"), "{}", describe(&not_ready));
    assert_eq!(stderr.trim_end().lines().count(), 1, "{}", describe(&not_ready));

    let refused = health(&format!("http://127.0.0.1:{closed}/healthz"));
    assert_eq!(refused.status.code(), Some(1), "{}", describe(&refused));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.starts_with("eragate health: ") && stderr.contains("cannot connect"),
        "{}",
        describe(&refused)
    );
    assert!(refused.stdout.is_empty(), "{}", describe(&refused));
}
