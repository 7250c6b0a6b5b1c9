//! What each principal may see, do and spend: per-principal policies, tool disclosure,
//! quotas and rate limits; and which definitions any principal sees at all: definition pins.

mod disclosure;
mod pins;
mod policies;
mod quotas;
mod rate_limits;
