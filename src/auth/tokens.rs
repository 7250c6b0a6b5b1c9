//! Static bearer tokens (`[[auth.tokens]]`), kept only as SHA-256 digests and
//! compared in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Principal;
use crate::config::{AuthConfig, TokenSource};

/// The configured tokens, by digest.
pub(crate) struct StaticTokens {
    tokens: Vec<([u8; 32], Principal)>,
}

impl StaticTokens {
    /// Reads `[[auth.tokens]]`; `Err` names a token whose environment variable is unset.
    pub(crate) fn from_config(config: &AuthConfig) -> Result<StaticTokens, String> {
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
        Ok(StaticTokens { tokens })
    }

    /// No tokens at all.
    #[cfg(test)]
    pub(crate) fn none() -> StaticTokens {
        StaticTokens { tokens: Vec::new() }
    }

    /// Whether any token is configured.
    pub(crate) fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The principal of the token whose digest is `presented`, if it is one of them.
    pub(crate) fn find(&self, presented: &[u8; 32]) -> Option<Principal> {
        // Every entry is compared, so the time taken says nothing about which one matched.
        let mut found = None;
        for (digest, principal) in &self.tokens {
            if bool::from(digest.ct_eq(presented)) {
                found = Some(principal);
            }
        }
        found.cloned()
    }
}

/// The SHA-256 digest a token is kept as.
pub fn digest_of(token: &str) -> [u8; 32] {
    digest_of_bytes(token.as_bytes())
}

/// The SHA-256 digest of a token's bytes: computed once per request, it serves the
/// static tokens and the cache of verified OAuth tokens alike.
pub(crate) fn digest_of_bytes(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}
