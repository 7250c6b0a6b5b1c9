//! Things a principal holds open, counted per principal and in all: open
//! listens (`limits.max_listens_per_principal`, `limits.max_listens`),
//! HTTP+SSE streams (`limits.max_sse_streams_per_principal`), requests in
//! flight (`limits.max_in_flight_per_principal`) and each upstream's sessions
//! (`pool.max_children_per_principal`). A [`Hold`] is one
//! place in a [`HeldQuota`], given back when dropped; past a bound the refusal
//! is [`Rejection::QuotaExceeded`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use dashmap::DashMap;

use crate::protocol::errors::Rejection;

/// Things of one kind held open, by principal.
///
/// Every request asks for a place, so the path is cheap: one shard lock of the
/// map (a principal already holding something costs no allocation) and one
/// atomic for the total; nothing sums over principals. A principal's entry goes
/// when its last place is given back, so the map holds only principals with
/// something open.
pub(crate) struct HeldQuota {
    /// What is held, for the refusal: `listens`, `requests in flight`.
    what: &'static str,
    /// Held by principal; never zero (an entry is removed when it reaches zero).
    open: DashMap<Arc<str>, usize>,
    /// Held in all.
    total: AtomicUsize,
    /// The bounds; a reload may change them (what is held above a lowered bound stays).
    per_principal: AtomicUsize,
    max: AtomicUsize,
    /// Whether the anonymous principal (a gateway without authentication) is counted.
    binds_anonymous: AtomicBool,
}

/// One place in a [`HeldQuota`], given back when dropped.
pub(crate) struct Hold {
    quota: Arc<HeldQuota>,
    /// Whose place it is; `None` for a place counted in all only.
    principal: Option<Arc<str>>,
}

impl HeldQuota {
    /// A quota of `per_principal` each, `max` in all, of `what`.
    pub(crate) fn new(what: &'static str, per_principal: usize, max: usize) -> Arc<HeldQuota> {
        Arc::new(HeldQuota {
            what,
            open: DashMap::new(),
            total: AtomicUsize::new(0),
            per_principal: AtomicUsize::new(per_principal),
            max: AtomicUsize::new(max),
            binds_anonymous: AtomicBool::new(true),
        })
    }

    /// Whether `principal` is counted: everyone, unless the anonymous one is spared.
    pub(crate) fn binds(&self, principal: &crate::auth::Principal) -> bool {
        !principal.is_anonymous() || self.binds_anonymous.load(Ordering::Relaxed)
    }

    /// Whether the anonymous principal is counted (set at start and by a reload).
    pub(crate) fn set_binds_anonymous(&self, binds: bool) {
        self.binds_anonymous.store(binds, Ordering::Relaxed);
    }

    /// New bounds (a reload): they apply to the next place asked for.
    pub(crate) fn set_bounds(&self, per_principal: usize, max: usize) {
        self.per_principal.store(per_principal, Ordering::Relaxed);
        self.max.store(max, Ordering::Relaxed);
    }

    /// A place for one more of `principal`'s, counted in all only when this
    /// quota does not bind `principal` (see [`HeldQuota::binds`]).
    pub(crate) fn hold_for(self: &Arc<Self>, principal: &crate::auth::Principal) -> Result<Hold, Rejection> {
        if self.binds(principal) {
            return self.hold(principal.as_str());
        }
        let max = self.max.load(Ordering::Relaxed);
        if self.total.fetch_add(1, Ordering::AcqRel) >= max {
            return Err(self.give_back_and_refuse(max));
        }
        Ok(Hold {
            quota: self.clone(),
            principal: None,
        })
    }

    /// A place for one more of `principal`'s, or the refusal.
    pub(crate) fn hold(self: &Arc<Self>, principal: &str) -> Result<Hold, Rejection> {
        let per_principal = self.per_principal.load(Ordering::Relaxed);
        let max = self.max.load(Ordering::Relaxed);
        // The total first: taken optimistically, given back on any refusal.
        if self.total.fetch_add(1, Ordering::AcqRel) >= max {
            return Err(self.give_back_and_refuse(max));
        }
        // The principal's count changes under its shard's lock, as does its removal
        // at zero (in `Drop`), so a count is never lost to a concurrent removal.
        let mut own = match self.open.get_mut(principal) {
            Some(own) => own,
            // A principal's first place: the one allocation, of its key.
            None => self.open.entry(Arc::from(principal)).or_insert(0),
        };
        if *own >= per_principal {
            let is_new = *own == 0;
            drop(own);
            if is_new {
                self.open.remove_if(principal, |_, own| *own == 0);
            }
            return Err(self.give_back_and_refuse(per_principal));
        }
        *own += 1;
        let principal = own.key().clone();
        drop(own);
        Ok(Hold {
            quota: self.clone(),
            principal: Some(principal),
        })
    }

    fn give_back_and_refuse(&self, limit: usize) -> Rejection {
        self.total.fetch_sub(1, Ordering::AcqRel);
        Rejection::QuotaExceeded { what: self.what, limit }
    }

    /// Held in all.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    /// How many principals hold something.
    #[cfg(test)]
    pub(crate) fn principals(&self) -> usize {
        self.open.len()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(principal) = &self.principal {
            self.quota.open.remove_if_mut(&**principal, |_, own| {
                *own -= 1;
                *own == 0
            });
        }
        self.quota.total.fetch_sub(1, Ordering::AcqRel);
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
        assert_eq!(quota.principals(), 1, "b's entry went with its last place");
    }

    /// Threads taking and giving back places at once: no principal ever holds
    /// more than its bound, and every count and entry is gone at the end.
    #[test]
    fn concurrent_places_never_pass_a_bound_and_all_come_back() {
        let quota = HeldQuota::new("requests in flight", 3, 10);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let quota = quota.clone();
                std::thread::spawn(move || {
                    let principal = if t % 2 == 0 { "even" } else { "odd" };
                    let mut peak = 0;
                    for _ in 0..2_000 {
                        if let Ok(hold) = quota.hold(principal) {
                            peak = peak.max(quota.open.get(principal).map_or(0, |own| *own));
                            drop(hold);
                        }
                    }
                    peak
                })
            })
            .collect();
        for thread in threads {
            let peak = thread.join().unwrap_or(usize::MAX);
            assert!(peak <= 3, "a principal held {peak} places, past its bound of 3");
        }
        assert_eq!(quota.len(), 0);
        assert_eq!(quota.principals(), 0);
    }
}
