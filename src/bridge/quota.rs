//! Things a principal holds open, counted per principal and in all: open
//! listens (`limits.max_listens_per_principal`, `limits.max_listens`) and
//! requests in flight (`limits.max_in_flight_per_principal`). A [`Hold`] is one
//! place in a [`HeldQuota`], given back when dropped; past a bound the refusal
//! is [`Rejection::QuotaExceeded`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::protocol::errors::Rejection;

/// Things of one kind held open, by principal.
pub struct HeldQuota {
    /// What is held, for the refusal: `listens`, `requests in flight`.
    what: &'static str,
    /// Held by principal; a std mutex, never held across `.await`.
    open: Mutex<HashMap<String, usize>>,
    /// The bounds; a reload may change them (what is held above a lowered bound stays).
    per_principal: AtomicUsize,
    max: AtomicUsize,
    /// Whether the anonymous principal (a gateway without authentication) is counted.
    binds_anonymous: AtomicBool,
}

/// One place in a [`HeldQuota`], given back when dropped.
pub struct Hold {
    quota: Arc<HeldQuota>,
    principal: String,
}

impl HeldQuota {
    /// A quota of `per_principal` each, `max` in all, of `what`.
    pub fn new(what: &'static str, per_principal: usize, max: usize) -> Arc<HeldQuota> {
        Arc::new(HeldQuota {
            what,
            open: Mutex::new(HashMap::new()),
            per_principal: AtomicUsize::new(per_principal),
            max: AtomicUsize::new(max),
            binds_anonymous: AtomicBool::new(true),
        })
    }

    /// Whether `principal` is counted: everyone, unless the anonymous one is spared.
    pub fn binds(&self, principal: &crate::auth::Principal) -> bool {
        !principal.is_anonymous() || self.binds_anonymous.load(Ordering::Relaxed)
    }

    /// Whether the anonymous principal is counted (set at start and by a reload).
    pub fn set_binds_anonymous(&self, binds: bool) {
        self.binds_anonymous.store(binds, Ordering::Relaxed);
    }

    /// New bounds (a reload): they apply to the next place asked for.
    pub fn set_bounds(&self, per_principal: usize, max: usize) {
        self.per_principal.store(per_principal, Ordering::Relaxed);
        self.max.store(max, Ordering::Relaxed);
    }

    /// A place for one more of `principal`'s, or the refusal.
    pub fn hold(self: &Arc<Self>, principal: &str) -> Result<Hold, Rejection> {
        let mut open = self.lock();
        let total: usize = open.values().sum();
        let own = open.get(principal).copied().unwrap_or(0);
        let (per_principal, max) = (
            self.per_principal.load(Ordering::Relaxed),
            self.max.load(Ordering::Relaxed),
        );
        if own >= per_principal || total >= max {
            let limit = if own >= per_principal { per_principal } else { max };
            return Err(Rejection::QuotaExceeded { what: self.what, limit });
        }
        *open.entry(principal.to_owned()).or_insert(0) += 1;
        Ok(Hold {
            quota: self.clone(),
            principal: principal.to_owned(),
        })
    }

    /// Held in all.
    pub fn len(&self) -> usize {
        self.lock().values().sum()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut open = self.quota.lock();
        if let Some(n) = open.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_per_principal_and_in_all_and_given_back() {
        let quota = HeldQuota::new("requests in flight", 2, 3);
        let a1 = quota.hold("a").ok();
        let _a2 = quota.hold("a").ok();
        // (what, principal, expected refusal bound or None when it holds)
        let table: [(&str, &str, Option<usize>); 3] = [
            ("a third of a's, past its own bound", "a", Some(2)),
            ("b's first, within both", "b", None),
            ("b's second, past the bound in all", "b", Some(3)),
        ];
        let mut kept = Vec::new();
        for (what, principal, refused) in table {
            match (quota.hold(principal), refused) {
                (Ok(hold), None) => kept.push(hold),
                (Err(Rejection::QuotaExceeded { what: w, limit }), Some(bound)) => {
                    assert_eq!((w, limit), ("requests in flight", bound), "{what}");
                }
                (other, _) => panic!("{what}: {:?}", other.err()),
            }
        }
        assert_eq!(quota.len(), 3);
        drop(a1);
        let a3 = quota.hold("a");
        assert!(a3.is_ok(), "a's place is given back");
        quota.set_bounds(1, 3);
        assert!(quota.hold("b").is_err(), "b holds one: at a lowered bound");
        drop(a3);
        drop(kept);
        assert_eq!(quota.len(), 1, "only a's second is still held");
    }
}
