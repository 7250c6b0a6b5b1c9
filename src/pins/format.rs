//! The pins' stored form: every upstream's pins as pretty JSON, members sorted, so that a
//! review reads the pin file and a diff of two versions shows exactly what was approved
//! (the shared store keeps each upstream's part the same way). Reading checks every pin's
//! digest against its definition: a garbled store is an error naming what is wrong, never
//! a reason to trust the upstream afresh.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Kind, Pin, Pins, digest};

/// The format this code writes and reads.
const VERSION: u64 = 1;

/// Every upstream's pins, by upstream name.
pub(crate) type PinFile = BTreeMap<String, Pins>;

/// What is wrong with a pin file.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PinFileError {
    /// Not JSON at all.
    #[error("not JSON: {0}")]
    Syntax(String),
    /// JSON, but not the pin file's shape.
    #[error("{at}: {problem}")]
    Shape {
        /// Where, as a path of members.
        at: String,
        /// What is wrong there.
        problem: String,
    },
}

fn shape(at: impl Into<String>, problem: impl Into<String>) -> PinFileError {
    PinFileError::Shape {
        at: at.into(),
        problem: problem.into(),
    }
}

/// The pin file's text for `pins`.
pub(crate) fn render(pins: &PinFile) -> String {
    let upstreams: Map<String, Value> = pins
        .iter()
        .map(|(upstream, pins)| (upstream.clone(), render_upstream(pins)))
        .collect();
    let file = json!({"version": VERSION, "upstreams": upstreams});
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    text
}

/// One upstream's pins as the pin file holds them: by kind, then by name.
pub(crate) fn render_upstream(pins: &Pins) -> Value {
    let mut kinds = Map::new();
    for ((kind, name), pin) in pins {
        let entries = kinds.entry(kind.as_str()).or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(entries) = entries {
            entries.insert(
                name.clone(),
                json!({"digest": pin.digest, "definition": pin.definition}),
            );
        }
    }
    Value::Object(kinds)
}

/// The pins in a pin file's `text`.
pub(crate) fn parse(text: &str) -> Result<PinFile, PinFileError> {
    let file: Value = serde_json::from_str(text).map_err(|e| PinFileError::Syntax(e.to_string()))?;
    match file.get("version").and_then(Value::as_u64) {
        Some(VERSION) => {}
        Some(other) => {
            return Err(shape(
                "version",
                format!("{other} is not a version this eragate reads ({VERSION})"),
            ));
        }
        None => return Err(shape("version", "missing: is this a pin file?")),
    }
    let upstreams = file
        .get("upstreams")
        .and_then(Value::as_object)
        .ok_or_else(|| shape("upstreams", "missing or not an object"))?;
    let mut out = PinFile::new();
    for (upstream, kinds) in upstreams {
        out.insert(
            upstream.clone(),
            parse_upstream(&format!("upstreams.{upstream}"), kinds)?,
        );
    }
    Ok(out)
}

/// One upstream's pins from what [`render_upstream`] wrote; `at` names where it was
/// read, for the error. Every digest is checked against its definition.
pub(crate) fn parse_upstream(at: &str, kinds: &Value) -> Result<Pins, PinFileError> {
    let kinds = kinds.as_object().ok_or_else(|| shape(at, "not an object"))?;
    let mut pins = Pins::new();
    for (kind_name, entries) in kinds {
        let at = format!("{at}.{kind_name}");
        let kind = Kind::parse(kind_name)
            .ok_or_else(|| shape(&at, "not a kind of definition (tool, prompt, resource_template)"))?;
        let entries = entries.as_object().ok_or_else(|| shape(&at, "not an object"))?;
        for (name, entry) in entries {
            let at = format!("{at}.{name}");
            let pin = read_pin(kind, name, entry).map_err(|problem| shape(&at, problem))?;
            pins.insert((kind, name.clone()), pin);
        }
    }
    Ok(pins)
}

fn read_pin(kind: Kind, name: &str, entry: &Value) -> Result<Pin, String> {
    let definition = entry
        .get("definition")
        .filter(|d| d.is_object())
        .ok_or("no definition object")?;
    let recorded = entry.get("digest").and_then(Value::as_str).ok_or("no digest")?;
    if definition.get(kind.key_member()).and_then(Value::as_str) != Some(name) {
        return Err(format!("the definition's {} is not {name:?}", kind.key_member()));
    }
    let computed = digest(definition);
    if computed != recorded {
        return Err(format!(
            "digest {recorded} does not match the definition ({computed}): edited by hand?"
        ));
    }
    Ok(Pin {
        definition: definition.clone(),
        digest: computed,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::pins::pins_of;

    fn sample() -> PinFile {
        let mut github = pins_of(
            Kind::Tool,
            &[json!({"name": "create_issue", "description": "Open an issue",
            "inputSchema": {"type": "object"}})],
        );
        github.extend(pins_of(Kind::Prompt, &[json!({"name": "triage"})]));
        let files = pins_of(
            Kind::ResourceTemplate,
            &[json!({"uriTemplate": "file:///{path}", "name": "file"})],
        );
        PinFile::from([("github".to_owned(), github), ("files".to_owned(), files)])
    }

    #[test]
    fn a_pin_file_reads_back_what_was_written_and_is_sorted_for_diffs() {
        let text = render(&sample());
        assert_eq!(parse(&text), Ok(sample()));
        assert!(text.find("\"files\"") < text.find("\"github\""), "{text}");
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn a_garbled_pin_file_is_refused_with_what_is_wrong() {
        let good = render(&sample());
        // (what, text, expected start of the error)
        let table: Vec<(&str, String, &str)> = vec![
            ("not JSON", "{\"version\": 1,".into(), "not JSON"),
            ("no version", "{\"upstreams\": {}}".into(), "version: missing"),
            (
                "a later version",
                "{\"version\": 2, \"upstreams\": {}}".into(),
                "version: 2 is not",
            ),
            (
                "an unknown kind",
                "{\"version\": 1, \"upstreams\": {\"a\": {\"tools\": {}}}}".into(),
                "upstreams.a.tools: not a kind",
            ),
            (
                "a description edited by hand",
                good.replace("Open an issue", "Open an issue and BCC me"),
                "upstreams.github.tool.create_issue: digest sha256:",
            ),
            (
                "a definition under another name",
                good.replace("\"create_issue\": {", "\"close_issue\": {"),
                "upstreams.github.tool.close_issue: the definition's name",
            ),
        ];
        for (what, text, expected) in table {
            let error = parse(&text).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(error.starts_with(expected), "{what}: {error}");
        }
    }
}
