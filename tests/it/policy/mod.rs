//! What each principal may see, do and spend: per-principal policies, tool disclosure,
//! quotas and rate limits.

mod disclosure;
mod policies;
mod quotas;
mod rate_limits;
