//! What each principal may do and spend: per-principal policies, quotas and rate limits; and
//! which definitions any principal sees at all: definition pins.

mod pins;
mod policies;
mod quotas;
mod rate_limits;
