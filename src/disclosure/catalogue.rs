//! A path's tools as one caller may see them, with their search index, and the
//! few most recently built kept so that a search does not index the same
//! listing again. Pure but for a lock: no I/O.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{ToolEntry, ToolIndex};

/// One listing of tools and its index.
#[derive(Debug)]
pub(crate) struct Catalogue {
    /// The definitions, in the order the path lists them.
    pub(crate) tools: Vec<Value>,
    /// Their index; a hit's `tool` is a position in `tools`.
    pub(crate) index: ToolIndex,
}

impl Catalogue {
    /// Indexes `tools`.
    pub(crate) fn new(tools: Vec<Value>) -> Catalogue {
        let index = ToolIndex::build(tools.iter().map(|tool| ToolEntry { member: "", tool }));
        Catalogue { tools, index }
    }

    /// The definition named `name`, if the listing has one.
    pub(crate) fn named(&self, name: &str) -> Option<&Value> {
        self.tools
            .iter()
            .find(|tool| tool.get("name").and_then(Value::as_str) == Some(name))
    }
}

/// The catalogues built last, by listing; callers under different policies see
/// different listings, and each gets its own.
#[derive(Debug)]
pub(crate) struct Catalogues {
    kept: Mutex<VecDeque<(u64, Arc<Catalogue>)>>,
    bound: usize,
}

impl Catalogues {
    /// Keeps at most `bound` catalogues.
    pub(crate) fn new(bound: usize) -> Catalogues {
        Catalogues {
            kept: Mutex::new(VecDeque::with_capacity(bound)),
            bound: bound.max(1),
        }
    }

    /// The catalogue of `tools`: the one kept if an equal listing was indexed,
    /// else built now (outside the lock) and kept.
    pub(crate) fn of(&self, tools: Vec<Value>) -> Arc<Catalogue> {
        let key = fingerprint(&tools);
        {
            let mut kept = self.lock();
            if let Some(at) = kept.iter().position(|(k, c)| *k == key && c.tools == tools)
                && let Some(entry) = kept.remove(at)
            {
                let catalogue = Arc::clone(&entry.1);
                kept.push_front(entry);
                return catalogue;
            }
        }
        let catalogue = Arc::new(Catalogue::new(tools));
        let mut kept = self.lock();
        kept.push_front((key, Arc::clone(&catalogue)));
        kept.truncate(self.bound);
        catalogue
    }

    /// How many catalogues are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, Arc<Catalogue>)>> {
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A hash of a listing; a match is confirmed by comparing the listings.
fn fingerprint(tools: &[Value]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    for tool in tools {
        hash_value(tool, &mut hasher);
    }
    hasher.finish()
}

/// Feeds `value` to `hasher` without writing it out as text.
fn hash_value(value: &Value, hasher: &mut impl Hasher) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => (1u8, b).hash(hasher),
        Value::Number(n) => (2u8, n).hash(hasher),
        Value::String(s) => (3u8, s).hash(hasher),
        Value::Array(items) => {
            (4u8, items.len()).hash(hasher);
            for item in items {
                hash_value(item, hasher);
            }
        }
        Value::Object(members) => {
            (5u8, members.len()).hash(hasher);
            for (key, member) in members {
                key.hash(hasher);
                hash_value(member, hasher);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_equal_listing_reuses_its_index_and_the_oldest_is_dropped() {
        let catalogues = Catalogues::new(2);
        let a = || vec![json!({"name": "a"})];
        let first = catalogues.of(a());
        assert!(Arc::ptr_eq(&first, &catalogues.of(a())));
        let b = catalogues.of(vec![json!({"name": "b"})]);
        assert!(!Arc::ptr_eq(&first, &b));
        catalogues.of(vec![json!({"name": "c"})]);
        assert_eq!(catalogues.len(), 2);
        assert!(
            !Arc::ptr_eq(&first, &catalogues.of(a())),
            "a was the least recently used"
        );
        assert_eq!(first.named("a"), Some(&json!({"name": "a"})));
        assert_eq!(first.named("b"), None);
    }
}
