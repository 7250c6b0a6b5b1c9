//! Tool search for progressive disclosure (issue 36): an index of a catalogue's tool
//! definitions, ranked against a free-text query with a lexical ranker (BM25F over
//! the name, title, description, parameters and member; English stemming).
//! Also the meta-tools a client searches, loads and calls tools with (`meta`).
//! Pure: no I/O, no network, no model; the request path that lists and calls tools
//! is `crate::bridge::disclosure`.

mod catalogue;
mod index;
pub(crate) mod meta;
mod synonyms;
mod text;

pub(crate) use catalogue::{Catalogue, Catalogues};
pub use index::{Hit, ToolEntry, ToolIndex};

/// The meta-tools' definitions as `tools/list` shows them (with `load_tools` for a
/// client with a session), for measuring what a disclosed listing weighs.
pub fn meta_tool_definitions(with_session: bool) -> Vec<serde_json::Value> {
    meta::definitions(with_session, crate::config::MAX_SEARCH_LIMIT)
}
