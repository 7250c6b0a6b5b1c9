//! The login attempt limit: failed sign-ins counted per user name and per client
//! IP (an IPv6 client by its /64) in a fixed window; past `login_attempts` in
//! either, the login form is refused with 429 until that window ends, before any
//! password is checked (so the limit is no oracle). Counted in this process
//! (bounded: when the table is full, ended windows go, then the windows that
//! started first), or, with `storage = "redis"`, in Redis, so that every replica
//! sees the same counts (a key per user or address, expiring with its window;
//! while Redis cannot be reached, this process counts).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::redis::Pool;
use crate::store::resp::Value;

/// Most users and addresses tracked at once.
const MAX_TRACKED: usize = 100_000;

/// What a count is kept for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Counted {
    User(String),
    Address(IpAddr),
}

/// The failures of one user or address in its current window.
struct Window {
    started: Instant,
    failures: u32,
}

/// Failed sign-ins per user and per address.
pub struct LoginAttempts {
    limit: u32,
    window: Duration,
    counts: Mutex<HashMap<Counted, Window>>,
    shared: Option<Shared>,
}

/// The counts in Redis.
struct Shared {
    pool: Pool,
    prefix: String,
}

/// The remaining milliseconds of a key's window if its count reached ARGV[1], else -1.
const REFUSED_SCRIPT: &str = "local n = tonumber(redis.call('GET', KEYS[1]) or '0') \
if n >= tonumber(ARGV[1]) then return redis.call('PTTL', KEYS[1]) end return -1";

/// Counts a failure: INCR, and the window's expiry on its first.
const FAILED_SCRIPT: &str = "local n = redis.call('INCR', KEYS[1]) \
if n == 1 or redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return n";

impl Counted {
    /// Its Redis key, after the prefix.
    fn key(&self) -> String {
        match self {
            Counted::User(user) => {
                use sha2::Digest;
                let digest = sha2::Sha256::digest(user.as_bytes());
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                format!("login:user:{hex}")
            }
            Counted::Address(ip) => format!("login:ip:{ip}"),
        }
    }
}

/// An IPv6 address stands for its /64 (one host usually holds a whole one).
fn network(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let segments = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(
                    segments[0],
                    segments[1],
                    segments[2],
                    segments[3],
                    0,
                    0,
                    0,
                    0,
                ))
            }
        },
    }
}

impl LoginAttempts {
    /// `limit` failures per `window` (0: no limit), counted in this process.
    pub fn new(limit: u32, window: Duration) -> LoginAttempts {
        LoginAttempts {
            limit,
            window,
            counts: Mutex::new(HashMap::new()),
            shared: None,
        }
    }

    /// The same, counted in Redis through `pool` under keys starting with `prefix`.
    pub fn shared(limit: u32, window: Duration, pool: Pool, prefix: String) -> LoginAttempts {
        LoginAttempts {
            shared: Some(Shared { pool, prefix }),
            ..LoginAttempts::new(limit, window)
        }
    }

    /// How long `user` (from `ip`) must still wait, if either is over the limit at
    /// `now` (in Redis when shared, else, or if Redis fails, in this process).
    pub async fn check(&self, user: &str, ip: Option<IpAddr>, now: Instant) -> Option<Duration> {
        if self.limit == 0 {
            return None;
        }
        let Some(shared) = &self.shared else {
            return self.refused(user, ip, now);
        };
        let limit = self.limit.to_string();
        let mut wait: Option<Duration> = None;
        for counted in Self::keys(user, ip) {
            let key = format!("{}{}", shared.prefix, counted.key());
            let args: [&[u8]; 5] = [
                b"EVAL",
                REFUSED_SCRIPT.as_bytes(),
                b"1",
                key.as_bytes(),
                limit.as_bytes(),
            ];
            match shared.pool.command(&args).await {
                Ok(Value::Integer(ms)) if ms > 0 => {
                    let this = Duration::from_millis(u64::try_from(ms).unwrap_or(0));
                    wait = Some(wait.map_or(this, |w| w.max(this)));
                }
                Ok(Value::Integer(_)) => {}
                Ok(other) => {
                    tracing::warn!(reply = ?other, "login attempts in redis: counting here");
                    return self.refused(user, ip, now);
                }
                Err(error) => {
                    tracing::warn!(%error, "login attempts in redis: counting here");
                    return self.refused(user, ip, now);
                }
            }
        }
        wait
    }

    /// Counts a failed sign-in (in Redis when shared and reachable, else here).
    pub async fn count_failure(&self, user: &str, ip: Option<IpAddr>, now: Instant) {
        if self.limit == 0 {
            return;
        }
        let Some(shared) = &self.shared else {
            return self.failed(user, ip, now);
        };
        let window = self.window.as_millis().max(1).to_string();
        for counted in Self::keys(user, ip) {
            let key = format!("{}{}", shared.prefix, counted.key());
            let args: [&[u8]; 5] = [
                b"EVAL",
                FAILED_SCRIPT.as_bytes(),
                b"1",
                key.as_bytes(),
                window.as_bytes(),
            ];
            match shared.pool.command(&args).await {
                Ok(Value::Integer(_)) => {}
                Ok(other) => {
                    tracing::warn!(reply = ?other, "login attempts in redis: counting here");
                    return self.failed(user, ip, now);
                }
                Err(error) => {
                    tracing::warn!(%error, "login attempts in redis: counting here");
                    return self.failed(user, ip, now);
                }
            }
        }
    }

    fn keys(user: &str, ip: Option<IpAddr>) -> Vec<Counted> {
        let mut keys = vec![Counted::User(user.to_owned())];
        keys.extend(ip.map(|ip| Counted::Address(network(ip))));
        keys
    }

    /// How long `user` (from `ip`) must still wait, if either is over the limit at `now`.
    pub fn refused(&self, user: &str, ip: Option<IpAddr>, now: Instant) -> Option<Duration> {
        if self.limit == 0 {
            return None;
        }
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        Self::keys(user, ip)
            .iter()
            .filter_map(|key| counts.get(key))
            .filter(|w| w.failures >= self.limit)
            .map(|w| (w.started + self.window).saturating_duration_since(now))
            .filter(|wait| !wait.is_zero())
            .max()
    }

    /// Counts a failed sign-in of `user` from `ip` at `now`.
    pub fn failed(&self, user: &str, ip: Option<IpAddr>, now: Instant) {
        if self.limit == 0 {
            return;
        }
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        for key in Self::keys(user, ip) {
            if !counts.contains_key(&key) && counts.len() >= MAX_TRACKED {
                let window = self.window;
                counts.retain(|_, w| now.saturating_duration_since(w.started) < window);
                if counts.len() >= MAX_TRACKED {
                    let mut starts: Vec<Instant> = counts.values().map(|w| w.started).collect();
                    starts.sort_unstable();
                    let cut = starts[starts.len() / 2];
                    counts.retain(|_, w| w.started > cut);
                }
            }
            let window = counts.entry(key).or_insert(Window {
                started: now,
                failures: 0,
            });
            if now.saturating_duration_since(window.started) >= self.window {
                *window = Window {
                    started: now,
                    failures: 0,
                };
            }
            window.failures = window.failures.saturating_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_past_the_limit_wait_for_the_window() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let ip = |text: &str| Some(text.parse::<IpAddr>().expect("ip"));
        let attempts = LoginAttempts::new(3, Duration::from_secs(60));
        for s in 0..3 {
            assert_eq!(attempts.refused("alice", ip("10.0.0.1"), at(s)), None, "failure {s}");
            attempts.failed("alice", ip("10.0.0.1"), at(s));
        }
        // (user, address, second, expected wait in seconds)
        let cases: Vec<(&str, Option<IpAddr>, u64, Option<u64>)> = vec![
            ("alice", ip("10.0.0.1"), 10, Some(50)),
            // The user is refused from anywhere…
            ("alice", ip("10.0.0.2"), 10, Some(50)),
            ("alice", None, 10, Some(50)),
            // …and the address for any user.
            ("bob", ip("10.0.0.1"), 10, Some(50)),
            ("bob", ip("10.0.0.2"), 10, None),
            // The window ends.
            ("alice", ip("10.0.0.1"), 60, None),
        ];
        for (user, address, second, expected) in cases {
            assert_eq!(
                attempts.refused(user, address, at(second)).map(|d| d.as_secs()),
                expected,
                "{user} from {address:?} at {second}"
            );
        }
    }

    #[test]
    fn an_ipv6_client_counts_by_its_64() {
        let attempts = LoginAttempts::new(1, Duration::from_secs(60));
        let now = Instant::now();
        attempts.failed("a", Some("2001:db8:1:2::1".parse().expect("ip")), now);
        let cases = [("2001:db8:1:2::ffff", true), ("2001:db8:1:3::1", false)];
        for (address, refused) in cases {
            let ip = Some(address.parse().expect("ip"));
            assert_eq!(attempts.refused("b", ip, now).is_some(), refused, "{address}");
        }
    }

    #[test]
    fn no_limit_counts_nothing() {
        let attempts = LoginAttempts::new(0, Duration::from_secs(60));
        let now = Instant::now();
        for _ in 0..10 {
            attempts.failed("a", None, now);
        }
        assert_eq!(attempts.refused("a", None, now), None);
    }
}
