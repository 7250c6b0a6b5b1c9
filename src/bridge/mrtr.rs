//! Multi round-trip requests for 2026-07-28 clients in front of legacy
//! upstreams: an upstream call that asks its client for input (sampling,
//! elicitation, roots) is suspended here, the client gets `input_required`, and
//! its retry answers the upstream and resumes the same call.
//!
//! A suspended call lives in this process: the `requestState` is sealed and
//! bound to the principal, the method, the params and an expiry, but only the
//! replica holding the call can resume it (a load balancer must route a retry
//! to the replica that answered `input_required`, e.g. by hashing
//! `requestState`). Calls never resumed are cancelled upstream at expiry.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::Instant as Deadline;

use dashmap::DashMap;
use rand::Rng;
use serde_json::Value;

use super::pump::ModernSide;
use crate::protocol::{ErrorObject, Request};
use crate::router::Call;
use crate::seal::{Purpose, SealKey, Sealer, unix_now};
use crate::translate::mrtr::{self, RequestStateClaims};

/// Suspended upstream calls awaiting their client's input.
pub struct SuspendedCalls {
    calls: DashMap<String, Suspended>,
    sealer: Sealer,
    expiry: Duration,
}

/// One suspended call.
pub struct Suspended {
    /// The upstream call, still in flight; `None` when the upstream ended it
    /// (a 2025-11-25 `-32042`) and the retry re-issues the request instead.
    pub call: Option<Call>,
    /// How to answer the client when it completes.
    pub side: ModernSide,
    /// The upstream's server→client requests still unanswered, by input key.
    pub awaiting: Vec<(String, Request)>,
    /// The original request's method and params digest.
    method: String,
    digest: String,
    principal: String,
    expires: Instant,
    /// When the whole request times out (the retry inherits what is left).
    pub deadline: Deadline,
}

impl SuspendedCalls {
    /// A store whose calls expire `expiry` after each suspension.
    pub fn new(expiry: Duration) -> SuspendedCalls {
        SuspendedCalls {
            calls: DashMap::new(),
            sealer: Sealer::new(&SealKey::random(), None),
            expiry,
        }
    }

    /// Suspends `call` and returns the `InputRequiredResult` for the client.
    #[allow(clippy::too_many_arguments)]
    pub fn suspend(
        &self,
        call: Option<Call>,
        side: ModernSide,
        awaiting: Vec<(String, Request)>,
        method: &str,
        digest: String,
        principal: &str,
        deadline: Deadline,
    ) -> Value {
        let handle = format!("{:032x}", rand::rng().random::<u128>());
        let expires = Instant::now() + self.expiry;
        let claims = RequestStateClaims {
            handle: handle.clone(),
            method: method.to_owned(),
            digest: digest.clone(),
            principal: principal.to_owned(),
            exp: unix_now() + self.expiry.as_secs().max(1),
        };
        let state = self
            .sealer
            .seal(Purpose::RequestState, &serde_json::to_vec(&claims).unwrap_or_default());
        let requests: Vec<(String, Value)> = awaiting
            .iter()
            .map(|(k, r)| (k.clone(), mrtr::input_request(r)))
            .collect();
        let result = mrtr::input_required(&requests, &state);
        let suspended = Suspended {
            call,
            side,
            awaiting,
            method: method.to_owned(),
            digest,
            principal: principal.to_owned(),
            expires,
            deadline,
        };
        self.calls.insert(handle, suspended);
        result
    }

    /// Takes the call a retry's `requestState` names, checking what it is bound to.
    pub fn resume(
        &self,
        state: &str,
        method: &str,
        params: Option<&Value>,
        principal: &str,
    ) -> Result<Suspended, ErrorObject> {
        let invalid = |why: &str| ErrorObject::invalid_params(format!("requestState {why}"));
        let plaintext = self
            .sealer
            .open(Purpose::RequestState, state, Instant::now())
            .ok_or_else(|| invalid("is not one eragate issued (tampered, or from another replica)"))?;
        let claims: RequestStateClaims = serde_json::from_slice(&plaintext).map_err(|_| invalid("is malformed"))?;
        if claims.exp <= unix_now() {
            return Err(invalid("has expired; send the request again without it"));
        }
        if claims.method != method || claims.principal != principal || claims.digest != mrtr::params_digest(params) {
            return Err(invalid("belongs to another request"));
        }
        let (_, suspended) = self
            .calls
            .remove(&claims.handle)
            .ok_or_else(|| invalid("names a request that is no longer waiting (expired or already resumed)"))?;
        if suspended.method != method || suspended.digest != claims.digest || suspended.principal != principal {
            return Err(invalid("belongs to another request"));
        }
        Ok(suspended)
    }

    /// Cancels every suspended call past its expiry.
    pub fn expire(&self) {
        let now = Instant::now();
        let expired: Vec<String> = self
            .calls
            .iter()
            .filter(|c| c.expires <= now)
            .map(|c| c.key().clone())
            .collect();
        for handle in expired {
            if let Some((_, suspended)) = self.calls.remove(&handle) {
                tracing::debug!(method = %suspended.method, "input never came; cancelling the suspended upstream call");
                if let Some(call) = suspended.call {
                    call.cancel("the client never answered input_required");
                }
            }
        }
    }

    /// Suspended calls (for the admin view and tests of leaks).
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether none are suspended.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Runs [`SuspendedCalls::expire`] every second while the store lives.
    pub fn spawn_expiry(self: &Arc<Self>) {
        let store = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_secs(1));
            loop {
                ticker.tick().await;
                let Some(store) = store.upgrade() else { return };
                store.expire();
            }
        });
    }
}
