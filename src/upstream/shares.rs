//! Each principal's share of one upstream's sessions: every upstream session a
//! principal causes (a pooled partition's, a legacy client's own, one opened for a
//! call that must be alone, and so a suspended call's) counts against
//! `pool.max_children_per_principal`. The session holds its [`Share`] and gives it
//! back when it closes or goes. Sessions opened for nobody in particular (the
//! stateless pool every principal shares, warm sessions, an anonymous caller's)
//! count for no one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The shares of one upstream's sessions, by principal.
pub(crate) struct Shares {
    table: Arc<ShareTable>,
}

struct ShareTable {
    /// A std mutex: held to count, never across `.await`.
    held: Mutex<HashMap<Arc<str>, usize>>,
    per_principal: usize,
}

impl ShareTable {
    fn held(&self) -> MutexGuard<'_, HashMap<Arc<str>, usize>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One session's place in its principal's share, given back when dropped.
pub(crate) struct Share {
    table: Arc<ShareTable>,
    principal: Arc<str>,
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.table.held();
        if let Some(count) = held.get_mut(&self.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.principal);
            }
        }
    }
}

/// `principal` holds its whole share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShareExhausted {
    /// The share (`pool.max_children_per_principal`).
    pub(crate) limit: usize,
}

impl Shares {
    /// At most `per_principal` sessions of one principal.
    pub(crate) fn new(per_principal: usize) -> Shares {
        Shares {
            table: Arc::new(ShareTable {
                held: Mutex::new(HashMap::new()),
                per_principal,
            }),
        }
    }

    /// A place for one more session of `principal`: `None` when the session counts
    /// for no one (`principal` is empty), refused when the principal holds its share.
    pub(crate) fn take(&self, principal: &str) -> Result<Option<Share>, ShareExhausted> {
        if principal.is_empty() {
            return Ok(None);
        }
        let mut held = self.table.held();
        let (principal, count) = match held.get_key_value(principal) {
            Some((name, count)) => (name.clone(), *count),
            None => (Arc::from(principal), 0),
        };
        if count >= self.table.per_principal {
            return Err(ShareExhausted {
                limit: self.table.per_principal,
            });
        }
        held.insert(principal.clone(), count + 1);
        Ok(Some(Share {
            table: self.table.clone(),
            principal,
        }))
    }

    /// The sessions `principal` holds now.
    #[cfg(test)]
    pub(crate) fn held_by(&self, principal: &str) -> usize {
        self.table.held().get(principal).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_holds_at_most_its_share_and_gets_it_back_as_sessions_go() {
        let shares = Shares::new(2);
        let first = shares.take("alice").expect("room").expect("counted");
        let second = shares.take("alice").expect("room").expect("counted");
        assert_eq!(shares.take("alice").err(), Some(ShareExhausted { limit: 2 }));
        // Another principal's share is its own.
        let bob = shares.take("bob").expect("bob's own share");
        assert_eq!(shares.held_by("alice"), 2);
        drop(first);
        assert_eq!(shares.held_by("alice"), 1);
        let third = shares.take("alice").expect("room again");
        drop((second, third, bob));
        assert_eq!((shares.held_by("alice"), shares.held_by("bob")), (0, 0));
    }

    #[test]
    fn sessions_for_no_one_count_for_no_one() {
        let shares = Shares::new(1);
        for _ in 0..3 {
            assert!(shares.take("").expect("never refused").is_none());
        }
        assert_eq!(shares.held_by(""), 0);
    }
}
