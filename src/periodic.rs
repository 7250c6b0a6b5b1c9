//! Work repeated on a timer for as long as its owner lives: the sweeps of expired
//! tasks, suspended calls and idle sessions. The task holds only a weak handle, so
//! the owner is never kept alive by its own sweeper.

use std::sync::{Arc, Weak};
use std::time::Duration;

/// Runs `work` on `owner` every `period` (the first at once) until `owner` is dropped.
pub(crate) fn spawn_every<T>(owner: &Arc<T>, period: Duration, work: impl Fn(&T) + Send + 'static)
where
    T: Send + Sync + 'static,
{
    let owner: Weak<T> = Arc::downgrade(owner);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(period);
        loop {
            ticker.tick().await;
            let Some(owner) = owner.upgrade() else { return };
            work(&owner);
        }
    });
}
