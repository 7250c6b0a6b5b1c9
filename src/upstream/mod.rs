//! I/O toward upstream MCP servers: live sessions, the transports they run on,
//! and the per-upstream pool that keeps sessions warm.
//!
//! Nothing here knows which era a client speaks; callers hand in JSON-RPC
//! messages for the upstream's own revision.
//!
//! From the bottom up: [`error`](UpstreamError) (how a request fails),
//! [`transport`] (the wire; reports through [`transport::Inbound`]),
//! [`credentials`] (what the HTTP transports present to the upstream),
//! [`member`] (a pool member and its health), [`session`] (one live
//! session, its call table and routing), [`call`] (a request in flight as its caller
//! holds it), `handshake` (`initialize` on a fresh session), and [`pool`]
//! (one configured upstream: era, admission, partitions, members).

pub(crate) mod call;
pub(crate) mod credentials;
mod error;
mod handshake;
pub(crate) mod member;
pub(crate) mod pool;
pub(crate) mod probe;
pub(crate) mod session;
pub(crate) mod transport;

pub(crate) use call::{Call, CallEvent, CallStep, OnDrop};
pub(crate) use error::UpstreamError;
pub(crate) use pool::{PartitionKey, Upstream};
pub(crate) use session::UpstreamSession;
