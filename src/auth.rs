//! Who a client is. Every request runs as a [`Principal`]: the anonymous one when
//! no tokens are configured, otherwise the owner of the bearer token the client
//! presented. Tokens are kept only as SHA-256 digests and compared in constant
//! time; a client's token is never passed on to an upstream (upstream links
//! build their own headers).
//!
//! The principal is bound into everything that outlives a request: pooled
//! upstream sessions are partitioned by it, legacy session ids and
//! `requestState` seal it, so one client can never resume another's.

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{AuthConfig, TokenSource};

/// Who a request runs as. Cheap to clone; the anonymous one allocates nothing.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Principal(Option<Arc<str>>);

impl Principal {
    /// The principal of every request when authentication is off (and of stdio
    /// clients, whose credentials are their environment).
    pub const fn anonymous() -> Principal {
        Principal(None)
    }

    /// A named principal.
    pub fn named(name: &str) -> Principal {
        Principal(Some(Arc::from(name)))
    }

    /// The name sealed into session ids and `requestState` (empty when anonymous).
    pub fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or_default()
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("anonymous"),
            Some(name) => write!(f, "{name:?}"),
        }
    }
}

/// Why a request was refused (HTTP 401).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// No `Authorization: Bearer` credential.
    Missing,
    /// A credential that matches no configured token, or is not a bearer token.
    Invalid,
}

impl Denied {
    /// The `WWW-Authenticate` challenge (RFC 6750 §3).
    pub fn challenge(self) -> &'static str {
        match self {
            Denied::Missing => r#"Bearer realm="eragate""#,
            Denied::Invalid => r#"Bearer realm="eragate", error="invalid_token""#,
        }
    }

    /// What the client is told.
    pub fn message(self) -> &'static str {
        match self {
            Denied::Missing => "Unauthorized: a bearer token is required",
            Denied::Invalid => "Unauthorized: invalid bearer token",
        }
    }
}

/// The configured tokens, by digest.
pub struct Authenticator {
    tokens: Vec<([u8; 32], Principal)>,
}

impl Authenticator {
    /// Builds the authenticator; `Err` names a token whose environment variable is unset.
    pub fn from_config(config: &AuthConfig) -> Result<Authenticator, String> {
        let mut tokens = Vec::with_capacity(config.tokens.len());
        for (i, token) in config.tokens.iter().enumerate() {
            let digest = match &token.source {
                TokenSource::Sha256(digest) => *digest,
                TokenSource::Env(name) => match std::env::var(name) {
                    Ok(value) if !value.is_empty() => digest_of(&value),
                    _ => return Err(format!("auth.tokens[{i}].env: environment variable {name} is not set")),
                },
            };
            tokens.push((digest, Principal::named(&token.principal)));
        }
        Ok(Authenticator { tokens })
    }

    /// An authenticator that lets everyone in as the anonymous principal.
    pub fn open() -> Authenticator {
        Authenticator { tokens: Vec::new() }
    }

    /// Whether requests must carry a token.
    pub fn is_required(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The principal for a request carrying `authorization` (the header's value, if any).
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Principal, Denied> {
        if !self.is_required() {
            return Ok(Principal::anonymous());
        }
        let value = authorization.ok_or(Denied::Missing)?;
        let token = bearer_token(value).ok_or(Denied::Invalid)?;
        let presented = digest_of_bytes(token);
        // Every entry is compared, so the time taken says nothing about which one matched.
        let mut found = None;
        for (digest, principal) in &self.tokens {
            if bool::from(digest.ct_eq(&presented)) {
                found = Some(principal);
            }
        }
        found.cloned().ok_or(Denied::Invalid)
    }
}

/// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// The SHA-256 digest a token is kept as.
pub fn digest_of(token: &str) -> [u8; 32] {
    digest_of_bytes(token.as_bytes())
}

fn digest_of_bytes(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TokenConfig;

    fn with_tokens(tokens: &[(&str, &str)]) -> Authenticator {
        let config = AuthConfig {
            tokens: tokens
                .iter()
                .map(|(principal, token)| TokenConfig {
                    principal: (*principal).to_owned(),
                    source: TokenSource::Sha256(digest_of(token)),
                })
                .collect(),
        };
        Authenticator::from_config(&config).expect("no env tokens")
    }

    #[test]
    fn open_gateway_admits_everyone_anonymously() {
        let open = Authenticator::open();
        assert_eq!(open.authenticate(None), Ok(Principal::anonymous()));
        assert_eq!(open.authenticate(Some(b"Bearer x")), Ok(Principal::anonymous()));
    }

    #[test]
    fn tokens_name_their_principal() {
        let auth = with_tokens(&[("alice", "a-secret"), ("bob", "b-secret"), ("alice", "a-rotated")]);
        type Case<'a> = (Option<&'a [u8]>, Result<&'a str, Denied>);
        let cases: &[Case] = &[
            (Some(b"Bearer a-secret"), Ok("alice")),
            (Some(b"bearer b-secret"), Ok("bob")),
            (Some(b"BEARER  a-rotated "), Ok("alice")),
            (None, Err(Denied::Missing)),
            (Some(b"Bearer "), Err(Denied::Invalid)),
            (Some(b"Bearer a-secre"), Err(Denied::Invalid)),
            (Some(b"Basic YWxpY2U6eA=="), Err(Denied::Invalid)),
            (Some(b"a-secret"), Err(Denied::Invalid)),
        ];
        for (header, expected) in cases {
            let got = auth.authenticate(*header);
            assert_eq!(got, expected.map(Principal::named), "{header:?}");
        }
    }

    #[test]
    fn challenges_follow_rfc_6750() {
        assert_eq!(Denied::Missing.challenge(), r#"Bearer realm="eragate""#);
        assert!(Denied::Invalid.challenge().contains(r#"error="invalid_token""#));
    }

    #[test]
    fn unset_environment_token_is_reported() {
        let config = AuthConfig {
            tokens: vec![TokenConfig {
                principal: "ci".into(),
                source: TokenSource::Env("ERAGATE_TEST_SURELY_UNSET_TOKEN".into()),
            }],
        };
        let error = Authenticator::from_config(&config).err().expect("unset");
        assert!(error.contains("ERAGATE_TEST_SURELY_UNSET_TOKEN"), "{error}");
    }
}
