//! OAuth refusals, against the real authorization server (oidc-provider) and eragate as
//! its protected resource in front of the legacy stdio fixture. Every refusal of a request
//! without an acceptable token is a 401 whose `WWW-Authenticate` names the same
//! `resource_metadata`: no `error` without credentials (RFC 6750 §3.1), `invalid_token`
//! for garbage, an expired token, a forged signature, `alg: none`, HMAC keyed with the
//! issuer's public key, a JWT typed `JWT` rather than `at+jwt`, another issuer (signed with
//! the issuer's own key, and with its own), another audience, and `invalid_request` for a token
//! in the query string, and for two `Authorization` headers. A token without the required
//! scope gets 403 `insufficient_scope`
//! naming the scope (step-up).

use crate::common;
use crate::common::oauth;

use std::time::Duration;

use common::*;
use oauth::*;
use serde_json::json;

#[test]
fn every_refusal_names_the_resource_metadata() {
    // The issuer signs with a key this test knows, and `twin` signs with the same key
    // under another issuer name: its tokens pass the signature check and are refused
    // on `iss` alone.
    let keys = tempfile::tempdir().expect("tempdir");
    let key_file = keys.path().join("signing-key.json").display().to_string();
    std::fs::write(&key_file, TEST_KEY.jwk().to_string()).expect("key file");
    let idp = Idp::start_with(0, &["--key-file", &key_file, "--alg", "EdDSA"]);
    let twin = Idp::start_with(0, &["--key-file", &key_file, "--alg", "EdDSA"]);
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
    let twins = twin.token("tester", &url, "mcp:read");
    // The issuer's own signature over its own claims, but typed `JWT`, as an ID token is.
    let untyped = TEST_KEY.sign(&json!({"alg": "EdDSA", "typ": "JWT", "kid": header["kid"]}), &claims);
    assert_eq!(
        split_jwt(&twins).0["kid"],
        header["kid"],
        "the twin signs with the same key"
    );
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
        (
            "typ JWT, not at+jwt",
            Some(bearer(&untyped)),
            Some("invalid_token"),
            "not an access token",
        ),
        // Signed with the issuer's own key, but `iss` names the twin.
        (
            "another issuer, the same key",
            Some(bearer(&twins)),
            Some("invalid_token"),
            "another authorization server",
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

/// The issuer's signing key in these tests: a throwaway Ed25519 key (PKCS#8 DER) and its
/// public `x`, known to the test so that it can sign what the issuer would not.
struct TestKey {
    pkcs8: &'static str,
    x: &'static str,
}

const TEST_KEY: TestKey = TestKey {
    pkcs8: "MC4CAQAwBQYDK2VwBCIEIEhILlLYsKGjJiVazweUD+EE3oFwksdyhsRU0Gf9+ERR",
    x: "qBq9P-N4fTIEdXqgTUHu4bUyD1l-VD459F_nGNipVwI",
};

impl TestKey {
    fn der(&self) -> Vec<u8> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(self.pkcs8)
            .expect("pkcs8")
    }

    /// The private JWK oidc_provider.mjs signs with (`--key-file`).
    fn jwk(&self) -> serde_json::Value {
        use base64::Engine;
        let der = self.der();
        let seed = &der[der.len() - 32..];
        let d = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(seed);
        json!({"kty": "OKP", "crv": "Ed25519", "x": self.x, "d": d, "kid": "test-key", "use": "sig", "alg": "EdDSA"})
    }

    /// A JWT with exactly `header` and `claims`, signed with this key.
    fn sign(&self, header: &serde_json::Value, claims: &serde_json::Value) -> String {
        let header: jsonwebtoken::Header = serde_json::from_value(header.clone()).expect("header");
        let key = jsonwebtoken::EncodingKey::from_ed_der(&self.der());
        jsonwebtoken::encode(&header, claims, &key).expect("sign")
    }
}
