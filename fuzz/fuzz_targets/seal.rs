//! Sealed tokens: legacy session ids and `requestState`.
//!
//! Input: one selector byte, then bytes. Properties:
//! - opening forged input never panics and never succeeds (the key is secret
//!   to this process; a forgery would mean a broken AEAD);
//! - seal → open round-trips any plaintext, for its own purpose only; a token
//!   with any byte changed, or cut short, does not open;
//! - the session store opens only claims it could have minted: arbitrary
//!   plaintext sealed with its key never panics its claim parser, and claims
//!   that parse are returned as sealed (unless expired or owned elsewhere);
//! - `requestState` claims parse or are refused, and `check` binds them to the
//!   request's method, params digest and principal.
#![no_main]

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use eragate::bridge::sessions::{SessionClaims, SessionStore};
use eragate::config::SessionsConfig;
use eragate::seal::{Purpose, SealKey, Sealer, unix_now};
use eragate::translate::mrtr::RequestStateClaims;
use eragate::translate::mrtr::conversation::Binding;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const PREVIOUS: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

static SEALER: LazyLock<Sealer> = LazyLock::new(|| {
    let key = SealKey::from_base64(KEY).expect("key");
    let previous = SealKey::from_base64(PREVIOUS).expect("key");
    Sealer::new(&key, Some((&previous, Instant::now() + Duration::from_secs(3600))))
});

static STORE: LazyLock<SessionStore> = LazyLock::new(|| {
    let config = SessionsConfig {
        key: Some(SealKey::from_base64(KEY).expect("key")),
        ..SessionsConfig::default()
    };
    SessionStore::new(config, 16)
});

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let purpose = if selector & 1 == 0 {
        Purpose::Session
    } else {
        Purpose::RequestState
    };
    match (selector >> 1) % 4 {
        0 => forged(purpose, rest),
        1 => round_trip(purpose, selector, rest),
        2 => session_claims(rest),
        _ => request_state(rest),
    }
});

fn forged(purpose: Purpose, bytes: &[u8]) {
    let token = String::from_utf8_lossy(bytes);
    assert_eq!(
        SEALER.open(purpose, &token, Instant::now()),
        None,
        "a forged token opened"
    );
    assert_eq!(STORE.open(&token), None, "a forged session id opened");
}

fn round_trip(purpose: Purpose, selector: u8, plaintext: &[u8]) {
    let token = SEALER.seal(purpose, plaintext);
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    let now = Instant::now();
    assert_eq!(SEALER.open(purpose, &token, now).as_deref(), Some(plaintext));
    let other = match purpose {
        Purpose::Session => Purpose::RequestState,
        Purpose::RequestState | Purpose::ListCursor => Purpose::Session,
    };
    assert_eq!(
        SEALER.open(other, &token, now),
        None,
        "a token opened for another purpose"
    );
    // One character changed (to another of the alphabet), or the token cut short.
    let mut tampered = token.clone().into_bytes();
    let at = usize::from(selector) * 7 % tampered.len();
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    // The last character may carry only padding bits, which the decoder refuses or
    // ignores: either way the token must not open to anything else.
    if let Some(opened) = SEALER.open(purpose, &tampered, now) {
        assert_eq!(opened, plaintext, "a tampered token opened to other bytes");
        assert_eq!(at, tampered.len() - 1);
    }
    assert_eq!(SEALER.open(purpose, &token[..token.len() - 1], now), None);
}

fn session_claims(plaintext: &[u8]) {
    let token = SEALER.seal(Purpose::Session, plaintext);
    let opened = STORE.open(&token);
    let parsed: Option<SessionClaims> = serde_json::from_slice(plaintext).ok();
    match (opened, parsed) {
        (Some(opened), Some(parsed)) => {
            assert_eq!(opened, parsed);
            assert!(opened.exp > unix_now());
        }
        (Some(_), None) => panic!("claims opened that do not parse"),
        (None, Some(parsed)) => assert!(parsed.exp <= unix_now() || parsed.own.is_some()),
        (None, None) => {}
    }
    // What the store mints, it opens.
    if let Ok(Value::Object(_)) = serde_json::from_slice::<Value>(plaintext) {
        let claims = SessionClaims {
            rev: "2025-06-18".into(),
            caps: serde_json::from_slice(plaintext).unwrap_or_default(),
            info: Value::Null,
            prn: String::from_utf8_lossy(plaintext).into_owned(),
            ups: "up".into(),
            usid: None,
            mem: None,
            own: None,
            exp: 0,
        };
        let id = STORE.mint(claims.clone(), false);
        let opened = STORE.open(&id).expect("a minted id opens");
        assert_eq!((opened.caps, opened.prn), (claims.caps, claims.prn));
    }
}

fn request_state(plaintext: &[u8]) {
    let token = SEALER.seal(Purpose::RequestState, plaintext);
    let Some(opened) = SEALER.open(Purpose::RequestState, &token, Instant::now()) else {
        panic!("a sealed requestState did not open");
    };
    let Ok(claims) = serde_json::from_slice::<RequestStateClaims>(&opened) else {
        return;
    };
    let params = serde_json::json!({"name": "echo", "arguments": {"n": 1}});
    let binding = Binding::of(&claims.method, Some(&params), &claims.principal);
    let outcome = claims.check(&binding, unix_now());
    if claims.exp <= unix_now() {
        assert!(outcome.is_err(), "expired claims accepted");
    } else {
        assert_eq!(outcome.is_ok(), claims.digest == binding.digest);
    }
    let stranger = Binding::of(&claims.method, Some(&params), &format!("{}/other", claims.principal));
    assert!(
        claims.check(&stranger, unix_now()).is_err(),
        "another principal's state accepted"
    );
}
