//! State shared by replicas, kept outside the process. Today: the counters of
//! shared rate limits, in Redis ([`redis`], speaking RESP through [`resp`]).
//! Nothing here decides anything: the rules are [`crate::policy`]'s.

pub mod redis;
pub mod resp;
