//! Tasks shared by replicas through Redis (with `[redis]`): every task's
//! record, as `tasks/get` shows it, is kept under `P task:ID` (`P` is
//! `eragate:tasks:` by default; the record expires with the task's `ttl`), so
//! any replica answers `tasks/get`; a `tasks/update` or `tasks/cancel` that
//! reaches a replica not running the task is added to the stream `P control`, which every replica reads every [`POLL_EVERY`]
//! and hands to the runner it holds.
//!
//! A record is written before the task's `CreateTaskResult` is sent; later
//! changes are written in order by one writer, after the runner made them.
//! While Redis is unreachable, tasks keep running on their replica and are
//! answered there; other replicas do not find them.

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::TaskRecord;
use crate::store::redis::{Pool, RedisError, StreamEntry, StreamTail, Target, Value as Reply, append};

/// How often the control stream is read.
const POLL_EVERY: Duration = Duration::from_millis(200);
/// Entries read at once.
const READ_BATCH: usize = 1000;
/// Entries the control stream keeps (approximately: `MAXLEN ~`).
const STREAM_CAP: usize = 10_000;
/// Record writes waiting; past it one is logged and dropped (the task's own
/// replica still answers it).
const WRITE_QUEUE: usize = 4096;

/// A task's record as it is kept in Redis.
struct Stored {
    key: String,
    json: Vec<u8>,
    ttl_ms: u64,
}

/// What a client asked of a task another replica runs.
#[derive(Debug, PartialEq)]
pub(crate) enum RemoteControl {
    /// `tasks/update` with these `inputResponses`.
    Answers(Map<String, Value>),
    /// `tasks/cancel`.
    Cancel,
}

/// Where the requests read from the control stream go: the runners this replica holds.
pub(crate) trait RunnersHere: Send + Sync {
    /// Hands `control` to the runner of task `id`, if this replica runs it.
    fn deliver(&self, id: &str, control: RemoteControl);
}

/// The tasks of every replica, in Redis.
pub(crate) struct SharedTasks {
    pool: Pool,
    writes: mpsc::Sender<Stored>,
}

impl SharedTasks {
    /// Tasks kept through `target`; `spawn` starts writing and reading.
    pub(crate) fn new(target: Target) -> (Arc<SharedTasks>, impl FnOnce(Weak<dyn RunnersHere>)) {
        let (writes, queue) = mpsc::channel(WRITE_QUEUE);
        let shared = Arc::new(SharedTasks {
            pool: Pool::new(target),
            writes,
        });
        let spawned = shared.clone();
        let spawn = move |runners: Weak<dyn RunnersHere>| {
            tokio::spawn(spawned.clone().write(queue));
            tokio::spawn(spawned.read(runners));
        };
        (shared, spawn)
    }

    fn record_key(&self, id: &str) -> String {
        format!("{}task:{id}", self.pool.prefix())
    }

    fn stream_key(&self) -> String {
        format!("{}control", self.pool.prefix())
    }

    fn stored(&self, record: &TaskRecord) -> Stored {
        let remaining = record
            .expires_at()
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::from_millis(1));
        let value = json!({"owner": record.owner, "task": record.detailed()});
        Stored {
            key: self.record_key(&record.id),
            json: serde_json::to_vec(&value).unwrap_or_default(),
            ttl_ms: u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX).max(1),
        }
    }

    /// Writes `record` now: a created task is in Redis before its client hears of it.
    pub(crate) async fn put(&self, record: &TaskRecord) -> Result<(), RedisError> {
        let stored = self.stored(record);
        self.set(&stored).await
    }

    /// Writes `record` after the writes queued before it.
    pub(crate) fn put_later(&self, record: &TaskRecord) {
        if self.writes.try_send(self.stored(record)).is_err() {
            tracing::warn!(task = %record.id, "tasks in redis: the write queue is full; this change stays on this replica");
        }
    }

    async fn set(&self, stored: &Stored) -> Result<(), RedisError> {
        let ttl = stored.ttl_ms.to_string();
        let reply = self
            .pool
            .command(&[b"SET", stored.key.as_bytes(), &stored.json, b"PX", ttl.as_bytes()])
            .await?;
        match reply {
            Reply::Simple(_) => Ok(()),
            other => Err(RedisError::Unexpected(format!("SET answered {other:?}"))),
        }
    }

    /// Task `id` as `tasks/get` shows it, with its owner; `None` when Redis has none.
    pub(crate) async fn get(&self, id: &str) -> Result<Option<(String, Value)>, RedisError> {
        let key = self.record_key(id);
        match self.pool.command(&[b"GET", key.as_bytes()]).await? {
            Reply::Bulk(Some(bytes)) => {
                let mut value: Value = serde_json::from_slice(&bytes)
                    .map_err(|e| RedisError::Unexpected(format!("a task record is not JSON: {e}")))?;
                let owner = value["owner"].as_str().unwrap_or_default().to_owned();
                Ok(Some((owner, value["task"].take())))
            }
            Reply::Bulk(None) => Ok(None),
            other => Err(RedisError::Unexpected(format!("GET answered {other:?}"))),
        }
    }

    /// Hands `control` to whichever replica runs task `id`.
    pub(crate) async fn send(&self, id: &str, control: RemoteControl) -> Result<(), RedisError> {
        let (op, responses) = match control {
            RemoteControl::Answers(responses) => ("update", serde_json::to_vec(&responses).unwrap_or_default()),
            RemoteControl::Cancel => ("cancel", b"{}".to_vec()),
        };
        let fields: [(&str, &[u8]); 3] = [
            ("task", id.as_bytes()),
            ("op", op.as_bytes()),
            ("responses", &responses),
        ];
        append(&self.pool, &self.stream_key(), STREAM_CAP, &fields).await?;
        Ok(())
    }

    /// Writes queued records in order, for as long as the store lives.
    async fn write(self: Arc<Self>, mut queue: mpsc::Receiver<Stored>) {
        while let Some(stored) = queue.recv().await {
            if let Err(error) = self.set(&stored).await {
                tracing::warn!(%error, "tasks in redis: a task's change was not written");
            }
        }
    }

    /// Reads the control stream from now on and hands each entry to the runner
    /// this replica holds, if any.
    async fn read(self: Arc<Self>, runners: Weak<dyn RunnersHere>) {
        let mut tail = StreamTail::from_now(self.stream_key());
        let mut reachable = true;
        let mut ticker = tokio::time::interval(POLL_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(runners) = runners.upgrade() else { return };
            match tail.read(&self.pool, READ_BATCH).await {
                Ok(entries) => {
                    reachable = true;
                    for (task, control) in entries.iter().filter_map(parse_control) {
                        runners.deliver(&task, control);
                    }
                }
                Err(error) => {
                    if std::mem::replace(&mut reachable, false) {
                        tracing::warn!(%error, "tasks in redis: the control stream cannot be read");
                    }
                }
            }
        }
    }
}

/// A control entry's task and what it asks.
fn parse_control(entry: &StreamEntry) -> Option<(String, RemoteControl)> {
    let task = String::from_utf8(entry.field("task")?.to_vec()).ok()?;
    let control = match entry.field("op")? {
        b"cancel" => RemoteControl::Cancel,
        b"update" => match serde_json::from_slice(entry.field("responses")?) {
            Ok(Value::Object(responses)) => RemoteControl::Answers(responses),
            _ => return None,
        },
        _ => return None,
    };
    Some((task, control))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(fields: &[(&str, &str)]) -> StreamEntry {
        StreamEntry {
            id: "1-0".into(),
            fields: fields
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn control_entries_are_read_as_written() {
        let update = entry(&[
            ("task", "abc"),
            ("op", "update"),
            ("responses", r#"{"elicitation-1":{"action":"accept"}}"#),
        ]);
        let mut answers = Map::new();
        answers.insert("elicitation-1".into(), json!({"action": "accept"}));
        assert_eq!(
            parse_control(&update),
            Some(("abc".into(), RemoteControl::Answers(answers)))
        );
        let cancel = entry(&[("task", "abc"), ("op", "cancel")]);
        assert_eq!(parse_control(&cancel), Some(("abc".into(), RemoteControl::Cancel)));
        assert_eq!(parse_control(&entry(&[("task", "abc"), ("op", "drop")])), None);
        assert_eq!(
            parse_control(&entry(&[("task", "abc"), ("op", "update"), ("responses", "[]")])),
            None
        );
    }
}
