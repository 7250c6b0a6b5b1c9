//! Per-caller policy: whether a caller may send a request now ([`rate`]: the
//! rate limits of `[rate_limits]`), and what one caller may see of an answer
//! (`tools` hides from `tools/list` the tools a caller's token may not call;
//! `catalog` applies `[[policies]]`: allow, deny, rename, describe per principal),
//! and what each principal holds open (`held`: listens, requests in flight, upstream
//! sessions, each counted per principal and in all).
//! No I/O: shared counts are named here and kept by `crate::store`.

pub(crate) mod catalog;
pub(crate) mod held;
pub(crate) mod quota;
pub mod rate;
pub(crate) mod tools;
