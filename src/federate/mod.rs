//! Federation, the pure part: several upstreams served as one MCP server on one
//! path. How members' names are exposed and traced back to their owner
//! ([`names`]), how their lists are paged together under one sealed cursor
//! (`cursor`) into one page (`page`), how their handshakes merge into one
//! (`merge`), and which member owns a request and how its results are exposed
//! (`route`). No I/O: the bridge (`bridge/federated/`) asks the members and
//! hands their answers in; the federation's state (its members, the names
//! learned from them) is `crate::router::federation`'s.

pub(crate) mod cursor;
pub(crate) mod merge;
pub mod names;
pub(crate) mod page;
pub(crate) mod route;
