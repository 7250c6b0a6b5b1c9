//! Sessions ended on one replica, refused by every replica (with `[redis]`).
//!
//! A replica ending a session by DELETE or by eviction (a quota reached) writes
//! the digest of its id to Redis twice: a key `P ended:HEX` that expires with the
//! session's sealed lifetime, and an entry of a stream `P ended` (capped at
//! [`LOG_CAP`] entries). Every replica reads the stream every [`POLL_EVERY`]:
//! each entry ends the session if it holds it, and is remembered with the other
//! ended ids ([`super::sessions`]' `EndedIds`, bounded). A sealed id a replica
//! does not hold is looked up by its key before it is resumed, so an ending
//! older than the stream's cap is still refused.
//!
//! Idle expiry stays per replica: the last use of a session is not shared, so a
//! replica that saw no traffic must not end a session another replica serves.
//! Shutdown ends nothing shared either: its sessions move to the other replicas.
//!
//! While Redis is unreachable, a replica refuses to resume sealed ids it does
//! not hold (fail closed: the client starts a new session), and keeps serving
//! those it holds; writes that fail are logged, and the stream is read again
//! from where it stopped once Redis answers.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::seal::unix_now;
use crate::store::redis::{Pool, RedisError, StreamEntry, StreamTail, Target, Value, append};

/// How often the stream of endings is read: well within the 1 s in which every
/// replica refuses an ended session.
const POLL_EVERY: Duration = Duration::from_millis(200);
/// Entries read at once.
const READ_BATCH: usize = 1000;
/// Entries the stream keeps (approximately: `MAXLEN ~`).
const LOG_CAP: usize = 100_000;
/// Endings waiting to be written; past it one is logged and dropped (the
/// ending replica still refuses it itself).
const QUEUE: usize = 4096;

/// The ended ids shared through Redis.
pub(crate) struct Revocations {
    pool: Pool,
    queue: mpsc::Sender<Ended>,
    pending: std::sync::Mutex<Option<mpsc::Receiver<Ended>>>,
}

/// One ended session: its id's digest and its sealed expiry (Unix seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) digest: [u8; 32],
    pub(crate) expiry: u64,
}

/// Where the endings read from Redis are applied: the sessions this replica holds.
pub(crate) trait EndedSessions: Send + Sync {
    /// Ends, on this replica, the sessions in `ended`, and remembers their ids.
    fn apply_ended(&self, ended: &[Ended]);
}

/// Whether a sealed id another replica may have ended can be resumed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No replica ended it.
    Live,
    /// A replica ended it.
    Ended,
    /// Redis did not answer: refused (fail closed).
    Unknown,
}

impl Revocations {
    /// The shared ended ids on `target`; nothing is connected yet.
    pub(crate) fn new(target: Target) -> Revocations {
        let (queue, receiver) = mpsc::channel(QUEUE);
        Revocations {
            pool: Pool::new(target),
            queue,
            pending: std::sync::Mutex::new(Some(receiver)),
        }
    }

    /// Queues `ended` to be written for every replica.
    pub(crate) fn publish(&self, ended: Ended) {
        if self.queue.try_send(ended).is_err() {
            tracing::warn!(
                "too many ended sessions waiting to be written to redis: this one is refused by this replica only"
            );
        }
    }

    /// Whether the sealed id of `digest` was ended by some replica.
    pub(crate) async fn check(&self, digest: &[u8; 32]) -> Verdict {
        let key = self.ended_key(digest);
        match self.pool.command(&[b"EXISTS", key.as_bytes()]).await {
            Ok(Value::Integer(0)) => Verdict::Live,
            Ok(Value::Integer(_)) => Verdict::Ended,
            Ok(other) => {
                tracing::warn!(reply = ?other, "ended sessions in redis: an unexpected reply; refusing to resume the session");
                Verdict::Unknown
            }
            Err(error) => {
                tracing::warn!(%error, "ended sessions in redis: no answer; refusing to resume the session (fail closed)");
                Verdict::Unknown
            }
        }
    }

    /// Starts writing this replica's endings and reading everyone's into
    /// `sessions`, for as long as `sessions` lives.
    pub(crate) fn spawn(self: &Arc<Self>, sessions: Weak<dyn EndedSessions>) {
        let receiver = self.pending.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(receiver) = receiver {
            tokio::spawn(Arc::clone(self).write(receiver));
        }
        tokio::spawn(Arc::clone(self).read(sessions));
    }

    async fn write(self: Arc<Self>, mut receiver: mpsc::Receiver<Ended>) {
        let stream = self.stream_key();
        while let Some(ended) = receiver.recv().await {
            let key = self.ended_key(&ended.digest);
            let (hex, expiry) = (hex(&ended.digest), ended.expiry.to_string());
            let set = match self
                .pool
                .command(&[b"SET", key.as_bytes(), b"1", b"EXAT", expiry.as_bytes()])
                .await
            {
                Ok(Value::Error(error)) => Err(RedisError::Unexpected(error)),
                other => other.map(drop),
            };
            let fields: [(&str, &[u8]); 2] = [("d", hex.as_bytes()), ("e", expiry.as_bytes())];
            let add = append(&self.pool, &stream, LOG_CAP, &fields).await.map(drop);
            for result in [set, add] {
                if let Err(error) = result {
                    tracing::warn!(%error, "ended sessions in redis: not written");
                }
            }
        }
    }

    async fn read(self: Arc<Self>, sessions: Weak<dyn EndedSessions>) {
        let mut tail = StreamTail::from_start(self.stream_key());
        // Warned once per outage, not every poll.
        let mut reachable = true;
        let mut ticker = tokio::time::interval(POLL_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(sessions) = sessions.upgrade() else { return };
            let entries = match tail.read(&self.pool, READ_BATCH).await {
                Ok(entries) => entries,
                Err(error) => {
                    if std::mem::replace(&mut reachable, false) {
                        tracing::warn!(%error, "ended sessions in redis: not read; sealed ids this replica does not hold are refused until redis answers");
                    }
                    continue;
                }
            };
            if !std::mem::replace(&mut reachable, true) {
                tracing::info!("ended sessions in redis: read again");
            }
            let now = unix_now();
            let ended: Vec<Ended> = entries
                .iter()
                .filter_map(parse_entry)
                .filter(|e| e.expiry > now)
                .collect();
            if !ended.is_empty() {
                sessions.apply_ended(&ended);
            }
        }
    }

    fn ended_key(&self, digest: &[u8; 32]) -> String {
        format!("{}ended:{}", self.pool.prefix(), hex(digest))
    }

    fn stream_key(&self) -> String {
        format!("{}ended", self.pool.prefix())
    }
}

/// The ending an entry of the stream carries (`None` if malformed).
fn parse_entry(entry: &StreamEntry) -> Option<Ended> {
    let text = |name: &str| entry.field(name).and_then(|v| std::str::from_utf8(v).ok());
    let digest = text("d").and_then(unhex)?;
    let expiry = text("e")?.parse().ok()?;
    Some(Ended { digest, expiry })
}

fn hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_carry_a_digest_and_an_expiry() {
        let digest = [0xab; 32];
        let entry = |fields: &[(&str, &str)]| StreamEntry {
            id: "1-0".into(),
            fields: fields
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.as_bytes().to_vec()))
                .collect(),
        };
        assert_eq!(
            parse_entry(&entry(&[("d", &hex(&digest)), ("e", "99")])),
            Some(Ended { digest, expiry: 99 })
        );
        assert_eq!(parse_entry(&entry(&[("d", "zz")])), None);
        assert_eq!(unhex(&hex(&digest)), Some(digest));
        assert_eq!(unhex("ab"), None);
    }
}
