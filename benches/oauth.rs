//! Micro benchmarks of OAuth access-token validation with the issuer's key already
//! cached: a full check (header, key lookup, signature, claims) per algorithm, and the
//! path a client's repeated token takes (digest + verified-token lookup).
//!
//! The keys below are throwaway test keys made for this bench only.

use std::hint::black_box;
use std::sync::Arc;

use base64::Engine;
use criterion::{Criterion, criterion_group, criterion_main};
use eragate::auth::grants::{Grant, Grants};
use eragate::auth::jwt::{self, Audience, KeySet};
use eragate::auth::{Principal, digest_of};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

const ISSUER: &str = "https://auth.example.com";
const RESOURCE: &str = "https://mcp.example.com/mcp";
const NOW: u64 = 1_800_000_000;
const ED_DER: &str = "MC4CAQAwBQYDK2VwBCIEIEhILlLYsKGjJiVazweUD+EE3oFwksdyhsRU0Gf9+ERR";
const ED_X: &str = "qBq9P-N4fTIEdXqgTUHu4bUyD1l-VD459F_nGNipVwI";
const EC_DER: &str = concat!(
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg8d3AuxI+zKiVGkA2qaTJigO6BdyanaOZx3l9py5Yru",
    "6hRANCAARLQDU+tBY6q38YiMcLXX6SY+ZXMDOW0gSvr2Tjfv1JVJ6fZqO6EZmEAuejpp/9qtBDzvGB42RvIiaaBfUF",
    "UI46",
);
const EC_X: &str = "S0A1PrQWOqt_GIjHC11-kmPmVzAzltIEr69k4379SVQ";
const EC_Y: &str = "np9mo7oRmYQC56Omn_2q0EPO8YHjZG8iJpoF9QVQjjo";
const RSA_DER: &str = concat!(
    "MIIEowIBAAKCAQEAuuGD7HKzjgqxZrArNxXl9IWg/YU5xRgUhvftXNozauENPEh6KVTNN4c5RPxopOeKJSkO1P2xw2",
    "+6rof20F5W16hkyYbiYGLZQiCgmhfJL4kaKsbtGWGmRl7fGxZmsmrOICMLUPz2l4PxxOUJfvuKNw0Xem7M+bIjKYcj",
    "/KOfiu5vevK7MipDI/iyYQbtkYflXG2rgk/gHYYcA51CaKv2L0tl7+cNybQAjEJicd8LJaWcYjEIfjPVTPlDhLW0K2",
    "SkFsBYiAUKXxQkrKcsXNugcMiMmrdJ4EjuNZ6iYU/gSFHYDvGaZvJsPKsrrTJDL8wiFOJo/Doo1m2/schqNzYkzQID",
    "AQABAoIBAAsaCwmAneCOC5BfXk3ZL+45AwGUiMRH5C5Ja7EkqEHM6Umfv5wVdNR75L/Po9LKC3eeKwqloIoM6ODl5F",
    "hoBk4s64HaULfrn17xi8DjsViw0xxf8WVc2vEawTO9fq/SLvkTQ+CVinuhQ7tP5OLFhCY1kaO9EdGyjqqwo8dmG/v3",
    "iHE34QZZgPuCzS/X2f0y1opR7Cs0+QBq7ChNICzq3ReSsuoo2P21B6GZpOvK8OaPazWhocDSLJKsxN9DMW7gIDz+0D",
    "+ZvQMIuB9rI6qM1R8TXo+ULeENNWny9FwK6B2ycJA6dDwJ1LSMW1QaJ1ieupnBsAYeBXAO/D6NjPdXLwECgYEA+fS5",
    "mpvFnk+ufML890AC42MkgZUoSfp7mRlZu6UDFrvC5QReGSTfRUeWkmeENhOltFnlNSdbTeytkTL3kG726w8ExR9WcG",
    "jjn0WOhi1h1L8AORPCrSEd6sSklTjIBKUf6U82M3r74Eq1D8+sbUARfGQ2An1B9NqVYtLtj0X7V80CgYEAv2ZYBB32",
    "FpFVMaVmo2HBhPJu7Jn7XnuNU2BGa9GD0cMT0owsWLPjMRek0ybJUhH2UkGL1Drjaw/ruWsztnrZyIpVuNQ9yqbTH1",
    "vNVn6cnjbvyWEySwf8WKH9PJWNF2sR077cEXUXKVZZNaCijrjvFrDV1yFhiedVsCFMFXRvAQECgYAdwa6e41CBakcB",
    "f00SOkKdw13DN3iWZgV00nnGRvy5Jh0rmnuBTsxtuPoJ79zjey9M6y7IRykte7GmCYVDYpJupVkSBosJ0tLWUTeIbb",
    "qp0xs5sEqKxdiD7GkTgrD9LJNB+TYgptF5gCtR+I00bF4oit2LKlJBzgveufGiDti/OQKBgQC+cpyjxBhJDmWiF72Q",
    "VsYTfpOnM/SuZ+wRCVwpDnnG8AA6YaYCwUQQZkFopVBvLFZYNMZo8Au4TUg14Ji9O3KWnCd92Rp/Gg47RsKEDUnUGD",
    "/ytpcvl4ududncPcb9hVlgw6oAaO0aAcSUmvkFYLjucBjnjlyatqhJsGgfdRK7AQKBgAmIQ05APaiQpqZrlwTxddpw",
    "z6/avmxT1HN8hyRt9weQtaNju5XmyOIoIBg9XinoZ9qDQ5vH1nCXVExUWo/y4N5m9Qcy6SLIO3PHpKlsWrhKj/DQ9k",
    "4wKn8CJxWaBP0oiPliJA7LHIstXypDLfLu91etAyF9YSIr43R9eI6SYmAb",
);
const RSA_N: &str = concat!(
    "uuGD7HKzjgqxZrArNxXl9IWg_YU5xRgUhvftXNozauENPEh6KVTNN4c5RPxopOeKJSkO1P2xw2-6rof20F5W16hkyY",
    "biYGLZQiCgmhfJL4kaKsbtGWGmRl7fGxZmsmrOICMLUPz2l4PxxOUJfvuKNw0Xem7M-bIjKYcj_KOfiu5vevK7MipD",
    "I_iyYQbtkYflXG2rgk_gHYYcA51CaKv2L0tl7-cNybQAjEJicd8LJaWcYjEIfjPVTPlDhLW0K2SkFsBYiAUKXxQkrK",
    "csXNugcMiMmrdJ4EjuNZ6iYU_gSFHYDvGaZvJsPKsrrTJDL8wiFOJo_Doo1m2_schqNzYkzQ",
);

fn der(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(text).expect("der")
}

fn jwks() -> Vec<u8> {
    json!({"keys": [
        {"kty": "OKP", "crv": "Ed25519", "x": ED_X, "kid": "ed", "alg": "EdDSA", "use": "sig"},
        {"kty": "EC", "crv": "P-256", "x": EC_X, "y": EC_Y, "kid": "ec", "alg": "ES256", "use": "sig"},
        {"kty": "RSA", "n": RSA_N, "e": "AQAB", "kid": "rsa", "alg": "RS256", "use": "sig"},
    ]})
    .to_string()
    .into_bytes()
}

fn token(alg: Algorithm, kid: &str, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    header.typ = Some("at+jwt".into());
    let claims = json!({"iss": ISSUER, "sub": "alice", "aud": RESOURCE, "exp": NOW + 600, "iat": NOW,
        "scope": "mcp:tools mcp:read", "client_id": "c", "jti": "0123456789abcdef"});
    jsonwebtoken::encode(&header, &claims, key).expect("sign")
}

fn validation(c: &mut Criterion) {
    let allowed = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];
    let keys = Arc::new(KeySet::parse(&jwks(), &allowed).expect("jwks"));
    assert_eq!(keys.len(), 3);
    let audience = Audience::new(ISSUER, RESOURCE, 30);
    let tokens = [
        (
            "EdDSA",
            token(Algorithm::EdDSA, "ed", &EncodingKey::from_ed_der(&der(ED_DER))),
        ),
        (
            "ES256",
            token(Algorithm::ES256, "ec", &EncodingKey::from_ec_der(&der(EC_DER))),
        ),
        (
            "RS256",
            token(Algorithm::RS256, "rsa", &EncodingKey::from_rsa_der(&der(RSA_DER))),
        ),
    ];
    let mut group = c.benchmark_group("oauth");
    for (name, token) in &tokens {
        let check = || {
            let header = jwt::header(black_box(token), &allowed).expect("header");
            jwt::verify(token, &header, &keys, &audience, NOW).expect("valid")
        };
        assert_eq!(check().subject, "alice");
        group.bench_function(format!("verify_cached_key/{name}"), |b| b.iter(check));
    }
    let grants = Grants::new(10_000);
    for (_, token) in &tokens {
        let grant = Grant {
            principal: Principal::oauth(ISSUER, "alice"),
            scoped: true,
            scopes: Arc::from(vec!["mcp:tools".to_owned()]),
            until: NOW + 630,
            resource: 0,
            keys: keys.clone(),
        };
        grants.insert(digest_of(token), grant, NOW);
    }
    let (_, repeated) = &tokens[1];
    group.bench_function("verified_token_hit", |b| {
        b.iter(|| {
            let grant = grants
                .find(&digest_of(black_box(repeated)), 0, &keys, NOW)
                .expect("hit");
            black_box(grant.principal)
        })
    });
    group.finish();
}

criterion_group!(benches, validation);
criterion_main!(benches);
