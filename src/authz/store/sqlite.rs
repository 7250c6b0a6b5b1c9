//! [`SqliteStore`]: the authorization server's state in one SQLite file, so that
//! clients, codes, refresh-token families, consents and signing keys survive a
//! restart (the embedded choice for a single instance; no server to run). One
//! connection, used off the async threads (`spawn_blocking`), each call one
//! transaction. The file is created with mode 0600, and an existing one (with
//! SQLite's `-wal` and `-shm` files beside it) that others may read or write is
//! made 0600 before anything is written to it, or refused when that cannot be
//! done: it holds the private keys.
//! What expired is deleted by [`Store::sweep`] (the housekeeping tick).

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{Client, ClientOrigin, Consent, Grant, Store, StoreError, Stored, StoredKey, Taken, TakenRefresh};

/// Codes are kept this long after they expire, so that a late reuse is still
/// recognised (and revokes what the code produced).
const CODE_KEPT_AFTER_EXPIRY: u64 = 600;

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA busy_timeout = 5000;
CREATE TABLE IF NOT EXISTS clients (
    client_id TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    is_static INTEGER NOT NULL,
    used_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS codes (
    digest BLOB PRIMARY KEY,
    grant_json TEXT NOT NULL,
    used INTEGER NOT NULL DEFAULT 0,
    family TEXT,
    keep_until INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS refresh_tokens (
    digest BLOB PRIMARY KEY,
    family TEXT NOT NULL,
    grant_json TEXT NOT NULL,
    used INTEGER NOT NULL DEFAULT 0,
    expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS refresh_tokens_family ON refresh_tokens (family);
CREATE TABLE IF NOT EXISTS revoked_families (family TEXT PRIMARY KEY);
-- A consent names its resource; a table of consents that name none is not read.
DROP TABLE IF EXISTS consents;
CREATE TABLE IF NOT EXISTS resource_consents (
    subject TEXT NOT NULL,
    client_id TEXT NOT NULL,
    resource TEXT NOT NULL,
    scopes TEXT NOT NULL,
    PRIMARY KEY (subject, client_id, resource)
);
CREATE TABLE IF NOT EXISTS signing_keys (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    body TEXT NOT NULL
);
";

/// The state in a SQLite file.
pub(crate) struct SqliteStore {
    connection: Arc<Mutex<Connection>>,
}

fn failed(error: impl std::fmt::Display) -> StoreError {
    StoreError(format!("sqlite: {error}"))
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(failed)
}

fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(failed)
}

impl SqliteStore {
    /// Opens (creating, with mode 0600, and migrating) the file at `path`.
    pub(crate) fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        if !path.exists() {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            match options.open(path) {
                Ok(_) => {}
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(StoreError(format!("creating {}: {error}", path.display()))),
            }
        }
        #[cfg(unix)]
        for file in [path.to_owned(), sidecar(path, "-wal"), sidecar(path, "-shm")] {
            private(&file)?;
        }
        let connection = Connection::open(path).map_err(|e| StoreError(format!("opening {}: {e}", path.display())))?;
        connection
            .execute_batch(SCHEMA)
            .map_err(|e| StoreError(format!("preparing {}: {e}", path.display())))?;
        Ok(SqliteStore {
            connection: Arc::new(Mutex::new(connection)),
        })
    }

    /// Runs `f` in one immediate transaction on a blocking thread.
    fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Stored<'_, T> {
        let connection = self.connection.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut connection = connection.lock().unwrap_or_else(|e| e.into_inner());
                let transaction = connection
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(failed)?;
                let value = f(&transaction)?;
                transaction.commit().map_err(failed)?;
                Ok(value)
            })
            .await
            .map_err(failed)?
        })
    }
}

/// `path` with `suffix` appended (SQLite's `-wal` and `-shm` files).
#[cfg(unix)]
fn sidecar(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

/// Makes `file`, if it exists, readable and writable by its owner only.
#[cfg(unix)]
fn private(file: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = match std::fs::metadata(file) {
        Ok(metadata) => metadata.permissions().mode() & 0o777,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(StoreError(format!("reading {}: {error}", file.display()))),
    };
    if mode & 0o077 == 0 {
        return Ok(());
    }
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)).map_err(|error| {
        StoreError(format!(
            "{} has mode {mode:04o} (others may read the signing keys it holds) and cannot be made 0600: \
             {error}; run `chmod 600 {}` as its owner",
            file.display(),
            file.display()
        ))
    })?;
    tracing::warn!(file = %file.display(), was = %format!("{mode:04o}"), "made the authorization server's storage file 0600: it holds the signing keys");
    Ok(())
}

impl Store for SqliteStore {
    fn put_client(&self, client: Client) -> Stored<'_, ()> {
        self.with(move |t| {
            t.execute(
                "INSERT OR REPLACE INTO clients (client_id, body, is_static, used_at) VALUES (?1, ?2, ?3, ?4)",
                params![
                    client.client_id,
                    to_json(&client)?,
                    client.origin == ClientOrigin::Static,
                    client.registered_at as i64
                ],
            )
            .map_err(failed)?;
            Ok(())
        })
    }

    fn client(&self, client_id: &str, now: u64) -> Stored<'_, Option<Client>> {
        let id = client_id.to_owned();
        self.with(move |t| {
            let body: Option<String> = t
                .query_row("SELECT body FROM clients WHERE client_id = ?1", params![id], |row| {
                    row.get(0)
                })
                .optional()
                .map_err(failed)?;
            let Some(body) = body else { return Ok(None) };
            t.execute(
                "UPDATE clients SET used_at = ?2 WHERE client_id = ?1",
                params![id, now as i64],
            )
            .map_err(failed)?;
            Ok(Some(from_json(&body)?))
        })
    }

    fn expire_clients(&self, before: u64) -> Stored<'_, usize> {
        self.with(move |t| {
            t.execute(
                "DELETE FROM clients WHERE is_static = 0 AND used_at < ?1",
                params![before as i64],
            )
            .map_err(failed)
        })
    }

    fn forget_static_clients(&self, keep: Vec<String>) -> Stored<'_, usize> {
        self.with(move |t| {
            let ids: Vec<String> = {
                let mut statement = t
                    .prepare("SELECT client_id FROM clients WHERE is_static = 1")
                    .map_err(failed)?;
                let rows = statement.query_map([], |row| row.get(0)).map_err(failed)?;
                rows.collect::<Result<_, _>>().map_err(failed)?
            };
            let mut forgotten = 0;
            for id in ids.iter().filter(|id| !keep.contains(id)) {
                forgotten += t
                    .execute("DELETE FROM clients WHERE client_id = ?1", params![id])
                    .map_err(failed)?;
            }
            Ok(forgotten)
        })
    }

    fn put_code(&self, digest: [u8; 32], grant: Grant) -> Stored<'_, ()> {
        self.with(move |t| {
            t.execute(
                "INSERT OR REPLACE INTO codes (digest, grant_json, used, family, keep_until) VALUES (?1, ?2, 0, NULL, ?3)",
                params![
                    &digest[..],
                    to_json(&grant)?,
                    grant.expires_at.saturating_add(CODE_KEPT_AFTER_EXPIRY) as i64
                ],
            )
            .map_err(failed)?;
            Ok(())
        })
    }

    fn take_code(&self, digest: [u8; 32]) -> Stored<'_, Taken> {
        self.with(move |t| {
            let row: Option<(String, bool, Option<String>)> = t
                .query_row(
                    "SELECT grant_json, used, family FROM codes WHERE digest = ?1",
                    params![&digest[..]],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )
                .optional()
                .map_err(failed)?;
            match row {
                None => Ok(Taken::Missing),
                Some((_, true, family)) => Ok(Taken::Reused(family)),
                Some((grant, false, _)) => {
                    t.execute("UPDATE codes SET used = 1 WHERE digest = ?1", params![&digest[..]])
                        .map_err(failed)?;
                    Ok(Taken::Fresh(from_json(&grant)?))
                }
            }
        })
    }

    fn link_code(&self, digest: [u8; 32], family: String) -> Stored<'_, ()> {
        self.with(move |t| {
            t.execute(
                "UPDATE codes SET family = ?2 WHERE digest = ?1",
                params![&digest[..], family],
            )
            .map_err(failed)?;
            Ok(())
        })
    }

    fn put_refresh(&self, digest: [u8; 32], family: String, grant: Grant) -> Stored<'_, ()> {
        self.with(move |t| {
            t.execute(
                "INSERT OR REPLACE INTO refresh_tokens (digest, family, grant_json, used, expires_at) VALUES (?1, ?2, ?3, 0, ?4)",
                params![&digest[..], family, to_json(&grant)?, grant.expires_at as i64],
            )
            .map_err(failed)?;
            Ok(())
        })
    }

    fn take_refresh(&self, digest: [u8; 32]) -> Stored<'_, TakenRefresh> {
        self.with(move |t| {
            let row: Option<(String, String, bool, bool)> = t
                .query_row(
                    "SELECT r.family, r.grant_json, r.used, v.family IS NOT NULL \
                     FROM refresh_tokens r LEFT JOIN revoked_families v ON v.family = r.family \
                     WHERE r.digest = ?1",
                    params![&digest[..]],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
                )
                .optional()
                .map_err(failed)?;
            let Some((family, grant, used, revoked)) = row else {
                return Ok(TakenRefresh::Missing);
            };
            if used || revoked {
                t.execute(
                    "INSERT OR IGNORE INTO revoked_families (family) VALUES (?1)",
                    params![family],
                )
                .map_err(failed)?;
                return Ok(TakenRefresh::Reused(family));
            }
            t.execute(
                "UPDATE refresh_tokens SET used = 1 WHERE digest = ?1",
                params![&digest[..]],
            )
            .map_err(failed)?;
            Ok(TakenRefresh::Fresh(family, from_json(&grant)?))
        })
    }

    fn revoke_family(&self, family: String) -> Stored<'_, ()> {
        self.with(move |t| {
            t.execute(
                "INSERT OR IGNORE INTO revoked_families (family) VALUES (?1)",
                params![family],
            )
            .map_err(failed)?;
            Ok(())
        })
    }

    fn family_of(&self, digest: [u8; 32]) -> Stored<'_, Option<(String, String)>> {
        self.with(move |t| {
            let row: Option<(String, String)> = t
                .query_row(
                    "SELECT family, grant_json FROM refresh_tokens WHERE digest = ?1",
                    params![&digest[..]],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(failed)?;
            match row {
                None => Ok(None),
                Some((family, grant)) => Ok(Some((family, from_json::<Grant>(&grant)?.client_id))),
            }
        })
    }

    fn consent(&self, subject: &str, client_id: &str, resource: &str) -> Stored<'_, Option<Vec<String>>> {
        let (subject, client_id, resource) = (subject.to_owned(), client_id.to_owned(), resource.to_owned());
        self.with(move |t| {
            let scopes: Option<String> = t
                .query_row(
                    "SELECT scopes FROM resource_consents WHERE subject = ?1 AND client_id = ?2 AND resource = ?3",
                    params![subject, client_id, resource],
                    |row| row.get(0),
                )
                .optional()
                .map_err(failed)?;
            scopes.map(|s| from_json(&s)).transpose()
        })
    }

    fn put_consent(&self, consent: Consent) -> Stored<'_, ()> {
        self.with(move |t| {
            t.execute(
                "INSERT OR REPLACE INTO resource_consents (subject, client_id, resource, scopes) VALUES (?1, ?2, ?3, ?4)",
                params![
                    consent.subject,
                    consent.client_id,
                    consent.resource,
                    to_json(&consent.scopes)?
                ],
            )
            .map_err(failed)?;
            Ok(())
        })
    }

    fn signing_keys(&self) -> Stored<'_, Vec<StoredKey>> {
        self.with(read_keys)
    }

    fn put_signing_keys(&self, expected: Vec<StoredKey>, keys: Vec<StoredKey>) -> Stored<'_, Vec<StoredKey>> {
        self.with(move |t| {
            let current = read_keys(t)?;
            if current != expected {
                return Ok(current);
            }
            t.execute(
                "INSERT OR REPLACE INTO signing_keys (id, body) VALUES (1, ?1)",
                params![to_json(&keys)?],
            )
            .map_err(failed)?;
            Ok(keys)
        })
    }

    fn sweep(&self, now: u64) -> Stored<'_, ()> {
        self.with(move |t| {
            t.execute("DELETE FROM codes WHERE keep_until < ?1", params![now as i64])
                .map_err(failed)?;
            t.execute("DELETE FROM refresh_tokens WHERE expires_at < ?1", params![now as i64])
                .map_err(failed)?;
            // A revocation matters while a token of its family lives.
            t.execute(
                "DELETE FROM revoked_families WHERE family NOT IN (SELECT family FROM refresh_tokens)",
                [],
            )
            .map_err(failed)?;
            Ok(())
        })
    }
}

fn read_keys(t: &rusqlite::Transaction<'_>) -> Result<Vec<StoredKey>, StoreError> {
    let body: Option<String> = t
        .query_row("SELECT body FROM signing_keys WHERE id = 1", [], |row| row.get(0))
        .optional()
        .map_err(failed)?;
    body.map_or(Ok(Vec::new()), |b| from_json(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(expires_at: u64) -> Grant {
        Grant {
            client_id: "c".into(),
            subject: "alice".into(),
            redirect_uri: "http://127.0.0.1/cb".into(),
            code_challenge: "x".into(),
            resource: "http://127.0.0.1:1/mcp".into(),
            scopes: vec!["mcp".into()],
            expires_at,
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn state_survives_reopening_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("as.db");
        let rt = runtime();
        let key = super::super::super::signing::generate(5);
        rt.block_on(async {
            let store = SqliteStore::open(&path).expect("open");
            store.put_code([1; 32], grant(u64::MAX / 4)).await.expect("code");
            store
                .put_refresh([2; 32], "f".into(), grant(u64::MAX / 4))
                .await
                .expect("refresh");
            store
                .put_consent(Consent {
                    subject: "alice".into(),
                    client_id: "c".into(),
                    resource: "http://127.0.0.1:1/mcp".into(),
                    scopes: vec!["mcp".into()],
                })
                .await
                .expect("consent");
            let stored = store.put_signing_keys(vec![], vec![key.clone()]).await.expect("keys");
            assert_eq!(stored, vec![key.clone()]);
            // Compare and set: a writer that read stale keys does not overwrite.
            let kept = store.put_signing_keys(vec![], vec![]).await.expect("stale");
            assert_eq!(kept, vec![key.clone()]);
        });
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        rt.block_on(async {
            let store = SqliteStore::open(&path).expect("reopen");
            assert_eq!(store.take_code([1; 32]).await, Ok(Taken::Fresh(grant(u64::MAX / 4))));
            assert_eq!(store.take_code([1; 32]).await, Ok(Taken::Reused(None)));
            assert_eq!(
                store.take_refresh([2; 32]).await,
                Ok(TakenRefresh::Fresh("f".into(), grant(u64::MAX / 4)))
            );
            assert_eq!(store.take_refresh([2; 32]).await, Ok(TakenRefresh::Reused("f".into())));
            assert_eq!(
                store.consent("alice", "c", "http://127.0.0.1:1/mcp").await,
                Ok(Some(vec!["mcp".to_owned()]))
            );
            assert_eq!(store.consent("alice", "c", "http://127.0.0.1:1/other").await, Ok(None));
            assert_eq!(store.signing_keys().await, Ok(vec![key]));
        });
    }

    #[cfg(unix)]
    #[test]
    fn an_existing_file_others_may_read_is_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("as.db");
        for file in [path.clone(), sidecar(&path, "-wal")] {
            std::fs::write(&file, b"").expect("create");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        drop(SqliteStore::open(&path).expect("open"));
        for file in [path.clone(), sidecar(&path, "-wal")] {
            let mode = std::fs::metadata(&file).map(|m| m.permissions().mode() & 0o777);
            assert!(matches!(mode, Ok(0o600) | Err(_)), "{}: {mode:?}", file.display());
        }
    }

    #[test]
    fn sweeping_forgets_what_expired() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rt = runtime();
        rt.block_on(async {
            let store = SqliteStore::open(&dir.path().join("as.db")).expect("open");
            store.put_code([1; 32], grant(100)).await.expect("code");
            store
                .put_refresh([2; 32], "old".into(), grant(100))
                .await
                .expect("refresh");
            store
                .put_refresh([3; 32], "live".into(), grant(10_000))
                .await
                .expect("refresh");
            store.revoke_family("old".into()).await.expect("revoke");
            store.sweep(100 + CODE_KEPT_AFTER_EXPIRY + 1).await.expect("sweep");
            assert_eq!(store.take_code([1; 32]).await, Ok(Taken::Missing));
            assert_eq!(store.take_refresh([2; 32]).await, Ok(TakenRefresh::Missing));
            assert!(matches!(store.take_refresh([3; 32]).await, Ok(TakenRefresh::Fresh(..))));
        });
    }
}
