//! Per-caller policy on the way back to the client: what one caller may see of an
//! answer. Pure. Today [`tools`] hides from `tools/list` the tools a caller's token may
//! not call; rate limits and per-principal tool filters join this room.

pub mod tools;
