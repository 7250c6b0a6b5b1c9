//! Words out of tool definitions and queries: split on punctuation and camelCase,
//! lowercased, English stop words dropped, stemmed. Pure and allocation-light: a
//! word is handed to a callback as a slice of a reused buffer.

use std::borrow::Cow;

use rust_stemmers::{Algorithm, Stemmer};

/// What a text is, which decides whether camelCase separates words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Text {
    /// A name made by a programmer (a tool's or a parameter's): `listPullRequests`
    /// is three words.
    Identifier,
    /// Sentences (a description, a title, a query): `GitHub` and `JavaScript` are
    /// one word each, as their authors and users mean them.
    Prose,
}

/// Splits `text` into lowercase words and calls `each` with every one.
///
/// A word is a run of letters and digits; everything else (`_`, `-`, `.`, `/`,
/// spaces) separates words. In an [`Text::Identifier`], inside a run, a lowercase
/// letter or a digit followed by an uppercase one starts a new word
/// (`listPullRequests` → list, pull, requests), and so does the last capital of a
/// run of capitals followed by a lowercase letter (`HTMLParser` → html, parser).
pub(crate) fn split_words(text: &str, kind: Text, mut each: impl FnMut(&str)) {
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    let mut prev: Option<char> = None;
    while let Some(c) = chars.next() {
        if !c.is_alphanumeric() {
            flush(&mut word, &mut each);
            prev = None;
            continue;
        }
        if let (Text::Identifier, Some(p)) = (kind, prev) {
            let next_lower = chars.peek().is_some_and(|n| n.is_lowercase());
            let boundary =
                c.is_uppercase() && ((p.is_lowercase() || p.is_ascii_digit()) || (p.is_uppercase() && next_lower));
            if boundary {
                flush(&mut word, &mut each);
            }
        }
        word.extend(c.to_lowercase());
        prev = Some(c);
    }
    flush(&mut word, &mut each);
}

fn flush(word: &mut String, each: &mut impl FnMut(&str)) {
    if !word.is_empty() {
        each(word);
        word.clear();
    }
}

/// Whether a lowercase word carries no meaning for a search: English function
/// words, the fillers of a request ("please show me"), and bare numbers (an issue
/// number in a query names no tool).
pub(crate) fn is_stop_word(word: &str) -> bool {
    word.bytes().all(|b| b.is_ascii_digit()) || STOP_WORDS.binary_search(&word).is_ok()
}

/// Sorted, for `binary_search`.
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "being", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "e", "each", "eg", "etc",
    "for", "from", "g", "go", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i",
    "i'm", "ie", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "me", "might", "more", "most", "must",
    "my", "myself", "no", "nor", "not", "now", "of", "on", "once", "only", "or", "other", "our", "ours", "out", "own",
    "please", "s", "same", "shall", "she", "should", "so", "some", "such", "t", "than", "that", "the", "their",
    "theirs", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "until", "up", "us",
    "very", "via", "want", "was", "we", "were", "what", "when", "where", "whether", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your", "yours",
];

/// English stemming (Snowball's Porter2), so `requests`, `requested` and
/// `requesting` are one term.
pub(crate) struct Stems {
    stemmer: Stemmer,
}

impl Stems {
    pub(crate) fn new() -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }

    /// The stem of a lowercase word.
    pub(crate) fn stem<'w>(&self, word: &'w str) -> Cow<'w, str> {
        self.stemmer.stem(word)
    }
}

impl std::fmt::Debug for Stems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stems(English)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        words_of(text, Text::Identifier)
    }

    fn words_of(text: &str, kind: Text) -> Vec<String> {
        let mut out = Vec::new();
        split_words(text, kind, |w| out.push(w.to_owned()));
        out
    }

    #[test]
    fn splits_names_as_their_authors_join_them() {
        let table: &[(&str, &[&str])] = &[
            ("create_pull_request", &["create", "pull", "request"]),
            ("API-post-search", &["api", "post", "search"]),
            ("browser.take/screenshot", &["browser", "take", "screenshot"]),
            ("listPullRequests", &["list", "pull", "requests"]),
            ("HTMLParser", &["html", "parser"]),
            ("getURL", &["get", "url"]),
            ("base64Image", &["base64", "image"]),
            ("read_text_file", &["read", "text", "file"]),
            ("  spaced   out ", &["spaced", "out"]),
            ("Ünïcode Wörds", &["ünïcode", "wörds"]),
            ("", &[]),
            ("__--..//", &[]),
        ];
        for (text, expected) in table {
            assert_eq!(words(text), *expected, "{text:?}");
        }
    }

    #[test]
    fn keeps_camel_case_whole_in_prose() {
        let table: &[(&str, &[&str])] = &[
            (
                "Search GitHub for JavaScript",
                &["search", "github", "for", "javascript"],
            ),
            ("the textGone option", &["the", "textgone", "option"]),
            ("read_text_file", &["read", "text", "file"]),
        ];
        for (text, expected) in table {
            assert_eq!(words_of(text, Text::Prose), *expected, "{text:?}");
        }
    }

    #[test]
    fn drops_function_words_and_numbers() {
        let table = [
            ("the", true),
            ("my", true),
            ("42", true),
            ("which", true),
            ("issue", false),
            ("base64", false),
            ("search", false),
        ];
        for (word, stop) in table {
            assert_eq!(is_stop_word(word), stop, "{word}");
        }
    }

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn stems_inflections_together() {
        let stems = Stems::new();
        let table = [
            ("requests", "request"),
            ("requested", "request"),
            ("directories", "directori"),
            ("directory", "directori"),
            ("merging", "merg"),
            ("merge", "merg"),
        ];
        for (word, stem) in table {
            assert_eq!(stems.stem(word), stem, "{word}");
        }
    }
}
