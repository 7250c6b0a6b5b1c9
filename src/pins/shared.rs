//! The pins in Redis (`store = "redis"`), shared by every replica: one hash per upstream
//! (`{prefix}pins:{upstream}`) holding its pins in the pin file's form and a version.
//! Every write names the version it edited and is refused, atomically, when another
//! replica wrote since, so no approval is lost to a race: the edit is then re-applied to
//! the pins just read. The pins last read are kept here, read without I/O, and re-read
//! when the version moved. An unreachable or garbled store at start refuses the start.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::Pins;
use super::edit::{Edit, PinStoreError};
use super::format::{parse_upstream, render_upstream};
use crate::store::redis::{Pool, RedisError, Target, Value};

/// Writes `ARGV[2]` as the pins when the stored version is still `ARGV[1]`; answers
/// `{1, new version}`, or `{0, the version found}` when another replica wrote first.
const WRITE_SCRIPT: &str = "local now = tonumber(redis.call('HGET', KEYS[1], 'version') or '0') \
if now ~= tonumber(ARGV[1]) then return {0, now} end \
redis.call('HSET', KEYS[1], 'version', now + 1, 'pins', ARGV[2]) \
return {1, now + 1}";

/// How often a write is tried against pins other replicas keep changing.
const WRITE_ATTEMPTS: usize = 4;

/// The shared store, and the pins last read from it.
pub(crate) struct SharedPins {
    pool: Pool,
    script: redis::Script,
    /// A std mutex: held to read or swap one upstream's pins, never across an await.
    cached: Mutex<BTreeMap<String, Cached>>,
    /// A write re-read pins another replica changed: the next refresh reports a change.
    reread: AtomicBool,
    /// Edits being written in the background ([`SharedPins::edit_soon`]).
    pending: AtomicUsize,
    /// Signalled each time a background write ends.
    written: Notify,
}

#[derive(Clone, Default)]
struct Cached {
    pins: Pins,
    /// The version `pins` were read at (0: none stored).
    version: i64,
    /// Edited here and not yet stored (a first sight whose write is under way or failed).
    unwritten: bool,
}

impl SharedPins {
    /// The store on `target`; nothing is read until [`SharedPins::load`].
    pub(crate) fn new(target: Target) -> SharedPins {
        SharedPins {
            pool: Pool::new(target),
            script: redis::Script::new(WRITE_SCRIPT),
            cached: Mutex::new(BTreeMap::new()),
            reread: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
            written: Notify::new(),
        }
    }

    fn key(&self, upstream: &str) -> String {
        format!("{}{upstream}", self.pool.prefix())
    }

    /// How logs name the store: its key prefix.
    pub(crate) fn describe(&self) -> String {
        format!("redis ({}*)", self.pool.prefix())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Cached>> {
        self.cached.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the pins of each of `upstreams`: at start, where an unreachable store or a
    /// garbled entry is an error naming it.
    pub(crate) async fn load(&self, upstreams: &[String]) -> Result<(), PinStoreError> {
        for upstream in upstreams {
            let (pins, version) = self.read(upstream).await?;
            self.keep_read(upstream, pins, version);
        }
        Ok(())
    }

    /// The pins of `upstream` as last read or edited here.
    pub(crate) fn pins_of(&self, upstream: &str) -> Pins {
        self.lock().get(upstream).map(|c| c.pins.clone()).unwrap_or_default()
    }

    /// Re-reads every upstream whose version moved: `Ok(true)` when some pins changed.
    pub(crate) async fn refresh(&self) -> Result<bool, PinStoreError> {
        let mut changed = self.reread.swap(false, Ordering::Relaxed);
        let known: Vec<(String, i64)> = self.lock().iter().map(|(u, c)| (u.clone(), c.version)).collect();
        for (upstream, version) in known {
            if self.version(&upstream).await? == version {
                continue;
            }
            let (pins, version) = self.read(&upstream).await?;
            changed |= self.keep_read(&upstream, pins, version);
        }
        Ok(changed)
    }

    /// Keeps `pins`, read from the store at `version`, as `upstream`'s (an edit not yet
    /// stored is dropped: its writer applies it again): whether they differ from those kept.
    fn keep_read(&self, upstream: &str, pins: Pins, version: i64) -> bool {
        let mut cached = self.lock();
        let entry = cached.entry(upstream.to_owned()).or_default();
        let changed = entry.pins != pins;
        *entry = Cached {
            pins,
            version,
            unwritten: false,
        };
        changed
    }

    /// Applies `edit` to the pins kept here at once and stores it in the background, as
    /// [`SharedPins::update`] does; `done` gets the outcome. [`SharedPins::settle`] waits for it.
    pub(crate) fn edit_soon(
        self: &Arc<Self>,
        upstream: &str,
        edit: Edit,
        done: impl FnOnce(Result<(), PinStoreError>) + Send + 'static,
    ) {
        {
            let mut cached = self.lock();
            let entry = cached.entry(upstream.to_owned()).or_default();
            edit(&mut entry.pins);
            entry.unwritten = true;
        }
        self.pending.fetch_add(1, Ordering::AcqRel);
        let (shared, upstream) = (Arc::clone(self), upstream.to_owned());
        tokio::spawn(async move {
            let written = shared.update(&upstream, &edit).await;
            shared.pending.fetch_sub(1, Ordering::AcqRel);
            shared.written.notify_waiters();
            done(written);
        });
    }

    /// Applies `edit` to the latest pins of `upstream` and stores them: when another
    /// replica wrote in between, its pins are read and the edit applied to them again.
    pub(crate) async fn update(&self, upstream: &str, edit: &Edit) -> Result<(), PinStoreError> {
        for _ in 0..WRITE_ATTEMPTS {
            let base = self.lock().get(upstream).cloned().unwrap_or_default();
            let mut next = base.pins.clone();
            edit(&mut next);
            if next == base.pins && !base.unwritten {
                return Ok(());
            }
            let text = render_upstream(&next).to_string();
            match self.write(upstream, base.version, &text).await? {
                Some(version) => {
                    let mut cached = self.lock();
                    let entry = cached.entry(upstream.to_owned()).or_default();
                    // A refresh may have read this write, or a later one, already.
                    if entry.version < version {
                        if entry.pins == base.pins {
                            *entry = Cached {
                                pins: next,
                                version,
                                unwritten: false,
                            };
                        } else {
                            // Edited here meanwhile: that edit is still to be written.
                            edit(&mut entry.pins);
                            entry.version = version;
                            entry.unwritten = true;
                        }
                    }
                    return Ok(());
                }
                None => {
                    let (pins, version) = self.read(upstream).await?;
                    self.keep_read(upstream, pins, version);
                    self.reread.store(true, Ordering::Relaxed);
                }
            }
        }
        Err(PinStoreError::Contended { at: self.key(upstream) })
    }

    /// Waits for the background writes, then writes every edit made here and not yet
    /// stored (one whose write failed): `Err` when one cannot be.
    pub(crate) async fn settle(&self) -> Result<(), PinStoreError> {
        loop {
            // Registered before the count is read, so no end between the two is missed.
            let written = self.written.notified();
            if self.pending.load(Ordering::Acquire) == 0 {
                break;
            }
            written.await;
        }
        let unwritten: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, cached)| cached.unwritten)
            .map(|(upstream, _)| upstream.clone())
            .collect();
        let nothing: Edit = std::sync::Arc::new(|_: &mut Pins| {});
        for upstream in unwritten {
            self.update(&upstream, &nothing).await?;
        }
        Ok(())
    }

    /// The stored version of `upstream`'s pins (0: none).
    async fn version(&self, upstream: &str) -> Result<i64, PinStoreError> {
        let key = self.key(upstream);
        match self.pool.command(&[b"HGET", key.as_bytes(), b"version"]).await? {
            Value::Bulk(None) => Ok(0),
            Value::Bulk(Some(bytes)) => parse_version(&bytes).ok_or_else(|| garbled(&key, "version is not a number")),
            other => Err(unexpected(other)),
        }
    }

    /// The stored pins of `upstream` and their version, read together.
    async fn read(&self, upstream: &str) -> Result<(Pins, i64), PinStoreError> {
        let key = self.key(upstream);
        let reply = self
            .pool
            .command(&[b"HMGET", key.as_bytes(), b"version", b"pins"])
            .await?;
        let Value::Array(Some(fields)) = reply else {
            return Err(unexpected(reply));
        };
        match fields.as_slice() {
            [Value::Bulk(None), Value::Bulk(None)] => Ok((Pins::new(), 0)),
            [Value::Bulk(Some(version)), Value::Bulk(Some(text))] => {
                let version = parse_version(version).ok_or_else(|| garbled(&key, "version is not a number"))?;
                let value: serde_json::Value =
                    serde_json::from_slice(text).map_err(|e| garbled(&key, &format!("pins are not JSON: {e}")))?;
                let pins = parse_upstream("pins", &value).map_err(|problem| PinStoreError::Garbled {
                    at: format!("redis key {key}"),
                    problem,
                })?;
                Ok((pins, version))
            }
            _ => Err(garbled(&key, "not a hash of version and pins")),
        }
    }

    /// Stores `text` as the pins of `upstream` if their version is still `version`: the
    /// new version, or `None` when another replica wrote first.
    async fn write(&self, upstream: &str, version: i64, text: &str) -> Result<Option<i64>, PinStoreError> {
        let key = self.key(upstream);
        let version = version.to_string();
        match self.pool.script(&self.script, &[&key], &[&version, text]).await? {
            Value::Array(Some(reply)) => match reply.as_slice() {
                [Value::Integer(1), Value::Integer(now)] => Ok(Some(*now)),
                [Value::Integer(0), Value::Integer(_)] => Ok(None),
                _ => Err(unexpected(Value::Array(Some(reply)))),
            },
            other => Err(unexpected(other)),
        }
    }
}

fn parse_version(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

fn garbled(key: &str, problem: &str) -> PinStoreError {
    PinStoreError::Garbled {
        at: format!("redis key {key}"),
        problem: super::format::PinFileError::Syntax(problem.to_owned()),
    }
}

fn unexpected(reply: Value) -> PinStoreError {
    PinStoreError::Shared(RedisError::Unexpected(format!("{reply:?}")))
}
