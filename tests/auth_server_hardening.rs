//! The built-in authorization server against strangers (issue 34), each against the
//! real binary:
//! - the consent page says where the code goes and marks names nobody verified;
//! - an existing SQLite file others may read is made 0600;
//! - consent to one resource is not consent to another;

#[path = "common/auth_server.rs"]
mod auth_server;
mod common;

use auth_server::*;
use common::*;
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

/// Whether a login answer is the consent page (the password was checked and right).
fn is_consent(reply: &Reply) -> bool {
    reply.status == 200 && reply.body.contains("Allow access?")
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
