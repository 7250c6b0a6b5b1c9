//! What each principal may do and spend: per-principal policies, quotas and rate limits.

mod policies;
mod quotas;
mod rate_limits;
