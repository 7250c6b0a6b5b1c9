//! The pure MCP vocabulary: JSON-RPC framing, revisions and eras, the modern
//! `_meta` envelope, routing headers, error codes and capability mapping.
//!
//! Nothing here performs I/O or knows about tokio or hyper, so every rule can be
//! tested from a table and fuzzed alone.

pub(crate) mod capabilities;
pub mod envelope;
pub(crate) mod errors;
pub mod headers;
pub(crate) mod json_check;
pub mod jsonrpc;
pub mod lazy_json;
pub mod method;
pub(crate) mod revision;
pub mod scan;
pub mod sse;

pub(crate) use errors::{ErrorCode, ErrorObject};
pub use jsonrpc::{Id, Message, Notification, Request, Response};
pub use lazy_json::LazyJson;
pub use method::ModernMethod;
pub use revision::{Era, Revision};
