//! What every pin store shares: an edit of one upstream's pins, and why a store could not
//! read or write them.

use std::path::PathBuf;
use std::sync::Arc;

use super::Pins;

/// An edit of one upstream's pins. It may run more than once: against the pins another
/// replica wrote in between, when the first write found them changed.
pub(crate) type Edit = Arc<dyn Fn(&mut Pins) + Send + Sync>;

/// Why the pins cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PinStoreError {
    /// Present but not readable.
    #[error("pin store {path}: cannot read it: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Read, but not pins.
    #[error("pin store {at}: {problem} (fix or remove it; eragate never re-trusts a garbled store)")]
    Garbled {
        /// The file, or the Redis key.
        at: String,
        /// What is wrong.
        problem: super::format::PinFileError,
    },
    /// Not writable.
    #[error("pin store {path}: cannot write it: {source}")]
    Unwritable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The shared store did not answer, or refused.
    #[error("pin store redis (upstreams.pins.store = \"redis\"): {0}")]
    Shared(#[from] crate::store::redis::RedisError),
    /// Other replicas changed the pins each time this one tried to write.
    #[error("pin store {at}: changed by another replica at every attempt; try again")]
    Contended {
        /// The Redis key.
        at: String,
    },
}
