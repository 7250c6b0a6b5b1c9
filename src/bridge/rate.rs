//! The rate-limit stage of dispatch: spends a request's share of every
//! `[rate_limits]` limit, locally ([`crate::policy::rate`]) and, for shared
//! limits, in Redis ([`crate::store::redis`]); a refusal is a
//! [`Rejection::RateLimited`]. While Redis is down, `on_error` decides.

use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, OnRedisError, RedisUser};
use crate::policy::rate::{RateLimits, Request, Scope, shared_verdict};
use crate::protocol::Message;
use crate::protocol::errors::Rejection;
use crate::store::redis::Counters;

/// How often the state of principals back at a full bucket is dropped.
const FORGET_EVERY: Duration = Duration::from_secs(60);

/// The configured limits and where shared ones are counted.
pub(crate) struct RateGate {
    limits: RateLimits,
    counters: Option<Counters>,
    on_error: OnRedisError,
}

impl RateGate {
    /// The gate of `config`.
    pub(crate) fn new(config: &Config) -> RateGate {
        let (config, target) = (&config.rate_limits, config.redis_target(RedisUser::RateLimits));
        RateGate {
            limits: RateLimits::new(config),
            counters: target.filter(|_| config.any_shared()).map(Counters::new),
            on_error: config.redis.as_ref().map(|r| r.on_error).unwrap_or_default(),
        }
    }

    /// Whether no `[[rate_limits]]` apply: every request passes without a look.
    pub(crate) fn unlimited(&self) -> bool {
        self.limits.is_empty()
    }

    /// Whether `message` from `principal` to `upstream` may pass now. Only
    /// requests are counted: notifications and responses answer nothing.
    pub(crate) async fn admit(&self, principal: &str, upstream: &str, message: &Message) -> Result<(), Rejection> {
        if self.limits.is_empty() {
            return Ok(());
        }
        let Message::Request(request) = message else {
            return Ok(());
        };
        let tool = match request.method.as_str() {
            "tools/call" => request
                .params
                .as_ref()
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str()),
            _ => None,
        };
        let request = Request {
            principal,
            upstream,
            tool,
        };
        let shared = self
            .limits
            .check(&request)
            .map_err(|refused| refusal(refused.scope, refused.retry_after_secs()))?;
        let Some(counters) = &self.counters else {
            return Ok(());
        };
        for count in shared {
            match counters.count(&count.key, count.window).await {
                Ok((after, ttl)) => {
                    if let Some(refused) = shared_verdict(&count, after, ttl) {
                        return Err(refusal(refused.scope, refused.retry_after_secs()));
                    }
                }
                Err(error) => match self.on_error {
                    OnRedisError::Open => {
                        tracing::warn!(%error, limit = count.scope.as_str(), "shared rate limit not counted; letting the request through (on_error = open)");
                    }
                    OnRedisError::Closed => {
                        tracing::warn!(%error, limit = count.scope.as_str(), "shared rate limit not counted; refusing the request (on_error = closed)");
                        return Err(refusal(count.scope, 1));
                    }
                },
            }
        }
        Ok(())
    }

    /// Drops idle principals' state every minute for as long as the gate lives.
    pub(crate) fn spawn_forgetting(self: &Arc<Self>) {
        if self.limits.is_empty() {
            return;
        }
        let gate = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(FORGET_EVERY);
            loop {
                ticker.tick().await;
                let Some(gate) = gate.upgrade() else { return };
                gate.limits.forget_idle();
            }
        });
    }
}

fn refusal(scope: Scope, retry_after_secs: u64) -> Rejection {
    Rejection::RateLimited {
        limit: scope.as_str(),
        retry_after_secs,
    }
}
