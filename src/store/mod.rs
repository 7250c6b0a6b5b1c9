//! State shared by replicas, kept outside the process: the Redis client ([`redis`],
//! on the `redis` crate: TLS through rustls, ACL users, Redis Cluster) and on it
//! the counters of shared rate limits and the ids of ended sessions; the
//! authorization server's shared store (`crate::authz::store::redis`) uses it too.
//! Nothing here decides anything: the rules are [`crate::policy`]'s.

pub(crate) mod redis;
