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
pub enum RedisError {
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

/// Where a Redis server is, and how to log in to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `host:port`.
    pub address: String,
    /// The password of `AUTH`, if any.
    pub password: Option<String>,
    /// The database of `SELECT`, if not 0.
    pub database: Option<u32>,
}

impl Endpoint {
    /// `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (port 6379 by default).
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL ({e})"))?;
        if url.scheme() != "redis" {
            return Err("must be a redis:// URL (plain TCP; rediss:// is not supported)".into());
        }
        let host = url.host_str().filter(|h| !h.is_empty()).ok_or("names no host")?;
        let address = format!("{host}:{}", url.port().unwrap_or(6379));
        let password = url.password().map(percent_decode).filter(|p| !p.is_empty());
        let database = match url.path().trim_start_matches('/') {
            "" => None,
            db => Some(
                db.parse::<u32>()
                    .map_err(|_| format!("{db:?} is not a database number"))?,
            ),
        };
        if url.query().is_some() || url.fragment().is_some() {
            return Err("takes no query or fragment".into());
        }
        Ok(Endpoint {
            address,
            password,
            database: database.filter(|&db| db != 0),
        })
    }
}

fn percent_decode(text: &str) -> String {
    url::form_urlencoded::parse(format!("p={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// Kept connections to one server, one command at a time on each.
pub struct Pool {
    endpoint: Endpoint,
    timeout: Duration,
    idle: Mutex<Vec<BufStream<TcpStream>>>,
    /// One permit per connection in use.
    open: tokio::sync::Semaphore,
}

impl Pool {
    /// A pool toward `endpoint` whose every command takes at most `timeout`;
    /// nothing is connected yet.
    pub fn new(endpoint: Endpoint, timeout: Duration) -> Pool {
        Pool {
            endpoint,
            timeout,
            idle: Mutex::new(Vec::new()),
            open: tokio::sync::Semaphore::new(MAX_CONNECTIONS),
        }
    }

    /// Sends the command `args` and reads its reply (a Redis error reply is `Ok(Value::Error)`).
    pub async fn command(&self, args: &[&[u8]]) -> Result<Value, RedisError> {
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
pub struct Counters {
    prefix: String,
    pool: Pool,
}

impl Counters {
    /// Counters on the server of `config`; nothing is connected yet.
    pub fn new(config: &RedisConfig) -> Counters {
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
    pub async fn count(&self, key: &str, window: Duration) -> Result<(u64, Duration), RedisError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_from_urls() {
        let at = |address: &str, password: Option<&str>, database: Option<u32>| {
            Ok(Endpoint {
                address: address.into(),
                password: password.map(str::to_owned),
                database,
            })
        };
        let cases: Vec<(&str, Result<Endpoint, ()>)> = vec![
            ("redis://127.0.0.1:6380", at("127.0.0.1:6380", None, None)),
            ("redis://localhost", at("localhost:6379", None, None)),
            (
                "redis://:s%40cret@10.0.0.1:1/2",
                at("10.0.0.1:1", Some("s@cret"), Some(2)),
            ),
            ("redis://u:pw@h:1/0", at("h:1", Some("pw"), None)),
            ("rediss://h:1", Err(())),
            ("http://h:1", Err(())),
            ("redis://h:1/x", Err(())),
            ("redis://h:1/?a=b", Err(())),
            ("127.0.0.1:6379", Err(())),
        ];
        for (text, expected) in cases {
            assert_eq!(Endpoint::parse(text).map_err(|_| ()), expected, "{text}");
        }
    }
}
