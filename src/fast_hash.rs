//! A faster hasher for the maps on a call's path whose keys eragate makes itself.
//!
//! std's `HashMap` and `DashMap` hash with SipHash-1-3, which resists an attacker
//! who chooses the keys that go into a map (HashDoS), at a price paid on every
//! lookup on a call's path (bench/NOTES.md, "Instructions per proxied call").
//! Where every key *inserted* is made by eragate, that resistance buys nothing: a
//! client can only look a key up, and a lookup probes no more than the keys present,
//! whose hashes it cannot choose. Those maps use [`FastState`] (foldhash, seeded
//! at random per map). It is used only for:
//!
//! - legacy client session ids (minted and sealed by eragate; a client presents one),
//! - upstream request ids (eragate's counter; the upstream echoes one back),
//! - the router's paths (from the configuration; a request's path is looked up).
//!
//! Maps keyed by what a peer chooses (a client's JSON-RPC ids, principals, tool
//! names) keep std's SipHash.

/// The hasher of maps whose inserted keys eragate makes (see the module doc).
pub(crate) type FastState = foldhash::fast::RandomState;

/// A `HashMap` with [`FastState`].
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, FastState>;
