//! Where an upstream's pins live: a pin file ([`PinStoreFile`]) or the shared Redis store
//! ([`SharedPins`], `store = "redis"`). Both keep the pins last read in memory, so a
//! listing reads them without I/O; a change is written through, and each is re-read when
//! another process changed it.

use std::sync::Arc;

use super::Pins;
use super::edit::{Edit, PinStoreError};
use super::file::PinStoreFile;
use super::shared::SharedPins;

/// One store of pins, shared by every upstream that names it.
pub(crate) enum PinStore {
    /// A pin file.
    File(PinStoreFile),
    /// The `[redis]` server, every replica's.
    Shared(Arc<SharedPins>),
}

impl PinStore {
    /// The pins of `upstream` as last read (or written).
    pub(crate) fn pins_of(&self, upstream: &str) -> Pins {
        match self {
            PinStore::File(file) => file.pins_of(upstream),
            PinStore::Shared(shared) => shared.pins_of(upstream),
        }
    }

    /// How logs and `eragate pins list` name the store.
    pub(crate) fn describe(&self) -> String {
        match self {
            PinStore::File(file) => file.path().display().to_string(),
            PinStore::Shared(shared) => shared.describe(),
        }
    }

    /// Reads what another process changed: `Ok(true)` when some upstream's pins changed.
    pub(crate) async fn refresh(&self) -> Result<bool, PinStoreError> {
        match self {
            PinStore::File(file) => file.refresh(),
            PinStore::Shared(shared) => shared.refresh().await,
        }
    }

    /// Writes what [`PinStore::edit_soon`] left to the background: `Err` when it cannot be.
    pub(crate) async fn settle(&self) -> Result<(), PinStoreError> {
        match self {
            PinStore::File(_) => Ok(()),
            PinStore::Shared(shared) => shared.settle().await,
        }
    }

    /// Edits the pins of `upstream` and writes them, against the latest pins stored.
    pub(crate) async fn update(&self, upstream: &str, edit: Edit) -> Result<(), PinStoreError> {
        match self {
            PinStore::File(file) => file.update(upstream, |pins| edit(pins)),
            PinStore::Shared(shared) => shared.update(upstream, &edit).await,
        }
    }

    /// Pins `listed` (definitions of one kind) for `upstream` when the store holds no pins
    /// of that kind yet (trust on first use), logged once.
    pub(crate) fn pin_first_sight(&self, upstream: &str, kind: super::Kind, listed: Pins) {
        let what = format!(
            "pinned on first sight (trust on first use): {} {}(s)",
            listed.len(),
            kind.as_str()
        );
        let edit: Edit = Arc::new(move |pins: &mut Pins| {
            if !pins.keys().any(|(k, _)| *k == kind) {
                pins.extend(listed.iter().map(|(key, pin)| (key.clone(), pin.clone())));
            }
        });
        self.edit_soon(upstream, edit, what);
    }

    /// Applies `edit` where a request is answered, which cannot wait for Redis: the file is
    /// written at once; the shared store's pins here are edited at once and written in the
    /// background (when another replica wrote first, the edit is applied to its pins).
    /// `what` names the edit in the log line of its outcome.
    pub(crate) fn edit_soon(&self, upstream: &str, edit: Edit, what: String) {
        match self {
            PinStore::File(file) => {
                let written = file.update(upstream, |pins| edit(pins));
                log_written(upstream, &self.describe(), &what, written);
            }
            PinStore::Shared(shared) => {
                let (store, name) = (shared.describe(), upstream.to_owned());
                shared.edit_soon(upstream, edit, move |written| {
                    log_written(&name, &store, &what, written)
                });
            }
        }
    }
}

fn log_written(upstream: &str, store: &str, what: &str, written: Result<(), PinStoreError>) {
    match written {
        Ok(()) => tracing::info!(upstream, store, "{what}"),
        Err(error) => tracing::error!(%error, upstream, "not written: {what}"),
    }
}
