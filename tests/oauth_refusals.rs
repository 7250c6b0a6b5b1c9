//! OAuth refusals, against the real authorization server (oidc-provider) and eragate as
//! its protected resource in front of the legacy stdio fixture. Every refusal of a request
//! without an acceptable token is a 401 whose `WWW-Authenticate` names the same
//! `resource_metadata`: no `error` without credentials (RFC 6750 §3.1), `invalid_token`
//! for garbage, an expired token, a forged signature, `alg: none`, HMAC keyed with the
//! issuer's public key, another issuer, another audience, and `invalid_request` for a token
//! in the query string, and for two `Authorization` headers. A token without the required
//! scope gets 403 `insufficient_scope`
//! naming the scope (step-up).

mod common;
#[path = "common/oauth.rs"]
mod oauth;

use std::time::Duration;

use common::*;
use oauth::*;
use serde_json::json;

#[test]
fn every_refusal_names_the_resource_metadata() {
    let idp = Idp::start();
    let other_idp = Idp::start();
    let gateway = gateway_for(&idp.issuer, "");
    let url = gateway.url();
    let metadata = format!("http://{}/.well-known/oauth-protected-resource/mcp", gateway.addr);

    // The baseline: a good token gets through, as the principal issuer#tester.
    let good = idp.token("tester", &url, "mcp:read");
    let reply = call_as(&url, &good, "through");
    assert_eq!(reply.status, 200, "{reply:?}\n{}", gateway.log());
    assert_eq!(tool_text(&answer(&reply, 1)["result"]), "echo: through");

    let (header, claims, signature) = split_jwt(&good);
    let short = idp.token("short-lived", &url, "mcp:read");
    let mut tampered = claims.clone();
    tampered["sub"] = json!("mallory");
    let forged = join_jwt(&header, &tampered, &signature);
    let unsigned = join_jwt(
        &json!({"alg": "none", "typ": "at+jwt", "kid": header["kid"]}),
        &claims,
        "",
    );
    let jwks = send("GET", &format!("{}/jwks", idp.issuer), &[], None).body;
    let hmac = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: header["kid"].as_str().map(str::to_owned),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(jwks.as_bytes()).expect("hmac key"),
    )
    .expect("hmac token");
    let foreign = other_idp.token("tester", &url, "mcp:read");
    let elsewhere = idp.token("tester", "http://127.0.0.1:1/mcp", "mcp:read");
    std::thread::sleep(Duration::from_millis(2100)); // `short` expires (leeway 0 s)

    let bearer = |t: &str| format!("Bearer {t}");
    // (case, Authorization, error, a word of its error_description)
    let cases: Vec<(&str, Option<String>, Option<&str>, &str)> = vec![
        ("no token", None, None, ""),
        ("garbage", Some(bearer("not-a-jwt")), Some("invalid_token"), "not a JWT"),
        (
            "another scheme",
            Some(format!("Basic {good}")),
            Some("invalid_token"),
            "bearer",
        ),
        ("expired", Some(bearer(&short)), Some("invalid_token"), "expired"),
        (
            "forged signature",
            Some(bearer(&forged)),
            Some("invalid_token"),
            "signature is invalid",
        ),
        ("alg none", Some(bearer(&unsigned)), Some("invalid_token"), "algorithm"),
        (
            "hmac with the public key",
            Some(bearer(&hmac)),
            Some("invalid_token"),
            "algorithm",
        ),
        // Its key id is not the issuer's: refetched, still unknown.
        (
            "another issuer",
            Some(bearer(&foreign)),
            Some("invalid_token"),
            "unknown key",
        ),
        (
            "another audience",
            Some(bearer(&elsewhere)),
            Some("invalid_token"),
            "another resource",
        ),
    ];
    for (case, authorization, error, why) in &cases {
        let reply = call_with(&url, authorization.as_deref(), "refused");
        assert_eq!(reply.status, 401, "{case}: {reply:?}");
        assert_eq!(
            challenge(&reply),
            (Some(metadata.clone()), error.map(str::to_owned)),
            "{case}: {reply:?}"
        );
        let value = reply.header("www-authenticate").unwrap_or_default();
        assert!(value.contains(r#"scope="mcp:read""#), "{case}: {reply:?}");
        assert!(value.contains(why), "{case}: {value}");
        if error.is_none() {
            assert!(!value.contains("error"), "{case}: {value}");
        }
    }

    // A token in the query string is refused, with or without one in the header.
    for header in [None, Some(bearer(&good))] {
        let query_url = format!("{url}?access_token={good}");
        let reply = call_with(&query_url, header.as_deref(), "query");
        assert_eq!(reply.status, 401, "{reply:?}");
        assert_eq!(
            challenge(&reply),
            (Some(metadata.clone()), Some("invalid_request".into()))
        );
    }

    // Two Authorization headers, even both good: no credential is picked.
    let good_header = bearer(&good);
    let mut headers = modern_headers("tools/call", Some("echo"));
    headers.extend([
        ("authorization", good_header.as_str()),
        ("authorization", good_header.as_str()),
    ]);
    let body = modern_body(1, "tools/call", json!({"name": "echo", "arguments": {"text": "two"}}));
    let reply = send("POST", &url, &headers, Some(&body));
    assert_eq!(reply.status, 401, "{reply:?}");
    assert_eq!(
        challenge(&reply),
        (Some(metadata.clone()), Some("invalid_token".into()))
    );

    // A good token without the required scope: 403 with what to ask for.
    let narrow = idp.token("tester", &url, "mcp:write");
    let reply = call_as(&url, &narrow, "narrow");
    assert_eq!(reply.status, 403, "{reply:?}");
    assert_eq!(
        challenge(&reply),
        (Some(metadata.clone()), Some("insufficient_scope".into()))
    );
    assert!(
        reply
            .header("www-authenticate")
            .unwrap_or_default()
            .contains(r#"scope="mcp:read""#)
    );

    // Still fine for the good token afterwards.
    assert_eq!(call_as(&url, &good, "again").status, 200);
}
