//! State shared by replicas, kept outside the process: a Redis client ([`redis`],
//! speaking RESP through [`resp`]) and on it the counters of shared rate limits;
//! the authorization server's shared store (`crate::authz::store::redis`) uses it too.
//! Nothing here decides anything: the rules are [`crate::policy`]'s.

pub(crate) mod redis;
pub(crate) mod resp;
