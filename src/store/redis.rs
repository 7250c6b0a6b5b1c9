//! A Redis client: [`Pool`] sends one command at a time on each of at most 64
//! connections, a handful kept idle (each opened with AUTH and SELECT when the
//! [`Endpoint`] says so), every exchange bounded by a timeout. On it, the counters of shared rate
//! limits: one fixed window per key, counted atomically by a Lua script (INCR,
//! then PEXPIRE on the window's first request); an error is the caller's to
//! judge (`rate_limits.redis.on_error`). The authorization server's shared
//! state ([`crate::authz::store::redis`]) uses the pool too.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufStream};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::resp::{self, ProtocolError, Value};
use crate::config::RedisConfig;

/// Counts one request in a window: INCR, PEXPIRE on the first, and the count
/// with the window's remaining milliseconds. A key left without expiry (by
/// hand, or a crash between the two calls in an older script) is given one.
const COUNT_SCRIPT: &str = "local n = redis.call('INCR', KEYS[1]) \
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end \
local ttl = redis.call('PTTL', KEYS[1]) \
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end \
return {n, ttl}";

/// Idle connections kept for the next counts.
const IDLE_CONNECTIONS: usize = 8;
/// Most connections open at once (commands beyond wait for one, within their timeout).
const MAX_CONNECTIONS: usize = 64;

/// Why a count failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RedisError {
    /// Connecting, writing or reading failed.
    #[error("redis I/O: {0}")]
    Io(#[from] std::io::Error),
    /// No answer within `rate_limits.redis.timeout`.
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    /// The server broke the protocol.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The server answered with an error, or with something else than asked.
    #[error("redis answered {0}")]
    Unexpected(String),
}

pub(crate) use crate::config::RedisEndpoint as Endpoint;

/// Kept connections to one server, one command at a time on each.
pub(crate) struct Pool {
    endpoint: Endpoint,
    timeout: Duration,
    idle: Mutex<Vec<BufStream<TcpStream>>>,
    /// One permit per connection in use.
    open: tokio::sync::Semaphore,
}

impl Pool {
    /// A pool toward `endpoint` whose every command takes at most `timeout`;
    /// nothing is connected yet.
    pub(crate) fn new(endpoint: Endpoint, timeout: Duration) -> Pool {
        Pool {
            endpoint,
            timeout,
            idle: Mutex::new(Vec::new()),
            open: tokio::sync::Semaphore::new(MAX_CONNECTIONS),
        }
    }

    /// Sends the command `args` and reads its reply (a Redis error reply is `Ok(Value::Error)`).
    pub(crate) async fn command(&self, args: &[&[u8]]) -> Result<Value, RedisError> {
        let command = resp::encode(args);
        let exchange = async {
            let _permit = self
                .open
                .acquire()
                .await
                .map_err(|_| RedisError::Unexpected("the connection pool is closed".into()))?;
            self.round_trip(&command).await
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| RedisError::Timeout(self.timeout))?
    }

    /// Sends `command` on an idle connection (or a new one) and reads its reply.
    /// A connection goes back to the idle set only after a whole exchange.
    async fn round_trip(&self, command: &[u8]) -> Result<Value, RedisError> {
        let idle = self.idle.lock().await.pop();
        let mut stream = match idle {
            Some(stream) => stream,
            None => self.connect().await?,
        };
        stream.write_all(command).await?;
        stream.flush().await?;
        let reply = read_reply(&mut stream).await?;
        let mut idle = self.idle.lock().await;
        if idle.len() < IDLE_CONNECTIONS {
            idle.push(stream);
        }
        Ok(reply)
    }

    /// A new connection, logged in and on its database.
    async fn connect(&self) -> Result<BufStream<TcpStream>, RedisError> {
        let mut stream = BufStream::new(TcpStream::connect(&self.endpoint.address).await?);
        let database = self.endpoint.database.map(|db| db.to_string());
        let mut setup: Vec<Vec<u8>> = Vec::new();
        if let Some(password) = &self.endpoint.password {
            setup.push(resp::encode(&[b"AUTH", password.as_bytes()]));
        }
        if let Some(db) = &database {
            setup.push(resp::encode(&[b"SELECT", db.as_bytes()]));
        }
        for command in setup {
            stream.write_all(&command).await?;
            stream.flush().await?;
            match read_reply(&mut stream).await? {
                Value::Simple(_) => {}
                Value::Error(error) => return Err(RedisError::Unexpected(error)),
                other => return Err(RedisError::Unexpected(format!("{other:?}"))),
            }
        }
        Ok(stream)
    }
}

/// The shared counters.
pub(crate) struct Counters {
    prefix: String,
    pool: Pool,
}

impl Counters {
    /// Counters on the server of `config`; nothing is connected yet.
    pub(crate) fn new(config: &RedisConfig) -> Counters {
        let endpoint = Endpoint {
            address: config.address.clone(),
            password: None,
            database: None,
        };
        Counters {
            prefix: config.key_prefix.clone(),
            pool: Pool::new(endpoint, config.timeout.0),
        }
    }

    /// Counts one request under `key` in a window of `window`: the count
    /// after it and the window's remaining time.
    pub(crate) async fn count(&self, key: &str, window: Duration) -> Result<(u64, Duration), RedisError> {
        let key = format!("{}{key}", self.prefix);
        let window_ms = window.as_millis().max(1).to_string();
        let reply = self
            .pool
            .command(&[
                b"EVAL",
                COUNT_SCRIPT.as_bytes(),
                b"1",
                key.as_bytes(),
                window_ms.as_bytes(),
            ])
            .await?;
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

async fn read_reply(stream: &mut BufStream<TcpStream>) -> Result<Value, RedisError> {
    let mut buf = Vec::with_capacity(64);
    let mut chunk = [0u8; 512];
    loop {
        if let Some((value, used)) = resp::parse(&buf)? {
            if used != buf.len() {
                return Err(RedisError::Unexpected("bytes after the reply".into()));
            }
            return Ok(value);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(RedisError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
