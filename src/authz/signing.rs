//! The authorization server's signing keys: Ed25519 keys it generates, rotates
//! every `key_rotation` (the previous keys stay in the JWKS until every token they
//! signed has expired), and signs RFC 9068 access tokens (`typ: at+jwt`) with.
//! A new key signs only once it is [`PUBLISHED_AHEAD`] old, so that every replica
//! sharing the store has read it into its JWKS before a token it signed arrives.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rand::RngCore;
use serde::Serialize;
use serde_json::json;

use super::store::StoredKey;

/// A PKCS#8 v1 Ed25519 private key is this prefix and the 32-byte seed (RFC 8410 §7).
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// How long a new key is published before it signs (replicas reload the keys
/// every minute); until then the previous one signs.
pub(crate) const PUBLISHED_AHEAD: u64 = 120;

/// The key to sign with at `now`: the newest one published for [`PUBLISHED_AHEAD`],
/// else (a first start) the newest one.
pub(crate) fn current(keys: &[StoredKey], now: u64) -> Option<&StoredKey> {
    keys.iter()
        .filter(|k| k.created_at.saturating_add(PUBLISHED_AHEAD) <= now)
        .max_by_key(|k| k.created_at)
        .or_else(|| keys.iter().max_by_key(|k| k.created_at))
}

/// A new key made now.
pub(crate) fn generate(now: u64) -> StoredKey {
    let mut seed = [0u8; 32];
    rand::rng().fill_bytes(&mut seed);
    let mut id = [0u8; 12];
    rand::rng().fill_bytes(&mut id);
    StoredKey {
        kid: URL_SAFE_NO_PAD.encode(id),
        seed,
        created_at: now,
    }
}

/// The keys after a rotation check at `now`: a new one when the newest is older
/// than `rotation` (or there is none); keys whose tokens have all expired are
/// dropped (a key retired at `t`, when its successor was made, signed its last
/// token at `t + PUBLISHED_AHEAD`). `None`: unchanged.
pub(crate) fn rotated(keys: &[StoredKey], now: u64, rotation: u64, token_lifetime: u64) -> Option<Vec<StoredKey>> {
    let newest = keys.iter().map(|k| k.created_at).max();
    let mut next: Vec<StoredKey> = keys.to_vec();
    let mut changed = false;
    if newest.is_none_or(|created| now >= created.saturating_add(rotation)) {
        next.push(generate(now));
        changed = true;
    }
    // Each key but the newest was retired when its successor was made.
    let mut created: Vec<u64> = next.iter().map(|k| k.created_at).collect();
    created.sort_unstable();
    let before = next.len();
    next.retain(|key| {
        let successor = created.iter().find(|&&c| c > key.created_at);
        successor.is_none_or(|&retired| now <= retired.saturating_add(PUBLISHED_AHEAD + token_lifetime))
    });
    changed |= next.len() != before;
    changed.then_some(next)
}

/// The public half of a key, as a JWK.
fn public_x(key: &StoredKey) -> String {
    let signing = ed25519_dalek::SigningKey::from_bytes(&key.seed);
    URL_SAFE_NO_PAD.encode(signing.verifying_key().to_bytes())
}

/// The JWKS document of `keys`.
pub(crate) fn jwks(keys: &[StoredKey]) -> Vec<u8> {
    let keys: Vec<_> = keys
        .iter()
        .map(|key| json!({"kty": "OKP", "crv": "Ed25519", "x": public_x(key), "kid": key.kid, "use": "sig", "alg": "EdDSA"}))
        .collect();
    json!({ "keys": keys }).to_string().into_bytes()
}

/// The claims of an access token (RFC 9068 §2.2).
#[derive(Serialize)]
pub(crate) struct AccessClaims<'a> {
    /// The issuer.
    pub(crate) iss: &'a str,
    /// The user.
    pub(crate) sub: &'a str,
    /// The resource (RFC 8707).
    pub(crate) aud: &'a str,
    /// The client.
    pub(crate) client_id: &'a str,
    /// Issued at.
    pub(crate) iat: u64,
    /// Expires.
    pub(crate) exp: u64,
    /// A unique id.
    pub(crate) jti: String,
    /// The granted scopes, space-separated (omitted when none).
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) scope: &'a str,
}

/// The private half of `key`, for jsonwebtoken.
pub(crate) fn encoding_key(key: &StoredKey) -> EncodingKey {
    let mut der = PKCS8_ED25519_PREFIX.to_vec();
    der.extend_from_slice(&key.seed);
    EncodingKey::from_ed_der(&der)
}

/// Signs `claims` with `key` as an `at+jwt`.
pub(crate) fn sign(key: &StoredKey, claims: &AccessClaims<'_>) -> Result<String, String> {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(key.kid.clone());
    header.typ = Some("at+jwt".into());
    jsonwebtoken::encode(&header, claims, &encoding_key(key)).map_err(|e| e.to_string())
}

/// A random token (codes, refresh tokens, CSRF tokens): 32 bytes, base64url.
pub(crate) fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::jwt::{self, Audience, KeySet};

    fn key(created_at: u64) -> StoredKey {
        StoredKey {
            kid: format!("k{created_at}"),
            seed: [(created_at % 256) as u8; 32],
            created_at,
        }
    }

    #[test]
    fn minted_tokens_verify_with_the_published_keys() {
        let signing = generate(1000);
        let claims = AccessClaims {
            iss: "http://127.0.0.1:9",
            sub: "alice",
            aud: "http://127.0.0.1:9/mcp",
            client_id: "c",
            iat: 1000,
            exp: 1600,
            jti: "j".into(),
            scope: "mcp",
        };
        let token = sign(&signing, &claims).expect("sign");
        let keys = KeySet::parse(&jwks(&[signing]), &[Algorithm::EdDSA]).expect("jwks");
        let header = jwt::header(&token, &[Algorithm::EdDSA]).expect("header");
        assert!(header.access_token_typ);
        let audience = Audience::new("http://127.0.0.1:9", "http://127.0.0.1:9/mcp", 0);
        let verified = jwt::verify(&token, &header, &keys, &audience, 1100).expect("verified");
        assert_eq!(
            (verified.subject.as_str(), verified.scopes),
            ("alice", vec!["mcp".to_owned()])
        );
    }

    #[test]
    fn a_new_key_signs_once_published_long_enough() {
        let keys = [key(0), key(1000)];
        // (keys, now, the signing key's created_at)
        let cases: Vec<(&[StoredKey], u64, Option<u64>)> = vec![
            (&[], 5, None),
            (&keys[..1], 0, Some(0)),
            (&keys, 1000, Some(0)),
            (&keys, 1000 + PUBLISHED_AHEAD - 1, Some(0)),
            (&keys, 1000 + PUBLISHED_AHEAD, Some(1000)),
            (&keys[1..], 1000, Some(1000)),
        ];
        for (keys, now, expected) in cases {
            assert_eq!(current(keys, now).map(|k| k.created_at), expected, "at {now}");
        }
    }

    #[test]
    fn rotation_keeps_old_keys_while_their_tokens_live() {
        let kids = |keys: &Option<Vec<StoredKey>>| -> Option<Vec<u64>> {
            keys.as_ref().map(|k| k.iter().map(|k| k.created_at).collect())
        };
        // (keys, now, expected created_at of the keys afterwards; None: unchanged)
        let cases: Vec<(Vec<StoredKey>, u64, Option<Vec<u64>>)> = vec![
            (vec![], 50, Some(vec![50])),
            (vec![key(0)], 999, None),
            (vec![key(0)], 1000, Some(vec![0, 1000])),
            // Key 0 signs until key 1000 is published (1120), and its tokens live 10 s more.
            (vec![key(0), key(1000)], 1130, None),
            (vec![key(0), key(1000)], 1131, Some(vec![1000])),
        ];
        for (keys, now, expected) in cases {
            assert_eq!(kids(&rotated(&keys, now, 1000, 10)), expected, "at {now}");
        }
    }
}
