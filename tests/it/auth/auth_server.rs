//! eragate's built-in authorization server (`[auth.server]`, `--auth-server local`):
//! the Python SDK's OAuth client (`mcp` 2.3.0) doing the whole flow against it with
//! dynamic registration and with a static client, then calling a tool through
//! eragate; a 2025-03-26-style client that knows only the metadata at the origin;
//! the metadata, JWKS and minted tokens; and every refusal with the RFC's error code.

use crate::common;
use crate::common::auth_server;
use crate::common::oauth;

use std::process::Stdio;

use auth_server::*;
use common::*;
use oauth::{call_as, split_jwt};
use serde_json::{Value, json};
use sha2::Digest;

fn py_oauth_client(args: &[&str]) -> Result<Value, String> {
    let peers = peers();
    run_driver(peers.python(), &peers.script("py_oauth_client.py"), args)
}

fn origin(gateway: &Eragate) -> String {
    format!("http://{}", gateway.addr)
}

#[test]
fn python_sdk_registers_logs_in_and_calls_a_tool_with_the_one_line_start() {
    // eragate run --stdio CMD --auth-server local --public-url URL --user NAME:HASH
    let port = free_port();
    let public = format!("http://127.0.0.1:{port}");
    let command = shell_words::join(legacy_stdio_command());
    let user = format!("{USER}:{}", hash_password(PASSWORD));
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("eragate.log");
    let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_eragate"));
    run.args(["run", "--listen", &format!("127.0.0.1:{port}"), "--stdio", &command])
        .args(["--auth-server", "local", "--public-url", &public, "--user", &user])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"));
    let _proc = Proc::spawn("eragate", &mut run);
    let log = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        listening(("127.0.0.1", port), std::time::Duration::from_secs(20)),
        "{}",
        log()
    );
    let url = format!("{public}/mcp");
    let out = py_oauth_client(&["--url", &url, "--login", &format!("{USER}:{PASSWORD}")])
        .unwrap_or_else(|e| panic!("{e}\n{}", log()));
    assert_eq!(out["text"], "echo: hello through oauth", "{out}");
    assert_eq!(out["pages"], json!(["login", "consent"]), "{out}");
    let requests: Vec<&str> = out["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        requests.contains(&format!("POST {public}/oauth/register").as_str()),
        "registered dynamically: {requests:?}"
    );
    let (header, claims, _) = split_jwt(out["access_token"].as_str().expect("token"));
    assert_eq!(header["typ"], "at+jwt");
    assert_eq!(header["alg"], "EdDSA");
    assert_eq!(claims["iss"], public.as_str());
    assert_eq!(claims["aud"], url.as_str());
    assert_eq!(claims["sub"], USER);
    assert_eq!(claims["client_id"], out["client_id"]);
}

#[test]
fn gap_static_clients_public_and_confidential() {
    let secret = "a-confidential-secret";
    let digest = hex(&sha2::Sha256::digest(secret.as_bytes()));
    let gateway = gateway(&format!(
        "[[auth.server.clients]]\nclient_id = \"public-app\"\nredirect_uris = [\"http://127.0.0.1/callback\"]\n\
         [[auth.server.clients]]\nclient_id = \"private-app\"\nredirect_uris = [\"{REDIRECT}\"]\nsecret_sha256 = \"{digest}\"\n"
    ));
    let login = format!("{USER}:{PASSWORD}");
    // A loopback redirect registered without a port matches any port (RFC 8252 §7.3).
    let public = py_oauth_client(&["--url", &gateway.url(), "--login", &login, "--client-id", "public-app"])
        .unwrap_or_else(|e| panic!("{e}\n{}", gateway.log()));
    assert_eq!(public["text"], "echo: hello through oauth");
    let private = py_oauth_client(&[
        "--url",
        &gateway.url(),
        "--login",
        &login,
        "--client-id",
        "private-app",
        "--client-secret",
        secret,
    ])
    .unwrap_or_else(|e| panic!("{e}\n{}", gateway.log()));
    assert_eq!(private["text"], "echo: hello through oauth");
    for out in [&public, &private] {
        let requests = out["requests"].to_string();
        assert!(!requests.contains("/oauth/register"), "no registration: {requests}");
    }
    // A confidential client's code is worthless without its secret.
    let origin = origin(&gateway);
    let (params, verifier) = code_for(&origin, "private-app", &gateway.url());
    let refused = exchange(&origin, "private-app", &params["code"], &verifier);
    assert_eq!(
        (refused.status, refused.json()["error"].clone()),
        (401, json!("invalid_client"))
    );
}

#[test]
fn a_2025_03_26_client_finds_the_metadata_at_the_origin_and_gets_a_working_token() {
    let gateway = gateway("");
    let origin = origin(&gateway);
    let metadata = get(&format!("{origin}/.well-known/oauth-authorization-server"));
    assert_eq!(metadata.status, 200);
    let metadata = metadata.json();
    assert_eq!(
        metadata["issuer"],
        origin.as_str(),
        "byte-identical to the URL it is served from"
    );
    assert_eq!(metadata["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(metadata["authorization_response_iss_parameter_supported"], true);
    assert_eq!(metadata["client_id_metadata_document_supported"], true);
    let openid = get(&format!("{origin}/.well-known/openid-configuration")).json();
    assert_eq!(openid["issuer"], metadata["issuer"]);
    let prm = get(&format!("{origin}/.well-known/oauth-protected-resource/mcp")).json();
    assert_eq!(prm["authorization_servers"], json!([origin]), "eragate names itself");
    let jwks = get(metadata["jwks_uri"].as_str().expect("jwks_uri")).json();
    assert_eq!(jwks["keys"][0]["kty"], "OKP");

    let client_id = register_public(&origin);
    let (params, verifier) = code_for(&origin, &client_id, &gateway.url());
    assert_eq!(params["state"], "st-1");
    assert_eq!(params["iss"], origin.as_str());
    let tokens = exchange(&origin, &client_id, &params["code"], &verifier);
    assert_eq!(tokens.status, 200, "{tokens:?}");
    assert_eq!(tokens.header("cache-control"), Some("no-store"));
    let token = tokens.json()["access_token"].as_str().expect("token").to_owned();
    let (header, _, _) = split_jwt(&token);
    assert!(
        jwks["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .any(|k| k["kid"] == header["kid"]),
        "signed by a published key"
    );
    let called = call_as(&gateway.url(), &token, "through the built-in server");
    assert_eq!(called.status, 200, "{called:?}\n{}", gateway.log());
    // Without a token: the challenge names eragate's own metadata.
    let refused = oauth::call_with(&gateway.url(), None, "x");
    assert_eq!(refused.status, 401);
}

#[test]
fn gap_rfc9207_iss_on_every_authorization_response_errors_included() {
    let gateway = gateway("");
    let origin = origin(&gateway);
    let client_id = register_public(&origin);
    let (_, challenge) = pkce();
    let mut authorize = Authorize {
        client_id: &client_id,
        redirect_uri: REDIRECT,
        challenge: &challenge,
        resource: "http://127.0.0.1:1/elsewhere",
        scope: None,
        state: "s-err",
    };
    // A resource eragate does not serve (RFC 8707 §2): invalid_target, by redirect.
    let refused = get(&authorize.url(&origin));
    assert_eq!(refused.status, 302, "{refused:?}");
    let params = location_params(&refused);
    assert_eq!(params["error"], "invalid_target");
    assert_eq!(params["state"], "s-err");
    assert_eq!(params["iss"], origin.as_str());
    // Access denied on the consent page: still iss.
    let resource = gateway.url();
    authorize.resource = &resource;
    let denied = log_in_and_decide(&origin, &authorize.url(&origin), "deny");
    let params = location_params(&denied);
    assert_eq!(
        (
            params["error"].as_str(),
            params["state"].as_str(),
            params["iss"].as_str()
        ),
        ("access_denied", "s-err", origin.as_str())
    );
}

#[test]
fn refusals_carry_the_rfc_error_codes() {
    let gateway = gateway("code_lifetime = \"1s\"");
    let origin = origin(&gateway);
    let resource = gateway.url();
    let client_id = register_public(&origin);
    let (verifier, challenge) = pkce();
    let good = Authorize {
        client_id: &client_id,
        redirect_uri: REDIRECT,
        challenge: &challenge,
        resource: &resource,
        scope: None,
        state: "s",
    };
    // Wrong redirect URI: an error page, never a redirect (RFC 6749 §4.1.2.1).
    let wrong = Authorize {
        redirect_uri: "http://127.0.0.1:9/elsewhere",
        ..good
    };
    let page = get(&wrong.url(&origin));
    assert_eq!((page.status, page.header("location")), (400, None));
    // No PKCE: invalid_request by redirect.
    let no_pkce = good
        .url(&origin)
        .replace("code_challenge_method=S256", "code_challenge_method=plain");
    assert_eq!(location_params(&get(&no_pkce))["error"], "invalid_request");
    // A wrong login shows the form again, with no redirect.
    let page = get(&good.url(&origin));
    let (fields, cookie) = form_fields(&page);
    let wrong_password = post_form(
        &format!("{origin}/oauth/login"),
        &[
            ("txn", &fields["txn"]),
            ("csrf", &fields["csrf"]),
            ("username", USER),
            ("password", "nope"),
        ],
        cookie.as_deref(),
    );
    assert_eq!(wrong_password.status, 200);
    assert!(
        wrong_password.body.contains("role=\"alert\""),
        "{}",
        wrong_password.body
    );
    // A forged form (no cookie, or a stale CSRF token) is refused.
    let forged = post_form(
        &format!("{origin}/oauth/login"),
        &[
            ("txn", &fields["txn"]),
            ("csrf", &fields["csrf"]),
            ("username", USER),
            ("password", PASSWORD),
        ],
        None,
    );
    assert_eq!(forged.status, 400);

    // Wrong and missing PKCE verifiers: invalid_grant (RFC 7636 §4.6).
    let done = log_in_and_allow(&origin, &good.url(&origin));
    let code = location_params(&done)["code"].clone();
    let (other_verifier, _) = pkce();
    let refused = exchange(&origin, &client_id, &code, &other_verifier);
    assert_eq!(
        (refused.status, refused.json()["error"].clone()),
        (400, json!("invalid_grant"))
    );
    // The code was spent by that attempt: single use.
    let refused = exchange(&origin, &client_id, &code, &verifier);
    assert_eq!(refused.json()["error"], "invalid_grant");

    // Code reuse revokes what the code produced.
    let (params, verifier) = code_for(&origin, &client_id, &resource);
    let first = exchange(&origin, &client_id, &params["code"], &verifier);
    assert_eq!(first.status, 200, "{first:?}");
    let refresh_token = first.json()["refresh_token"].as_str().expect("refresh").to_owned();
    let again = exchange(&origin, &client_id, &params["code"], &verifier);
    assert_eq!(again.json()["error"], "invalid_grant");
    let dead = refresh(&origin, &client_id, &refresh_token);
    assert_eq!(
        dead.json()["error"],
        "invalid_grant",
        "the family died with the reused code"
    );

    // Refresh-token reuse revokes the whole family (OAuth 2.1 §4.3.1).
    let (params, verifier) = code_for(&origin, &client_id, &resource);
    let first = exchange(&origin, &client_id, &params["code"], &verifier).json();
    let r1 = first["refresh_token"].as_str().expect("r1").to_owned();
    let second = refresh(&origin, &client_id, &r1);
    assert_eq!(second.status, 200, "{second:?}");
    let r2 = second.json()["refresh_token"].as_str().expect("r2").to_owned();
    assert_ne!(r1, r2, "rotated");
    assert_eq!(refresh(&origin, &client_id, &r1).json()["error"], "invalid_grant");
    assert_eq!(
        refresh(&origin, &client_id, &r2).json()["error"],
        "invalid_grant",
        "the newer token of the family is revoked too"
    );

    // Revocation (RFC 7009): 200, and the refresh token is dead.
    let (params, verifier) = code_for(&origin, &client_id, &resource);
    let r = exchange(&origin, &client_id, &params["code"], &verifier).json()["refresh_token"]
        .as_str()
        .expect("refresh")
        .to_owned();
    let revoked = post_form(
        &format!("{origin}/oauth/revoke"),
        &[("token", &r), ("client_id", &client_id)],
        None,
    );
    assert_eq!(revoked.status, 200);
    assert_eq!(refresh(&origin, &client_id, &r).json()["error"], "invalid_grant");

    // An expired code (code_lifetime 1 s).
    let (params, verifier) = code_for(&origin, &client_id, &resource);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let expired = exchange(&origin, &client_id, &params["code"], &verifier);
    assert_eq!(expired.json()["error"], "invalid_grant", "{expired:?}");

    // Other grants and response types.
    let implicit = good.url(&origin).replace("response_type=code", "response_type=token");
    assert_eq!(location_params(&get(&implicit))["error"], "unsupported_response_type");
    let password = post_form(
        &format!("{origin}/oauth/token"),
        &[
            ("grant_type", "password"),
            ("client_id", &client_id),
            ("username", USER),
            ("password", PASSWORD),
        ],
        None,
    );
    assert_eq!(password.json()["error"], "unsupported_grant_type");
}

#[test]
fn gap_application_type_on_registration() {
    // Seven registrations from one address in a minute.
    let gateway = gateway("registrations_per_minute_per_ip = 20");
    let register = |body: Value| post_json(&format!("{}/oauth/register", origin(&gateway)), &body);
    let cases = [
        (
            json!({"redirect_uris": ["http://127.0.0.1:3000/cb"], "application_type": "native"}),
            201,
            None,
        ),
        (
            json!({"redirect_uris": ["com.example.app:/cb"], "application_type": "native"}),
            201,
            None,
        ),
        (json!({"redirect_uris": ["https://app.example.com/cb"]}), 201, None),
        (
            json!({"redirect_uris": ["http://127.0.0.1:3000/cb"], "application_type": "web"}),
            400,
            Some("invalid_redirect_uri"),
        ),
        (
            json!({"redirect_uris": ["https://app.example.com/cb"], "application_type": "native"}),
            400,
            Some("invalid_redirect_uri"),
        ),
        (
            json!({"redirect_uris": ["http://127.0.0.1/cb"], "application_type": "desktop"}),
            400,
            Some("invalid_client_metadata"),
        ),
        (json!({"application_type": "native"}), 400, Some("invalid_redirect_uri")),
    ];
    for (body, status, error) in cases {
        let reply = register(body.clone());
        assert_eq!(reply.status, status, "{body}: {reply:?}");
        match error {
            Some(error) => assert_eq!(reply.json()["error"], error, "{body}"),
            None => {
                let registered = reply.json();
                let kind = body.get("application_type").cloned().unwrap_or(json!("web"));
                assert_eq!(registered["application_type"], kind, "echoed: {registered}");
                assert_eq!(registered["redirect_uris"], body["redirect_uris"], "echoed");
                assert!(registered["client_id"].is_string());
            }
        }
    }
}

#[test]
fn registrations_are_rate_limited() {
    let gateway = gateway("registrations_per_minute = 2");
    let body = json!({"redirect_uris": [REDIRECT], "application_type": "native", "token_endpoint_auth_method": "none"});
    let url = format!("{}/oauth/register", origin(&gateway));
    let statuses: Vec<u16> = (0..4).map(|_| post_json(&url, &body).status).collect();
    // Two per minute; a minute boundary between the calls may let a third through.
    assert!(statuses.contains(&429), "{statuses:?}");
    assert_eq!(statuses[0], 201);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn check_config_names_every_auth_server_mistake() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("eragate.toml");
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "path = \"/oauth/mcp\"", "");
    std::fs::write(
        &path,
        format!(
            "[auth.server]\nissuer = \"http://auth.example.com\"\ncode_lifetime = \"1h\"\n\
             [[auth.server.users]]\nname = \"bob\"\npassword_argon2 = \"hunter2\"\n\
             [[auth.server.clients]]\nclient_id = \"c\"\nredirect_uris = []\nsecret_sha256 = \"abc\"\n{upstream}"
        ),
    )
    .expect("write");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_eragate"))
        .arg("check-config")
        .arg(&path)
        .output()
        .expect("check-config");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    for key in [
        "auth.server.issuer",
        "auth.server.code_lifetime",
        "auth.server.users[0].password_argon2",
        "auth.server.clients[0].redirect_uris",
        "auth.server.clients[0].secret_sha256",
        "upstreams[0].path",
    ] {
        assert!(stderr.contains(&format!("  {key}:")), "{key} missing from:\n{stderr}");
    }
    // --user without --auth-server is refused too.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_eragate"))
        .args(["run", "--stdio", "true", "--user", "alice:$argon2id$x"])
        .output()
        .expect("run");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--user"));
}

#[test]
fn gap_credentials_keyed_by_issuer() {
    // Two eragates, two issuers, the same user name: what one issues the other refuses.
    let first = gateway("");
    let second = gateway("");
    let (origin_a, origin_b) = (origin(&first), origin(&second));
    let client_a = register_public(&origin_a);
    let (params, verifier) = code_for(&origin_a, &client_a, &first.url());
    let tokens = exchange(&origin_a, &client_a, &params["code"], &verifier).json();
    let access = tokens["access_token"].as_str().expect("access");
    let (_, claims, _) = split_jwt(access);
    assert_eq!(claims["iss"], origin_a.as_str());
    assert_eq!(call_as(&first.url(), access, "a").status, 200);
    let refused = call_as(&second.url(), access, "b");
    assert_eq!(refused.status, 401, "another issuer's token: {refused:?}");
    assert_eq!(oauth::challenge(&refused).1.as_deref(), Some("invalid_token"));
    // Neither the client nor the refresh token exist at the other issuer.
    let refresh_a = tokens["refresh_token"].as_str().expect("refresh");
    let elsewhere = refresh(&origin_b, &client_a, refresh_a);
    assert_eq!(
        (elsewhere.status, elsewhere.json()["error"].clone()),
        (401, json!("invalid_client"))
    );
    let client_b = register_public(&origin_b);
    let elsewhere = refresh(&origin_b, &client_b, refresh_a);
    assert_eq!(elsewhere.json()["error"], "invalid_grant");
}
