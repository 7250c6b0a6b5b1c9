//! Every key `check-config` accepts, found by asking the configuration loader itself, and
//! the sections and keys `docs/configuration.md` documents.
//!
//! The loader refuses an unknown key with serde's message, which lists the keys it expected
//! (unknown field `__probe`, expected one of `address`, …), so a probe key in each table lists
//! that table's keys; a probe table put under each key then tells a nested table (or an array
//! or a map of them, or a tagged enum such as `credentials.kind`) from a value. No list of keys
//! is kept by hand: a field added to `src/config/` is found here, under its `serde` name.

use std::collections::{BTreeMap, BTreeSet};

use eragate::config::Config;
use toml::{Table, Value};

/// A key no section has.
const PROBE: &str = "__probe";

/// One step from the file's root to a table: a key, or the first entry of an array.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    /// A key the table leaves free (a map): documented as `NAME`.
    Name,
    Item,
}

/// Where a section is: the steps to it.
#[derive(Clone, Debug, Default)]
struct Location(Vec<Step>);

impl Location {
    fn then(&self, step: Step) -> Location {
        let mut steps = self.0.clone();
        steps.push(step);
        Location(steps)
    }

    /// The key path the loader reports mistakes under: `upstreams[0].stdio`.
    fn reported(&self) -> String {
        let mut out = String::new();
        for step in &self.0 {
            match step {
                Step::Key(key) if out.is_empty() => out.push_str(key),
                Step::Key(key) => {
                    out.push('.');
                    out.push_str(key);
                }
                Step::Name if out.is_empty() => out.push_str(PROBE),
                Step::Name => {
                    out.push('.');
                    out.push_str(PROBE);
                }
                Step::Item => out.push_str("[0]"),
            }
        }
        out
    }

    /// The section's name in the reference: `upstreams.stdio`, `rate_limits.tools.NAME`.
    fn section(&self) -> String {
        let names: Vec<&str> = self
            .0
            .iter()
            .filter_map(|step| match step {
                Step::Key(key) => Some(key.as_str()),
                Step::Name => Some("NAME"),
                Step::Item => None,
            })
            .collect();
        names.join(".")
    }

    /// A file holding `value` at this location.
    fn document(&self, value: Value) -> String {
        let mut value = value;
        for step in self.0.iter().rev() {
            value = match step {
                Step::Key(key) => Value::Table(Table::from_iter([(key.clone(), value)])),
                Step::Name => Value::Table(Table::from_iter([(PROBE.to_owned(), value)])),
                Step::Item => Value::Array(vec![value]),
            };
        }
        let Value::Table(root) = value else {
            panic!("a location starts with a key")
        };
        toml::to_string(&root).expect("a probe serialises")
    }

    /// The loader's messages about this location (and what is under it) for `value` there.
    fn messages(&self, value: Value) -> Vec<(String, String)> {
        let text = self.document(value);
        let Err(error) = Config::from_toml(&text) else {
            return Vec::new();
        };
        let here = self.reported();
        error
            .issues
            .into_iter()
            .filter(|issue| {
                issue.path == here
                    || issue.path.starts_with(&format!("{here}."))
                    || issue.path.starts_with(&format!("{here}["))
            })
            .map(|issue| (issue.path, issue.message))
            .collect()
    }
}

/// The names in backticks after `expected` in a serde message (or the loader's own
/// "unknown section; expected one of …").
fn expected_names(message: &str) -> Vec<String> {
    let Some((_, list)) = message.split_once("expected") else {
        return Vec::new();
    };
    list.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// A probe table: `{ __probe = 0 }`.
fn probe_table() -> Value {
    Value::Table(Table::from_iter([(PROBE.to_owned(), Value::Integer(0))]))
}

/// The keys of the table at `at`, when it is a table of fixed keys.
fn table_keys(at: &Location) -> Option<Vec<String>> {
    let messages = if at.0.is_empty() {
        // The root: the probe is a section of its own. The loader reads each section on its
        // own and names the sections it knows; `Config`'s own fields are asked too.
        let text = format!("{PROBE} = 0\n");
        let error = Config::from_toml(&text).expect_err("an unknown section is refused");
        let mut messages: Vec<(String, String)> = error
            .issues
            .into_iter()
            .filter(|issue| issue.path == PROBE)
            .map(|issue| (issue.path, issue.message))
            .collect();
        if let Err(error) = toml::from_str::<Config>(&text) {
            messages.push((PROBE.to_owned(), error.message().to_owned()));
        }
        let names: BTreeSet<String> = messages.iter().flat_map(|(_, m)| expected_names(m)).collect();
        let joined: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        vec![(
            PROBE.to_owned(),
            format!("unknown section; expected one of {}", joined.join(", ")),
        )]
    } else {
        at.messages(probe_table())
    };
    messages.iter().find_map(|(_, message)| {
        let unknown =
            message.starts_with(&format!("unknown field `{PROBE}`")) || message.starts_with("unknown section");
        unknown.then(|| expected_names(message))
    })
}

/// What one key holds.
enum Shape {
    /// A value (a string, number, list, or a map of values such as `timeouts`): a row.
    Value,
    /// A table of fixed keys (through an array or a map of them as well): a section.
    Section,
}

/// Everything found: each section's keys.
#[derive(Default)]
pub struct Accepted {
    /// Section (`""` for the file's root) → its keys and whether each is a section itself.
    pub sections: BTreeMap<String, BTreeMap<String, bool>>,
    /// Problems with the code itself (a table that accepts any key).
    pub problems: Vec<String>,
}

/// Walks every section from the root.
pub fn accepted_keys() -> Accepted {
    let mut accepted = Accepted::default();
    walk_table(&Location::default(), &mut accepted);
    accepted
}

fn walk_table(at: &Location, accepted: &mut Accepted) {
    let Some(keys) = table_keys(at) else {
        accepted.problems.push(format!(
            "[{}] did not list its keys when given an unknown one",
            at.section()
        ));
        return;
    };
    let mut entries = BTreeMap::new();
    for key in keys {
        let shape = walk_key(&at.then(Step::Key(key.clone())), accepted);
        entries.insert(key, matches!(shape, Shape::Section));
    }
    accepted.sections.insert(at.section(), entries);
}

/// Finds what the key at `at` holds, walking the sections under it.
fn walk_key(at: &Location, accepted: &mut Accepted) -> Shape {
    if table_keys(at).is_some() {
        walk_table(at, accepted);
        return Shape::Section;
    }
    let messages = at.messages(probe_table());
    let here = at.reported();
    if messages.is_empty() {
        accepted.problems.push(format!(
            "[{}] accepts any key: give it #[serde(deny_unknown_fields)]",
            at.section()
        ));
        return Shape::Value;
    }
    for (path, message) in &messages {
        // An internally tagged enum (`kind = "header"`, …): its variants' keys, and the tag.
        if path == &here
            && let Some(tag) = message
                .strip_prefix("missing field `")
                .and_then(|m| m.strip_suffix('`'))
        {
            return walk_tagged(at, tag, accepted);
        }
        // An array: of tables (`[[upstreams]]`) or of values.
        if path == &here && (message.contains("sequence") || message.contains("array")) {
            return walk_key(&at.then(Step::Item), accepted);
        }
        // A map with keys of the user's choosing: of tables (`rate_limits.tools.NAME`) or of values.
        if path.starts_with(&format!("{here}.{PROBE}")) {
            return walk_key(&at.then(Step::Name), accepted);
        }
    }
    Shape::Value
}

/// An internally tagged enum: the tag, and every variant's keys, as one section.
fn walk_tagged(at: &Location, tag: &str, accepted: &mut Accepted) -> Shape {
    let unknown = Value::Table(Table::from_iter([(tag.to_owned(), Value::String(PROBE.into()))]));
    let variants = at
        .messages(unknown)
        .iter()
        .find_map(|(_, message)| message.starts_with("unknown variant").then(|| expected_names(message)))
        .unwrap_or_default();
    let mut entries = BTreeMap::from([(tag.to_owned(), false)]);
    for variant in &variants {
        let probe = Value::Table(Table::from_iter([
            (tag.to_owned(), Value::String(variant.clone())),
            (PROBE.to_owned(), Value::Integer(0)),
        ]));
        // A unit variant takes no keys of its own.
        let keys = at.messages(probe).iter().find_map(|(_, message)| {
            message
                .starts_with(&format!("unknown field `{PROBE}`"))
                .then(|| expected_names(message))
        });
        for key in keys.unwrap_or_default() {
            entries.insert(key, false);
        }
    }
    if variants.is_empty() {
        accepted
            .problems
            .push(format!("[{}] names no variants for `{tag}`", at.section()));
    }
    accepted.sections.insert(at.section(), entries);
    Shape::Section
}

/// What a reference in Markdown documents: each section named in a heading (`### [listen]`,
/// `### [policies.tools], [policies.prompts]`) with the keys in the first column of the
/// tables under it (`| `key` | …`, or `| `value_env` / `value_file` | …`).
pub fn documented(markdown: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Vec<String> = Vec::new();
    for line in markdown.lines() {
        if line.starts_with('#') {
            current = line
                .split('`')
                .skip(1)
                .step_by(2)
                .filter(|code| code.starts_with('['))
                .map(|code| code.trim_matches(|c| c == '[' || c == ']').to_owned())
                .collect();
            for section in &current {
                documented.entry(section.clone()).or_default();
            }
        } else if let Some(row) = line.strip_prefix('|') {
            let first = row.split('|').next().unwrap_or_default();
            let keys: Vec<&str> = first.split('`').skip(1).step_by(2).collect();
            for section in &current {
                documented
                    .entry(section.clone())
                    .or_default()
                    .extend(keys.iter().map(|k| (*k).to_owned()));
            }
        }
    }
    documented
}

/// The keys and sections the loader accepts that `markdown` does not document, and the keys
/// `markdown` documents in a section the loader accepts that the loader does not.
pub fn differences(accepted: &Accepted, markdown: &str) -> BTreeSet<String> {
    let documented = documented(markdown);
    let mut missing = BTreeSet::new();
    for (section, keys) in &accepted.sections {
        for (key, is_section) in keys {
            let (wanted_section, wanted_key) = match (section.as_str(), is_section) {
                // A section of its own is documented by its heading.
                (_, true) if section.is_empty() => (key.clone(), None),
                (_, true) => (format!("{section}.{key}"), None),
                // A key of the root that is no section (`[groups]`, a map): a heading too.
                ("", false) => (key.clone(), None),
                (_, false) => (section.clone(), Some(key)),
            };
            let Some(rows) = documented.get(&wanted_section).or_else(|| {
                // A map of sections is documented as `[section.NAME]`.
                documented.get(&format!("{wanted_section}.NAME"))
            }) else {
                missing.insert(format!("no heading names `[{wanted_section}]`"));
                continue;
            };
            if let Some(key) = wanted_key
                && !rows.contains(key)
            {
                missing.insert(format!("`[{section}]` has no row for `{key}`"));
            }
        }
    }
    for (section, rows) in &documented {
        let Some(keys) = accepted.sections.get(section) else {
            continue;
        };
        for row in rows {
            if !keys.contains_key(row) {
                missing.insert(format!("`[{section}]` documents `{row}`, which check-config refuses"));
            }
        }
    }
    missing
}
