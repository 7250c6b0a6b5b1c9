//! The words users ask with, next to the words tool authors write: a small table of
//! everyday English → API vocabulary, applied to a query's words (never to the
//! index), each added with a lower weight than the words the user wrote.
//!
//! Every entry is a general equivalence of the domains MCP servers cover (files, code
//! hosting, chat, browsers, maps, notes, memory), not a tool's name: it must hold
//! for any server that uses the API word. Keep it short; an entry that helps one
//! query and hurts another is not worth it.

/// A word a user writes (lowercase, as written) → words a tool's definition would use
/// for it. Sorted by the first column for `binary_search_by`.
pub(crate) const SYNONYMS: &[(&str, &[&str])] = &[
    ("approve", &["review"]),
    ("big", &["size"]),
    ("button", &["click"]),
    ("cafe", &["place"]),
    ("capture", &["screenshot"]),
    ("coffee", &["place"]),
    ("coordinates", &["geocode", "latitude", "longitude"]),
    ("copy", &["fork"]),
    ("download", &["fetch"]),
    ("erase", &["delete"]),
    ("find", &["search"]),
    ("folder", &["directory"]),
    ("folders", &["directory"]),
    ("forget", &["delete", "memory"]),
    ("go", &["navigate"]),
    ("history", &["log"]),
    ("hotel", &["place"]),
    ("image", &["screenshot"]),
    ("large", &["size"]),
    ("latitude", &["coordinates", "geocode"]),
    ("longitude", &["coordinates", "geocode"]),
    ("look", &["search"]),
    ("memorize", &["memory", "observation"]),
    ("modify", &["update", "edit"]),
    ("mr", &["merge", "request"]),
    ("now", &["current"]),
    ("open", &["read", "navigate"]),
    ("photo", &["screenshot"]),
    ("picture", &["screenshot"]),
    ("pr", &["pull", "request"]),
    ("prs", &["pull", "request"]),
    ("recall", &["memory", "search"]),
    ("remember", &["memory", "observation", "entity"]),
    ("rename", &["move"]),
    ("repo", &["repository"]),
    ("repos", &["repository"]),
    ("restaurant", &["place"]),
    ("restaurants", &["place"]),
    ("shop", &["place"]),
    ("shops", &["place"]),
    ("store", &["place"]),
    ("tap", &["click"]),
    ("unstage", &["reset"]),
    ("visit", &["navigate"]),
    ("website", &["url", "page"]),
    ("who", &["user"]),
];

/// The API words for a word a user wrote (lowercase), if the table has it.
pub(crate) fn synonyms(word: &str) -> &'static [&'static str] {
    SYNONYMS
        .binary_search_by(|(w, _)| w.cmp(&word))
        .map_or(&[], |i| SYNONYMS[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_lowercase() {
        assert!(SYNONYMS.windows(2).all(|w| w[0].0 < w[1].0));
        for (word, to) in SYNONYMS {
            assert_eq!(word.to_lowercase(), *word);
            assert!(to.iter().all(|t| t.to_lowercase() == *t), "{word}");
        }
    }

    #[test]
    fn finds_what_it_holds_only() {
        let table: &[(&str, &[&str])] = &[
            ("find", &["search"]),
            ("folder", &["directory"]),
            ("pr", &["pull", "request"]),
            ("repository", &[]),
            ("", &[]),
        ];
        for (word, expected) in table {
            assert_eq!(synonyms(word), *expected, "{word}");
        }
    }
}
