//! The search index over a catalogue's tools: BM25F over the fields of each tool
//! definition, every (term, tool) score computed once at build so that a search only
//! adds up postings. Pure: no I/O, no clock; a definition is read, never kept.

use std::collections::HashMap;

use serde_json::Value;

use super::text::{Stems, is_stop_word, split_words};

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
    /// Stem → term number.
    vocabulary: HashMap<Box<str>, u32>,
    /// Per term: every tool containing it with its precomputed BM25F score.
    postings: Vec<Vec<Posting>>,
    tools: usize,
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

/// How a field counts: `weight` multiplies its term frequency, `b` is how much a
/// long field is discounted (0: not at all, 1: fully, as BM25's `b`).
struct FieldParams {
    weight: f32,
    b: f32,
}

/// BM25F per field; a name is short and says what the tool does, so a word in it
/// counts most. Tuned on the benchmark's tuning queries (bench/disclosure).
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
        let terms = self.query_terms(query);
        let mut scores = vec![0f32; self.tools];
        for &(term, weight) in &terms {
            for posting in &self.postings[term as usize] {
                scores[posting.tool as usize] += weight * posting.score;
            }
        }
        let mut hits: Vec<Hit> = scores
            .iter()
            .enumerate()
            .filter(|&(tool, &score)| score > 0.0 && allowed(tool))
            .map(|(tool, &score)| Hit { tool, score })
            .collect();
        let by_rank = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.tool.cmp(&b.tool));
        if hits.len() > limit {
            hits.select_nth_unstable_by(limit - 1, by_rank);
            hits.truncate(limit);
        }
        hits.sort_unstable_by(by_rank);
        hits
    }

    /// The query's terms known to the index, each once, with its weight.
    fn query_terms(&self, query: &str) -> Vec<(u32, f32)> {
        let mut terms: Vec<(u32, f32)> = Vec::new();
        let mut add = |term: u32, weight: f32| match terms.iter_mut().find(|(t, _)| *t == term) {
            Some(known) => known.1 = known.1.max(weight),
            None => terms.push((term, weight)),
        };
        split_words(truncate(query), |word| {
            if is_stop_word(word) {
                return;
            }
            if let Some(&term) = self.vocabulary.get(self.stems.stem(word).as_ref()) {
                add(term, 1.0);
            }
        });
        terms
    }
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

    /// Adds the words of one field's text to the tool being added.
    fn field(&mut self, field: Field, text: &str) {
        let Self {
            stems,
            words,
            vocabulary,
            scratch,
            ..
        } = self;
        split_words(truncate(text), |word| {
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
        ToolIndex {
            vocabulary: self.vocabulary,
            postings,
            tools: count,
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
