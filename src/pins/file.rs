//! The pin file on disk, shared by every upstream (and every replica) that names it:
//! read at start (a garbled or unreadable file is an error naming it, never a fresh
//! start), polled for changes another process made, and written whole through a
//! temporary file and a rename, so no reader ever sees half of it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use super::Pins;
use super::edit::PinStoreError;
use super::format::{PinFile, parse, render};

/// What identifies one version of the file on disk without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

/// One pin file and the pins last read from it.
pub(crate) struct PinStoreFile {
    path: PathBuf,
    /// A std mutex: held only to read or swap the loaded pins, and around the rare write
    /// (a first sight, an approval), never across an await.
    loaded: Mutex<Loaded>,
}

struct Loaded {
    pins: Arc<PinFile>,
    stamp: Option<Stamp>,
}

impl PinStoreFile {
    /// The file at `path`, read now: absent is empty (the first sight writes it); unreadable
    /// or garbled is an error naming it.
    pub(crate) fn open(path: &Path) -> Result<PinStoreFile, PinStoreError> {
        let (pins, stamp) = read(path)?;
        Ok(PinStoreFile {
            path: path.to_owned(),
            loaded: Mutex::new(Loaded {
                pins: Arc::new(pins),
                stamp,
            }),
        })
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The pins of `upstream` as last read.
    pub(crate) fn pins_of(&self, upstream: &str) -> Pins {
        let loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        loaded.pins.get(upstream).cloned().unwrap_or_default()
    }

    /// Reads the file again when its size or modification time changed: `Ok(true)` when the
    /// pins changed. A garbled file keeps the pins last read (and is reported).
    pub(crate) fn refresh(&self) -> Result<bool, PinStoreError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        self.refresh_locked(&mut loaded)
    }

    /// Changes the pins of `upstream` with `change` and writes the file; the file is read
    /// first when another process changed it, so its other upstreams' pins are kept.
    pub(crate) fn update(&self, upstream: &str, change: impl FnOnce(&mut Pins)) -> Result<(), PinStoreError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        self.refresh_locked(&mut loaded)?;
        let mut pins = PinFile::clone(&loaded.pins);
        let entry = pins.entry(upstream.to_owned()).or_default();
        change(entry);
        if entry.is_empty() {
            pins.remove(upstream);
        }
        write_atomically(&self.path, &render(&pins)).map_err(|source| PinStoreError::Unwritable {
            path: self.path.clone(),
            source,
        })?;
        loaded.stamp = stamp(&self.path);
        loaded.pins = Arc::new(pins);
        Ok(())
    }

    fn refresh_locked(&self, loaded: &mut Loaded) -> Result<bool, PinStoreError> {
        let now = stamp(&self.path);
        if now == loaded.stamp {
            return Ok(false);
        }
        let (pins, stamp) = read(&self.path)?;
        loaded.stamp = stamp;
        if pins == *loaded.pins {
            return Ok(false);
        }
        loaded.pins = Arc::new(pins);
        Ok(true)
    }
}

fn stamp(path: &Path) -> Option<Stamp> {
    let metadata = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: metadata.modified().ok(),
        len: metadata.len(),
    })
}

fn read(path: &Path) -> Result<(PinFile, Option<Stamp>), PinStoreError> {
    let before = stamp(path);
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok((PinFile::new(), None)),
        Err(source) => {
            return Err(PinStoreError::Unreadable {
                path: path.to_owned(),
                source,
            });
        }
    };
    let pins = parse(&text).map_err(|problem| PinStoreError::Garbled {
        at: path.display().to_string(),
        problem,
    })?;
    Ok((pins, before))
}

/// Writes `text` to a temporary file beside `path`, then renames it over `path`.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::pins::{Kind, pins_of};

    #[test]
    fn an_update_is_read_back_and_seen_by_another_reader() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("pins.json");
        let one = PinStoreFile::open(&path).expect("absent is empty");
        let other = PinStoreFile::open(&path).expect("absent is empty");
        let tools = pins_of(Kind::Tool, &[json!({"name": "echo", "description": "Echo"})]);
        one.update("files", |pins| pins.extend(tools.clone())).expect("written");
        assert_eq!(one.pins_of("files"), tools);
        assert_eq!(other.refresh().ok(), Some(true));
        assert_eq!(other.pins_of("files"), tools);
        assert_eq!(other.refresh().ok(), Some(false));
    }

    #[test]
    fn a_garbled_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("pins.json");
        std::fs::write(&path, "{ not json").expect("write");
        let error = PinStoreFile::open(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains(&path.display().to_string()) && error.contains("not JSON"),
            "{error}"
        );
    }
}
