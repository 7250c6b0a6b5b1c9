//! Era translation as pure functions: a message and the facts of a session in,
//! the message to send out. All "which era is this, what does that era expect"
//! decisions live here, never in the HTTP or transport code.

pub mod cache;
pub mod classify;
pub(crate) mod discover;
pub mod down;
pub(crate) mod listen;
pub mod mrtr;
pub(crate) mod multiplex;
pub mod param_headers;
pub mod up;

pub use cache::{CachePolicy, CacheScope};
pub use classify::{Classification, HeaderField, ModernRequest, RoutingHeaders};
