//! Rate limits (`[rate_limits]`): which counters a request spends, and the
//! local GCRA limiters (governor) that keep them. No I/O: a limit shared by
//! replicas is only named here ([`SharedCount`]) and judged from Redis's
//! answer (`shared_verdict`); counting it is the caller's job.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};

use crate::config::{RateLimit, RateLimitsConfig};

/// Which limit refused a request: the client is told, so it knows what to slow down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `per_principal`: all of this principal's requests.
    Principal,
    /// `tools.NAME`: this principal's calls of one tool.
    Tool,
    /// `upstreams.NAME`: every principal's requests to one upstream.
    Upstream,
}

impl Scope {
    /// The name used in errors, logs and Redis keys.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scope::Principal => "principal",
            Scope::Tool => "tool",
            Scope::Upstream => "upstream",
        }
    }
}

/// A request, as far as rate limits care.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// Who sends it (empty when anonymous).
    pub principal: &'a str,
    /// The upstream it is for.
    pub upstream: &'a str,
    /// The tool, for a `tools/call`.
    pub tool: Option<&'a str>,
}

/// A refusal: the limit, and when the request could have passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// Which limit.
    pub(crate) scope: Scope,
    /// How long until it would pass.
    pub(crate) retry_after: Duration,
}

impl Refused {
    /// `Retry-After` in whole seconds, rounded up, at least 1.
    pub(crate) fn retry_after_secs(&self) -> u64 {
        let secs = self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0);
        secs.max(1)
    }
}

/// One count a request must make in the shared store: a fixed window of
/// `window` holding at most `requests`, under `key` (without the configured prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedCount {
    /// Which limit.
    pub(crate) scope: Scope,
    /// The counter's name: scope, limit name and key.
    pub(crate) key: String,
    /// How many the window holds.
    pub(crate) requests: u32,
    /// The window.
    pub(crate) window: Duration,
}

/// Judges a shared count from the store's answer: `count` after this request
/// and the window's remaining `ttl`. `None` lets it through.
pub(crate) fn shared_verdict(count: &SharedCount, after: u64, ttl: Duration) -> Option<Refused> {
    (after > u64::from(count.requests)).then_some(Refused {
        scope: count.scope,
        retry_after: if ttl.is_zero() { count.window } else { ttl },
    })
}

type Keyed<C> = RateLimiter<String, DashMapStateStore<String>, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// One configured limit: kept here, or counted in the shared store.
enum Limiter<C: Clock> {
    Local(Keyed<C>, C),
    Shared { requests: u32, window: Duration },
}

impl<C: Clock + Clone> Limiter<C> {
    fn new(limit: &RateLimit, clock: &C) -> Limiter<C> {
        let requests = NonZeroU32::new(limit.requests).unwrap_or(NonZeroU32::MIN);
        if limit.shared {
            return Limiter::Shared {
                requests: requests.get(),
                window: limit.per.0,
            };
        }
        let burst = limit.burst.and_then(NonZeroU32::new).unwrap_or(requests);
        // One request every per/requests; a zero period (validated away) still builds.
        let period = (limit.per.0 / requests.get()).max(Duration::from_nanos(1));
        let quota = Quota::with_period(period).unwrap_or(Quota::per_second(requests));
        let limiter = RateLimiter::dashmap_with_clock(quota.allow_burst(burst), clock.clone());
        Limiter::Local(limiter, clock.clone())
    }

    /// Spends one request of `key`: `Err` when the local limit refuses, the
    /// shared count to make when the limit is shared.
    fn spend(&self, scope: Scope, name: &str, key: &str, shared: &mut Vec<SharedCount>) -> Result<(), Refused> {
        match self {
            Limiter::Local(limiter, clock) => limiter.check_key(&key.to_owned()).map_err(|not_until| Refused {
                scope,
                retry_after: not_until.wait_time_from(clock.now()),
            }),
            Limiter::Shared { requests, window } => {
                shared.push(SharedCount {
                    scope,
                    key: format!("{}:{name}:{key}", scope.as_str()),
                    requests: *requests,
                    window: *window,
                });
                Ok(())
            }
        }
    }

    fn forget_idle(&self) {
        if let Limiter::Local(limiter, _) = self {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

/// Every configured limit.
pub struct RateLimits<C: Clock = DefaultClock> {
    per_principal: Option<Limiter<C>>,
    tools: HashMap<String, Limiter<C>>,
    upstreams: HashMap<String, Limiter<C>>,
}

impl RateLimits<DefaultClock> {
    /// The limits of `config`, on the system clock.
    pub fn new(config: &RateLimitsConfig) -> RateLimits {
        RateLimits::with_clock(config, &DefaultClock::default())
    }
}

impl<C: Clock + Clone> RateLimits<C> {
    /// The limits of `config`, on `clock`.
    pub(crate) fn with_clock(config: &RateLimitsConfig, clock: &C) -> RateLimits<C> {
        let build = |map: &std::collections::BTreeMap<String, RateLimit>| {
            map.iter()
                .map(|(name, limit)| (name.clone(), Limiter::new(limit, clock)))
                .collect()
        };
        RateLimits {
            per_principal: config.per_principal.as_ref().map(|l| Limiter::new(l, clock)),
            tools: build(&config.tools),
            upstreams: build(&config.upstreams),
        }
    }

    /// Whether any limit is configured (the check is skipped otherwise).
    pub(crate) fn is_empty(&self) -> bool {
        self.per_principal.is_none() && self.tools.is_empty() && self.upstreams.is_empty()
    }

    /// Spends `request`'s share of every limit that applies, most specific
    /// first: the tool, the upstream, the principal. A refusal stops there
    /// (what was spent before it stays spent, as governor cannot give back).
    /// On success, the counts still to be made in the shared store.
    pub fn check(&self, request: &Request<'_>) -> Result<Vec<SharedCount>, Refused> {
        let mut shared = Vec::new();
        if let Some(tool) = request.tool
            && let Some(limiter) = self.tools.get(tool)
        {
            limiter.spend(Scope::Tool, tool, request.principal, &mut shared)?;
        }
        if let Some(limiter) = self.upstreams.get(request.upstream) {
            limiter.spend(Scope::Upstream, request.upstream, "", &mut shared)?;
        }
        if let Some(limiter) = &self.per_principal {
            limiter.spend(Scope::Principal, "", request.principal, &mut shared)?;
        }
        Ok(shared)
    }

    /// Drops the state of keys back at a full bucket, so that principals seen
    /// once do not stay in memory.
    pub(crate) fn forget_idle(&self) {
        let all = self
            .per_principal
            .iter()
            .chain(self.tools.values())
            .chain(self.upstreams.values());
        all.for_each(Limiter::forget_idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    fn limits(text: &str) -> (RateLimits<FakeRelativeClock>, FakeRelativeClock) {
        let config: RateLimitsConfig = toml::from_str(text).unwrap();
        let clock = FakeRelativeClock::default();
        (RateLimits::with_clock(&config, &clock), clock)
    }

    fn call<'a>(principal: &'a str, tool: Option<&'a str>) -> Request<'a> {
        Request {
            principal,
            upstream: "files",
            tool,
        }
    }

    /// (what, config, requests in order with the expected outcome: None passes,
    /// Some((scope, retry after in ms)) is refused)
    type Case = (
        &'static str,
        &'static str,
        Vec<(Request<'static>, Option<(Scope, u64)>)>,
    );

    #[test]
    fn limits_refuse_past_their_quota_and_say_when() {
        let refused = |scope, ms| Some((scope, ms));
        let cases: Vec<Case> = vec![
            (
                "nothing configured: everything passes",
                "",
                vec![(call("a", Some("echo")), None), (call("a", Some("echo")), None)],
            ),
            (
                "per principal: each principal has its own bucket",
                "per_principal = { requests = 2, per = \"1s\" }",
                vec![
                    (call("a", None), None),
                    (call("a", None), None),
                    (call("a", None), refused(Scope::Principal, 500)),
                    (call("b", None), None),
                ],
            ),
            (
                "per tool: only that tool, per principal",
                "tools.slow = { requests = 1, per = \"10s\" }",
                vec![
                    (call("a", Some("slow")), None),
                    (call("a", Some("slow")), refused(Scope::Tool, 10_000)),
                    (call("a", Some("echo")), None),
                    (call("b", Some("slow")), None),
                ],
            ),
            (
                "per upstream: every principal together",
                "upstreams.files = { requests = 1, per = \"2s\" }",
                vec![
                    (call("a", None), None),
                    (call("b", None), refused(Scope::Upstream, 2_000)),
                ],
            ),
            (
                "a burst above the rate",
                "per_principal = { requests = 1, per = \"1s\", burst = 3 }",
                vec![
                    (call("a", None), None),
                    (call("a", None), None),
                    (call("a", None), None),
                    (call("a", None), refused(Scope::Principal, 1_000)),
                ],
            ),
            (
                "the tool refuses before the principal's bucket is spent",
                "per_principal = { requests = 2 }\ntools.slow = { requests = 1, per = \"1m\" }",
                vec![
                    (call("a", Some("slow")), None),
                    (call("a", Some("slow")), refused(Scope::Tool, 60_000)),
                    (call("a", None), None),
                    (call("a", None), refused(Scope::Principal, 500)),
                ],
            ),
        ];
        for (what, text, requests) in cases {
            let (limits, _clock) = limits(text);
            for (i, (request, expected)) in requests.into_iter().enumerate() {
                let outcome = limits
                    .check(&request)
                    .err()
                    .map(|r| (r.scope, r.retry_after.as_millis() as u64));
                assert_eq!(outcome, expected, "{what}: request {i}");
            }
        }
    }

    #[test]
    fn a_bucket_refills_with_time_and_idle_keys_are_forgotten() {
        let (limits, clock) = limits("per_principal = { requests = 1, per = \"1s\" }");
        assert!(limits.check(&call("a", None)).is_ok());
        assert!(limits.check(&call("a", None)).is_err());
        clock.advance(Duration::from_millis(1000));
        assert!(limits.check(&call("a", None)).is_ok());
        clock.advance(Duration::from_secs(5));
        limits.forget_idle();
        let Some(Limiter::Local(limiter, _)) = &limits.per_principal else {
            panic!("a local limit")
        };
        assert_eq!(limiter.len(), 0);
    }

    #[test]
    fn shared_limits_are_named_and_judged_from_the_store() {
        let config = "per_principal = { requests = 5, per = \"1m\", shared = true }\n\
                      tools.echo = { requests = 1, shared = true }\n[redis]\naddress = \"127.0.0.1:1\"";
        let (limits, _clock) = limits(config);
        let counts = limits.check(&call("alice", Some("echo"))).unwrap();
        let keys: Vec<_> = counts.iter().map(|c| (c.key.as_str(), c.requests)).collect();
        assert_eq!(keys, [("tool:echo:alice", 1), ("principal::alice", 5)]);
        let table = [
            (1, 900, None),
            (5, 10, None),
            (6, 59_000, Some(59_000)),
            (7, 0, Some(60_000)),
        ];
        let principal = &counts[1];
        for (after, ttl, expected) in table {
            let verdict = shared_verdict(principal, after, Duration::from_millis(ttl));
            assert_eq!(
                verdict.map(|r| r.retry_after.as_millis() as u64),
                expected,
                "{after} {ttl}"
            );
        }
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        for (ms, secs) in [(0, 1), (1, 1), (999, 1), (1000, 1), (1001, 2), (59_500, 60)] {
            let refused = Refused {
                scope: Scope::Tool,
                retry_after: Duration::from_millis(ms),
            };
            assert_eq!(refused.retry_after_secs(), secs, "{ms}");
        }
    }
}
