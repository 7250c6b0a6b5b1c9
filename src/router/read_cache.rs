//! The `resources/read` results a modern upstream let eragate keep: each for
//! the `ttlMs` the upstream gave it, shared by every principal only when it
//! said `public`, else kept per principal. Bounded in entries and in the size
//! of what one entry holds; whether a result may be kept is decided by
//! [`crate::translate::CachePolicy::keep_read`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::translate::CacheScope;

/// The largest result kept (its JSON text), in bytes: larger ones are served, not kept.
pub(crate) const MAX_KEPT_READ_BYTES: usize = 256 * 1024;

/// Whose read a kept result is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ReadKey {
    /// The URI read, as the upstream knows it.
    pub(crate) uri: String,
    /// The principal it was read for; `None` for a `public` result.
    pub(crate) principal: Option<String>,
}

struct Kept {
    result: Arc<Value>,
    fetched: Instant,
    ttl: Duration,
}

/// The reads kept for one backend.
pub(crate) struct ReadCache {
    max_entries: usize,
    kept: Mutex<HashMap<ReadKey, Kept>>,
}

impl ReadCache {
    /// An empty cache of at most `max_entries` results.
    pub(crate) fn new(max_entries: usize) -> ReadCache {
        ReadCache {
            max_entries,
            kept: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ReadKey, Kept>> {
        self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The result of reading `uri` that `principal` may be served at `now`: a
    /// public one, else its own; with `ttlMs` set to what is left of its time.
    pub(crate) fn lookup(&self, uri: &str, principal: &str, now: Instant) -> Option<Value> {
        let mut kept = self.lock();
        let public = ReadKey {
            uri: uri.to_owned(),
            principal: None,
        };
        let own = ReadKey {
            uri: uri.to_owned(),
            principal: Some(principal.to_owned()),
        };
        for key in [public, own] {
            let Some(entry) = kept.get(&key) else {
                continue;
            };
            let age = now.saturating_duration_since(entry.fetched);
            match entry.ttl.checked_sub(age).filter(|left| !left.is_zero()) {
                Some(left) => {
                    let mut result = (*entry.result).clone();
                    if let Some(object) = result.as_object_mut() {
                        let left = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
                        object.insert("ttlMs".into(), Value::from(left));
                    }
                    return Some(result);
                }
                None => {
                    kept.remove(&key);
                }
            }
        }
        None
    }

    /// Keeps `result` of reading `uri` for `ttl_ms`, for everyone (`public`) or
    /// for `principal` alone. A result too large is not kept; when full, the
    /// oldest result gives way.
    pub(crate) fn store(
        &self,
        uri: &str,
        principal: &str,
        result: Value,
        (ttl_ms, scope): (u64, CacheScope),
        now: Instant,
    ) {
        if self.max_entries == 0 || !within_bytes(&result, MAX_KEPT_READ_BYTES) {
            return;
        }
        let key = ReadKey {
            uri: uri.to_owned(),
            principal: match scope {
                CacheScope::Public => None,
                CacheScope::Private => Some(principal.to_owned()),
            },
        };
        let mut kept = self.lock();
        if kept.len() >= self.max_entries && !kept.contains_key(&key) {
            // Expired results go first; then the oldest.
            kept.retain(|_, entry| now.saturating_duration_since(entry.fetched) < entry.ttl);
            if kept.len() >= self.max_entries {
                let oldest = kept.iter().min_by_key(|(_, e)| e.fetched).map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    kept.remove(&oldest);
                }
            }
        }
        let entry = Kept {
            result: Arc::new(result),
            fetched: now,
            ttl: Duration::from_millis(ttl_ms),
        };
        kept.insert(key, entry);
    }

    /// How many results are kept (expired ones included until next touched).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is kept.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `value`'s JSON text is at most `limit` bytes (stops counting past it).
fn within_bytes(value: &Value, limit: usize) -> bool {
    struct Counter {
        written: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.written += bytes.len();
            if self.written > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Counter { written: 0, limit }, value).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Value {
        json!({"contents": [{"uri": "test://a", "text": text}], "ttlMs": 5000, "cacheScope": "public"})
    }

    #[test]
    fn kept_for_its_time_and_for_whom_it_may_be() {
        let cache = ReadCache::new(8);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        cache.store("test://a", "alice", read("a"), (5_000, CacheScope::Public), t0);
        cache.store("test://p", "alice", read("p"), (1_000, CacheScope::Private), t0);

        let cases = [
            (
                "public: bob is served it, with what is left",
                "test://a",
                "bob",
                2_000,
                Some(3_000),
            ),
            ("public: expired", "test://a", "bob", 5_000, None),
            (
                "private: its principal is served it",
                "test://p",
                "alice",
                500,
                Some(500),
            ),
            ("private: never another principal", "test://p", "bob", 500, None),
            ("never read", "test://x", "alice", 0, None),
        ];
        for (what, uri, principal, ms, left) in cases {
            let served = cache.lookup(uri, principal, at(ms));
            assert_eq!(served.map(|r| r["ttlMs"].as_u64().unwrap_or(0)), left, "{what}");
        }
        assert_eq!(
            cache.len(),
            1,
            "the expired public result was dropped when found expired"
        );
    }

    #[test]
    fn bounded_in_entries_and_bytes() {
        let cache = ReadCache::new(2);
        let t0 = Instant::now();
        let later = |ms: u64| t0 + Duration::from_millis(ms);
        cache.store("test://1", "", read("1"), (60_000, CacheScope::Public), later(0));
        cache.store("test://2", "", read("2"), (60_000, CacheScope::Public), later(1));
        cache.store("test://3", "", read("3"), (60_000, CacheScope::Public), later(2));
        assert_eq!(cache.len(), 2);
        assert!(cache.lookup("test://1", "", later(3)).is_none(), "the oldest gave way");
        assert!(cache.lookup("test://3", "", later(3)).is_some());

        let big = "x".repeat(MAX_KEPT_READ_BYTES);
        cache.store("test://big", "", read(&big), (60_000, CacheScope::Public), later(4));
        assert!(cache.lookup("test://big", "", later(5)).is_none(), "too large to keep");
        let none = ReadCache::new(0);
        none.store("test://1", "", read("1"), (60_000, CacheScope::Public), t0);
        assert!(none.is_empty());
    }
}
