//! Brokered login (`[auth.server] login = "oidc"`): eragate's authorization server
//! sends users to a real OpenID provider (oidc-provider 9.13.3, `tests/peers/
//! oidc_provider.mjs`, which signs every user in as `--account`), where eragate is a
//! confidential client registered by the test; the Python SDK's OAuth client (`mcp`
//! 2.3.0) does the whole flow through it (DCR at eragate, the provider's redirects,
//! eragate's consent page) and calls a tool as the provider's user. Refusals: a
//! callback without its browser's cookie or with another `state`, the local login
//! form while brokering.

use crate::common;
use crate::common::auth_server;
use crate::common::oauth;

use std::net::SocketAddr;

use auth_server::*;
use common::*;
use oauth::{Idp, split_jwt};
use serde_json::{Value, json};

fn py_oauth_client(args: &[&str]) -> Result<Value, String> {
    let peers = peers();
    run_driver(peers.python(), &peers.script("py_oauth_client.py"), args)
}

const SECRET_ENV: &str = "ERAGATE_TEST_OIDC_CLIENT_SECRET";

/// eragate at a free address, brokering to `idp` as a client the test registered there.
fn brokering_gateway(idp: &Idp) -> Eragate {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let discovery = get(&format!("{}/.well-known/openid-configuration", idp.plain)).json();
    let registration = discovery["registration_endpoint"]
        .as_str()
        .expect("registration_endpoint");
    let registered = post_json(
        registration,
        &json!({
            "redirect_uris": [format!("http://{addr}/oauth/callback")],
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_basic",
            "client_name": "eragate",
        }),
    );
    assert_eq!(registered.status, 201, "{registered:?}");
    let registered = registered.json();
    let client_id = registered["client_id"].as_str().expect("client_id");
    let secret = registered["client_secret"].as_str().expect("client_secret");
    let upstream = stdio_upstream_toml(&legacy_stdio_command(), "", "");
    let config = format!(
        "[auth.server]\nlogin = \"oidc\"\n[auth.server.oidc]\nissuer = \"{}\"\nclient_id = \"{client_id}\"\n\
         client_secret_env = \"{SECRET_ENV}\"\n{upstream}",
        idp.issuer
    );
    Eragate::start_at(addr, &config, &[], &[(SECRET_ENV, secret)])
}

#[test]
fn python_sdk_signs_in_through_a_real_openid_provider_and_calls_a_tool() {
    let idp = Idp::start_with(0, &["--account", "bob"]);
    let gateway = brokering_gateway(&idp);
    // --login: the SDK's headless browser fills in the forms it meets (here, only the consent).
    let out = py_oauth_client(&["--url", &gateway.url(), "--login", "unused:unused"])
        .unwrap_or_else(|e| panic!("{e}\n{}", gateway.log()));
    assert_eq!(out["text"], "echo: hello through oauth", "{out}");
    assert_eq!(
        out["pages"],
        json!(["consent"]),
        "no local login form; consent is asked: {out}"
    );
    let token = out["access_token"].as_str().expect("access_token");
    let (header, claims, _) = split_jwt(token);
    assert_eq!(header["typ"], "at+jwt");
    assert_eq!(claims["sub"], "bob", "the provider's user is the principal: {claims}");
    assert_eq!(claims["iss"], format!("http://{}", gateway.addr));
    assert_eq!(claims["aud"], gateway.url());
    assert!(
        gateway.log().contains("signed in at the identity provider"),
        "{}",
        gateway.log()
    );
}

#[test]
fn callbacks_that_are_not_the_browsers_own_are_refused() {
    let idp = Idp::start_with(0, &["--account", "bob"]);
    let gateway = brokering_gateway(&idp);
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
    // The authorization request goes to the provider, with PKCE, a nonce and a state.
    let sent = get(&authorize.url(&origin));
    assert_eq!(sent.status, 302, "{sent:?}\n{}", gateway.log());
    let to_provider = url::Url::parse(sent.header("location").expect("location")).expect("url");
    assert!(to_provider.as_str().starts_with(&idp.issuer), "{to_provider}");
    let query: std::collections::HashMap<String, String> = to_provider.query_pairs().into_owned().collect();
    assert_eq!(query["response_type"], "code");
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["redirect_uri"], format!("{origin}/oauth/callback"));
    assert!(query["scope"].split(' ').any(|s| s == "openid"));
    assert!(!query["nonce"].is_empty() && !query["state"].is_empty());
    let (_, cookie) = form_fields(&sent);
    let cookie = cookie.expect("the transaction cookie");
    let callback = |state: &str, cookie: Option<&str>| {
        let url = format!("{origin}/oauth/callback?code=forged&state={state}&iss={}", idp.issuer);
        let mut request = client().get(url);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        request.send().expect("callback")
    };
    // Without the browser's cookie, or with another state: an error page, no redirect.
    for (state, cookie) in [(query["state"].as_str(), None), ("another", Some(cookie.as_str()))] {
        let refused = callback(state, cookie);
        assert_eq!(refused.status(), 400, "state {state}, cookie {cookie:?}");
        assert!(refused.headers().get("location").is_none());
    }
    // The right state and cookie, but a code the provider never issued: access_denied
    // to the client, with its state and eragate's iss (RFC 9207).
    let denied = callback(&query["state"], Some(&cookie));
    assert_eq!(denied.status(), 303);
    let location = url::Url::parse(denied.headers()["location"].to_str().expect("location")).expect("url");
    let params: std::collections::HashMap<String, String> = location.query_pairs().into_owned().collect();
    assert_eq!(params["error"], "access_denied");
    assert_eq!(params["state"], "st");
    assert_eq!(params["iss"], origin);
    // The callback is single-use.
    assert_eq!(callback(&query["state"], Some(&cookie)).status(), 400);
    // The local login form is off while brokering.
    let login = post_form(
        &format!("{origin}/oauth/login"),
        &[("username", USER), ("password", PASSWORD)],
        None,
    );
    assert_eq!(login.status, 400);
}
