//! The built-in authorization server against strangers (issue 34), each against the
//! real binary:
//! - no empty password: `eragate hash-password` refuses one, eragate refuses a hash of one;
//! - login limits by user name *and* real client address (`[listen] trusted_proxies`):
//!   guessing at one name never holds back another, nor the same name from another
//!   address, and nobody waits more than a minute for a stranger; a trusted proxy's
//!   connections are not capped per address;
//! - the consent page says where the code goes and marks names nobody verified;
//! - an existing SQLite file others may read is made 0600;
//! - consent to one resource is not consent to another;
//! - the `Host` and `Origin` checks on the authorization server's endpoints;
//! - registrations limited per client address too;
//! - the one-line start with `--scope`; no user, a malformed hash, and the shipped
//!   example password off loopback, each refused at start with the fix named.

use crate::common;
use crate::common::auth_server;
use crate::common::oauth;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use auth_server::*;
use common::*;
use oauth::call_as;
use serde_json::json;

fn origin(gateway: &Eragate) -> String {
    format!("http://{}", gateway.addr)
}

/// A reply of a request sent with `headers` (added to `reqwest`'s own).
fn request(method: reqwest::Method, url: &str, headers: &[(&str, &str)], body: Option<String>) -> Reply {
    let mut request = client().request(method, url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    let response = request.send().unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.text().unwrap_or_default();
    Reply { status, headers, body }
}

/// Opens `authorize_url` and signs in as `user` with `password`, every request
/// carrying `headers`: the login form's answer.
fn sign_in(origin: &str, authorize_url: &str, user: &str, password: &str, headers: &[(&str, &str)]) -> Reply {
    let page = request(reqwest::Method::GET, authorize_url, headers, None);
    assert_eq!(page.status, 200, "the login page: {page:?}");
    let (fields, cookie) = form_fields(&page);
    let cookie = cookie.expect("the transaction cookie");
    let form = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("txn", fields["txn"].as_str()),
            ("csrf", fields["csrf"].as_str()),
            ("username", user),
            ("password", password),
        ])
        .finish();
    let mut all = vec![
        ("content-type", "application/x-www-form-urlencoded"),
        ("cookie", cookie.as_str()),
    ];
    all.extend_from_slice(headers);
    request(
        reqwest::Method::POST,
        &format!("{origin}/oauth/login"),
        &all,
        Some(form),
    )
}

/// A public client registered at `origin` and an authorization URL of it for `resource`.
fn authorize_url(origin: &str, resource: &str) -> String {
    let client_id = register_public(origin);
    let (_, challenge) = pkce();
    Authorize {
        client_id: &client_id,
        redirect_uri: REDIRECT,
        challenge: &challenge,
        resource,
        scope: None,
        state: "st",
    }
    .url(origin)
}

/// Whether a login answer is the consent page (the password was checked and right).
fn is_consent(reply: &Reply) -> bool {
    reply.status == 200 && reply.body.contains("Allow access?")
}

/// The `Retry-After` of a refusal, in seconds.
fn retry_after(reply: &Reply) -> u64 {
    reply
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {reply:?}"))
}

/// `eragate` run with `args`, expected to refuse to start: its stderr.
fn refused_to_start(args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_eragate"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("eragate");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut stderr)
                .expect("stderr");
            assert!(!status.success(), "exited 0: {stderr}");
            return stderr;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("eragate {args:?} started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An Argon2id hash of `password` made here (eragate refuses to make one of the empty password).
fn argon2_hash(password: &str) -> String {
    use argon2::PasswordHasher;
    argon2::Argon2::default()
        .hash_password(password.as_bytes())
        .expect("a hash")
        .to_string()
}

#[test]
fn empty_passwords_are_refused_by_hash_password_and_at_start() {
    for input in ["", "\n", "\r\n"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_eragate"))
            .arg("hash-password")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("hash-password");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write");
        let output = child.wait_with_output().expect("hash-password");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{input:?}: exited 0");
        assert!(output.stdout.is_empty(), "{input:?}: printed a hash");
        assert!(stderr.contains("empty"), "{input:?}: {stderr}");
    }
    // A user whose hash is of the empty password (made elsewhere): eragate does not start.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("eragate.toml");
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let config = format!(
        "[auth.server]\n[[auth.server.users]]\nname = \"{USER}\"\npassword_argon2 = \"{}\"\n{upstream}",
        argon2_hash("")
    );
    std::fs::write(&path, config).expect("write");
    let path = path.display().to_string();
    let port = free_port().to_string();
    let stderr = refused_to_start(&["run", "--config", &path, "--listen", &format!("127.0.0.1:{port}")]);
    assert!(
        stderr.contains("auth.server.users[0].password_argon2") && stderr.contains("empty password"),
        "{stderr}"
    );
}

#[test]
fn guessing_at_one_name_never_holds_back_another_name_from_the_same_address() {
    let gateway = gateway("login_attempts = 2");
    let origin = origin(&gateway);
    let url = authorize_url(&origin, &gateway.url());
    let answers: Vec<u16> = (0..4)
        .map(|_| sign_in(&origin, &url, "mallory", "guess", &[]).status)
        .collect();
    assert_eq!(answers, [200, 200, 429, 429], "mallory is held from this address");
    // alice, from the very same address, signs in at once.
    let alice = sign_in(&origin, &url, USER, PASSWORD, &[]);
    assert!(is_consent(&alice), "{alice:?}\n{}", gateway.log());
}

#[test]
fn behind_a_trusted_proxy_each_client_is_counted_by_its_own_address() {
    let trusting = gateway_with_listen("login_attempts = 2", "trusted_proxies = [\"127.0.0.0/8\"]");
    let origin = origin(&trusting);
    let url = authorize_url(&origin, &trusting.url());
    let stranger = [("x-forwarded-for", "192.0.2.1, 203.0.113.9")];
    let answers: Vec<u16> = (0..3)
        .map(|_| sign_in(&origin, &url, USER, "guess", &stranger).status)
        .collect();
    assert_eq!(answers, [200, 200, 429], "alice's name, guessed from 203.0.113.9");
    // alice herself, from her own address behind the same proxy, is not held back.
    let alice = sign_in(&origin, &url, USER, PASSWORD, &[("x-forwarded-for", "198.51.100.7")]);
    assert!(is_consent(&alice), "{alice:?}\n{}", trusting.log());
    // What the client wrote left of the proxy's entry is not believed: a stranger
    // rotating it is still 203.0.113.9.
    let spoofed = [("x-forwarded-for", "198.51.100.7, 203.0.113.9")];
    assert_eq!(sign_in(&origin, &url, USER, "guess", &spoofed).status, 429);

    // Without trusted proxies, a forwarding header is nobody's word: every guess
    // counts against the peer itself, whatever it names.
    let untrusting = gateway("login_attempts = 2");
    let origin = format!("http://{}", untrusting.addr);
    let url = authorize_url(&origin, &untrusting.url());
    let answers: Vec<u16> = ["192.0.2.1", "192.0.2.2", "192.0.2.3"]
        .iter()
        .map(|xff| sign_in(&origin, &url, USER, "guess", &[("x-forwarded-for", xff)]).status)
        .collect();
    assert_eq!(answers, [200, 200, 429], "{}", untrusting.log());
}

#[test]
fn a_stranger_holds_a_user_back_a_minute_at_most() {
    // The stranger guesses alice's name from alice's own address (a shared NAT): the
    // one case where nothing tells them apart.
    let gateway = gateway("login_attempts = 2");
    let origin = origin(&gateway);
    let url = authorize_url(&origin, &gateway.url());
    for _ in 0..2 {
        assert_eq!(sign_in(&origin, &url, USER, "guess", &[]).status, 200);
    }
    let held = sign_in(&origin, &url, USER, PASSWORD, &[]);
    assert_eq!(held.status, 429, "{held:?}");
    assert!(held.body.contains("Too many attempts"), "{}", held.body);
    let wait = retry_after(&held);
    assert!((1..=60).contains(&wait), "Retry-After: {wait}");
    std::thread::sleep(Duration::from_secs(wait));
    let alice = sign_in(&origin, &url, USER, PASSWORD, &[]);
    assert!(is_consent(&alice), "after {wait} s: {alice:?}\n{}", gateway.log());
}

/// An HTTP/1.1 keep-alive connection to `addr` and the status of a `GET /healthz` on it
/// (`None`: closed without an answer).
fn healthz_on_new_connection(addr: SocketAddr) -> (TcpStream, Option<u16>) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let _ = stream.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes());
    let mut buffer = [0u8; 1024];
    let read = stream.read(&mut buffer).unwrap_or(0);
    let head = String::from_utf8_lossy(&buffer[..read]).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
    (stream, status)
}

#[test]
fn a_trusted_proxys_connections_are_not_capped_per_address() {
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let limits = "[limits]\nmax_connections_per_ip = 2\n";
    let trusting = Eragate::start(&format!(
        "[listen]\ntrusted_proxies = [\"127.0.0.1\"]\n{limits}{upstream}"
    ));
    let held: Vec<_> = (0..5).map(|_| healthz_on_new_connection(trusting.addr)).collect();
    let statuses: Vec<Option<u16>> = held.iter().map(|(_, s)| *s).collect();
    assert_eq!(statuses, [Some(200); 5], "{}", trusting.log());

    let untrusting = Eragate::start(&format!("{limits}{upstream}"));
    let held: Vec<_> = (0..3).map(|_| healthz_on_new_connection(untrusting.addr)).collect();
    let statuses: Vec<Option<u16>> = held.iter().map(|(_, s)| *s).collect();
    assert_eq!(statuses, [Some(200), Some(200), Some(503)]);
}

/// [`gateway`] with `[listen]` keys.
fn gateway_with_listen(extra: &str, listen: &str) -> Eragate {
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    Eragate::start(&format!("[listen]\n{listen}\n{}\n{upstream}", server_toml(extra)))
}

#[test]
fn the_consent_page_says_where_the_code_goes_and_marks_names_nobody_verified() {
    let gateway = gateway(
        "[[auth.server.clients]]\nclient_id = \"desktop\"\nclient_name = \"Desktop app\"\n\
         redirect_uris = [\"https://desktop.example.com/cb\"]\n",
    );
    let origin = origin(&gateway);
    let registered = post_json(
        &format!("{origin}/oauth/register"),
        &json!({
            "redirect_uris": [REDIRECT],
            "application_type": "native",
            "token_endpoint_auth_method": "none",
            "client_name": "Totally Official Bank",
        }),
    );
    let dynamic = registered.json()["client_id"].as_str().expect("client_id").to_owned();
    let (_, challenge) = pkce();
    // (client, redirect URI, the name, whether it is marked, where the code goes)
    let cases = [
        (
            dynamic.as_str(),
            REDIRECT,
            "Totally Official Bank",
            true,
            "127.0.0.1:9 (an application on this computer)",
        ),
        (
            "desktop",
            "https://desktop.example.com/cb",
            "Desktop app",
            false,
            "desktop.example.com",
        ),
    ];
    for (client_id, redirect_uri, name, marked, destination) in cases {
        let url = Authorize {
            client_id,
            redirect_uri,
            challenge: &challenge,
            resource: &gateway.url(),
            scope: None,
            state: "s",
        }
        .url(&origin);
        let login = get(&url);
        let consent = sign_in(&origin, &url, USER, PASSWORD, &[]);
        assert!(is_consent(&consent), "{consent:?}");
        for page in [&login.body, &consent.body] {
            assert!(page.contains(name), "{page}");
            assert_eq!(page.contains("name not verified"), marked, "{client_id}: {page}");
        }
        assert!(consent.body.contains(destination), "{client_id}: {}", consent.body);
    }
}

#[cfg(unix)]
#[test]
fn an_existing_sqlite_file_others_may_read_is_made_private_before_keys_go_in() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("authorization.db");
    std::fs::write(&path, b"").expect("create");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let gateway = gateway(&format!(
        "storage = \"sqlite\"\nsqlite_path = {:?}",
        path.display().to_string()
    ));
    // Started: the signing keys are in the file.
    let jwks = get(&format!("{}/oauth/jwks", origin(&gateway))).json();
    assert_eq!(jwks["keys"].as_array().map(Vec::len), Some(1), "{jwks}");
    let mode = std::fs::metadata(&path).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}\n{}", gateway.log());
    assert!(
        gateway
            .log()
            .contains("made the authorization server's storage file 0600")
    );
}

#[test]
fn consent_to_one_resource_is_not_consent_to_another() {
    let command = serde_json::to_string(&legacy_stdio_command()).expect("json");
    let upstreams = format!(
        "[[upstreams]]\nname = \"first\"\npath = \"/mcp\"\n[upstreams.stdio]\ncommand = {command}\n\
         [[upstreams]]\nname = \"second\"\npath = \"/private\"\n[upstreams.stdio]\ncommand = {command}\n"
    );
    let gateway = Eragate::start(&format!("{}\n{upstreams}", server_toml("")));
    let origin = origin(&gateway);
    let client_id = register_public(&origin);
    let (first, second) = (format!("{origin}/mcp"), format!("{origin}/private"));
    let (_, challenge) = pkce();
    let url = |resource: &str| {
        Authorize {
            client_id: &client_id,
            redirect_uri: REDIRECT,
            challenge: &challenge,
            resource,
            scope: None,
            state: "s",
        }
        .url(&origin)
    };
    // alice allows the client on the first resource; the next time it asks for
    // that one, she is not asked again.
    let allowed = log_in_and_allow(&origin, &url(&first));
    assert_eq!(allowed.status, 303, "{allowed:?}");
    let again = sign_in(&origin, &url(&first), USER, PASSWORD, &[]);
    assert_eq!(again.status, 303, "remembered for the first resource: {again:?}");
    // The second resource needs a consent of its own.
    let other = sign_in(&origin, &url(&second), USER, PASSWORD, &[]);
    assert!(is_consent(&other), "{other:?}");
    assert!(other.body.contains(&second), "{}", other.body);
}

#[test]
fn the_authorization_server_refuses_foreign_hosts_and_cross_origin_api_calls() {
    let gateway = gateway("");
    let origin = origin(&gateway);
    let registration =
        json!({"redirect_uris": [REDIRECT], "application_type": "native", "token_endpoint_auth_method": "none"})
            .to_string();
    let json_type = ("content-type", "application/json");
    let register = |headers: &[(&str, &str)]| {
        let mut all = vec![json_type];
        all.extend_from_slice(headers);
        request(
            reqwest::Method::POST,
            &format!("{origin}/oauth/register"),
            &all,
            Some(registration.clone()),
        )
    };
    let foreign = ("origin", "http://evil.example");
    let rebound = ("host", "evil.example");
    // (what, the answer, the status expected)
    let cases: Vec<(&str, Reply, u16)> = vec![
        ("register, foreign Origin", register(&[foreign]), 403),
        ("register, Origin null", register(&[("origin", "null")]), 403),
        ("register, unknown Host", register(&[rebound]), 421),
        ("register, own Origin", register(&[("origin", origin.as_str())]), 201),
        ("register, no Origin", register(&[]), 201),
        (
            "token, foreign Origin",
            request(
                reqwest::Method::POST,
                &format!("{origin}/oauth/token"),
                &[("content-type", "application/x-www-form-urlencoded"), foreign],
                Some("grant_type=refresh_token&client_id=x&refresh_token=y".into()),
            ),
            403,
        ),
        (
            "revoke, foreign Origin",
            request(
                reqwest::Method::POST,
                &format!("{origin}/oauth/revoke"),
                &[("content-type", "application/x-www-form-urlencoded"), foreign],
                Some("token=y&client_id=x".into()),
            ),
            403,
        ),
        (
            "authorize, unknown Host",
            request(
                reqwest::Method::GET,
                &format!("{origin}/oauth/authorize"),
                &[rebound],
                None,
            ),
            421,
        ),
        (
            "metadata, unknown Host",
            request(
                reqwest::Method::GET,
                &format!("{origin}/.well-known/oauth-authorization-server"),
                &[rebound],
                None,
            ),
            421,
        ),
        (
            "metadata, foreign Origin",
            request(
                reqwest::Method::GET,
                &format!("{origin}/.well-known/oauth-authorization-server"),
                &[foreign],
                None,
            ),
            200,
        ),
        (
            "JWKS, foreign Origin",
            request(reqwest::Method::GET, &format!("{origin}/oauth/jwks"), &[foreign], None),
            200,
        ),
    ];
    for (what, reply, status) in &cases {
        assert_eq!(reply.status, *status, "{what}: {reply:?}");
    }
    for (what, reply, _) in &cases[..3] {
        assert!(reply.json()["error"].is_string(), "{what}: an OAuth error: {reply:?}");
    }
    assert_eq!(cases[9].1.header("access-control-allow-origin"), Some("*"));
    // The login form, posted by a browser from eragate's own page (Origin: null: the
    // page's referrer policy), still signs in.
    let url = authorize_url(&origin, &gateway.url());
    let signed_in = sign_in(&origin, &url, USER, PASSWORD, &[("origin", "null")]);
    assert!(is_consent(&signed_in), "{signed_in:?}");
}

#[test]
fn registrations_are_limited_per_client_address_too() {
    let gateway = gateway_with_listen("", "trusted_proxies = [\"127.0.0.1\"]");
    let origin = origin(&gateway);
    let body = json!({"redirect_uris": [REDIRECT], "application_type": "native", "token_endpoint_auth_method": "none"})
        .to_string();
    let register = |address: &str| {
        request(
            reqwest::Method::POST,
            &format!("{origin}/oauth/register"),
            &[("content-type", "application/json"), ("x-forwarded-for", address)],
            Some(body.clone()),
        )
    };
    // The counts are per minute: start early in one.
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs()
        % 60;
    if second > 45 {
        std::thread::sleep(Duration::from_secs(61 - second));
    }
    // One anonymous caller takes its five (the default) and no more…
    let statuses: Vec<u16> = (0..7).map(|_| register("203.0.113.9").status).collect();
    assert_eq!(statuses, [201, 201, 201, 201, 201, 429, 429], "{}", gateway.log());
    let refused = register("203.0.113.9");
    assert!(refused.body.contains("from your address"), "{refused:?}");
    // …and everybody else still registers.
    for address in ["198.51.100.7", "2001:db8::1"] {
        let reply = register(address);
        assert_eq!(reply.status, 201, "{address}: {reply:?}");
    }
}

#[test]
fn the_one_line_start_takes_scope_and_refuses_what_nobody_could_sign_in_to() {
    let command = shell_words::join(legacy_stdio_command());
    let user = format!("{USER}:{}", hash_password(PASSWORD));
    let port = free_port();
    let public = format!("http://127.0.0.1:{port}");
    let listen = format!("127.0.0.1:{port}");
    let mut run = Command::new(env!("CARGO_BIN_EXE_eragate"));
    run.args(["run", "--listen", &listen, "--stdio", &command])
        .args(["--auth-server", "local", "--public-url", &public, "--user", &user])
        .args(["--scope", "mcp:read"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _proc = Proc::spawn("eragate", &mut run);
    assert!(listening(("127.0.0.1", port), Duration::from_secs(20)), "did not start");
    let prm = get(&format!("{public}/.well-known/oauth-protected-resource/mcp")).json();
    assert_eq!(prm["scopes_supported"], json!(["mcp:read"]), "{prm}");
    assert_eq!(prm["authorization_servers"], json!([public]), "{prm}");
    let client_id = register_public(&public);
    let resource = format!("{public}/mcp");
    for (scope, status) in [(None, 403), (Some("mcp:read"), 200)] {
        let (verifier, challenge) = pkce();
        let url = Authorize {
            client_id: &client_id,
            redirect_uri: REDIRECT,
            challenge: &challenge,
            resource: &resource,
            scope,
            state: "s",
        }
        .url(&public);
        let done = log_in_and_allow(&public, &url);
        let code = location_params(&done)["code"].clone();
        let tokens = exchange(&public, &client_id, &code, &verifier);
        let token = tokens.json()["access_token"].as_str().expect("token").to_owned();
        assert_eq!(call_as(&resource, &token, "x").status, status, "scope {scope:?}");
    }

    // Nobody could sign in: refused, with the fix named.
    let base = ["run", "--stdio", command.as_str(), "--auth-server", "local"];
    let stderr = refused_to_start(&base);
    assert!(
        stderr.contains("auth.server.users") && stderr.contains("--user"),
        "{stderr}"
    );
    let malformed = format!("{USER}:$argon2id$v=19$m=19456,t=2,p=1$garbage");
    let stderr = refused_to_start(&[&base[..], &["--user", &malformed]].concat());
    assert!(
        stderr.contains("auth.server.users[0].password_argon2") && stderr.contains("eragate hash-password"),
        "{stderr}"
    );
}

#[test]
fn the_shipped_example_runs_on_loopback_and_its_password_is_refused_elsewhere() {
    let example = repo_root().join("config/auth-server.toml").display().to_string();
    let command = shell_words::join(legacy_stdio_command());
    let port = free_port();
    let public = format!("http://127.0.0.1:{port}");
    let run = |listen: &str, public: &str| -> Vec<String> {
        [
            "run",
            "--config",
            &example,
            "--stdio",
            &command,
            "--listen",
            listen,
            "--public-url",
            public,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let args = run(&format!("127.0.0.1:{port}"), &public);
    let mut command_line = Command::new(env!("CARGO_BIN_EXE_eragate"));
    command_line.args(&args).stdout(Stdio::null()).stderr(Stdio::null());
    let _proc = Proc::spawn("eragate", &mut command_line);
    assert!(listening(("127.0.0.1", port), Duration::from_secs(20)), "did not start");
    let url = authorize_url(&public, &format!("{public}/mcp"));
    let signed_in = sign_in(&public, &url, "alice", "change-me", &[]);
    assert!(is_consent(&signed_in), "alice/change-me on loopback: {signed_in:?}");

    // The same file, reachable from elsewhere: refused, naming the password and the fix.
    let other = free_port();
    for (listen, public) in [
        (format!("0.0.0.0:{other}"), format!("http://127.0.0.1:{other}")),
        (format!("127.0.0.1:{other}"), "https://mcp.example.com".to_owned()),
    ] {
        let args = run(&listen, &public);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stderr = refused_to_start(&args);
        assert!(
            stderr.contains("auth.server.users[0].password_argon2")
                && stderr.contains("\"change-me\"")
                && stderr.contains("eragate hash-password"),
            "{listen} {public}: {stderr}"
        );
    }
    let check = Command::new(env!("CARGO_BIN_EXE_eragate"))
        .args(["check-config", &example])
        .output()
        .expect("check-config");
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
}
