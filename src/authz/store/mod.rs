//! What the authorization server remembers: clients, authorization codes,
//! refresh-token families, consents (per user, client and resource) and signing keys, behind the [`Store`] trait
//! (async, so that a shared store can sit behind it), and the backends that keep
//! it: [`memory`] (this process only: tests and development), [`sqlite`] (a file
//! that survives restarts: the embedded default for production) and [`redis`]
//! (shared by several replicas). [`open`] picks the one `[auth.server] storage` names.
//! Codes and refresh tokens are kept by their SHA-256 only.

pub(crate) mod memory;
pub(crate) mod redis;
pub(crate) mod sqlite;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::config::{AuthServerConfig, StorageKind};
use crate::store::redis::Target;

/// A registered client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Client {
    /// The client id.
    pub(crate) client_id: String,
    /// SHA-256 of its secret (a confidential client), else none (a public one).
    pub(crate) secret_sha256: Option<[u8; 32]>,
    /// Its exact redirect URIs.
    pub(crate) redirect_uris: Vec<String>,
    /// The name shown on the consent page.
    pub(crate) client_name: Option<String>,
    /// How it came to be known.
    pub(crate) origin: ClientOrigin,
    /// When it was registered (seconds since the epoch).
    pub(crate) registered_at: u64,
    /// The registration as the client sent it (echoed back, RFC 7591 §3.2.1).
    pub(crate) metadata: Option<serde_json::Value>,
}

/// How a client came to be known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ClientOrigin {
    /// `[[auth.server.clients]]`.
    Static,
    /// Dynamic Client Registration; forgotten when unused for `registration_expiry`.
    Dynamic,
    /// A Client ID Metadata Document.
    MetadataDocument,
}

/// What an authorization code stands for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Grant {
    /// The client it was issued to.
    pub(crate) client_id: String,
    /// The user (the token's `sub`).
    pub(crate) subject: String,
    /// The redirect URI of the authorization request.
    pub(crate) redirect_uri: String,
    /// The PKCE S256 challenge.
    pub(crate) code_challenge: String,
    /// The resource (the token's `aud`).
    pub resource: String,
    /// The granted scopes.
    pub scopes: Vec<String>,
    /// When the code (or the refresh token) stops working.
    pub(crate) expires_at: u64,
}

/// A code taken from the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// First use: what it grants.
    Fresh(Grant),
    /// Used before: the refresh-token family it produced (to revoke), if any.
    Reused(Option<String>),
    /// Unknown.
    Missing,
}

/// A refresh token taken from the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TakenRefresh {
    /// First use of a live token: its family and grant.
    Fresh(String, Grant),
    /// Used before (or its family was revoked): the family, now revoked.
    Reused(String),
    /// Unknown.
    Missing,
}

/// A user's consent to a client acting on one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Consent {
    /// The user.
    pub(crate) subject: String,
    /// The client.
    pub(crate) client_id: String,
    /// The protected resource (a token's `aud`).
    pub(crate) resource: String,
    /// The scopes consented to.
    pub(crate) scopes: Vec<String>,
}

/// A signing key as stored (the private key too: storage must be protected like a secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredKey {
    /// The key id.
    pub(crate) kid: String,
    /// The Ed25519 seed.
    pub(crate) seed: [u8; 32],
    /// When it was made.
    pub(crate) created_at: u64,
}

/// Storage errors (a shared store that cannot be reached).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("authorization server storage: {0}")]
pub(crate) struct StoreError(pub(crate) String);

/// The result of a store call.
pub(crate) type Stored<'a, T> = BoxFuture<'a, Result<T, StoreError>>;

/// Where the authorization server keeps its state.
pub(crate) trait Store: Send + Sync {
    /// Registers (or replaces) a client.
    fn put_client(&self, client: Client) -> Stored<'_, ()>;
    /// A client by id; `now` marks it used.
    fn client(&self, client_id: &str, now: u64) -> Stored<'_, Option<Client>>;
    /// Forgets dynamic clients unused since `before`; how many.
    fn expire_clients(&self, before: u64) -> Stored<'_, usize>;
    /// Forgets the static clients whose ids are not in `keep` (removed from the
    /// configuration since a durable store remembered them); how many.
    fn forget_static_clients(&self, keep: Vec<String>) -> Stored<'_, usize>;
    /// Stores a code (its digest).
    fn put_code(&self, digest: [u8; 32], grant: Grant) -> Stored<'_, ()>;
    /// Takes a code: the first time its grant, afterwards [`Taken::Reused`].
    fn take_code(&self, digest: [u8; 32]) -> Stored<'_, Taken>;
    /// Records the refresh-token family a code produced (revoked if the code is reused).
    fn link_code(&self, digest: [u8; 32], family: String) -> Stored<'_, ()>;
    /// Stores a refresh token of `family`.
    fn put_refresh(&self, digest: [u8; 32], family: String, grant: Grant) -> Stored<'_, ()>;
    /// Takes a refresh token: the first time its family and grant; a second use
    /// revokes the whole family.
    fn take_refresh(&self, digest: [u8; 32]) -> Stored<'_, TakenRefresh>;
    /// Revokes a family: none of its refresh tokens works any more.
    fn revoke_family(&self, family: String) -> Stored<'_, ()>;
    /// The family of a refresh token (used or not) and its client, for revocation.
    fn family_of(&self, digest: [u8; 32]) -> Stored<'_, Option<(String, String)>>;
    /// The scopes `subject` consented to for `client_id` on `resource` (a consent
    /// to one resource says nothing of another).
    fn consent(&self, subject: &str, client_id: &str, resource: &str) -> Stored<'_, Option<Vec<String>>>;
    /// Remembers a consent to `resource`.
    fn put_consent(&self, consent: Consent) -> Stored<'_, ()>;
    /// The signing keys, oldest first.
    fn signing_keys(&self) -> Stored<'_, Vec<StoredKey>>;
    /// Replaces the signing keys if they are still `expected` (compare and set: two
    /// replicas rotating at once agree on one set); the keys stored afterwards.
    fn put_signing_keys(&self, expected: Vec<StoredKey>, keys: Vec<StoredKey>) -> Stored<'_, Vec<StoredKey>>;
    /// Forgets what expired before `now` (codes, refresh tokens, revocations) where
    /// the backend does not expire them itself.
    fn sweep(&self, now: u64) -> Stored<'_, ()> {
        let _ = now;
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The store `[auth.server] storage` names, opened (the SQLite file created and
/// migrated; Redis is only connected on first use).
pub(crate) fn open(config: &AuthServerConfig, redis: Option<Target>) -> Result<Arc<dyn Store>, StoreError> {
    Ok(match config.storage {
        StorageKind::Memory => Arc::new(memory::MemoryStore::default()),
        StorageKind::Sqlite => {
            let path = config
                .sqlite_path
                .as_deref()
                .ok_or_else(|| StoreError("storage = \"sqlite\" needs sqlite_path".into()))?;
            Arc::new(sqlite::SqliteStore::open(path)?)
        }
        StorageKind::Redis => {
            let target = redis.ok_or_else(|| StoreError("storage = \"redis\" needs [redis] url".into()))?;
            Arc::new(redis::RedisStore::new(target, config)?)
        }
    })
}

/// Seconds since the epoch.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
