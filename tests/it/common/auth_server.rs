//! Driving eragate's built-in authorization server by hand (a 2025-03-26-style
//! client that reads the metadata at the origin, and every refusal): PKCE, the
//! HTML forms with their cookie and CSRF token, the token endpoint.

use std::collections::HashMap;
use std::process::{Command, Stdio};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Eragate, Reply, legacy_stdio_command, stdio_upstream_toml};

pub const USER: &str = "alice";
pub const PASSWORD: &str = "wonderland";
pub const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// The Argon2id hash of `password`, by `eragate hash-password`.
pub fn hash_password(password: &str) -> String {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_eragate"))
        .arg("hash-password")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("eragate hash-password");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{password}\n").as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("hash-password");
    assert!(output.status.success(), "hash-password failed");
    String::from_utf8(output.stdout).expect("utf-8").trim().to_owned()
}

/// `[auth.server]` with `extra` lines (its keys, or `[[auth.server.clients]]` tables), and alice.
pub fn server_toml(extra: &str) -> String {
    format!(
        "[auth.server]\n{extra}\n[[auth.server.users]]\nname = \"{USER}\"\npassword_argon2 = \"{}\"\n",
        hash_password(PASSWORD)
    )
}

/// eragate with `server_toml(extra)` in front of the legacy stdio fixture.
pub fn gateway(extra: &str) -> Eragate {
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    Eragate::start(&format!("{}\n{upstream}", server_toml(extra)))
}

/// A client without redirects, for seeing every step.
pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .expect("client")
}

fn reply(response: reqwest::blocking::Response) -> Reply {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.text().unwrap_or_default();
    Reply { status, headers, body }
}

/// GET `url`.
pub fn get(url: &str) -> Reply {
    reply(client().get(url).send().expect("GET"))
}

/// POST a form to `url`, with a `cookie` header when given.
pub fn post_form(url: &str, form: &[(&str, &str)], cookie: Option<&str>) -> Reply {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let mut request = client()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    reply(request.send().expect("POST"))
}

/// POST JSON to `url`.
pub fn post_json(url: &str, body: &Value) -> Reply {
    reply(
        client()
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .expect("POST"),
    )
}

/// A PKCE verifier and its S256 challenge.
pub fn pkce() -> (String, String) {
    let verifier = URL_SAFE_NO_PAD.encode(rand_bytes());
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

fn rand_bytes() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_nanos();
    let digest = Sha256::digest(format!("{nanos}-{:?}", std::thread::current().id()).as_bytes());
    bytes.copy_from_slice(&digest);
    bytes
}

/// The query parameters of a `Location`.
pub fn location_params(reply: &Reply) -> HashMap<String, String> {
    let location = reply
        .header("location")
        .unwrap_or_else(|| panic!("no Location: {reply:?}"));
    let url = url::Url::parse(location).expect("location URL");
    url.query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// The hidden inputs of a page's form, and the `eragate_txn` cookie it set.
pub fn form_fields(reply: &Reply) -> (HashMap<String, String>, Option<String>) {
    let mut fields = HashMap::new();
    for input in reply.body.split("<input").skip(1) {
        let attr = |name: &str| {
            let start = input.find(&format!("{name}=\""))? + name.len() + 2;
            let end = input[start..].find('"')? + start;
            Some(input[start..end].to_owned())
        };
        if let (Some(name), Some(value)) = (attr("name"), attr("value")) {
            fields.insert(name, value);
        }
    }
    let cookie = reply
        .headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("eragate_txn="))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned);
    (fields, cookie)
}

/// One authorization request's parts.
pub struct Authorize<'a> {
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub challenge: &'a str,
    pub resource: &'a str,
    pub scope: Option<&'a str>,
    pub state: &'a str,
}

impl Authorize<'_> {
    /// The `/oauth/authorize` URL at `origin`.
    pub fn url(&self, origin: &str) -> String {
        let mut url = url::Url::parse(&format!("{origin}/oauth/authorize")).expect("url");
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", self.client_id)
            .append_pair("redirect_uri", self.redirect_uri)
            .append_pair("code_challenge", self.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", self.resource)
            .append_pair("state", self.state);
        if let Some(scope) = self.scope {
            url.query_pairs_mut().append_pair("scope", scope);
        }
        url.to_string()
    }
}

/// Logs in as alice and allows (if asked): the final redirect to the client.
pub fn log_in_and_allow(origin: &str, authorize_url: &str) -> Reply {
    log_in_and_decide(origin, authorize_url, "allow")
}

/// Logs in as alice and answers the consent page with `decision` (`allow` or
/// `deny`): the final redirect to the client, or the login's answer if it failed.
pub fn log_in_and_decide(origin: &str, authorize_url: &str, decision: &str) -> Reply {
    let page = get(authorize_url);
    assert_eq!(page.status, 200, "the login page: {page:?}");
    let (fields, cookie) = form_fields(&page);
    let cookie = cookie.expect("the transaction cookie");
    let login = post_form(
        &format!("{origin}/oauth/login"),
        &[
            ("txn", &fields["txn"]),
            ("csrf", &fields["csrf"]),
            ("username", USER),
            ("password", PASSWORD),
        ],
        Some(&cookie),
    );
    if login.status != 200 {
        return login;
    }
    let (fields, _) = form_fields(&login);
    assert!(login.body.contains("Allow access?"), "the consent page: {}", login.body);
    post_form(
        &format!("{origin}/oauth/consent"),
        &[
            ("txn", &fields["txn"]),
            ("csrf", &fields["csrf"]),
            ("decision", decision),
        ],
        Some(&cookie),
    )
}

/// Registers a public native client redirecting to [`REDIRECT`]: its `client_id`.
pub fn register_public(origin: &str) -> String {
    let registered = post_json(
        &format!("{origin}/oauth/register"),
        &serde_json::json!({
            "redirect_uris": [REDIRECT],
            "application_type": "native",
            "token_endpoint_auth_method": "none",
            "client_name": "hand-driven client",
        }),
    );
    assert_eq!(registered.status, 201, "{registered:?}");
    registered.json()["client_id"].as_str().expect("client_id").to_owned()
}

/// Exchanges a code: the token response.
pub fn exchange(origin: &str, client_id: &str, code: &str, verifier: &str) -> Reply {
    post_form(
        &format!("{origin}/oauth/token"),
        &[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier),
        ],
        None,
    )
}

/// Refreshes: the token response.
pub fn refresh(origin: &str, client_id: &str, refresh_token: &str) -> Reply {
    post_form(
        &format!("{origin}/oauth/token"),
        &[
            ("grant_type", "refresh_token"),
            ("client_id", client_id),
            ("refresh_token", refresh_token),
        ],
        None,
    )
}

/// The whole flow for a public client: the code's redirect parameters, the verifier.
pub fn code_for(origin: &str, client_id: &str, resource: &str) -> (HashMap<String, String>, String) {
    let (verifier, challenge) = pkce();
    let authorize = Authorize {
        client_id,
        redirect_uri: REDIRECT,
        challenge: &challenge,
        resource,
        scope: None,
        state: "st-1",
    };
    let done = log_in_and_allow(origin, &authorize.url(origin));
    assert_eq!(done.status, 303, "{done:?}");
    (location_params(&done), verifier)
}
