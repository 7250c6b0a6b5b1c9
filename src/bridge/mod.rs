//! The era conversations: what eragate says to a client of one era while the
//! backend behind the route speaks another. Every client body enters through
//! one intake (`take`); every message is classified, admitted by one ordered
//! stage (`admission`) and served by `dispatch`. Modern requests (`modern`),
//! legacy client sessions with sealed ids (`legacy`, [`sessions`]), multi
//! round-trip suspensions (`mrtr`), listens (`listen`), what principals
//! hold open (`quota`), `Mcp-Param-*` mirrored and checked (`param_headers`) and
//! batches meet here, with the lists kept of a legacy upstream (`cached_lists`)
//! and the tasks eragate runs behind the tasks extension (`tasks`); `pump` turns a call in
//! flight into what the client sees, handing its messages over through `handoff`.
//! A federated path is served by `federated`, which asks each member as a
//! 2026-07-28 client would; `dispatch` decides, once per request, whether
//! one upstream or a federation serves it.
//!
//! The rules live in [`crate::translate`]; servers are reached only through
//! `crate::router`. Nothing here knows a client's transport: the edge hands
//! in a message and renders the `Reply` that comes back.

mod admission;
mod cached_lists;
mod cached_reads;
mod client_session;
mod disclosure;
mod dispatch;
mod federated;
pub(crate) mod handoff;
mod intake;
mod legacy;
pub(crate) mod listen;
pub(crate) mod live_discover;
mod live_narrowing;
mod modern;
mod modern_client;
pub(crate) mod mrtr;
pub(crate) mod param_headers;
pub(crate) mod pins;
mod pooled_session;
mod pump;
pub(crate) mod rate;
pub(crate) mod reply;
mod restrict;
pub(crate) mod revocations;
pub mod sessions;
mod tasks;

pub(crate) use federated::{never_collisions, spawn_watcher, spawn_watchers};
pub(crate) use intake::{Batches, Intake, Taken, take};
pub(crate) use legacy::SessionLookup;
pub(crate) use reply::{Reply, Status};
pub(crate) use sessions::{AttachError, ClientSession};
