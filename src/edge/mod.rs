//! The client edge: the transports clients speak (Streamable HTTP with JSON or
//! SSE answers, the 2024-11-05 HTTP+SSE pair, stdio), turning bytes into one
//! framed message with the authenticated principal and the client's session,
//! and rendering the bridge's [`crate::bridge::Reply`] back.
//!
//! Nothing here knows an era's rules or a server: it imports nothing from
//! `upstream`, and reaches the bridge and the router only by their APIs.

pub(crate) mod http;
pub(crate) mod legacy_sse;
pub(crate) mod respond;
pub(crate) mod seed;
pub(crate) mod stdio;
pub(crate) mod tls;
