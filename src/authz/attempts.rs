//! The login attempt limit: sign-ins are counted per user name *and* client
//! address together (an IPv6 client by its /64; the address is the real client's
//! behind `listen.trusted_proxies`). `login_attempts` failures of one name from
//! one address within `login_attempts_window` are each answered; past them that
//! name may be tried from that address once a minute ([`LOCKOUT`]), until the
//! window ends. A refused attempt is answered 429 before any password is checked,
//! so the limit is no oracle.
//!
//! Hence guessing at one user name never holds back another name, and never
//! holds back the same name tried from another address; nobody waits more than
//! [`LOCKOUT`] for a stranger's failures. An attempt is counted as a failure when
//! it begins (so concurrent guesses cannot slip past the limit together) and the
//! count is cleared when it signs in.
//!
//! Counted in this process (bounded: when the table is full, ended windows go,
//! then the windows that started first), or, with `storage = "redis"`, in Redis,
//! so that every replica sees the same counts (a key per name and address, and
//! one for its minute of waiting, each expiring; while Redis cannot be reached,
//! this process counts).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::redis::Pool;
use crate::store::redis::Value;

/// Most name-and-address pairs tracked at once.
const MAX_TRACKED: usize = 100_000;

/// How long a name must wait, from one address, after each failure past the limit.
pub(crate) const LOCKOUT: Duration = Duration::from_secs(60);

/// A user name tried from one network: the SHA-256 of both (a name may be long).
type Pair = [u8; 32];

/// The failures of one pair in its current window.
struct Window {
    started: Instant,
    failures: u32,
    /// Until when the pair is refused.
    locked_until: Option<Instant>,
}

/// Failed sign-ins per user name and client address.
pub(crate) struct LoginAttempts {
    limit: u32,
    window: Duration,
    counts: Mutex<HashMap<Pair, Window>>,
    shared: Option<Shared>,
}

/// The counts in Redis.
struct Shared {
    pool: Pool,
    prefix: String,
}

/// Begins an attempt: the remaining milliseconds of the pair's wait if it must
/// wait, else -1 after counting the attempt (and starting a wait of ARGV[3] ms,
/// within the window, once the count reaches ARGV[1]).
/// KEYS: the count, the wait. ARGV: limit, window ms, lockout ms.
const BEGIN_SCRIPT: &str = "local waiting = redis.call('PTTL', KEYS[2]) \
if waiting > 0 then return waiting end \
local n = redis.call('INCR', KEYS[1]) \
if n == 1 or redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end \
if n >= tonumber(ARGV[1]) then \
  local wait = tonumber(ARGV[3]) \
  local left = redis.call('PTTL', KEYS[1]) \
  if left > 0 and left < wait then wait = left end \
  redis.call('SET', KEYS[2], '1', 'PX', wait) \
end \
return -1";

/// The pair of `user` from `ip`'s network (no address: one pair per name).
fn pair(user: &str, ip: Option<IpAddr>) -> Pair {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    hasher.update(user.as_bytes());
    hasher.update([0]);
    if let Some(ip) = ip {
        hasher.update(network(ip).to_string().as_bytes());
    }
    hasher.finalize().into()
}

/// An IPv6 address stands for its /64 (one host usually holds a whole one).
pub(crate) fn network(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
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
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl LoginAttempts {
    /// `limit` failures per pair and `window` (0: no limit), counted in this process.
    pub(crate) fn new(limit: u32, window: Duration) -> LoginAttempts {
        LoginAttempts {
            limit,
            window,
            counts: Mutex::new(HashMap::new()),
            shared: None,
        }
    }

    /// The same, counted in Redis through `pool` under keys starting with `prefix`.
    pub(crate) fn shared(limit: u32, window: Duration, pool: Pool, prefix: String) -> LoginAttempts {
        LoginAttempts {
            shared: Some(Shared { pool, prefix }),
            ..LoginAttempts::new(limit, window)
        }
    }

    /// Begins a sign-in of `user` from `ip` at `now`: how long it must still wait,
    /// or `None` once it is counted (as a failure until [`LoginAttempts::succeeded`]).
    pub(crate) async fn begin(&self, user: &str, ip: Option<IpAddr>, now: Instant) -> Option<Duration> {
        if self.limit == 0 {
            return None;
        }
        let Some(shared) = &self.shared else {
            return self.begin_here(user, ip, now);
        };
        let (count, wait) = shared.keys(user, ip);
        let (limit, window) = (self.limit.to_string(), self.window.as_millis().max(1).to_string());
        let lockout = LOCKOUT.as_millis().to_string();
        let args: [&[u8]; 8] = [
            b"EVAL",
            BEGIN_SCRIPT.as_bytes(),
            b"2",
            count.as_bytes(),
            wait.as_bytes(),
            limit.as_bytes(),
            window.as_bytes(),
            lockout.as_bytes(),
        ];
        match shared.pool.command(&args).await {
            Ok(Value::Integer(ms)) if ms > 0 => Some(Duration::from_millis(u64::try_from(ms).unwrap_or(1))),
            Ok(Value::Integer(_)) => None,
            Ok(other) => {
                tracing::warn!(reply = ?other, "login attempts in redis: counting here");
                self.begin_here(user, ip, now)
            }
            Err(error) => {
                tracing::warn!(%error, "login attempts in redis: counting here");
                self.begin_here(user, ip, now)
            }
        }
    }

    /// `user` signed in from `ip`: its count there starts again.
    pub(crate) async fn succeeded(&self, user: &str, ip: Option<IpAddr>) {
        if self.limit == 0 {
            return;
        }
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pair(user, ip));
        if let Some(shared) = &self.shared {
            let (count, wait) = shared.keys(user, ip);
            if let Err(error) = shared.pool.command(&[b"DEL", count.as_bytes(), wait.as_bytes()]).await {
                tracing::warn!(%error, "login attempts in redis: clearing a count");
            }
        }
    }

    /// [`LoginAttempts::begin`], counted in this process.
    pub(crate) fn begin_here(&self, user: &str, ip: Option<IpAddr>, now: Instant) -> Option<Duration> {
        if self.limit == 0 {
            return None;
        }
        let key = pair(user, ip);
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(wait) = counts
            .get(&key)
            .and_then(|w| w.locked_until)
            .map(|until| until.saturating_duration_since(now))
            .filter(|wait| !wait.is_zero())
        {
            return Some(wait);
        }
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
            locked_until: None,
        });
        if now.saturating_duration_since(window.started) >= self.window {
            *window = Window {
                started: now,
                failures: 0,
                locked_until: None,
            };
        }
        window.failures = window.failures.saturating_add(1);
        if window.failures >= self.limit {
            let ends = window.started + self.window;
            window.locked_until = Some((now + LOCKOUT).min(ends));
        }
        None
    }
}

impl Shared {
    /// The Redis keys of a pair: its count and its wait.
    fn keys(&self, user: &str, ip: Option<IpAddr>) -> (String, String) {
        let hex = hex(&pair(user, ip));
        (
            format!("{}login:{hex}", self.prefix),
            format!("{}login-wait:{hex}", self.prefix),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse::<IpAddr>().expect("ip"))
    }

    #[test]
    fn a_name_tried_from_an_address_waits_a_minute_past_the_limit() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let attempts = LoginAttempts::new(3, Duration::from_secs(900));
        for s in 0..3 {
            assert_eq!(attempts.begin_here("alice", ip("10.0.0.1"), at(s)), None, "attempt {s}");
        }
        // (user, address, second, expected wait in seconds)
        let cases: Vec<(&str, Option<IpAddr>, u64, Option<u64>)> = vec![
            // The third failure (at 2 s) starts a minute's wait for alice from 10.0.0.1…
            ("alice", ip("10.0.0.1"), 10, Some(52)),
            ("alice", ip("::ffff:10.0.0.1"), 10, Some(52)),
            // …and for nobody else: not alice elsewhere, not bob from there.
            ("alice", ip("10.0.0.2"), 10, None),
            ("bob", ip("10.0.0.1"), 10, None),
            // Once the minute is over, one more attempt (which fails: a minute more).
            ("alice", ip("10.0.0.1"), 62, None),
            ("alice", ip("10.0.0.1"), 63, Some(59)),
        ];
        for (user, address, second, expected) in cases {
            assert_eq!(
                attempts.begin_here(user, address, at(second)).map(|d| d.as_secs()),
                expected,
                "{user} from {address:?} at {second}"
            );
        }
    }

    #[test]
    fn the_wait_ends_with_the_window_and_a_sign_in_clears_the_count() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let attempts = LoginAttempts::new(2, Duration::from_secs(3));
        assert_eq!(attempts.begin_here("alice", None, at(0)), None);
        assert_eq!(attempts.begin_here("alice", None, at(1000)), None);
        // The window (3 s from the first failure) ends before the minute would.
        assert_eq!(
            attempts.begin_here("alice", None, at(1500)),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(attempts.begin_here("alice", None, at(3000)), None);
        futures_util::FutureExt::now_or_never(attempts.succeeded("alice", None)).expect("in memory");
        assert_eq!(attempts.begin_here("alice", None, at(3001)), None, "counted afresh");
    }

    #[test]
    fn an_ipv6_client_counts_by_its_64() {
        let attempts = LoginAttempts::new(1, Duration::from_secs(60));
        let now = Instant::now();
        assert_eq!(attempts.begin_here("a", ip("2001:db8:1:2::1"), now), None);
        let cases = [("2001:db8:1:2::ffff", true), ("2001:db8:1:3::1", false)];
        for (address, refused) in cases {
            assert_eq!(
                attempts.begin_here("a", ip(address), now).is_some(),
                refused,
                "{address}"
            );
        }
    }

    #[test]
    fn no_limit_counts_nothing() {
        let attempts = LoginAttempts::new(0, Duration::from_secs(60));
        let now = Instant::now();
        for _ in 0..10 {
            assert_eq!(attempts.begin_here("a", None, now), None);
        }
    }
}
