//! JWT access tokens (RFC 9068) checked against the issuer's keys: the pure part,
//! with no I/O and the clock passed in. The signature is verified by `jsonwebtoken`
//! with an allowlist of public-key algorithms (never `none`, never HMAC); `iss` must
//! be the issuer exactly, `aud` must contain this resource (RFC 8707), `exp` and
//! `nbf` hold within a small leeway, and `sub` names the principal.

use std::collections::HashMap;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

/// Why a JWT was refused. Each is a 401 `invalid_token`; the text is not a contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// Not three base64url segments, or a header that is not JSON.
    #[error("the token is not a JWT")]
    NotAJwt,
    /// An algorithm outside the allowlist (`none`, HMAC, or one not configured).
    #[error("the token's signature algorithm is not accepted")]
    AlgorithmNotAllowed,
    /// No key of the issuer has the token's `kid` (after a refetch).
    #[error("the token was signed by an unknown key")]
    UnknownKey,
    /// The signature does not verify.
    #[error("the token's signature is invalid")]
    BadSignature,
    /// The header's `typ` is not `at+jwt`: an ID token or another JWT, not an access token.
    #[error("the token is not an access token (its typ is not at+jwt)")]
    NotAnAccessToken,
    /// `iss` is another issuer.
    #[error("the token was issued by another authorization server")]
    WrongIssuer,
    /// `aud` does not name this resource.
    #[error("the token is for another resource")]
    WrongAudience,
    /// Past `exp`.
    #[error("the token has expired")]
    Expired,
    /// Before `nbf`.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// A claim the resource needs is absent or malformed.
    #[error("the token lacks a required claim")]
    MissingClaim,
    /// Introspection (RFC 7662) says the token is not active.
    #[error("the token is not active")]
    Inactive,
}

/// The issuer's public signing keys, by `kid`.
#[derive(Clone, Default)]
pub struct KeySet {
    by_kid: HashMap<String, VerifyKey>,
    unnamed: Vec<VerifyKey>,
}

#[derive(Clone)]
struct VerifyKey {
    key: DecodingKey,
    /// The one algorithm this key may verify (the JWK's `alg`, or its type's usual one).
    alg: Algorithm,
}

impl KeySet {
    /// The signing keys of a JWKS document usable with one of `allowed`; keys
    /// for encryption, of unknown types, or symmetric, are skipped.
    pub fn parse(document: &[u8], allowed: &[Algorithm]) -> Result<KeySet, String> {
        let set: JwkSet = serde_json::from_slice(document).map_err(|e| format!("not a JWKS: {e}"))?;
        let mut keys = KeySet::default();
        for jwk in &set.keys {
            if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
                continue;
            }
            let Some(alg) = key_algorithm(jwk) else { continue };
            if !allowed.contains(&alg) {
                continue;
            }
            let Ok(key) = DecodingKey::from_jwk(jwk) else { continue };
            let entry = VerifyKey { key, alg };
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.by_kid.insert(kid.clone(), entry);
                }
                None => keys.unnamed.push(entry),
            }
        }
        Ok(keys)
    }

    /// How many usable keys the set holds.
    pub fn len(&self) -> usize {
        self.by_kid.len() + self.unnamed.len()
    }

    /// Whether the set holds no usable key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a key for this header is present.
    pub(crate) fn knows(&self, header: &TokenHeader) -> bool {
        self.find(header).is_some()
    }

    fn find(&self, header: &TokenHeader) -> Option<&VerifyKey> {
        let found = match &header.kid {
            Some(kid) => self.by_kid.get(kid),
            // Without a `kid`, only an unambiguous key will do.
            None if self.len() == 1 => self.by_kid.values().chain(&self.unnamed).next(),
            None => None,
        };
        found.filter(|k| k.alg == header.alg)
    }
}

/// The algorithm a JWK verifies: its `alg`, else the usual one of its key type.
fn key_algorithm(jwk: &jsonwebtoken::jwk::Jwk) -> Option<Algorithm> {
    if let Some(alg) = jwk.common.key_algorithm {
        return match alg {
            KeyAlgorithm::RS256 => Some(Algorithm::RS256),
            KeyAlgorithm::RS384 => Some(Algorithm::RS384),
            KeyAlgorithm::RS512 => Some(Algorithm::RS512),
            KeyAlgorithm::PS256 => Some(Algorithm::PS256),
            KeyAlgorithm::ES256 => Some(Algorithm::ES256),
            KeyAlgorithm::ES384 => Some(Algorithm::ES384),
            KeyAlgorithm::EdDSA => Some(Algorithm::EdDSA),
            _ => None,
        };
    }
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Some(Algorithm::RS256),
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => Some(Algorithm::ES256),
            EllipticCurve::P384 => Some(Algorithm::ES384),
            _ => None,
        },
        AlgorithmParameters::OctetKeyPair(_) => Some(Algorithm::EdDSA),
        // Symmetric keys never verify access tokens here.
        _ => None,
    }
}

/// The parts of a JWT header that pick the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenHeader {
    /// The signature algorithm, already checked against the allowlist.
    pub(crate) alg: Algorithm,
    /// The key id.
    pub(crate) kid: Option<String>,
    /// Whether `typ` says the token is an access token (`at+jwt`, RFC 9068 §2.1).
    pub(crate) access_token_typ: bool,
}

/// Reads the header of `token`, refusing algorithms outside `allowed` before any key is looked at.
pub fn header(token: &str, allowed: &[Algorithm]) -> Result<TokenHeader, JwtError> {
    if token.split('.').count() != 3 {
        return Err(JwtError::NotAJwt);
    }
    let header = match jsonwebtoken::decode_header(token) {
        Ok(header) => header,
        // `alg: none` and unknown algorithms do not even parse.
        Err(e) if matches!(e.kind(), jsonwebtoken::errors::ErrorKind::Json(_)) => {
            return Err(JwtError::AlgorithmNotAllowed);
        }
        Err(_) => return Err(JwtError::NotAJwt),
    };
    if !allowed.contains(&header.alg) {
        return Err(JwtError::AlgorithmNotAllowed);
    }
    // RFC 9068 §4: "at+jwt", or its full media type; media types compare without case.
    let access_token_typ = header.typ.as_deref().is_some_and(|typ| {
        let typ = typ.strip_prefix("application/").unwrap_or(typ);
        typ.eq_ignore_ascii_case("at+jwt")
    });
    Ok(TokenHeader {
        alg: header.alg,
        kid: header.kid,
        access_token_typ,
    })
}

/// The rules one resource applies to every token.
#[derive(Clone)]
pub struct Audience {
    validation: Validation,
    leeway: u64,
    require_at_jwt: bool,
}

impl Audience {
    /// Tokens from `issuer` for `resource`, with `leeway` seconds of clock skew.
    pub fn new(issuer: &str, resource: &str, leeway: u64) -> Audience {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[issuer]);
        validation.set_audience(&[resource]);
        validation.set_required_spec_claims(&["iss", "aud", "exp", "sub"]);
        // Time is checked below against the caller's clock.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        Audience {
            validation,
            leeway,
            require_at_jwt: true,
        }
    }

    /// The same, accepting JWTs whose `typ` is not `at+jwt` (an issuer that
    /// types its access tokens `JWT`).
    pub(crate) fn accepting_any_typ(self) -> Audience {
        Audience {
            require_at_jwt: false,
            ..self
        }
    }
}

/// A token that passed every check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// `iss`.
    pub(crate) issuer: String,
    /// `sub`.
    pub subject: String,
    /// The granted scopes (`scope`, space-separated, or `scp`).
    pub(crate) scopes: Vec<String>,
    /// `exp`, in seconds since the epoch.
    pub(crate) expires: u64,
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    exp: f64,
    nbf: Option<f64>,
    scope: Option<String>,
    scp: Option<ScopeClaim>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScopeClaim {
    Text(String),
    List(Vec<String>),
}

/// Verifies `token` (whose header is `header`) with `keys` for `audience` at `now`
/// (seconds since the epoch).
pub fn verify(
    token: &str,
    header: &TokenHeader,
    keys: &KeySet,
    audience: &Audience,
    now: u64,
) -> Result<Verified, JwtError> {
    if audience.require_at_jwt && !header.access_token_typ {
        return Err(JwtError::NotAnAccessToken);
    }
    let key = keys.find(header).ok_or(JwtError::UnknownKey)?;
    let mut validation = audience.validation.clone();
    validation.algorithms = vec![key.alg];
    let data = jsonwebtoken::decode::<Claims>(token, &key.key, &validation).map_err(|e| classify(&e))?;
    let claims = data.claims;
    let leeway = audience.leeway as f64;
    let now = now as f64;
    if claims.exp + leeway <= now {
        return Err(JwtError::Expired);
    }
    if claims.nbf.is_some_and(|nbf| nbf > now + leeway) {
        return Err(JwtError::NotYetValid);
    }
    if claims.sub.is_empty() {
        return Err(JwtError::MissingClaim);
    }
    let scopes = match (claims.scope, claims.scp) {
        (Some(text), _) | (None, Some(ScopeClaim::Text(text))) => {
            text.split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect()
        }
        (None, Some(ScopeClaim::List(list))) => list,
        (None, None) => Vec::new(),
    };
    Ok(Verified {
        issuer: claims.iss,
        subject: claims.sub,
        scopes,
        expires: claims.exp.max(0.0) as u64,
    })
}

fn classify(error: &jsonwebtoken::errors::Error) -> JwtError {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::InvalidSignature => JwtError::BadSignature,
        ErrorKind::InvalidIssuer => JwtError::WrongIssuer,
        ErrorKind::InvalidAudience => JwtError::WrongAudience,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => JwtError::AlgorithmNotAllowed,
        ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) | ErrorKind::Json(_) => {
            JwtError::MissingClaim
        }
        ErrorKind::ExpiredSignature => JwtError::Expired,
        ErrorKind::ImmatureSignature => JwtError::NotYetValid,
        _ => JwtError::BadSignature,
    }
}

/// Parses the configured algorithm names (already checked by `check-config`).
pub(crate) fn algorithms(names: &[String]) -> Vec<Algorithm> {
    names
        .iter()
        .filter_map(|name| match name.as_str() {
            "RS256" => Some(Algorithm::RS256),
            "RS384" => Some(Algorithm::RS384),
            "RS512" => Some(Algorithm::RS512),
            "PS256" => Some(Algorithm::PS256),
            "ES256" => Some(Algorithm::ES256),
            "ES384" => Some(Algorithm::ES384),
            "EdDSA" => Some(Algorithm::EdDSA),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::{Value, json};

    /// A throwaway Ed25519 key (PKCS#8 DER) and its public `x`, for these tests only.
    const PRIVATE: &str = "MC4CAQAwBQYDK2VwBCIEIEhILlLYsKGjJiVazweUD+EE3oFwksdyhsRU0Gf9+ERR";
    const PUBLIC_X: &str = "qBq9P-N4fTIEdXqgTUHu4bUyD1l-VD459F_nGNipVwI";
    const ISSUER: &str = "https://auth.example.com";
    const RESOURCE: &str = "https://mcp.example.com/mcp";
    const NOW: u64 = 1_800_000_000;

    fn jwks() -> Vec<u8> {
        json!({"keys": [
            {"kty": "OKP", "crv": "Ed25519", "x": PUBLIC_X, "kid": "k1", "use": "sig", "alg": "EdDSA"},
            {"kty": "OKP", "crv": "Ed25519", "x": PUBLIC_X, "kid": "enc", "use": "enc"},
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
        ]})
        .to_string()
        .into_bytes()
    }

    fn sign(kid: &str, claims: &Value) -> String {
        let der = base64::engine::general_purpose::STANDARD.decode(PRIVATE).expect("der");
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(kid.into());
        header.typ = Some("at+jwt".into());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ed_der(&der)).expect("sign")
    }

    fn claims() -> Value {
        json!({"iss": ISSUER, "sub": "alice", "aud": [RESOURCE, "other"], "exp": NOW + 60, "nbf": NOW - 5, "scope": "mcp:read mcp:write"})
    }

    fn check(token: &str) -> Result<Verified, JwtError> {
        let allowed = [Algorithm::EdDSA, Algorithm::ES256, Algorithm::RS256];
        let keys = KeySet::parse(&jwks(), &allowed).expect("jwks");
        let header = header(token, &allowed)?;
        verify(token, &header, &keys, &Audience::new(ISSUER, RESOURCE, 30), NOW)
    }

    fn with(change: impl FnOnce(&mut Value)) -> String {
        let mut claims = claims();
        change(&mut claims);
        sign("k1", &claims)
    }

    #[test]
    fn a_good_token_names_its_subject_and_scopes() {
        let verified = check(&sign("k1", &claims())).expect("valid");
        assert_eq!(verified.subject, "alice");
        assert_eq!(verified.issuer, ISSUER);
        assert_eq!(verified.scopes, ["mcp:read", "mcp:write"]);
        let scp = with(|c| {
            c.as_object_mut().map(|o| o.remove("scope"));
            c["scp"] = json!(["a", "b"]);
        });
        assert_eq!(check(&scp).expect("valid").scopes, ["a", "b"]);
    }

    #[test]
    fn only_signing_keys_of_allowed_algorithms_are_kept() {
        let keys = KeySet::parse(&jwks(), &[Algorithm::EdDSA]).expect("jwks");
        assert_eq!(keys.len(), 1, "the encryption key and the symmetric key are skipped");
        let keys = KeySet::parse(&jwks(), &[Algorithm::ES256]).expect("jwks");
        assert!(keys.is_empty());
    }

    #[test]
    fn refusals() {
        let good = sign("k1", &claims());
        let mut parts = good.split('.');
        let (h, p) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
        let mallory = with(|c| c["sub"] = json!("mallory"));
        let forged = format!(
            "{h}.{}.{}",
            mallory.split('.').nth(1).unwrap_or_default(),
            good.rsplit('.').next().unwrap_or_default()
        );
        let none_header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"none","kid":"k1"}"#);
        let hs_header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","kid":"hmac"}"#);
        let cases: Vec<(&str, String, JwtError)> = vec![
            ("garbage", "not-a-jwt".into(), JwtError::NotAJwt),
            ("alg none", format!("{none_header}.{p}."), JwtError::AlgorithmNotAllowed),
            ("hmac", format!("{hs_header}.{p}.AAAA"), JwtError::AlgorithmNotAllowed),
            ("forged", forged, JwtError::BadSignature),
            ("unknown kid", sign("k2", &claims()), JwtError::UnknownKey),
            (
                "other issuer",
                with(|c| c["iss"] = json!("https://evil.example")),
                JwtError::WrongIssuer,
            ),
            (
                "other audience",
                with(|c| c["aud"] = json!("https://other.example/mcp")),
                JwtError::WrongAudience,
            ),
            ("expired", with(|c| c["exp"] = json!(NOW - 31)), JwtError::Expired),
            ("not yet", with(|c| c["nbf"] = json!(NOW + 31)), JwtError::NotYetValid),
            (
                "no sub",
                with(|c| {
                    c.as_object_mut().map(|o| o.remove("sub"));
                }),
                JwtError::MissingClaim,
            ),
            (
                "no exp",
                with(|c| {
                    c.as_object_mut().map(|o| o.remove("exp"));
                }),
                JwtError::MissingClaim,
            ),
            (
                "no aud",
                with(|c| {
                    c.as_object_mut().map(|o| o.remove("aud"));
                }),
                JwtError::MissingClaim,
            ),
        ];
        for (case, token, expected) in cases {
            assert_eq!(check(&token), Err(expected), "{case}");
        }
        // `typ` must say access token, unless the audience accepts any.
        let untyped = {
            let der = base64::engine::general_purpose::STANDARD.decode(PRIVATE).expect("der");
            let mut header = Header::new(Algorithm::EdDSA);
            header.kid = Some("k1".into());
            header.typ = Some("JWT".into());
            jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_ed_der(&der)).expect("sign")
        };
        assert_eq!(check(&untyped), Err(JwtError::NotAnAccessToken));
        let allowed = [Algorithm::EdDSA];
        let keys = KeySet::parse(&jwks(), &allowed).expect("jwks");
        let lenient = Audience::new(ISSUER, RESOURCE, 30).accepting_any_typ();
        let header_of_untyped = header(&untyped, &allowed).expect("header");
        assert!(verify(&untyped, &header_of_untyped, &keys, &lenient, NOW).is_ok());
        // Within the leeway both ways.
        assert!(check(&with(|c| c["exp"] = json!(NOW - 29))).is_ok());
        assert!(check(&with(|c| c["nbf"] = json!(NOW + 29))).is_ok());
    }
}
