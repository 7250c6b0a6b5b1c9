//! Tokens already verified, so a client's next request with the same token costs a
//! digest and a lookup instead of a signature check. Keyed by the SHA-256 of the whole
//! token, so only the identical token hits; an entry holds until the token's `exp`
//! (plus leeway), for the resource it was checked for, and only while the key set it
//! was checked with is still the current one (a JWKS change forgets everything).
//! Bounded: past `capacity` entries, the expired ones go, and if that is not enough,
//! all of them (a cache miss only costs a verification).

use std::sync::Arc;

use dashmap::DashMap;

use super::Principal;
use super::jwt::KeySet;

/// The default bound.
pub(crate) const DEFAULT_CAPACITY: usize = 10_000;

/// One verified token.
#[derive(Clone)]
pub struct Grant {
    /// Who it names.
    pub principal: Principal,
    /// Whether it carried every required scope.
    pub scoped: bool,
    /// Every scope it carried.
    pub scopes: Arc<[String]>,
    /// Until when (seconds since the epoch) it is accepted: `exp` + leeway.
    pub until: u64,
    /// Which resource it was checked for (the index of the MCP path).
    pub resource: usize,
    /// The key set that verified it.
    pub keys: Arc<KeySet>,
}

/// The cache.
pub struct Grants {
    entries: DashMap<[u8; 32], Grant>,
    capacity: usize,
}

impl Grants {
    /// An empty cache of at most `capacity` tokens.
    pub fn new(capacity: usize) -> Grants {
        Grants {
            entries: DashMap::new(),
            capacity,
        }
    }

    /// The grant of the token whose digest is `digest`, if it is still good for
    /// `resource` under `keys` at `now`.
    pub fn find(&self, digest: &[u8; 32], resource: usize, keys: &Arc<KeySet>, now: u64) -> Option<Grant> {
        let entry = self.entries.get(digest)?;
        let good = entry.resource == resource && now < entry.until && Arc::ptr_eq(&entry.keys, keys);
        good.then(|| entry.clone())
    }

    /// Remembers a verified token.
    pub fn insert(&self, digest: [u8; 32], grant: Grant, now: u64) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.len() >= self.capacity {
            self.entries.retain(|_, g| now < g.until);
            if self.entries.len() >= self.capacity {
                self.entries.clear();
            }
        }
        self.entries.insert(digest, grant);
    }

    /// How many tokens are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(until: u64, keys: &Arc<KeySet>) -> Grant {
        Grant {
            principal: Principal::named("i#s"),
            scoped: true,
            scopes: Arc::from(Vec::new()),
            until,
            resource: 0,
            keys: keys.clone(),
        }
    }

    #[test]
    fn hits_only_while_good() {
        let keys = Arc::new(KeySet::default());
        let other_keys = Arc::new(KeySet::default());
        let grants = Grants::new(10);
        grants.insert([1; 32], grant(100, &keys), 50);
        assert!(grants.find(&[1; 32], 0, &keys, 99).is_some());
        assert!(grants.find(&[1; 32], 0, &keys, 100).is_none(), "expired");
        assert!(grants.find(&[1; 32], 1, &keys, 99).is_none(), "another resource");
        assert!(grants.find(&[1; 32], 0, &other_keys, 99).is_none(), "another key set");
        assert!(grants.find(&[2; 32], 0, &keys, 99).is_none());
    }

    #[test]
    fn stays_bounded() {
        let keys = Arc::new(KeySet::default());
        let grants = Grants::new(3);
        for i in 0..10u8 {
            grants.insert([i; 32], grant(1000, &keys), 0);
            assert!(grants.len() <= 3);
        }
        grants.insert([20; 32], grant(5, &keys), 0);
        // Expired entries go first when full.
        grants.insert([21; 32], grant(1000, &keys), 10);
        assert!(grants.len() <= 3);
        assert!(grants.find(&[21; 32], 0, &keys, 10).is_some());
    }
}
