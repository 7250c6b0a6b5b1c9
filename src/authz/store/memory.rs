//! The in-memory [`MemoryStore`]: state in this process only (tests, and single
//! instances that may forget everything on restart). Every map is bounded: once
//! one is full, its expired entries go, and if that is not enough, all of them.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use super::{Client, ClientOrigin, Consent, Grant, Store, Stored, StoredKey, Taken, TakenRefresh, now};

/// Most entries of each map of the [`MemoryStore`].
const MAX_ENTRIES: usize = 100_000;

/// State in this process only (tests, single instances that may forget on restart).
#[derive(Default)]
pub(crate) struct MemoryStore {
    inner: Mutex<Memory>,
}

#[derive(Default)]
struct Memory {
    clients: HashMap<String, (Client, u64)>,
    codes: HashMap<[u8; 32], CodeEntry>,
    refresh: HashMap<[u8; 32], RefreshEntry>,
    revoked: HashSet<String>,
    /// (subject, client, resource) → scopes.
    consents: HashMap<(String, String, String), Vec<String>>,
    keys: Vec<StoredKey>,
}

struct CodeEntry {
    grant: Grant,
    used: bool,
    family: Option<String>,
}

struct RefreshEntry {
    family: String,
    grant: Grant,
    used: bool,
}

impl MemoryStore {
    fn with<T: Send + 'static>(&self, f: impl FnOnce(&mut Memory) -> T) -> Stored<'_, T> {
        let value = f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()));
        Box::pin(std::future::ready(Ok(value)))
    }
}

/// Drops the entries of `map` that `expired` says are gone, and if it is still full,
/// every entry (a flood of codes or tokens must not grow memory without bound).
fn bound<K, V>(map: &mut HashMap<K, V>, expired: impl Fn(&V) -> bool) {
    if map.len() >= MAX_ENTRIES {
        map.retain(|_, v| !expired(v));
    }
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
}

impl Store for MemoryStore {
    fn put_client(&self, client: Client) -> Stored<'_, ()> {
        self.with(move |m| {
            let at = client.registered_at;
            bound(&mut m.clients, |(c, _)| c.origin != ClientOrigin::Static);
            m.clients.insert(client.client_id.clone(), (client, at));
        })
    }

    fn client(&self, client_id: &str, now: u64) -> Stored<'_, Option<Client>> {
        let id = client_id.to_owned();
        self.with(move |m| {
            m.clients.get_mut(&id).map(|(client, used)| {
                *used = now;
                client.clone()
            })
        })
    }

    fn expire_clients(&self, before: u64) -> Stored<'_, usize> {
        self.with(move |m| {
            let was = m.clients.len();
            m.clients
                .retain(|_, (c, used)| c.origin == ClientOrigin::Static || *used >= before);
            was - m.clients.len()
        })
    }

    fn forget_static_clients(&self, keep: Vec<String>) -> Stored<'_, usize> {
        self.with(move |m| {
            let was = m.clients.len();
            m.clients
                .retain(|id, (c, _)| c.origin != ClientOrigin::Static || keep.contains(id));
            was - m.clients.len()
        })
    }

    fn put_code(&self, digest: [u8; 32], grant: Grant) -> Stored<'_, ()> {
        self.with(move |m| {
            let t = now();
            bound(&mut m.codes, |e| e.grant.expires_at + 600 < t);
            m.codes.insert(
                digest,
                CodeEntry {
                    grant,
                    used: false,
                    family: None,
                },
            );
        })
    }

    fn take_code(&self, digest: [u8; 32]) -> Stored<'_, Taken> {
        self.with(move |m| match m.codes.get_mut(&digest) {
            None => Taken::Missing,
            Some(entry) if entry.used => Taken::Reused(entry.family.clone()),
            Some(entry) => {
                entry.used = true;
                Taken::Fresh(entry.grant.clone())
            }
        })
    }

    fn link_code(&self, digest: [u8; 32], family: String) -> Stored<'_, ()> {
        self.with(move |m| {
            if let Some(entry) = m.codes.get_mut(&digest) {
                entry.family = Some(family);
            }
        })
    }

    fn put_refresh(&self, digest: [u8; 32], family: String, grant: Grant) -> Stored<'_, ()> {
        self.with(move |m| {
            let t = now();
            bound(&mut m.refresh, |e| e.grant.expires_at < t);
            m.refresh.insert(
                digest,
                RefreshEntry {
                    family,
                    grant,
                    used: false,
                },
            );
        })
    }

    fn take_refresh(&self, digest: [u8; 32]) -> Stored<'_, TakenRefresh> {
        self.with(move |m| {
            let Some(entry) = m.refresh.get_mut(&digest) else {
                return TakenRefresh::Missing;
            };
            if entry.used || m.revoked.contains(&entry.family) {
                let family = entry.family.clone();
                m.revoked.insert(family.clone());
                return TakenRefresh::Reused(family);
            }
            entry.used = true;
            TakenRefresh::Fresh(entry.family.clone(), entry.grant.clone())
        })
    }

    fn revoke_family(&self, family: String) -> Stored<'_, ()> {
        self.with(move |m| {
            if m.revoked.len() >= MAX_ENTRIES {
                // Forget revocations whose tokens are all gone.
                let live: HashSet<&String> = m.refresh.values().map(|e| &e.family).collect();
                let keep: HashSet<String> = m.revoked.iter().filter(|f| live.contains(f)).cloned().collect();
                m.revoked = keep;
            }
            m.revoked.insert(family);
        })
    }

    fn family_of(&self, digest: [u8; 32]) -> Stored<'_, Option<(String, String)>> {
        self.with(move |m| {
            m.refresh
                .get(&digest)
                .map(|e| (e.family.clone(), e.grant.client_id.clone()))
        })
    }

    fn consent(&self, subject: &str, client_id: &str, resource: &str) -> Stored<'_, Option<Vec<String>>> {
        let key = (subject.to_owned(), client_id.to_owned(), resource.to_owned());
        self.with(move |m| m.consents.get(&key).cloned())
    }

    fn put_consent(&self, consent: Consent) -> Stored<'_, ()> {
        self.with(move |m| {
            bound(&mut m.consents, |_| false);
            m.consents
                .insert((consent.subject, consent.client_id, consent.resource), consent.scopes);
        })
    }

    fn signing_keys(&self) -> Stored<'_, Vec<StoredKey>> {
        self.with(|m| m.keys.clone())
    }

    fn put_signing_keys(&self, expected: Vec<StoredKey>, keys: Vec<StoredKey>) -> Stored<'_, Vec<StoredKey>> {
        self.with(move |m| {
            if m.keys == expected {
                m.keys = keys;
            }
            m.keys.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> Grant {
        Grant {
            client_id: "c".into(),
            subject: "alice".into(),
            redirect_uri: "http://127.0.0.1/cb".into(),
            code_challenge: "x".into(),
            resource: "http://127.0.0.1:1/mcp".into(),
            scopes: vec![],
            expires_at: u64::MAX / 2,
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        futures_util::FutureExt::now_or_never(f).expect("the memory store never waits")
    }

    #[test]
    fn codes_are_single_use_and_remember_their_family() {
        let store = MemoryStore::default();
        block_on(store.put_code([1; 32], grant())).expect("put");
        assert_eq!(block_on(store.take_code([1; 32])), Ok(Taken::Fresh(grant())));
        block_on(store.link_code([1; 32], "f1".into())).expect("link");
        assert_eq!(block_on(store.take_code([1; 32])), Ok(Taken::Reused(Some("f1".into()))));
        assert_eq!(block_on(store.take_code([2; 32])), Ok(Taken::Missing));
    }

    #[test]
    fn a_reused_refresh_token_revokes_its_family() {
        let store = MemoryStore::default();
        block_on(store.put_refresh([1; 32], "f".into(), grant())).expect("put");
        block_on(store.put_refresh([2; 32], "f".into(), grant())).expect("put");
        assert_eq!(
            block_on(store.take_refresh([1; 32])),
            Ok(TakenRefresh::Fresh("f".into(), grant()))
        );
        assert_eq!(
            block_on(store.take_refresh([1; 32])),
            Ok(TakenRefresh::Reused("f".into()))
        );
        // The family's newer token is dead too.
        assert_eq!(
            block_on(store.take_refresh([2; 32])),
            Ok(TakenRefresh::Reused("f".into()))
        );
    }

    #[test]
    fn unused_dynamic_clients_expire_and_static_ones_stay() {
        let store = MemoryStore::default();
        for (id, origin) in [("s", ClientOrigin::Static), ("d", ClientOrigin::Dynamic)] {
            let client = Client {
                client_id: id.into(),
                secret_sha256: None,
                redirect_uris: vec![],
                client_name: None,
                origin,
                registered_at: 10,
                metadata: None,
            };
            block_on(store.put_client(client)).expect("put");
        }
        assert_eq!(block_on(store.expire_clients(5)), Ok(0));
        assert_eq!(block_on(store.expire_clients(20)), Ok(1));
        assert!(block_on(store.client("s", 30)).expect("get").is_some());
        assert!(block_on(store.client("d", 30)).expect("get").is_none());
    }
}
