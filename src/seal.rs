//! Sealed tokens: authenticated encryption of small state that eragate hands to
//! clients (legacy session ids, and later `requestState`) so that any replica
//! holding the key can open them, and nobody else can read or forge them.
//!
//! XChaCha20-Poly1305 with a random 192-bit nonce per token; the token's
//! purpose is bound as associated data, so a token minted for one use never
//! opens for another. Key rotation: the previous key still opens tokens until
//! its overlap ends.

use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore;

/// Length of a key in bytes.
pub(crate) const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 24;

/// What a token is for; bound into the authentication tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A legacy client's `Mcp-Session-Id`.
    Session,
    /// A multi round-trip `requestState`.
    RequestState,
    /// A federated list's `nextCursor` (each member's position).
    ListCursor,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::Session => b"eragate/session/v1",
            Purpose::RequestState => b"eragate/request-state/v1",
            Purpose::ListCursor => b"eragate/list-cursor/v1",
        }
    }
}

/// A 256-bit sealing key.
#[derive(Clone)]
pub struct SealKey([u8; KEY_BYTES]);

/// Compared in constant time (a reload compares the running key with the new one).
impl PartialEq for SealKey {
    fn eq(&self, other: &SealKey) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(self.0.ct_eq(&other.0))
    }
}

impl Eq for SealKey {}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(..)") // never print key material
    }
}

/// Why a key could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not base64.
    #[error("not base64 (standard alphabet, with or without padding)")]
    NotBase64,
    /// Wrong length.
    #[error("must decode to exactly 32 bytes, got {0}")]
    WrongLength(usize),
}

impl SealKey {
    /// A random key (for a single process; tokens die with it).
    pub fn random() -> SealKey {
        let mut key = [0u8; KEY_BYTES];
        rand::rng().fill_bytes(&mut key);
        SealKey(key)
    }

    /// Reads base64 of 32 bytes (`head -c 32 /dev/urandom | base64`).
    pub fn from_base64(text: &str) -> Result<SealKey, KeyError> {
        use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
        let text = text.trim();
        let bytes = STANDARD
            .decode(text)
            .or_else(|_| STANDARD_NO_PAD.decode(text))
            .map_err(|_| KeyError::NotBase64)?;
        let key: [u8; KEY_BYTES] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError::WrongLength(bytes.len()))?;
        Ok(SealKey(key))
    }
}

/// Seals and opens tokens with the current key (and, during rotation, the previous one).
#[derive(Clone)]
pub struct Sealer {
    current: XChaCha20Poly1305,
    previous: Option<(XChaCha20Poly1305, Instant)>,
}

impl Sealer {
    /// A sealer; `previous` opens tokens until its instant passes.
    pub fn new(current: &SealKey, previous: Option<(&SealKey, Instant)>) -> Sealer {
        Sealer {
            current: XChaCha20Poly1305::new(&current.0.into()),
            previous: previous.map(|(key, until)| (XChaCha20Poly1305::new(&key.0.into()), until)),
        }
    }

    /// Seals `plaintext` into a URL-safe token (visible ASCII, fit for a header).
    pub fn seal(&self, purpose: Purpose, plaintext: &[u8]) -> String {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rng().fill_bytes(&mut nonce);
        let payload = Payload {
            msg: plaintext,
            aad: purpose.label(),
        };
        // Encryption fails only for plaintexts beyond 256 GiB; ours are a few hundred bytes.
        let ciphertext = self
            .current
            .encrypt(XNonce::from_slice(&nonce), payload)
            .unwrap_or_default();
        let mut token = Vec::with_capacity(NONCE_BYTES + ciphertext.len());
        token.extend_from_slice(&nonce);
        token.extend_from_slice(&ciphertext);
        URL_SAFE_NO_PAD.encode(token)
    }

    /// Opens a token sealed for `purpose`; `None` for anything tampered, foreign or malformed.
    pub fn open(&self, purpose: Purpose, token: &str, now: Instant) -> Option<Vec<u8>> {
        let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
        if bytes.len() <= NONCE_BYTES {
            return None;
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_BYTES);
        let payload = || Payload {
            msg: ciphertext,
            aad: purpose.label(),
        };
        if let Ok(plaintext) = self.current.decrypt(XNonce::from_slice(nonce), payload()) {
            return Some(plaintext);
        }
        match &self.previous {
            Some((previous, until)) if now < *until => previous.decrypt(XNonce::from_slice(nonce), payload()).ok(),
            _ => None,
        }
    }
}

/// A token's SHA-256: the fixed-size trace kept of an id once it has ended.
pub fn digest(token: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes()).into()
}

/// A token's short fingerprint for logs (the first 8 hex digits of its
/// SHA-256): enough to follow one session through a log, useless as a credential.
pub fn fingerprint(token: &str) -> String {
    digest(token)[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// Seconds since the Unix epoch: the clock sealed expiries are written in, so
/// replicas agree on them.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    #[test]
    fn fingerprints_are_short_and_stable() {
        let id = "a-session-id-that-is-a-credential";
        assert_eq!(fingerprint(id).len(), 8);
        assert_eq!(fingerprint(id), fingerprint(id));
        assert_ne!(fingerprint(id), fingerprint("another"));
        assert!(!id.contains(&fingerprint(id)));
    }

    fn sealer() -> Sealer {
        Sealer::new(&SealKey([7; 32]), None)
    }

    #[test]
    fn tampered_foreign_and_misused_tokens_do_not_open() {
        let now = Instant::now();
        let token = sealer().seal(Purpose::Session, b"state");
        assert_eq!(
            sealer().open(Purpose::Session, &token, now).as_deref(),
            Some(&b"state"[..])
        );
        assert_eq!(sealer().open(Purpose::RequestState, &token, now), None);
        let foreign = Sealer::new(&SealKey([8; 32]), None);
        assert_eq!(foreign.open(Purpose::Session, &token, now), None);
        let mut bytes = token.clone().into_bytes();
        let last = bytes.len() - 1;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            sealer().open(Purpose::Session, &String::from_utf8(bytes).unwrap(), now),
            None
        );
        assert_eq!(sealer().open(Purpose::Session, "", now), None);
        assert_eq!(sealer().open(Purpose::Session, "not base64!", now), None);
    }

    #[test]
    fn the_previous_key_opens_only_during_the_overlap() {
        let old = SealKey([1; 32]);
        let new = SealKey([2; 32]);
        let token = Sealer::new(&old, None).seal(Purpose::Session, b"x");
        let start = Instant::now();
        let rotating = Sealer::new(&new, Some((&old, start + Duration::from_secs(60))));
        assert!(rotating.open(Purpose::Session, &token, start).is_some());
        assert!(
            rotating
                .open(Purpose::Session, &token, start + Duration::from_secs(61))
                .is_none()
        );
    }

    #[test]
    fn keys_from_base64() {
        let text = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
        assert!(SealKey::from_base64(&text).is_ok());
        assert_eq!(SealKey::from_base64("AAAA").unwrap_err(), KeyError::WrongLength(3));
        assert_eq!(SealKey::from_base64("***").unwrap_err(), KeyError::NotBase64);
    }

    proptest! {
        #[test]
        fn sealed_values_open_to_what_was_sealed(plaintext in proptest::collection::vec(any::<u8>(), 0..512)) {
            let token = sealer().seal(Purpose::Session, &plaintext);
            prop_assert!(token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            prop_assert_eq!(sealer().open(Purpose::Session, &token, Instant::now()), Some(plaintext));
        }

        #[test]
        fn opening_garbage_never_panics(token in ".*") {
            let _ = sealer().open(Purpose::Session, &token, Instant::now());
        }
    }
}
