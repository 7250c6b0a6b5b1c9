//! A Redis client on the `redis` crate: [`Pool`] holds one multiplexed connection
//! (a connection manager that reconnects by itself, or a cluster connection that
//! follows the slots), opened on first use from a [`Target`] (`[redis]`: a
//! `redis://` or `rediss://` URL with its ACL user and password, a CA for TLS, or
//! the nodes of a cluster), every command bounded by the target's timeout. On it,
//! the counters of shared rate limits: one fixed window per key, counted
//! atomically by a Lua script (EVALSHA, INCR then PEXPIRE on the window's first
//! request); an error is the caller's to judge (`rate_limits.redis.on_error`).
//! The authorization server's shared state ([`crate::authz::store::redis`]) and
//! the ended sessions ([`crate::bridge::revocations`]) use the pool too.

use std::path::PathBuf;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use tokio::sync::OnceCell;

/// Counts one request in a window: INCR, PEXPIRE on the first, and the count
/// with the window's remaining milliseconds. A key left without expiry (by
/// hand, or a crash between the two calls in an older script) is given one.
const COUNT_SCRIPT: &str = "local n = redis.call('INCR', KEYS[1]) \
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end \
local ttl = redis.call('PTTL', KEYS[1]) \
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end \
return {n, ttl}";

/// Where a Redis server (or cluster) is and how to reach it: resolved from
/// `[redis]` (or a deprecated key) for one user of shared state.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `redis://` or `rediss://`, with user and password: a secret, never logged.
    pub(crate) url: String,
    /// The config key the URL came from, named in errors.
    pub(crate) url_key: &'static str,
    /// A PEM file of the CA that signs the server's certificate (`redis.tls_ca`).
    pub(crate) tls_ca: Option<PathBuf>,
    /// The nodes of a Redis Cluster (`redis.cluster`), instead of `url`.
    pub(crate) cluster: Vec<String>,
    /// How long one command may take.
    pub(crate) timeout: Duration,
    /// Prepended to every key of this user.
    pub(crate) prefix: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("url", &redacted(&self.url))
            .field("tls_ca", &self.tls_ca)
            .field("cluster", &self.cluster.iter().map(|u| redacted(u)).collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// `url` without its password, for logs.
pub(crate) fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("REDACTED"));
            }
            parsed.to_string()
        }
        Err(_) => "(not a URL)".into(),
    }
}

/// Why a command failed. The text names the configuration key to look at.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RedisError {
    /// The CA file cannot be read, or the URL is not one.
    #[error("{key}: {why}")]
    Config { key: &'static str, why: String },
    /// The server refused the user or password.
    #[error("{key}: redis refused the user or password ({source})")]
    Auth {
        key: &'static str,
        source: redis::RedisError,
    },
    /// The TLS handshake failed: most often a CA that did not sign the server's certificate.
    #[error("redis.tls_ca: the TLS handshake with redis failed ({source})")]
    Tls { source: redis::RedisError },
    /// Connecting, writing or reading failed, or the server answered an error.
    #[error("redis: {0}")]
    Redis(redis::RedisError),
    /// No answer within the timeout.
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    /// The server answered something else than asked.
    #[error("redis answered {0}")]
    Unexpected(String),
}

/// A reply, as the callers match it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// `+OK`
    Simple(String),
    /// `-ERR ...`
    Error(String),
    /// `:42`
    Integer(i64),
    /// A bulk string, or nil (None).
    Bulk(Option<Vec<u8>>),
    /// An array, or a nil array (None).
    Array(Option<Vec<Value>>),
}

enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// One connection to a server or cluster, opened on first use; commands are
/// multiplexed on it (the `redis` crate pipelines them), so nothing queues here.
pub(crate) struct Pool {
    target: Target,
    connection: OnceCell<Connection>,
}

impl Pool {
    /// A pool toward `target`; nothing is connected yet.
    pub(crate) fn new(target: Target) -> Pool {
        Pool {
            target,
            connection: OnceCell::new(),
        }
    }

    /// The prefix of this user's keys.
    pub(crate) fn prefix(&self) -> &str {
        &self.target.prefix
    }

    /// Sends the command `args` and reads its reply (a Redis error reply is `Ok(Value::Error)`).
    pub(crate) async fn command(&self, args: &[&[u8]]) -> Result<Value, RedisError> {
        let Some((name, rest)) = args.split_first() else {
            return Err(RedisError::Unexpected("an empty command".into()));
        };
        let mut cmd = redis::cmd(&String::from_utf8_lossy(name));
        for arg in rest {
            cmd.arg(*arg);
        }
        let timeout = self.target.timeout;
        let exchange = async {
            let reply: Result<redis::Value, redis::RedisError> = match self.connect().await? {
                Connection::Single(manager) => cmd.query_async(&mut manager.clone()).await,
                Connection::Cluster(cluster) => cmd.query_async(&mut cluster.clone()).await,
            };
            self.reply(reply)
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| RedisError::Timeout(timeout))?
    }

    /// Runs `script` (EVALSHA, loading it when the server lacks it) on `keys` and `argv`.
    pub(crate) async fn script(
        &self,
        script: &redis::Script,
        keys: &[&str],
        argv: &[&str],
    ) -> Result<Value, RedisError> {
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in argv {
            invocation.arg(*arg);
        }
        let timeout = self.target.timeout;
        let exchange = async {
            let reply: Result<redis::Value, redis::RedisError> = match self.connect().await? {
                Connection::Single(manager) => invocation.invoke_async(&mut manager.clone()).await,
                Connection::Cluster(cluster) => invocation.invoke_async(&mut cluster.clone()).await,
            };
            self.reply(reply)
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| RedisError::Timeout(timeout))?
    }

    fn reply(&self, reply: Result<redis::Value, redis::RedisError>) -> Result<Value, RedisError> {
        match reply {
            Ok(value) => Ok(convert(value)),
            Err(error) if error.kind() == redis::ErrorKind::AuthenticationFailed => Err(RedisError::Auth {
                key: self.target.url_key,
                source: error,
            }),
            Err(error) if error.is_connection_refusal() || error.is_io_error() => Err(self.io_error(error)),
            Err(error) => match error.code() {
                Some(code) => Ok(Value::Error(format!("{code} {}", error.detail().unwrap_or_default()))),
                None => Err(RedisError::Redis(error)),
            },
        }
    }

    /// The connection, opened now if it is not yet.
    async fn connect(&self) -> Result<&Connection, RedisError> {
        self.connection.get_or_try_init(|| self.open()).await
    }

    async fn open(&self) -> Result<Connection, RedisError> {
        let target = &self.target;
        let certificates = match &target.tls_ca {
            Some(path) => Some(redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(std::fs::read(path).map_err(|e| RedisError::Config {
                    key: "redis.tls_ca",
                    why: format!("cannot read {}: {e}", path.display()),
                })?),
            }),
            None => None,
        };
        let invalid = |error: redis::RedisError| RedisError::Config {
            key: target.url_key,
            why: format!("{} ({error})", redacted(&target.url)),
        };
        if !target.cluster.is_empty() {
            let mut builder = redis::cluster::ClusterClientBuilder::new(target.cluster.clone())
                .connection_timeout(target.timeout)
                .response_timeout(target.timeout);
            if let Some(certificates) = certificates {
                builder = builder.certs(certificates);
            }
            let client = builder.build().map_err(|e| RedisError::Config {
                key: "redis.cluster",
                why: e.to_string(),
            })?;
            let connection = client.get_async_connection().await;
            return connection.map(Connection::Cluster).map_err(|e| self.open_error(e));
        }
        let client = match certificates {
            Some(certificates) => redis::Client::build_with_tls(target.url.as_str(), certificates),
            None => redis::Client::open(target.url.as_str()),
        }
        .map_err(invalid)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(target.timeout))
            .set_response_timeout(Some(target.timeout))
            .set_number_of_retries(1);
        let manager = ConnectionManager::new_with_config(client, config).await;
        manager.map(Connection::Single).map_err(|e| self.open_error(e))
    }

    fn open_error(&self, error: redis::RedisError) -> RedisError {
        match error.kind() {
            redis::ErrorKind::AuthenticationFailed => RedisError::Auth {
                key: self.target.url_key,
                source: error,
            },
            _ => self.io_error(error),
        }
    }

    fn io_error(&self, error: redis::RedisError) -> RedisError {
        let text = error.to_string();
        if text.contains("certificate") || text.contains("UnknownIssuer") || text.contains("HandshakeFailure") {
            RedisError::Tls { source: error }
        } else if text.contains("WRONGPASS") || text.contains("NOAUTH") {
            RedisError::Auth {
                key: self.target.url_key,
                source: error,
            }
        } else {
            RedisError::Redis(error)
        }
    }
}

/// One entry of a stream: its id and its fields, as name and value pairs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct StreamEntry {
    /// The entry's id (`MS-SEQ`).
    pub(crate) id: String,
    /// Its fields, in order.
    pub(crate) fields: Vec<(String, Vec<u8>)>,
}

impl StreamEntry {
    /// The value of the field `name`, if the entry has one.
    pub(crate) fn field(&self, name: &str) -> Option<&[u8]> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }
}

/// A stream read onwards from a point: each [`StreamTail::read`] returns the
/// entries added after those it returned before.
pub(crate) struct StreamTail {
    key: String,
    /// The id of the last entry returned (exclusive start of the next read).
    last: String,
}

impl StreamTail {
    /// Reads the stream `key` from its first entry.
    pub(crate) fn from_start(key: String) -> StreamTail {
        StreamTail {
            key,
            last: "0-0".into(),
        }
    }

    /// Reads the stream `key` from entries added from now on.
    pub(crate) fn from_now(key: String) -> StreamTail {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        StreamTail {
            key,
            last: format!("{now_ms}-0"),
        }
    }

    /// At most `count` entries after the last read (XRANGE), in order.
    pub(crate) async fn read(&mut self, pool: &Pool, count: usize) -> Result<Vec<StreamEntry>, RedisError> {
        let start = format!("({}", self.last);
        let count = count.to_string();
        let command: [&[u8]; 6] = [
            b"XRANGE",
            self.key.as_bytes(),
            start.as_bytes(),
            b"+",
            b"COUNT",
            count.as_bytes(),
        ];
        let Value::Array(Some(entries)) = pool.command(&command).await? else {
            return Err(RedisError::Unexpected("XRANGE answered no array".into()));
        };
        let mut read = Vec::with_capacity(entries.len());
        for entry in entries {
            if let Some(entry) = stream_entry(entry) {
                self.last.clone_from(&entry.id);
                read.push(entry);
            }
        }
        Ok(read)
    }
}

/// Adds an entry of `fields` to the stream `key`, trimmed to about `cap` entries
/// (XADD MAXLEN ~): the new entry's id.
pub(crate) async fn append(pool: &Pool, key: &str, cap: usize, fields: &[(&str, &[u8])]) -> Result<String, RedisError> {
    let cap = cap.to_string();
    let mut command: Vec<&[u8]> = vec![b"XADD", key.as_bytes(), b"MAXLEN", b"~", cap.as_bytes(), b"*"];
    for (name, value) in fields {
        command.push(name.as_bytes());
        command.push(value);
    }
    match pool.command(&command).await? {
        Value::Bulk(Some(id)) => Ok(String::from_utf8_lossy(&id).into_owned()),
        other => Err(RedisError::Unexpected(format!("XADD answered {other:?}"))),
    }
}

/// An XRANGE entry as id and fields; `None` without an id.
fn stream_entry(entry: Value) -> Option<StreamEntry> {
    let Value::Array(Some(parts)) = entry else { return None };
    let mut parts = parts.into_iter();
    let Some(Value::Bulk(Some(id))) = parts.next() else {
        return None;
    };
    let id = String::from_utf8(id).ok()?;
    let mut fields = Vec::new();
    if let Some(Value::Array(Some(values))) = parts.next() {
        let mut values = values.into_iter();
        while let (Some(Value::Bulk(Some(name))), Some(Value::Bulk(Some(value)))) = (values.next(), values.next()) {
            fields.push((String::from_utf8_lossy(&name).into_owned(), value));
        }
    }
    Some(StreamEntry { id, fields })
}

fn convert(value: redis::Value) -> Value {
    match value {
        redis::Value::Nil => Value::Bulk(None),
        redis::Value::Int(n) => Value::Integer(n),
        redis::Value::BulkString(bytes) => Value::Bulk(Some(bytes)),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            Value::Array(Some(items.into_iter().map(convert).collect()))
        }
        redis::Value::SimpleString(text) => Value::Simple(text),
        redis::Value::Okay => Value::Simple("OK".into()),
        redis::Value::ServerError(error) => Value::Error(format!("{error:?}")),
        other => Value::Error(format!("an unexpected reply {other:?}")),
    }
}

/// The shared counters.
pub(crate) struct Counters {
    pool: Pool,
    script: redis::Script,
}

impl Counters {
    /// Counters on `target`; nothing is connected yet.
    pub(crate) fn new(target: Target) -> Counters {
        Counters {
            pool: Pool::new(target),
            script: redis::Script::new(COUNT_SCRIPT),
        }
    }

    /// Counts one request under `key` in a window of `window`: the count
    /// after it and the window's remaining time.
    pub(crate) async fn count(&self, key: &str, window: Duration) -> Result<(u64, Duration), RedisError> {
        let key = format!("{}{key}", self.pool.prefix());
        let window_ms = window.as_millis().max(1).to_string();
        let reply = self.pool.script(&self.script, &[&key], &[&window_ms]).await?;
        match reply {
            Value::Array(Some(items)) => match items.as_slice() {
                [Value::Integer(n), Value::Integer(ttl)] => Ok((
                    u64::try_from(*n).unwrap_or(0),
                    Duration::from_millis(u64::try_from(*ttl).unwrap_or(0)),
                )),
                _ => Err(RedisError::Unexpected(format!("{items:?}"))),
            },
            Value::Error(error) => Err(RedisError::Unexpected(error)),
            other => Err(RedisError::Unexpected(format!("{other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_a_log() {
        assert_eq!(
            redacted("rediss://app:s3cret@h:6380/0"),
            "rediss://app:REDACTED@h:6380/0"
        );
        assert_eq!(redacted("redis://h:1"), "redis://h:1");
        let target = Target {
            url: "redis://u:hunter2@h:1".into(),
            url_key: "redis.url",
            tls_ca: None,
            cluster: vec!["redis://:hunter2@n:1".into()],
            timeout: Duration::from_secs(1),
            prefix: "p:".into(),
        };
        assert!(!format!("{target:?}").contains("hunter2"));
    }
}
