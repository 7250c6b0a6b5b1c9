//! The built-in authorization server's storage and login limit, with real parts:
//! - `storage = "sqlite"`: a client registered by DCR, its refresh token and the
//!   signing key that signed an access token all survive a restart of eragate;
//! - `storage = "redis"` with a real `redis-server` and two eragate replicas: a code
//!   issued by one is redeemed at the other, a refresh token rotated at one and
//!   reused at the other revokes its family, a token signed by one verifies at the other;
//! - the login attempt limit: past it, one user name from one address is answered 429
//!   "Too many attempts" for a minute, even to the right password, and nobody else is;
//!   with Redis, counted across replicas.

use crate::common;
use crate::common::auth_server;
use crate::common::oauth;

use std::net::SocketAddr;
use std::process::Command;

use auth_server::*;
use common::redis::RedisServer;
use common::*;
use oauth::{call_as, split_jwt};

fn origin(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

fn local_addr() -> SocketAddr {
    format!("127.0.0.1:{}", free_port()).parse().expect("addr")
}

/// `server_toml(extra)` in front of the legacy stdio fixture, with `listen` keys.
fn config(extra: &str, listen: &str) -> String {
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    format!("[listen]\n{listen}\n{}\n{upstream}", server_toml(extra))
}

/// A registered public client's whole flow at `origin`: its access and refresh tokens.
fn tokens_at(origin: &str, client_id: &str, resource: &str) -> (String, String) {
    let (params, verifier) = code_for(origin, client_id, resource);
    let tokens = exchange(origin, client_id, &params["code"], &verifier);
    assert_eq!(tokens.status, 200, "{tokens:?}");
    let tokens = tokens.json();
    let access = tokens["access_token"].as_str().expect("access_token").to_owned();
    let refresh = tokens["refresh_token"].as_str().expect("refresh_token").to_owned();
    (access, refresh)
}

#[test]
fn sqlite_keeps_clients_refresh_tokens_and_keys_across_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("authorization.db");
    let extra = format!("storage = \"sqlite\"\nsqlite_path = {:?}", path.display().to_string());
    let static_client =
        format!("\n[[auth.server.clients]]\nclient_id = \"retired-app\"\nredirect_uris = [\"{REDIRECT}\"]");
    let addr = local_addr();
    let origin = origin(addr);
    let url = format!("{origin}/mcp");
    let (_, challenge) = pkce();
    let retired = Authorize {
        client_id: "retired-app",
        redirect_uri: REDIRECT,
        challenge: &challenge,
        resource: &url,
        scope: None,
        state: "st",
    };

    let first = Eragate::start_at(addr, &config(&format!("{extra}{static_client}"), ""), &[], &[]);
    assert_eq!(get(&retired.url(&origin)).status, 200, "the static client is known");
    let client_id = register_public(&origin);
    let (access, refresh_token) = tokens_at(&origin, &client_id, &url);
    let (header, _, _) = split_jwt(&access);
    let called = call_as(&url, &access, "before the restart");
    assert_eq!(called.status, 200, "{called:?}\n{}", first.log());
    drop(first);
    assert!(path.is_file(), "the database file stays");

    // Restarted without the static client: the file forgets it too.
    let second = Eragate::start_at(addr, &config(&extra, ""), &[], &[]);
    let refused = get(&retired.url(&origin));
    assert_eq!(
        refused.status, 400,
        "a static client removed from the file: {refused:?}"
    );
    assert!(refused.body.contains("not registered"), "{}", refused.body);
    // The key that signed before the restart still verifies (and is still published).
    let called = call_as(&url, &access, "after the restart");
    assert_eq!(called.status, 200, "{called:?}\n{}", second.log());
    let jwks = get(&format!("{origin}/oauth/jwks")).json();
    let kids: Vec<&serde_json::Value> = jwks["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| &k["kid"])
        .collect();
    assert!(kids.contains(&&header["kid"]), "{jwks} lacks {}", header["kid"]);
    // The client and its refresh token are remembered.
    let refreshed = refresh(&origin, &client_id, &refresh_token);
    assert_eq!(refreshed.status, 200, "{refreshed:?}\n{}", second.log());
    let rotated = refreshed.json();
    let access = rotated["access_token"].as_str().expect("access_token");
    assert_eq!(call_as(&url, access, "refreshed").status, 200);
    // The rotation was stored too: the old refresh token is now a reuse.
    let reused = refresh(&origin, &client_id, &refresh_token);
    assert_eq!(
        (reused.status, reused.json()["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    // The registration works for a new authorization as well.
    let (_, _) = tokens_at(&origin, &client_id, &url);
}

#[test]
fn redis_shares_codes_refresh_families_and_keys_between_two_replicas() {
    let redis = RedisServer::start();
    let (a_addr, b_addr) = (local_addr(), local_addr());
    let (a, b) = (origin(a_addr), origin(b_addr));
    // Both replicas serve one public URL (A's, standing for the load balancer).
    let listen = format!("public_url = \"{a}\"");
    let extra = format!(
        "storage = \"redis\"\nredis_url = \"redis://127.0.0.1:{}/3\"\nlogin_attempts = 2",
        redis.port
    );
    let config = config(&extra, &listen);
    let replica_a = Eragate::start_at(a_addr, &config, &[], &[]);
    let replica_b = Eragate::start_at(b_addr, &config, &[], &[]);
    let logs = || format!("A:\n{}\nB:\n{}", replica_a.log(), replica_b.log());
    let resource = format!("{a}/mcp");

    // Registered at A, known at B; a code issued by A is redeemed at B.
    let client_id = register_public(&a);
    let (params, verifier) = code_for(&a, &client_id, &resource);
    let at_b = exchange(&b, &client_id, &params["code"], &verifier);
    assert_eq!(at_b.status, 200, "{at_b:?}\n{}", logs());
    let tokens = at_b.json();
    let refresh_token = tokens["refresh_token"].as_str().expect("refresh_token").to_owned();

    // A token signed by A verifies at B, and one signed by B at A.
    let (from_a, _) = tokens_at(&a, &client_id, &resource);
    let from_b = tokens["access_token"].as_str().expect("access_token");
    let called = call_as(&format!("{b}/mcp"), &from_a, "signed by A, checked by B");
    assert_eq!(called.status, 200, "{called:?}\n{}", logs());
    let called = call_as(&format!("{a}/mcp"), from_b, "signed by B, checked by A");
    assert_eq!(called.status, 200, "{called:?}\n{}", logs());
    assert_eq!(
        get(&format!("{a}/oauth/jwks")).json(),
        get(&format!("{b}/oauth/jwks")).json(),
        "one key set"
    );

    // A refresh token rotated at B, then replayed at A: the family is revoked everywhere.
    let rotated = refresh(&b, &client_id, &refresh_token);
    assert_eq!(rotated.status, 200, "{rotated:?}\n{}", logs());
    let newest = rotated.json()["refresh_token"]
        .as_str()
        .expect("refresh_token")
        .to_owned();
    let replayed = refresh(&a, &client_id, &refresh_token);
    assert_eq!(
        (replayed.status, replayed.json()["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let revoked = refresh(&b, &client_id, &newest);
    assert_eq!(
        (revoked.status, revoked.json()["error"].as_str()),
        (400, Some("invalid_grant")),
        "the family's newest token died with it"
    );

    // The code redeemed at B is used at A as well.
    let again = exchange(&a, &client_id, &params["code"], &verifier);
    assert_eq!(
        (again.status, again.json()["error"].as_str()),
        (400, Some("invalid_grant"))
    );

    // Everything that expires carries its expiry in Redis; what does not, does not.
    let keys = redis.cli(3, &["KEYS", "eragate:as:*"]);
    let ttl = |key: &str| -> i64 { redis.cli(3, &["TTL", key])[0].parse().expect("a TTL") };
    let ttl_of = |prefix: &str| -> Vec<i64> { keys.iter().filter(|k| k.starts_with(prefix)).map(|k| ttl(k)).collect() };
    for prefix in [
        "eragate:as:code:",
        "eragate:as:rt:",
        "eragate:as:family:",
        "eragate:as:client:",
    ] {
        let ttls = ttl_of(prefix);
        assert!(!ttls.is_empty(), "no {prefix} keys in {keys:?}");
        assert!(ttls.iter().all(|&t| t > 0), "{prefix}: {ttls:?}");
    }
    assert_eq!(ttl("eragate:as:keys"), -1, "the signing keys do not expire");
    assert!(redis.cli(0, &["KEYS", "*"]).is_empty(), "everything went to database 3");

    // Failed sign-ins are counted in Redis: two at A, and B refuses the third (mallory
    // from 127.0.0.1).
    for (origin, expected) in [(&a, 200), (&a, 200), (&b, 429)] {
        let answer = failed_login(origin, &client_id, &resource);
        assert_eq!(answer.status, expected, "{answer:?}\n{}", logs());
    }
    let counted = redis.cli(3, &["KEYS", "eragate:as:login*"]);
    assert_eq!(
        counted.len(),
        2,
        "one count for the name and address, one for its minute of waiting: {counted:?}"
    );
    assert!(
        counted.iter().all(|k| ttl(k) > 0),
        "the counts expire with their window"
    );

    // Redis down: the token endpoint is temporarily unavailable (503), not "unknown client".
    drop(redis);
    let down = refresh(&a, &client_id, &newest);
    assert_eq!(
        (down.status, down.json()["error"].as_str()),
        (503, Some("temporarily_unavailable")),
        "{down:?}"
    );
    let registration = post_json(
        &format!("{b}/oauth/register"),
        &serde_json::json!({"redirect_uris": [REDIRECT], "application_type": "native", "token_endpoint_auth_method": "none"}),
    );
    assert_eq!(
        (registration.status, registration.json()["error"].as_str()),
        (503, Some("temporarily_unavailable")),
        "{registration:?}"
    );
}

/// A sign-in at `origin` as mallory with a wrong password: the login form's answer.
fn failed_login(origin: &str, client_id: &str, resource: &str) -> Reply {
    let (_, challenge) = pkce();
    let authorize = Authorize {
        client_id,
        redirect_uri: REDIRECT,
        challenge: &challenge,
        resource,
        scope: None,
        state: "st",
    };
    let page = get(&authorize.url(origin));
    let (fields, cookie) = form_fields(&page);
    post_form(
        &format!("{origin}/oauth/login"),
        &[
            ("txn", &fields["txn"]),
            ("csrf", &fields["csrf"]),
            ("username", "mallory"),
            ("password", "not the password"),
        ],
        cookie.as_deref(),
    )
}

#[test]
fn too_many_failed_logins_answer_429_for_a_minute() {
    let gateway = gateway("login_attempts = 2\nlogin_attempts_window = \"10m\"");
    let origin = format!("http://{}", gateway.addr);
    let client_id = register_public(&origin);
    let (_, challenge) = pkce();
    let authorize = Authorize {
        client_id: &client_id,
        redirect_uri: REDIRECT,
        challenge: &challenge,
        resource: &gateway.url(),
        scope: None,
        state: "st",
    };
    let page = get(&authorize.url(&origin));
    let (mut fields, cookie) = form_fields(&page);
    let cookie = cookie.expect("cookie");
    let mut try_password = |password: &str| {
        let answer = post_form(
            &format!("{origin}/oauth/login"),
            &[
                ("txn", &fields["txn"]),
                ("csrf", &fields["csrf"]),
                ("username", USER),
                ("password", password),
            ],
            Some(&cookie),
        );
        fields = form_fields(&answer).0;
        answer
    };
    for attempt in 0..2 {
        let wrong = try_password("not the password");
        assert_eq!(wrong.status, 200, "failure {attempt}");
        assert!(wrong.body.contains("not right"), "{}", wrong.body);
    }
    // Past the limit even the right password is refused, without being checked.
    for password in ["not the password", PASSWORD] {
        let refused = try_password(password);
        assert_eq!(refused.status, 429, "{refused:?}");
        assert!(refused.body.contains("Too many attempts"), "{}", refused.body);
        let retry: u64 = refused
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .expect("Retry-After");
        assert!((1..=60).contains(&retry), "{retry}");
        assert!(refused.content_type_is("text/html"));
    }
    // Another user from the same address is not held back.
    let other = post_form(
        &format!("{origin}/oauth/login"),
        &[
            ("txn", &fields["txn"]),
            ("csrf", &fields["csrf"]),
            ("username", "mallory"),
            ("password", "x"),
        ],
        Some(&cookie),
    );
    assert_eq!(other.status, 200, "{other:?}");
    assert!(other.body.contains("not right"), "{}", other.body);
}

#[test]
fn check_config_names_storage_and_login_mistakes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // (the [auth.server] keys, the key check-config must name)
    let cases = [
        ("storage = \"sqlite\"", "auth.server.sqlite_path"),
        (
            "storage = \"sqlite\"\nsqlite_path = \"/no/such/dir/as.db\"",
            "auth.server.sqlite_path",
        ),
        (
            "storage = \"redis\"",
            "redis: auth.server.storage = \"redis\" needs [redis] url",
        ),
        (
            "storage = \"redis\"\nredis_url = \"http://127.0.0.1:6379\"",
            "auth.server.redis_url",
        ),
        ("login = \"oidc\"", "auth.server.oidc"),
        (
            "login = \"oidc\"\n[auth.server.oidc]\nissuer = \"http://127.0.0.1:1\"\nclient_id = \"eragate\"",
            "auth.server.oidc.client_secret",
        ),
        (
            "login_attempts = 3\nlogin_attempts_window = \"0s\"",
            "auth.server.login_attempts_window",
        ),
    ];
    for (extra, key) in cases {
        let path = dir.path().join("eragate.toml");
        let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
        std::fs::write(&path, format!("[auth.server]\n{extra}\n{upstream}")).expect("write");
        let output = Command::new(env!("CARGO_BIN_EXE_eragate"))
            .arg("check-config")
            .arg(&path)
            .output()
            .expect("check-config");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!output.status.success(), "{extra}: accepted\n{text}");
        assert!(text.contains(key), "{extra}: {key} not named in\n{text}");
    }
}
