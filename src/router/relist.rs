//! Relisting an upstream's list that eragate keeps (a modern upstream's tool
//! annotations, a federation's exposed names), bounded two ways: one relist in
//! flight at a time, the callers that arrive meanwhile waiting for it and
//! reading what it listed (single flight); and a name the kept list lacks, or a
//! listing that failed, relisting at most every [`MIN_RELIST_INTERVAL`] (pace),
//! so that a client naming things that do not exist cannot turn every call
//! into a full listing.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Least time between two relists an unknown name (or a failed listing) may cause.
pub(crate) const MIN_RELIST_INTERVAL: Duration = Duration::from_secs(5);

/// The relisting of one kept list.
#[derive(Default)]
pub(crate) struct RelistGate {
    /// Bumped whenever a relist ends, so a caller that waited on one knows it happened.
    generation: AtomicU64,
    /// Held by the relist in flight.
    in_flight: tokio::sync::Mutex<()>,
    /// When the last relist started (a std mutex, one step).
    last: Mutex<Option<Instant>>,
}

/// A caller's turn at the gate.
pub(crate) enum Turn<'a> {
    /// Another relist ended while this caller waited: what it listed is the answer.
    Relisted,
    /// This caller relists; the others wait until it is [`Relisting::finished`] (or dropped).
    Relist(Relisting<'a>),
}

/// The relist in flight: callers arriving meanwhile wait for it.
#[must_use]
pub(crate) struct Relisting<'a> {
    gate: &'a RelistGate,
    _in_flight: tokio::sync::MutexGuard<'a, ()>,
}

impl RelistGate {
    /// Whether a relist started less than [`MIN_RELIST_INTERVAL`] ago: then a
    /// name the kept list lacks, or a failed listing, is answered from what is
    /// kept rather than relisted.
    pub(crate) fn relisted_recently(&self) -> bool {
        let last = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.is_some_and(|at| at.elapsed() < MIN_RELIST_INTERVAL)
    }

    /// Waits for the relist in flight, if any: [`Turn::Relisted`] when one
    /// ended meanwhile, else this caller's own [`Turn::Relist`].
    pub(crate) async fn turn(&self) -> Turn<'_> {
        let seen = self.generation.load(Ordering::Acquire);
        let in_flight = self.in_flight.lock().await;
        if self.generation.load(Ordering::Acquire) != seen {
            return Turn::Relisted;
        }
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        Turn::Relist(Relisting {
            gate: self,
            _in_flight: in_flight,
        })
    }
}

impl Relisting<'_> {
    /// The relist ended and what it listed is kept: the callers that waited read it.
    /// (A relist dropped unfinished, its caller gone, lets the next waiter relist.)
    pub(crate) fn finished(self) {
        self.gate.generation.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test]
    async fn callers_arriving_during_a_relist_read_what_it_listed() {
        let gate = Arc::new(RelistGate::default());
        let relists = Arc::new(AtomicUsize::new(0));
        let Turn::Relist(first) = gate.turn().await else {
            panic!("nobody relisted yet")
        };
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let (gate, relists) = (gate.clone(), relists.clone());
                tokio::spawn(async move {
                    if let Turn::Relist(relisting) = gate.turn().await {
                        relists.fetch_add(1, Ordering::Relaxed);
                        relisting.finished();
                    }
                })
            })
            .collect();
        // On this single-threaded runtime each waiter runs up to the gate at its first turn.
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        first.finished();
        for waiter in waiters {
            waiter.await.expect("waiter");
        }
        assert_eq!(relists.load(Ordering::Relaxed), 0, "one relist served every waiter");
        assert!(gate.relisted_recently());
    }

    #[tokio::test]
    async fn a_relist_dropped_unfinished_lets_the_next_caller_relist() {
        let gate = RelistGate::default();
        assert!(!gate.relisted_recently(), "nothing relisted yet");
        let Turn::Relist(dropped) = gate.turn().await else {
            panic!("nobody relisted yet")
        };
        drop(dropped);
        assert!(matches!(gate.turn().await, Turn::Relist(_)));
    }
}
