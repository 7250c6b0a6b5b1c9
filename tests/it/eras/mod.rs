//! Clients and servers of both eras through eragate: the era matrix and every translation
//! between them (errors, server→client input, listen, lists and their caching hints).

mod bridging;
mod legacy_over_modern;
mod legacy_sessions;
mod list_cache;
mod listen;
mod matrix;
mod matrix_eras;
mod mrtr;
mod tasks;
