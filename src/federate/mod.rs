//! Federation, the pure part: several upstreams served as one MCP server on one
//! path. How members' names are exposed and traced back to their owner
//! ([`names`]), how their lists are paged together under one sealed cursor
//! ([`cursor`]), and how their handshakes merge into one ([`merge`]). No I/O:
//! the router fetches from members and hands their answers in.

pub mod cursor;
pub mod merge;
pub mod names;
