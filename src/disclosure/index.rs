//! The search index over a catalogue's tools: BM25F over the fields of each tool
//! definition, every (term, tool) score computed once at build so that a search only
//! adds up postings. Pure: no I/O, no clock; a definition is read, never kept.

use std::collections::HashMap;

use serde_json::Value;

use super::synonyms::synonyms;
use super::text::{Stems, Text, is_stop_word, split_words};

/// One tool to index: its definition as `tools/list` gives it, and the name of the
/// member (upstream) that offers it.
#[derive(Clone, Copy, Debug)]
pub struct ToolEntry<'a> {
    /// The member's name (`[[upstreams]] name`), searched as a field of its own.
    pub member: &'a str,
    /// The tool's definition: `name`, `title`, `description`, `inputSchema`, ….
    pub tool: &'a Value,
}

/// A tool found by a search: its position in what the index was built from, and
/// its score (higher is better; only the order means anything).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// The position of the tool in the entries given to [`ToolIndex::build`].
    pub tool: usize,
    /// How well it matches the query.
    pub score: f32,
}

/// The searchable index of one catalogue. Built once per listing (cheap: about a
/// millisecond per hundred tools) and then only read.
#[derive(Debug)]
pub struct ToolIndex {
    /// Every stem with its term number, sorted by stem: looked up by binary search,
    /// and by prefix for a word the index lacks.
    vocabulary: Vec<(Box<str>, u32)>,
    /// Per term: every tool containing it with its precomputed BM25F score.
    postings: Vec<Vec<Posting>>,
    tools: usize,
    /// Per tool: its member, a position in `members`.
    member_of: Vec<u32>,
    /// Per member: the terms of its name.
    members: Vec<Box<[u32]>>,
    stems: Stems,
}

#[derive(Clone, Copy, Debug)]
struct Posting {
    tool: u32,
    score: f32,
}

/// The fields of a tool definition, each with its own weight and length
/// normalisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Field {
    Name,
    Title,
    Description,
    ParamName,
    ParamDescription,
    Member,
}

const FIELDS: usize = 6;

impl Field {
    /// Whether the field's text is a programmer's name or sentences.
    fn text(self) -> Text {
        match self {
            Field::Name | Field::ParamName | Field::Member => Text::Identifier,
            Field::Title | Field::Description | Field::ParamDescription => Text::Prose,
        }
    }
}

/// How a field counts: `weight` multiplies its term frequency, `b` is how much a
/// long field is discounted (0: not at all, 1: fully, as BM25's `b`).
struct FieldParams {
    weight: f32,
    b: f32,
}

/// BM25F per field; a name is short and says what the tool does, so a word in it
/// counts most. bench/disclosure/README.md tells what was tried around these.
const PARAMS: [FieldParams; FIELDS] = [
    FieldParams { weight: 3.0, b: 0.3 },  // Name
    FieldParams { weight: 2.0, b: 0.5 },  // Title
    FieldParams { weight: 1.0, b: 0.75 }, // Description
    FieldParams { weight: 0.5, b: 0.5 },  // ParamName
    FieldParams { weight: 0.3, b: 0.75 }, // ParamDescription
    FieldParams { weight: 1.0, b: 0.0 },  // Member
];

/// BM25's saturation: how fast repeating a term stops adding to the score.
const K1: f32 = 1.2;

/// The weight of a word the synonym table adds for one the user wrote.
const SYNONYM_WEIGHT: f32 = 0.8;

/// The weight of a term found by prefix for a word the index lacks
/// (`react` → `reaction`, `geocoding` → `geocod`).
const PREFIX_WEIGHT: f32 = 0.5;

/// The shortest stem matched by prefix, and the most terms one word reaches so.
const MIN_PREFIX: usize = 4;
const MAX_PREFIX_TERMS: usize = 8;

/// How much the tools of a member the query names (`… on GitHub`) count above the
/// others.
const MEMBER_BOOST: f32 = 1.5;

/// The most words of a query that count (a query is a task, not a document).
const MAX_QUERY_WORDS: usize = 32;

/// The most text read from one field of one tool, in bytes: a definition is an
/// upstream's to write, and a huge one must not make the index slow to build.
const MAX_FIELD_BYTES: usize = 8 * 1024;

/// The most parameters of one tool that are indexed.
const MAX_PARAMS: usize = 64;

impl ToolIndex {
    /// Indexes `entries`; a [`Hit`]'s `tool` is a position in them. A definition
    /// without a string `name` is indexed by whatever else it has.
    pub fn build<'a>(entries: impl IntoIterator<Item = ToolEntry<'a>>) -> Self {
        let mut builder = Builder::new();
        for entry in entries {
            builder.add(entry);
        }
        builder.finish()
    }

    /// How many tools the index holds.
    pub fn len(&self) -> usize {
        self.tools
    }

    /// Whether the index holds no tool.
    pub fn is_empty(&self) -> bool {
        self.tools == 0
    }

    /// The best `limit` tools for `query`, best first; tools sharing no word with
    /// it are never returned.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        self.search_where(query, limit, |_| true)
    }

    /// [`Self::search`] among the tools for which `allowed(position)` holds, so a
    /// tool the caller may not see never takes a place in the results.
    pub fn search_where(&self, query: &str, limit: usize, allowed: impl Fn(usize) -> bool) -> Vec<Hit> {
        if limit == 0 || self.tools == 0 {
            return Vec::new();
        }
        let (terms, words) = self.query_terms(query);
        let mut scores = vec![0f32; self.tools];
        let mut covered = vec![0u32; self.tools];
        for term in &terms {
            for posting in &self.postings[term.term as usize] {
                scores[posting.tool as usize] += term.weight * posting.score;
                covered[posting.tool as usize] |= term.words;
            }
        }
        let named = self.named_members(&terms);
        let words = words.max(1) as f32;
        let mut hits: Vec<Hit> = scores
            .iter()
            .zip(&covered)
            .enumerate()
            .filter(|&(tool, (&score, _))| score > 0.0 && allowed(tool))
            .map(|(tool, (&score, &covered))| {
                // Coordination: a tool matching more of the query's words
                // outranks one matching a single word many times.
                let mut score = score * covered.count_ones() as f32 / words;
                if named.get(self.member_of[tool] as usize) == Some(&true) {
                    score *= MEMBER_BOOST;
                }
                Hit { tool, score }
            })
            .collect();
        let by_rank = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.tool.cmp(&b.tool));
        if hits.len() > limit {
            hits.select_nth_unstable_by(limit - 1, by_rank);
            hits.truncate(limit);
        }
        hits.sort_unstable_by(by_rank);
        hits
    }

    /// The query's terms known to the index, each once with its weight and the
    /// query words it stands for (a bit each), and how many words the query has.
    fn query_terms(&self, query: &str) -> (Vec<QueryTerm>, u32) {
        let mut terms: Vec<QueryTerm> = Vec::new();
        let mut add = |term: u32, weight: f32, word: u32| {
            let bit = 1u32 << word;
            match terms.iter_mut().find(|t| t.term == term) {
                Some(known) => {
                    known.weight = known.weight.max(weight);
                    known.words |= bit;
                }
                None => terms.push(QueryTerm {
                    term,
                    weight,
                    words: bit,
                }),
            }
        };
        let mut words = 0u32;
        split_words(truncate(query), Text::Prose, |word| {
            if words as usize == MAX_QUERY_WORDS {
                return;
            }
            let expansions = synonyms(word);
            let stop = is_stop_word(word);
            if stop && expansions.is_empty() {
                return;
            }
            let index = words;
            for expansion in expansions {
                if let Some(term) = self.term(&self.stems.stem(expansion)) {
                    add(term, SYNONYM_WEIGHT, index);
                }
            }
            if !stop {
                let stem = self.stems.stem(word);
                match self.term(&stem) {
                    Some(term) => add(term, 1.0, index),
                    None => self.prefixed(&stem, |term| add(term, PREFIX_WEIGHT, index)),
                }
            }
            words += 1;
        });
        (terms, words)
    }

    /// Per member: whether the query names it, in a word the user wrote.
    fn named_members(&self, terms: &[QueryTerm]) -> Vec<bool> {
        self.members
            .iter()
            .map(|member| {
                member
                    .iter()
                    .any(|m| terms.iter().any(|t| t.term == *m && t.weight >= 1.0))
            })
            .collect()
    }

    /// The term of a stem the index holds.
    fn term(&self, stem: &str) -> Option<u32> {
        self.vocabulary
            .binary_search_by(|(s, _)| s.as_ref().cmp(stem))
            .ok()
            .map(|i| self.vocabulary[i].1)
    }

    /// Calls `each` with the terms that start with `stem` or that `stem` starts
    /// with, for a stem of at least [`MIN_PREFIX`] characters the index lacks.
    fn prefixed(&self, stem: &str, mut each: impl FnMut(u32)) {
        if stem.chars().count() < MIN_PREFIX {
            return;
        }
        let start = self.vocabulary.partition_point(|(s, _)| s.as_ref() < stem);
        let longer = self.vocabulary[start..]
            .iter()
            .take_while(|(s, _)| s.starts_with(stem))
            .take(MAX_PREFIX_TERMS);
        for &(_, term) in longer {
            each(term);
        }
        let shorter = stem
            .char_indices()
            .map(|(i, _)| &stem[..i])
            .filter(|p| p.chars().count() >= MIN_PREFIX);
        for prefix in shorter {
            if let Some(term) = self.term(prefix) {
                each(term);
            }
        }
    }
}

/// A term of a query: its weight (1 for a word the user wrote) and the query words
/// it stands for, a bit each.
#[derive(Clone, Copy, Debug)]
struct QueryTerm {
    term: u32,
    weight: f32,
    words: u32,
}

/// What the index is while tools are added to it.
struct Builder {
    stems: Stems,
    /// Lowercase word → its term (`None`: a stop word), so each distinct word is
    /// stemmed once.
    words: HashMap<String, Option<u32>>,
    vocabulary: HashMap<Box<str>, u32>,
    /// Per tool: its terms with their frequency in each field.
    tools: Vec<Vec<(u32, [u16; FIELDS])>>,
    /// Per tool: the number of words in each field.
    lengths: Vec<[u32; FIELDS]>,
    /// The (term, field) of every word of the tool being added; reused.
    scratch: Vec<(u32, Field)>,
    /// Per tool: its member, a position in `members`.
    member_of: Vec<u32>,
    /// Per member: its name and the terms of its name.
    members: Vec<(String, Vec<u32>)>,
}

impl Builder {
    fn new() -> Self {
        Self {
            stems: Stems::new(),
            words: HashMap::new(),
            vocabulary: HashMap::new(),
            tools: Vec::new(),
            lengths: Vec::new(),
            scratch: Vec::new(),
            member_of: Vec::new(),
            members: Vec::new(),
        }
    }

    fn add(&mut self, entry: ToolEntry<'_>) {
        let tool = entry.tool;
        self.scratch.clear();
        if let Some(name) = tool.get("name").and_then(Value::as_str) {
            self.field(Field::Name, name);
        }
        let title = tool
            .get("title")
            .or_else(|| tool.get("annotations").and_then(|a| a.get("title")));
        if let Some(title) = title.and_then(Value::as_str) {
            self.field(Field::Title, title);
        }
        if let Some(description) = tool.get("description").and_then(Value::as_str) {
            self.field(Field::Description, description);
        }
        let properties = tool
            .get("inputSchema")
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object);
        for (name, schema) in properties.into_iter().flatten().take(MAX_PARAMS) {
            self.field(Field::ParamName, name);
            if let Some(description) = schema.get("description").and_then(Value::as_str) {
                self.field(Field::ParamDescription, description);
            }
        }
        self.field(Field::Member, entry.member);
        self.member(entry.member);

        let mut lengths = [0u32; FIELDS];
        for &(_, field) in &self.scratch {
            lengths[field as usize] += 1;
        }
        self.scratch.sort_unstable();
        let mut terms: Vec<(u32, [u16; FIELDS])> = Vec::new();
        for &(term, field) in &self.scratch {
            match terms.last_mut() {
                Some((last, counts)) if *last == term => {
                    counts[field as usize] = counts[field as usize].saturating_add(1);
                }
                _ => {
                    let mut counts = [0u16; FIELDS];
                    counts[field as usize] = 1;
                    terms.push((term, counts));
                }
            }
        }
        self.tools.push(terms);
        self.lengths.push(lengths);
    }

    /// Records the member of the tool being added (its name's words are the last
    /// ones in `scratch`).
    fn member(&mut self, member: &str) {
        let known = self.members.iter().position(|(name, _)| name == member);
        let position = known.unwrap_or_else(|| {
            let mut terms: Vec<u32> = (self.scratch.iter().rev())
                .take_while(|(_, field)| *field == Field::Member)
                .map(|&(term, _)| term)
                .collect();
            terms.sort_unstable();
            terms.dedup();
            self.members.push((member.to_owned(), terms));
            self.members.len() - 1
        });
        self.member_of.push(position as u32);
    }

    /// Adds the words of one field's text to the tool being added.
    fn field(&mut self, field: Field, text: &str) {
        let Self {
            stems,
            words,
            vocabulary,
            scratch,
            ..
        } = self;
        split_words(truncate(text), field.text(), |word| {
            let term = match words.get(word) {
                Some(&term) => term,
                None => {
                    let term = (!is_stop_word(word)).then(|| {
                        let stem = stems.stem(word);
                        let next = vocabulary.len() as u32;
                        *vocabulary.entry(stem.as_ref().into()).or_insert(next)
                    });
                    words.insert(word.to_owned(), term);
                    term
                }
            };
            if let Some(term) = term {
                scratch.push((term, field));
            }
        });
    }

    fn finish(self) -> ToolIndex {
        let count = self.tools.len();
        let mut average = [0f32; FIELDS];
        for lengths in &self.lengths {
            for (sum, &length) in average.iter_mut().zip(lengths) {
                *sum += length as f32;
            }
        }
        for sum in &mut average {
            *sum = if count == 0 {
                1.0
            } else {
                (*sum / count as f32).max(1.0)
            };
        }
        let mut documents = vec![0u32; self.vocabulary.len()];
        for terms in &self.tools {
            for &(term, _) in terms {
                documents[term as usize] += 1;
            }
        }
        let idf: Vec<f32> = documents
            .iter()
            .map(|&df| {
                let (n, df) = (count as f32, df as f32);
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        let mut postings: Vec<Vec<Posting>> = documents.iter().map(|&df| Vec::with_capacity(df as usize)).collect();
        for (tool, (terms, lengths)) in self.tools.iter().zip(&self.lengths).enumerate() {
            let norms: [f32; FIELDS] = std::array::from_fn(|f| {
                let p = &PARAMS[f];
                p.weight / (1.0 - p.b + p.b * lengths[f] as f32 / average[f])
            });
            for &(term, counts) in terms {
                let tf: f32 = counts.iter().zip(&norms).map(|(&c, &n)| c as f32 * n).sum();
                let score = idf[term as usize] * tf * (K1 + 1.0) / (K1 + tf);
                postings[term as usize].push(Posting {
                    tool: tool as u32,
                    score,
                });
            }
        }
        let members = self.members.into_iter().map(|(_, terms)| terms.into()).collect();
        let mut vocabulary: Vec<(Box<str>, u32)> = self.vocabulary.into_iter().collect();
        vocabulary.sort_unstable();
        ToolIndex {
            vocabulary,
            postings,
            tools: count,
            member_of: self.member_of,
            members,
            stems: self.stems,
        }
    }
}

/// `text` cut to at most [`MAX_FIELD_BYTES`], on a character boundary.
fn truncate(text: &str) -> &str {
    if text.len() <= MAX_FIELD_BYTES {
        return text;
    }
    let mut end = MAX_FIELD_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A small federation: (member, definition).
    fn catalogue() -> Vec<(&'static str, Value)> {
        vec![
            (
                "github",
                json!({"name": "create_pull_request", "description": "Create a new pull request in a GitHub repository",
                "inputSchema": {"type": "object", "properties": {"title": {"type": "string", "description": "Pull request title"}, "head": {"type": "string"}}}}),
            ),
            (
                "github",
                json!({"name": "merge_pull_request", "description": "Merge a pull request"}),
            ),
            (
                "github",
                json!({"name": "create_issue", "description": "Create a new issue in a GitHub repository"}),
            ),
            (
                "gitlab",
                json!({"name": "create_issue", "description": "Create a new issue in a GitLab project"}),
            ),
            (
                "filesystem",
                json!({"name": "list_directory", "description": "Get a detailed listing of all files and directories in a specified path"}),
            ),
            (
                "filesystem",
                json!({"name": "readTextFile", "title": "Read file", "description": "Read the complete contents of a file as text"}),
            ),
            (
                "slack",
                json!({"name": "slack_add_reaction", "description": "Add a reaction emoji to a message"}),
            ),
            (
                "time",
                json!({"name": "get_current_time", "description": "Get current time in a specific timezone",
                "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA timezone name"}}}}),
            ),
            (
                "maps",
                json!({"name": "maps_search_places", "description": "Search for places using Google Places API"}),
            ),
        ]
    }

    fn index(tools: &[(&'static str, Value)]) -> ToolIndex {
        ToolIndex::build(tools.iter().map(|(member, tool)| ToolEntry { member, tool }))
    }

    fn top(index: &ToolIndex, query: &str) -> Option<usize> {
        index.search(query, 5).first().map(|hit| hit.tool)
    }

    #[test]
    fn finds_the_tool_a_task_asks_for() {
        let tools = catalogue();
        let index = index(&tools);
        let table: &[(&str, usize)] = &[
            ("merge my pull request", 1),            // name words, stemmed
            ("open a new PR", 0),                    // synonym: pr → pull request
            ("file a bug on GitHub as an issue", 2), // the member named
            ("create an issue in GitLab", 3),
            ("what is in this folder", 4),  // synonym: folder → directory
            ("read the text of a file", 5), // camelCase name
            ("react to the message", 6),    // prefix: react → reaction
            ("what time is it now", 7),
            ("which timezone", 7),      // a parameter's name
            ("coffee shops nearby", 8), // synonyms: shop, coffee → place
        ];
        for &(query, expected) in table {
            assert_eq!(
                top(&index, query),
                Some(expected),
                "{query:?}: {:?}",
                index.search(query, 5)
            );
        }
    }

    #[test]
    fn answers_nothing_rather_than_anything() {
        let tools = catalogue();
        let index = index(&tools);
        for query in ["", "   ", "the of and", "zzzz qqqq", "42"] {
            assert_eq!(index.search(query, 5), Vec::new(), "{query:?}");
        }
        assert_eq!(index.search("merge pull request", 0), Vec::new());
        assert!(ToolIndex::build([]).search("merge", 5).is_empty());
    }

    #[test]
    fn ranks_best_first_within_the_limit() {
        let tools = catalogue();
        let index = index(&tools);
        let hits = index.search("create a pull request or an issue", 2);
        assert_eq!(hits.len(), 2);
        assert!(hits[0].score >= hits[1].score);
        let all = index.search("create a pull request or an issue", 50);
        assert_eq!(all[..2], hits[..]);
    }

    #[test]
    fn leaves_out_what_the_caller_may_not_see() {
        let tools = catalogue();
        let index = index(&tools);
        let hits = index.search_where("create an issue", 5, |tool| tool != 2 && tool != 3);
        assert!(hits.iter().all(|hit| hit.tool != 2 && hit.tool != 3), "{hits:?}");
        assert!(index.search_where("create an issue", 5, |_| false).is_empty());
    }

    #[test]
    fn indexes_odd_definitions_without_failing() {
        let long = "é".repeat(MAX_FIELD_BYTES); // cut inside a two-byte character
        let tools = vec![
            ("odd", json!({})),
            (
                "odd",
                json!({"name": 7, "description": null, "inputSchema": "not a schema"}),
            ),
            (
                "odd",
                json!({"name": "huge", "description": long, "inputSchema": {"properties": {"a": 1, "b": {"description": 2}}}}),
            ),
            ("odd", json!("not even an object")),
            (
                "odd",
                json!({"name": "fine_tool", "annotations": {"title": "Fine tool"}}),
            ),
        ];
        let index = index(&tools);
        assert_eq!(index.len(), 5);
        assert_eq!(top(&index, "fine"), Some(4));
        assert_eq!(top(&index, "huge"), Some(2));
    }
}
