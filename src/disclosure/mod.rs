//! Tool search for progressive disclosure (issue 36): an index of a catalogue's tool
//! definitions, ranked against a free-text query with a lexical ranker (BM25F over
//! the name, title, description, parameters and member; English stemming).
//! Pure: no I/O, no network, no model; the proxy that lists and calls tools is not here.

mod index;
mod synonyms;
mod text;

pub use index::{Hit, ToolEntry, ToolIndex};
