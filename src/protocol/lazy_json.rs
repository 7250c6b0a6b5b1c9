//! `params` and `result` kept as the peer's JSON text until a stage looks inside.
//!
//! A proxied call needs only the envelope of its messages (id, method and a few
//! `_meta` keys), so a `serde_json::Value` tree of its `params` or `result` is
//! built only when a stage asks for it
//! (bench/NOTES.md, "Instructions per proxied call"). A [`LazyJson`]
//! read from the wire keeps the text and writes it out byte for byte (member
//! order, number spelling and unknown fields untouched); the tree is built the
//! first time a stage dereferences it, and the text is given up only when a
//! stage changes the tree (`DerefMut`). `_meta` alone can be read without the
//! tree ([`LazyJson::meta`]), and one member of it without building `_meta`
//! ([`LazyJson::meta_member`]): a 2026-07-28 request's envelope is read so.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::json_check::special_byte;

/// A JSON value kept as text until needed as a tree. Either holds the text
/// (with the tree and `_meta` built on first look) or a tree of its own.
#[derive(Default)]
pub struct LazyJson {
    /// The text as it came (line breaks turned into spaces), JSON that serde_json
    /// accepts (checked by it or by `json_check`); `None` once the tree is owned.
    text: Option<Box<str>>,
    /// The tree, when there is no text: given, or changed by a stage (boxed, as `read`).
    owned: Option<Box<Value>>,
    /// The tree of `text`, built on first look (boxed: a message stays small to move).
    read: OnceLock<Box<Value>>,
    /// One pass over `text`: its `_meta` and where its members lie, when it is an
    /// object with a `_meta` (boxed: most texts have none, and a message stays small).
    digest: OnceLock<Option<Box<Digest>>>,
}

impl LazyJson {
    /// Keeps a JSON text that serde_json has checked (`Message::parse` does).
    /// Whitespace line breaks become spaces, so a message still writes as one
    /// line (stdio framing): inside a JSON string they can only appear escaped.
    #[cfg(test)]
    pub(crate) fn from_checked_text(text: &RawValue) -> LazyJson {
        let text = text.get();
        LazyJson::from_text(text, text.bytes().any(|b| matches!(b, b'\n' | b'\r')))
    }

    /// [`LazyJson::from_checked_text`] for text checked as JSON (by serde_json, or
    /// by `json_check`, which accepts only what serde_json does), when the caller
    /// knows whether it holds line breaks.
    pub(crate) fn from_text(text: &str, line_breaks: bool) -> LazyJson {
        let text = if line_breaks {
            // Whitespace for whitespace: still the same JSON.
            text.replace(['\n', '\r'], " ").into_boxed_str()
        } else {
            text.into()
        };
        LazyJson {
            text: Some(text),
            ..LazyJson::default()
        }
    }

    /// The text this value will be written as, when it is still the peer's.
    pub(crate) fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// Whether the tree of the text was built (tests of stages that should not need it).
    #[cfg(test)]
    pub(crate) fn tree_was_built(&self) -> bool {
        self.read.get().is_some()
    }

    /// Writes the value as JSON: the text as it came, or the tree serialised.
    pub(crate) fn write_to(&self, out: &mut Vec<u8>) {
        match self.text.as_deref() {
            Some(text) => out.extend_from_slice(text.as_bytes()),
            // A tree with string keys written to memory: cannot fail.
            None => {
                let _ = serde_json::to_writer(&mut *out, &**self);
            }
        }
    }

    /// The tree, built now if it was not yet.
    pub fn into_value(mut self) -> Value {
        match self.owned.take() {
            Some(value) => *value,
            None => self
                .read
                .take()
                .map_or_else(|| tree_of(self.text.as_deref()), |tree| *tree),
        }
    }

    /// The `_meta` member of an object, read without building the whole tree.
    pub fn meta(&self) -> Option<&Value> {
        let Some(text) = self.text.as_deref() else {
            return self.owned.as_ref()?.get("_meta");
        };
        if let Some(tree) = self.read.get() {
            return tree.get("_meta");
        }
        let digest = self.digest_of(text)?;
        Some(digest.meta.tree(text))
    }

    /// One member of `_meta` (the last of that name, as a tree keeps), read
    /// without building `_meta` where the pass found where its members lie.
    pub fn meta_member(&self, key: &str) -> Option<MetaMember<'_>> {
        let Some(text) = self.text.as_deref() else {
            return self.owned.as_ref()?.get("_meta")?.get(key).map(MetaMember::Tree);
        };
        if let Some(tree) = self.read.get() {
            return tree.get("_meta")?.get(key).map(MetaMember::Tree);
        }
        let digest = self.digest_of(text)?;
        match (digest.meta.tree.get(), digest.meta.member_spans(text)) {
            (None, Some((meta, members))) => {
                let member = members.iter().rev().find(|member| member.name(meta) == key)?;
                Some(MetaMember::Text(member.value(meta)))
            }
            _ => digest.meta.tree(text).get(key).map(MetaMember::Tree),
        }
    }

    /// The names of `_meta`'s members, in order, when the pass found them and no
    /// name repeats (`None`: ask [`LazyJson::meta`]); `Some` of none for no `_meta`.
    pub fn meta_names(&self) -> Option<Vec<&str>> {
        let text = self.text.as_deref()?;
        if self.read.get().is_some() {
            return None;
        }
        let Some(digest) = self.digest_of(text) else {
            return Some(Vec::new());
        };
        let (meta, members) = digest.meta.member_spans(text)?;
        let names: Vec<&str> = members.iter().map(|member| member.name(meta)).collect();
        let repeats = names.iter().enumerate().any(|(at, name)| names[..at].contains(name));
        (!repeats).then_some(names)
    }

    /// The one pass over the text, made on first use.
    fn digest_of(&self, text: &str) -> Option<&Digest> {
        self.digest.get_or_init(|| Digest::of(text).map(Box::new)).as_deref()
    }

    /// Where the members of the text lie, when the pass for `_meta` found them
    /// (objects that have a `_meta` member; see [`Digest`]).
    fn spans(&self) -> Option<(&str, &[MemberSpan])> {
        let text = self.text.as_deref()?;
        let members = self.digest.get()?.as_deref()?.members.as_deref()?;
        Some((text, members))
    }

    /// Whether the text is an object with a member `name`, when known without another pass.
    pub fn has_member(&self, name: &str) -> Option<bool> {
        let (text, members) = self.spans()?;
        Some(members.iter().any(|member| member.name(text) == name))
    }

    /// The object written again with some members dropped or replaced, from the
    /// member spans the `_meta` pass found (no other pass; see `Digest`).
    /// `edit` is asked about each member, with whether it is the last of that
    /// name (the one a tree keeps). `None` when the spans are not known: the
    /// caller takes [`LazyJson::text_members`].
    pub(crate) fn edit_members<'v>(&self, edit: impl Fn(&str, bool) -> MemberEdit<'v>) -> Option<Edited> {
        let (text, members) = self.spans()?;
        // (the member's name and value as written, or its name and a new value) per member kept
        let mut kept: Vec<(&str, Option<String>)> = Vec::with_capacity(members.len());
        let mut changed = false;
        for (at, member) in members.iter().enumerate() {
            let name = member.name(text);
            let last = !members[at + 1..].iter().any(|later| later.name(text) == name);
            match edit(name, last) {
                MemberEdit::Keep => kept.push((text.get(member.member())?, None)),
                MemberEdit::Drop => changed = true,
                MemberEdit::Replace(value) => {
                    let name = text.get(member.name_start - 1..member.name_end + 1)?;
                    kept.push((name, Some(serde_json::to_string(value).ok()?)));
                    changed = true;
                }
            }
        }
        if !changed {
            return Some(Edited::Unchanged);
        }
        // Names are written without escapes: a kept `_meta` starts so.
        let has_meta = kept.iter().any(|(piece, _)| piece.starts_with("\"_meta\""));
        // Sized once: the text is boxed as it is, without a copy to shrink it.
        let size = 2
            + kept.len()
            + kept
                .iter()
                .map(|(piece, value)| piece.len() + value.as_ref().map_or(0, String::len))
                .sum::<usize>();
        let mut written = String::with_capacity(size);
        written.push('{');
        for (piece, value) in &kept {
            if written.len() > 1 {
                written.push(',');
            }
            written.push_str(piece);
            if let Some(value) = value {
                written.push(':');
                written.push_str(value);
            }
        }
        written.push('}');
        // Pieces of a checked text (and a serialised tree): checked JSON still.
        let lazy = LazyJson {
            text: Some(written.into_boxed_str()),
            ..LazyJson::default()
        };
        if !has_meta {
            let _ = lazy.digest.set(None);
        }
        Some(Edited::Written(lazy))
    }

    /// The object with its one member `name` given `value` instead, written from
    /// the member spans the `_meta` pass found. The new text keeps that pass
    /// (`_meta`, and the spans moved by the new value's length), so the stages
    /// after read it without another. `Err` with the value as it was when the
    /// spans are not known, the object has no member `name` or several, or
    /// `name` is `_meta` (which the pass holds).
    pub fn with_member<T: serde::Serialize + ?Sized>(mut self, name: &str, value: &T) -> Result<LazyJson, LazyJson> {
        let (Some((text, members)), false) = (self.spans(), name == "_meta") else {
            return Err(self);
        };
        let mut named = members
            .iter()
            .enumerate()
            .filter(|(_, member)| member.name(text) == name);
        let (Some((at, &old)), None) = (named.next(), named.next()) else {
            return Err(self);
        };
        let (Ok(value), Some(before), Some(after)) = (
            serde_json::to_string(value),
            text.get(..old.value_start),
            text.get(old.value_end..),
        ) else {
            return Err(self);
        };
        let mut written = String::with_capacity(before.len() + value.len() + after.len());
        written.push_str(before);
        written.push_str(&value);
        written.push_str(after);
        // A checked text with one value replaced by a serialised one: checked JSON still.
        let written = written.into_boxed_str();
        let Some(Some(mut digest)) = self.digest.take() else {
            return Err(self); // cannot happen: the spans came from the digest
        };
        let moved = |offset: usize| offset - old.value_end + old.value_start + value.len();
        // `_meta` (never the member replaced) moves when it lies after it; its
        // members' offsets are its own.
        if digest.meta.start >= old.value_end {
            digest.meta.start = moved(digest.meta.start);
            digest.meta.end = moved(digest.meta.end);
        }
        if let Some(spans) = digest.members.as_deref_mut() {
            for (index, span) in spans.iter_mut().enumerate() {
                match index.cmp(&at) {
                    std::cmp::Ordering::Less => {}
                    std::cmp::Ordering::Equal => span.value_end = span.value_start + value.len(),
                    std::cmp::Ordering::Greater => {
                        *span = MemberSpan {
                            name_start: moved(span.name_start),
                            name_end: moved(span.name_end),
                            value_start: moved(span.value_start),
                            value_end: moved(span.value_end),
                        }
                    }
                }
            }
        }
        let lazy = LazyJson {
            text: Some(written),
            ..LazyJson::default()
        };
        let _ = lazy.digest.set(Some(digest));
        Ok(lazy)
    }
}

/// What [`LazyJson::edit_members`] does with one member.
pub(crate) enum MemberEdit<'v> {
    /// Written as it was.
    Keep,
    /// Left out.
    Drop,
    /// Written with this value instead.
    Replace(&'v Value),
}

/// What [`LazyJson::edit_members`] made.
pub(crate) enum Edited {
    /// Every member was kept: the value as it was will do.
    Unchanged,
    /// The object written again.
    Written(LazyJson),
}

/// What one pass over an object's text that has a `_meta` (a 2026-07-28
/// request's envelope) finds: `_meta`, built (the last, as a tree keeps), and
/// where each member lies, so that later stages read a member (`Mcp-Name`,
/// `requestState`) or cut some out (toward a legacy upstream) without another
/// pass. Texts without `_meta` (a legacy call's params) keep nothing; spans are
/// not kept past [`SPAN_LIMIT`] members or for an escaped name.
struct Digest {
    /// `_meta`.
    meta: MetaDigest,
    /// The members in order, when known.
    members: Option<Box<[MemberSpan]>>,
}

/// Where an object's `_meta` lies in its text, and its members: a request's
/// envelope is read member by member (`io.modelcontextprotocol/*`, `progressToken`,
/// `traceparent`), and `_meta` is built only for a stage that asks for the tree.
struct MetaDigest {
    /// `_meta`'s value (the last, as a tree keeps), as byte offsets into the text.
    start: usize,
    end: usize,
    /// Its members, offsets into `_meta`'s own text, when it is an object of at
    /// most [`SPAN_LIMIT`] members whose names have no escapes.
    members: Option<Box<[MemberSpan]>>,
    /// `_meta` built, on first use of [`LazyJson::meta`].
    tree: OnceLock<Value>,
}

impl MetaDigest {
    /// `_meta` lying at `start..end` in `text`, its members found by a walk over
    /// its own text when it is an object.
    fn at(text: &str, start: usize, end: usize) -> MetaDigest {
        let members = text.get(start..end).and_then(walk_object);
        MetaDigest {
            start,
            end,
            members,
            tree: OnceLock::new(),
        }
    }

    /// `_meta`'s text and the spans of its members, when known.
    fn member_spans<'t>(&self, text: &'t str) -> Option<(&'t str, &[MemberSpan])> {
        Some((text.get(self.start..self.end)?, self.members.as_deref()?))
    }

    /// `_meta` built (once) from `text`, the params' text it lies in.
    fn tree(&self, text: &str) -> &Value {
        self.tree.get_or_init(|| {
            text.get(self.start..self.end)
                .and_then(|meta| serde_json::from_str(meta).ok())
                .unwrap_or_default()
        })
    }
}

/// One member of a request's `_meta` as [`ParamsView::meta_member`] finds it.
#[derive(Clone, Copy, Debug)]
pub enum MetaMember<'a> {
    /// Its value as the peer wrote it (checked JSON).
    Text(&'a str),
    /// Its value in a tree.
    Tree(&'a Value),
}

impl<'a> MetaMember<'a> {
    /// The value when it is a string (borrowed unless it had escapes).
    pub fn as_str(self) -> Option<std::borrow::Cow<'a, str>> {
        match self {
            MetaMember::Text(text) if text.starts_with('"') => match plain_string(text) {
                Some(plain) => Some(std::borrow::Cow::Borrowed(plain)),
                // Escapes: written out anew.
                None => serde_json::from_str::<String>(text).ok().map(std::borrow::Cow::Owned),
            },
            MetaMember::Text(_) => None,
            MetaMember::Tree(value) => value.as_str().map(std::borrow::Cow::Borrowed),
        }
    }

    /// Whether the value is an object.
    pub(crate) fn is_object(self) -> bool {
        match self {
            MetaMember::Text(text) => text.starts_with('{'),
            MetaMember::Tree(value) => value.is_object(),
        }
    }

    /// The value, built.
    pub fn to_value(self) -> Value {
        match self {
            MetaMember::Text(text) => serde_json::from_str(text).unwrap_or_default(),
            MetaMember::Tree(value) => value.clone(),
        }
    }
}

/// Most members whose spans a [`Digest`] keeps (params have a handful).
const SPAN_LIMIT: usize = 8;

/// Where one member of an object's text lies (byte offsets into the text).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct MemberSpan {
    /// The first byte of the name, after its opening quote.
    name_start: usize,
    /// The closing quote of the name (written without escapes).
    name_end: usize,
    /// The first byte of the value.
    value_start: usize,
    /// One past the value's last byte.
    value_end: usize,
}

impl MemberSpan {
    /// The member's name.
    fn name(self, text: &str) -> &str {
        text.get(self.name_start..self.name_end).unwrap_or_default()
    }

    /// The member's value, as text.
    fn value(self, text: &str) -> &str {
        text.get(self.value_start..self.value_end).unwrap_or_default()
    }

    /// The member as written, name to value.
    fn member(self) -> std::ops::Range<usize> {
        self.name_start - 1..self.value_end
    }
}

impl Digest {
    /// The pass over a checked text; `None` when it is not an object with a `_meta`.
    fn of(text: &str) -> Option<Digest> {
        // A text without `_meta` in it, nor an escape to spell it with, has no such
        // member: a legacy call's params are searched, not walked.
        if !text.contains("_meta") && !text.contains('\\') {
            return None;
        }
        // The text is checked JSON: a walk over its bytes finds the members, unless
        // a name has escapes or there are many; serde_json's pass does then.
        if let Some((members, meta_members)) = walk_object_and_meta(text) {
            let meta = members.iter().rev().find(|member| member.name(text) == "_meta")?;
            return Some(Digest {
                meta: MetaDigest {
                    start: meta.value_start,
                    end: meta.value_end,
                    members: meta_members,
                    tree: OnceLock::new(),
                },
                members: Some(members),
            });
        }
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let seed = DigestSeed {
            base: text.as_ptr() as usize,
            len: text.len(),
        };
        let Ok(Some((Some((start, end)), names))) = seed.deserialize(&mut deserializer) else {
            return None;
        };
        Some(Digest {
            meta: MetaDigest::at(text, start, end),
            members: names.and_then(|names| member_spans(text, names.as_slice())),
        })
    }
}

/// Where the names of an object's members lie, up to [`SPAN_LIMIT`] of them.
struct NameSpans {
    at: [(usize, usize); SPAN_LIMIT],
    len: usize,
}

impl NameSpans {
    fn as_slice(&self) -> &[(usize, usize)] {
        self.at.get(..self.len).unwrap_or_default()
    }
}

/// The spans of members whose names lie at `names` (in order) in `text`: after a
/// name, whitespace, `:` and whitespace lead to the value; the value ends where
/// whitespace, `,` and whitespace before the next name (or `}` at the end) begin.
fn member_spans(text: &str, names: &[(usize, usize)]) -> Option<Box<[MemberSpan]>> {
    let bytes = text.as_bytes();
    let blank = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let skip = |mut at: usize| {
        while bytes.get(at).is_some_and(blank) {
            at += 1;
        }
        at
    };
    let back = |mut end: usize| {
        while end > 0 && bytes.get(end - 1).is_some_and(blank) {
            end -= 1;
        }
        end
    };
    let close = back(bytes.len());
    if close == 0 || bytes.get(close - 1) != Some(&b'}') {
        return None;
    }
    let mut spans = Vec::with_capacity(names.len());
    for (at, &(name_start, name_end)) in names.iter().enumerate() {
        let colon = skip(name_end + 1);
        if bytes.get(colon) != Some(&b':') {
            return None;
        }
        let value_start = skip(colon + 1);
        let value_end = match names.get(at + 1) {
            Some(&(next, _)) => {
                let comma = back(next.checked_sub(1)?);
                if comma == 0 || bytes.get(comma - 1) != Some(&b',') {
                    return None;
                }
                back(comma - 1)
            }
            None => back(close - 1),
        };
        if value_end <= value_start {
            return None;
        }
        spans.push(MemberSpan {
            name_start,
            name_end,
            value_start,
            value_end,
        });
    }
    Some(spans.into_boxed_slice())
}

/// Finds where an object's member names lie (`None` past [`SPAN_LIMIT`] or for
/// an escaped name) and where its `_meta` value lies (the last); every value is
/// skipped unbuilt. For the texts [`walk_object`] leaves: escaped names, many members.
struct DigestSeed {
    /// Where the text starts in memory: borrowed names are located from it.
    base: usize,
    len: usize,
}

impl DigestSeed {
    /// The span of a name borrowed from the text, between its quotes.
    fn locate(&self, name: &str) -> Option<(usize, usize)> {
        let start = (name.as_ptr() as usize).checked_sub(self.base)?;
        let end = start.checked_add(name.len())?;
        (start >= 1 && end < self.len).then_some((start, end))
    }

    /// The span of a value borrowed from the text.
    fn locate_value(&self, value: &str) -> Option<(usize, usize)> {
        let start = (value.as_ptr() as usize).checked_sub(self.base)?;
        let end = start.checked_add(value.len())?;
        (end <= self.len).then_some((start, end))
    }
}

/// What a [`DigestSeed`] finds: `_meta`'s span, and the names' spans.
type Found = Option<(Option<(usize, usize)>, Option<NameSpans>)>;

impl<'de> DeserializeSeed<'de> for DigestSeed {
    type Value = Found;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DigestSeed {
    type Value = Found;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut meta = None;
        let mut names = NameSpans {
            at: [(0, 0); SPAN_LIMIT],
            len: 0,
        };
        // Whether every name so far was located (and fit).
        let mut located = true;
        while let Some(Name(name)) = map.next_key::<Name<'de>>()? {
            if located {
                let span = match &name {
                    std::borrow::Cow::Borrowed(name) => self.locate(name),
                    std::borrow::Cow::Owned(_) => None,
                };
                match (span, names.at.get_mut(names.len)) {
                    (Some(span), Some(slot)) => {
                        *slot = span;
                        names.len += 1;
                    }
                    _ => located = false,
                }
            }
            if name == "_meta" {
                let value = map.next_value::<&'de RawValue>()?;
                // Borrowed from the text, so found in it (a checked text: cannot fail).
                meta = self.locate_value(value.get());
                if meta.is_none() {
                    return Ok(None);
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        let names = located.then_some(names);
        Ok(Some((meta, names)))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// Request params as a stage reads them: `_meta` alone (cheap on a [`LazyJson`])
/// or the whole tree. Lets the pure classifiers take either form.
pub trait ParamsView {
    /// The `_meta` member, when `self` is an object that has one.
    fn meta(&self) -> Option<&Value>;
    /// One member of `_meta`, when `self` has a `_meta` object with that member.
    fn meta_member(&self, key: &str) -> Option<MetaMember<'_>> {
        self.meta()?.get(key).map(MetaMember::Tree)
    }
    /// Whether `self` has a `_meta` member that is an object.
    fn has_meta_object(&self) -> bool {
        self.meta().is_some_and(Value::is_object)
    }
    /// The whole value.
    fn tree(&self) -> &Value;
    /// A top-level member that is a string, when `self` is an object that has one.
    fn str_member(&self, key: &str) -> Option<String> {
        self.tree().get(key)?.as_str().map(str::to_owned)
    }
}

impl ParamsView for Value {
    fn meta(&self) -> Option<&Value> {
        self.get("_meta")
    }

    fn tree(&self) -> &Value {
        self
    }
}

impl ParamsView for LazyJson {
    fn meta(&self) -> Option<&Value> {
        LazyJson::meta(self)
    }

    fn meta_member(&self, key: &str) -> Option<MetaMember<'_>> {
        LazyJson::meta_member(self, key)
    }

    /// Read from the text while `_meta` is not built.
    fn has_meta_object(&self) -> bool {
        match (&self.owned, self.read.get(), self.text.as_deref()) {
            (None, None, Some(text)) => self
                .digest_of(text)
                .is_some_and(|digest| text.get(digest.meta.start..).is_some_and(|meta| meta.starts_with('{'))),
            _ => self.meta().is_some_and(Value::is_object),
        }
    }

    fn tree(&self) -> &Value {
        self
    }

    /// Read from the text alone while the tree is not built (one pass, nothing else built).
    fn str_member(&self, key: &str) -> Option<String> {
        match (&self.owned, self.read.get(), self.text.as_deref()) {
            (None, None, Some(text)) => {
                if let Some((text, members)) = self.spans() {
                    // The last of that name, as a tree keeps; a value that is not a string is none.
                    let member = members.iter().rev().find(|member| member.name(text) == key)?;
                    let value = member.value(text);
                    return match plain_string(value) {
                        Some(plain) => Some(plain.to_owned()),
                        None => serde_json::from_str::<String>(value).ok(),
                    };
                }
                let mut deserializer = serde_json::Deserializer::from_str(text);
                StrMember(key).deserialize(&mut deserializer).ok().flatten()
            }
            _ => self.tree().get(key)?.as_str().map(str::to_owned),
        }
    }
}

/// Reads one object's string member by name (the last, as a tree would keep).
struct StrMember<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for StrMember<'_> {
    type Value = Option<String>;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Option<String>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrMember<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        let mut found = None;
        while let Some(Name(name)) = map.next_key::<Name<'de>>()? {
            if name == self.0 {
                found = match map.next_value::<Value>()? {
                    Value::String(text) => Some(text),
                    _ => None,
                };
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Option<String>, A::Error> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
}

/// A member's value as [`LazyJson::object_with`] writes it.
pub(crate) enum MemberValue<'a> {
    /// The text as it was (checked JSON: a value of a [`LazyJson`]'s text).
    Text(&'a str),
    /// A tree, written as JSON.
    Tree(&'a Value),
}

impl LazyJson {
    /// The members of an object still held as text, in order, their values unbuilt
    /// (`None` for a tree, or a text that is not an object: the caller uses the tree).
    pub(crate) fn text_members(&self) -> Option<Vec<(std::borrow::Cow<'_, str>, &str)>> {
        let text = self.text.as_deref()?;
        if !text.starts_with('{') {
            return None;
        }
        // Where the members lie, from the `_meta` pass or a walk over the checked
        // text; serde_json's pass only for escaped names or many members.
        let walked;
        let spans = match self.spans() {
            Some((_, spans)) => spans,
            None => match walk_object(text) {
                Some(spans) => {
                    walked = spans;
                    &walked[..]
                }
                None => {
                    let members: TextMembers<'_> = serde_json::from_str(text).ok()?;
                    return Some(members.0.into_iter().map(|(name, value)| (name, value.get())).collect());
                }
            },
        };
        let members = spans
            .iter()
            .map(|span| (std::borrow::Cow::Borrowed(span.name(text)), span.value(text)))
            .collect();
        Some(members)
    }

    /// An object written from members: text values copied as they are, trees
    /// written as JSON. What a stage that adds or drops a few members of an
    /// object uses instead of building (and writing out) the whole tree.
    pub(crate) fn object_with<'a>(members: impl IntoIterator<Item = (&'a str, MemberValue<'a>)>) -> LazyJson {
        let members: Vec<(&str, MemberValue<'_>)> = members.into_iter().collect();
        // Sized for the pieces: exactly when every name is plain and every value is
        // text (the common case), so the text is boxed without a reallocation.
        let size = 1 + members
            .iter()
            .map(|(key, value)| {
                let key_len = match is_plain(key) {
                    true => key.len() + 2,
                    false => 6 * key.len() + 2,
                };
                key_len
                    + 2
                    + match value {
                        MemberValue::Text(text) => text.len(),
                        MemberValue::Tree(_) => 64,
                    }
            })
            .sum::<usize>()
            .max(2);
        // Written as a `String`, not parsed again: every piece is JSON already.
        let mut text = String::with_capacity(size);
        let mut has_meta = false;
        text.push('{');
        for (key, value) in members {
            if text.len() > 1 {
                text.push(',');
            }
            has_meta |= key == "_meta";
            match is_plain(key) {
                true => {
                    text.push('"');
                    text.push_str(key);
                    text.push('"');
                }
                // A string written to memory: cannot fail.
                false => text.push_str(&serde_json::to_string(key).unwrap_or_default()),
            }
            text.push(':');
            match value {
                MemberValue::Text(piece) => text.push_str(piece),
                // A tree with string keys written to memory: cannot fail.
                MemberValue::Tree(tree) => text.push_str(&serde_json::to_string(tree).unwrap_or_default()),
            }
        }
        text.push('}');
        let lazy = LazyJson {
            text: Some(text.into_boxed_str()),
            ..LazyJson::default()
        };
        if !has_meta {
            // Known without a look: later stages asking for `_meta` skip a pass.
            let _ = lazy.digest.set(None);
        }
        lazy
    }
}

/// An object's members, names read and values left as text.
struct TextMembers<'a>(Vec<(std::borrow::Cow<'a, str>, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for TextMembers<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<TextMembers<'de>, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = TextMembers<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TextMembers<'de>, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(Name(name)) = map.next_key::<Name<'de>>()? {
                    members.push((name, map.next_value::<&'de RawValue>()?));
                }
                Ok(TextMembers(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// A member name, borrowed from the text unless it had escapes.
struct Name<'a>(std::borrow::Cow<'a, str>);

impl<'de> serde::Deserialize<'de> for Name<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Name<'de>, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(std::borrow::Cow::Borrowed(name)))
            }
            fn visit_str<E>(self, name: &str) -> Result<Name<'de>, E> {
                Ok(Name(std::borrow::Cow::Owned(name.to_owned())))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

impl From<Value> for LazyJson {
    fn from(value: Value) -> LazyJson {
        LazyJson {
            owned: Some(Box::new(value)),
            ..LazyJson::default()
        }
    }
}

impl From<LazyJson> for Value {
    fn from(lazy: LazyJson) -> Value {
        lazy.into_value()
    }
}

impl Deref for LazyJson {
    type Target = Value;

    fn deref(&self) -> &Value {
        match &self.owned {
            Some(value) => value,
            None => self.read.get_or_init(|| Box::new(tree_of(self.text.as_deref()))),
        }
    }
}

impl DerefMut for LazyJson {
    /// The tree to change: from here on the value is written from it.
    fn deref_mut(&mut self) -> &mut Value {
        if self.owned.is_none() {
            let tree = self
                .read
                .take()
                .unwrap_or_else(|| Box::new(tree_of(self.text.as_deref())));
            self.owned = Some(tree);
            self.text = None;
            self.digest = OnceLock::new();
        }
        self.owned.get_or_insert_with(Box::default)
    }
}

impl Clone for LazyJson {
    fn clone(&self) -> LazyJson {
        let clone = LazyJson {
            text: self.text.clone(),
            owned: self.owned.clone(),
            ..LazyJson::default()
        };
        // That there is no `_meta` is kept (nothing to copy): the params of a
        // request sent again are not looked through for it again.
        if let Some(None) = self.digest.get() {
            let _ = clone.digest.set(None);
        }
        clone
    }
}

impl PartialEq for LazyJson {
    fn eq(&self, other: &LazyJson) -> bool {
        match (self.text(), other.text()) {
            (Some(a), Some(b)) if a == b => true,
            _ => **self == **other,
        }
    }
}

impl PartialEq<Value> for LazyJson {
    fn eq(&self, other: &Value) -> bool {
        **self == *other
    }
}

impl fmt::Debug for LazyJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.text() {
            Some(text) => f.write_str(text),
            None => fmt::Debug::fmt(&**self, f),
        }
    }
}

impl serde::Serialize for LazyJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.text.as_deref() {
            // Written as it is; serde_json has no way to write text unchecked, so
            // the text is read once more. Messages are written by hand, without it
            // (`Message::write_to`); this is for other writers.
            Some(text) => match serde_json::from_str::<&RawValue>(text) {
                Ok(raw) => raw.serialize(serializer),
                Err(error) => Err(serde::ser::Error::custom(error)),
            },
            None => (**self).serialize(serializer),
        }
    }
}

impl<'de> serde::Deserialize<'de> for LazyJson {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<LazyJson, D::Error> {
        Value::deserialize(deserializer).map(LazyJson::from)
    }
}

/// Writes `text` as a JSON string: as it is between quotes when nothing in it
/// needs an escape, else as serde_json escapes it.
pub(crate) fn write_json_str(out: &mut Vec<u8>, text: &str) {
    if !is_plain(text) {
        // Writing a string to memory cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
    } else {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    }
}

/// The contents of a checked JSON string written without escapes (`None` for
/// any other value, or a string with an escape).
pub(crate) fn plain_string(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('"')?;
    let end = special_byte(inner.as_bytes(), 0);
    (end + 1 == inner.len() && inner.as_bytes().get(end) == Some(&b'"')).then(|| inner.get(..end))?
}

/// Whether `text` is written as JSON between quotes as it is (no quote,
/// backslash or control character to escape).
fn is_plain(text: &str) -> bool {
    special_byte(text.as_bytes(), 0) == text.len()
}

/// The tree of a checked text (`Null` for none; a checked text always parses).
fn tree_of(text: Option<&str>) -> Value {
    text.and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// Where the members of an object lie, found by walking a text serde_json has
/// checked (so no mistake of syntax is looked for): `None` when it is not an
/// object, has more than [`SPAN_LIMIT`] members, or a name with an escape (whose
/// span would not spell the name). Strings are crossed eight bytes at a time,
/// nested values by counting brackets: a fraction of a serde_json pass.
fn walk_object(text: &str) -> Option<Box<[MemberSpan]>> {
    walk_object_and_meta(text).map(|(members, _)| members)
}

/// The members of one object, in order.
type Spans = Box<[MemberSpan]>;

/// [`walk_object`], and the members of its last `_meta` found in the same pass
/// when that is an object the walk reads (offsets into `_meta`'s own text).
fn walk_object_and_meta(text: &str) -> Option<(Spans, Option<Spans>)> {
    let bytes = text.as_bytes();
    let start = blank(bytes, 0);
    let (members, meta, end) = walk_members(bytes, start, true)?;
    (blank(bytes, end) == bytes.len()).then_some((members, meta))
}

/// The members of the object that opens at `start` (offsets from `start` when it is
/// the text's start, as `walk_object` has it; a nested one's from its own `{`), the
/// members of its last `_meta` when `read_meta` asks and that is an object of plain
/// names, and one past its closing `}`.
fn walk_members(bytes: &[u8], start: usize, read_meta: bool) -> Option<(Spans, Option<Spans>, usize)> {
    if bytes.get(start) != Some(&b'{') {
        return None;
    }
    let base = if read_meta { 0 } else { start };
    let mut at = blank(bytes, start + 1);
    // Gathered in place and boxed at their number, because boxing a `Vec` would
    // shrink it with a reallocation.
    let mut spans = [MemberSpan::default(); SPAN_LIMIT];
    let mut found = 0;
    let mut meta = None;
    if bytes.get(at) == Some(&b'}') {
        return Some((Box::default(), None, at + 1));
    }
    loop {
        if bytes.get(at) != Some(&b'"') || found == SPAN_LIMIT {
            return None;
        }
        let name_start = at + 1;
        let name_end = special_byte(bytes, name_start);
        if bytes.get(name_end) != Some(&b'"') {
            return None;
        }
        at = blank(bytes, name_end + 1);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let value_start = blank(bytes, at + 1);
        // `_meta` read member by member on the way, not crossed and read again.
        let value_end = match read_meta && bytes.get(name_start..name_end) == Some(b"_meta".as_slice()) {
            true => match walk_members(bytes, value_start, false) {
                Some((members, _, end)) => {
                    meta = Some(members);
                    end
                }
                None => {
                    meta = None;
                    value_end(bytes, value_start)?
                }
            },
            false => value_end(bytes, value_start)?,
        };
        spans[found] = MemberSpan {
            name_start: name_start - base,
            name_end: name_end - base,
            value_start: value_start - base,
            value_end: value_end - base,
        };
        found += 1;
        at = blank(bytes, value_end);
        match bytes.get(at) {
            Some(b',') => at = blank(bytes, at + 1),
            Some(b'}') => return Some((Box::from(&spans[..found]), meta, at + 1)),
            _ => return None,
        }
    }
}

/// The first byte at or after `at` that is not whitespace.
fn blank(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// One past the end of the (checked) JSON value that starts at `start`.
fn value_end(bytes: &[u8], start: usize) -> Option<usize> {
    match bytes.get(start)? {
        b'"' => string_end(bytes, start + 1),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = start;
            loop {
                match bytes.get(at)? {
                    b'"' => {
                        at = string_end(bytes, at + 1)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        // A number, `true`, `false` or `null`: up to what follows a value.
        _ => {
            let mut at = start;
            while bytes
                .get(at)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                at += 1;
            }
            (at > start).then_some(at)
        }
    }
}

/// One past the closing quote of a string whose contents start at `at`.
fn string_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        at = special_byte(bytes, at);
        match bytes.get(at)? {
            b'"' => return Some(at + 1),
            // An escape and the byte it escapes (a `\uXXXX`'s digits are plain bytes).
            _ => at += 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lazy(text: &str) -> LazyJson {
        let raw: Box<RawValue> = serde_json::from_str(text).unwrap();
        LazyJson::from_checked_text(&raw)
    }

    #[test]
    fn text_is_written_byte_for_byte_until_changed() {
        let cases = [
            // (text, written)
            (r#"{"b":1,"a":2}"#, r#"{"b":1,"a":2}"#),
            (r#"{"n":1.50,"e":1E3}"#, r#"{"n":1.50,"e":1E3}"#),
            (r#"{ "a" : [ 1 , 2 ] }"#, r#"{ "a" : [ 1 , 2 ] }"#),
            ("{\"a\":\n1,\r\n\"s\":\"x\\ny\"}", "{\"a\": 1,  \"s\":\"x\\ny\"}"),
            (r#"[1,"two",null]"#, r#"[1,"two",null]"#),
        ];
        for (text, written) in cases {
            let value = lazy(text);
            assert_eq!(serde_json::to_string(&value).unwrap(), written, "{text}");
            // Looking does not give the text up.
            let _ = value.get("a");
            assert_eq!(value.text(), Some(written), "{text}");
            assert_eq!(*value, serde_json::from_str::<Value>(text).unwrap(), "{text}");
        }
    }

    #[test]
    fn a_change_is_written_from_the_tree() {
        let mut value = lazy(r#"{"b":1,"a":2}"#);
        value["c"] = json!(3);
        assert_eq!(value.text(), None);
        assert_eq!(serde_json::to_string(&value).unwrap(), r#"{"a":2,"b":1,"c":3}"#);
        assert_eq!(value.into_value(), json!({"a":2,"b":1,"c":3}));
    }

    #[test]
    fn meta_is_read_without_the_tree() {
        let cases = [
            (
                r#"{"name":"t","_meta":{"progressToken":7}}"#,
                Some(json!({"progressToken":7})),
            ),
            (
                r#"{"_meta":1,"x":{"_meta":2},"_meta":{"k":"v"}}"#,
                Some(json!({"k":"v"})),
            ),
            (r#"{"name":"t","arguments":{"_meta":3}}"#, None),
            (r#"{"name":"_meta","arguments":{"text":"_meta"}}"#, None),
            (r#"{"name":"t","arguments":{"a":1}}"#, None),
            (r#"{"\u005f\u006deta":{"k":1}}"#, Some(json!({"k":1}))),
            (r#"{"\u005fmeta":true}"#, Some(json!(true))),
            (r#"[{"_meta":1}]"#, None),
            ("{}", None),
        ];
        for (text, meta) in cases {
            let value = lazy(text);
            assert_eq!(value.meta(), meta.as_ref(), "{text}");
            assert!(value.read.get().is_none(), "{text}: the tree was built");
            assert_eq!(
                LazyJson::from(serde_json::from_str::<Value>(text).unwrap()).meta(),
                meta.as_ref()
            );
        }
        let mut changed = lazy(r#"{"_meta":{"a":1}}"#);
        changed["_meta"]["a"] = json!(2);
        assert_eq!(changed.meta(), Some(&json!({"a":2})));
    }

    #[test]
    fn a_meta_member_is_read_as_the_tree_would_give_it() {
        let envelope = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}"#;
        let many: String = (0..12).map(|i| format!(r#","k{i}":{i}"#)).collect();
        let cases = [
            format!(r#"{{"name":"echo","arguments":{{"text":"hi"}},"_meta":{{{envelope}}}}}"#),
            format!(r#"{{"_meta":{{{envelope},"progressToken":"p-1","traceparent":"00-ab-cd-01"}},"name":"echo"}}"#),
            "{ \"_meta\" : { \"progressToken\" :\n 7 , \"k\" : [1, {\"_meta\": 2}] } , \"name\":\"x\"}".to_owned(),
            // The last of a repeated name, in `_meta` and of `_meta` itself.
            r#"{"_meta":{"k":1,"k":"two"}}"#.to_owned(),
            r#"{"_meta":{"k":1},"x":1,"_meta":{"k":3,"j":[]}}"#.to_owned(),
            r#"{"_meta":{"k":1},"_meta":5}"#.to_owned(),
            r#"{"_meta":5,"_meta":{"k":2,"j":{"k":0}}}"#.to_owned(),
            "{ \"_meta\" : { \"k\" : 1 ,\n \"j\" : [ { } ] } , \"x\" : 2 }".to_owned(),
            // Escaped names, too many members, `_meta` that is no object: the tree answers.
            r#"{"_meta":{"\u006b":"esc","traceparent":"t\u0041"}}"#.to_owned(),
            format!(r#"{{"_meta":{{"k":"first"{many}}}}}"#),
            r#"{"_meta":[1,2]}"#.to_owned(),
            r#"{"_meta":{}}"#.to_owned(),
            r#"{"name":"no meta"}"#.to_owned(),
        ];
        let keys = [
            "io.modelcontextprotocol/protocolVersion",
            "io.modelcontextprotocol/clientCapabilities",
            "io.modelcontextprotocol/clientInfo",
            "progressToken",
            "traceparent",
            "k",
            "j",
            "k11",
            "absent",
        ];
        for text in &cases {
            let tree: Value = serde_json::from_str(text).unwrap();
            let tree_meta = tree.get("_meta");
            let value = lazy(text);
            for key in keys {
                let expected = tree_meta.and_then(|meta| meta.get(key));
                let found = value.meta_member(key);
                assert_eq!(found.map(MetaMember::to_value).as_ref(), expected, "{text}: {key}");
                assert_eq!(
                    found.and_then(MetaMember::as_str).as_deref(),
                    expected.and_then(Value::as_str),
                    "{text}: {key}"
                );
                assert_eq!(
                    found.is_some_and(MetaMember::is_object),
                    expected.is_some_and(Value::is_object),
                    "{text}: {key}"
                );
                // The tree's answers, through the same view.
                assert_eq!(tree.meta_member(key).map(MetaMember::to_value).as_ref(), expected);
            }
            assert_eq!(
                value.has_meta_object(),
                tree_meta.is_some_and(Value::is_object),
                "{text}"
            );
            if let Some(names) = value.meta_names() {
                let expected: Vec<&str> = tree_meta
                    .and_then(Value::as_object)
                    .map(|meta| meta.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                let mut sorted = names.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, expected, "{text}");
            }
            assert!(value.read.get().is_none(), "{text}: the params' tree was built");
            assert_eq!(value.meta(), tree_meta, "{text}");
        }
        // Read from the text alone where the pass found `_meta`'s members.
        let plain = lazy(&cases[0]);
        assert!(matches!(
            plain.meta_member("io.modelcontextprotocol/clientInfo"),
            Some(MetaMember::Text(_))
        ));
        assert!(
            plain
                .digest
                .get()
                .and_then(Option::as_deref)
                .is_some_and(|d| d.meta.tree.get().is_none())
        );
        assert_eq!(lazy(r#"{"_meta":{"k":1,"k":2}}"#).meta_names(), None, "a repeated name");
    }

    #[test]
    fn the_walk_finds_the_members_serde_json_finds() {
        let cases = [
            r#"{"name":"echo","arguments":{"text":"a \"quoted\" } ] {","n":[1,{"x":"]"}]},"_meta":{}}"#,
            "{ \"a\" :\t1 ,\n\"b\": -2.5e3 , \"c\":true,\"d\":null , \"e\" : \"\\\\\" }",
            r#"{"k":"\u00e9\n\\","l":[[],[[{}]]],"m":{"":""}}"#,
            "{}",
            " { } ",
        ];
        for text in cases {
            let walked = walk_object(text).unwrap_or_else(|| panic!("{text}: not walked"));
            // serde_json's view of the same members: names, and values as text.
            let members: TextMembers<'_> = serde_json::from_str(text).unwrap();
            assert_eq!(walked.len(), members.0.len(), "{text}");
            for (span, (name, value)) in walked.iter().zip(&members.0) {
                assert_eq!(span.name(text), name, "{text}");
                assert_eq!(span.value(text), value.get(), "{text}");
            }
        }
        let nine: String = (0..9).map(|i| format!(r#""k{i}":{i}"#)).collect::<Vec<_>>().join(",");
        for left in [
            r#"{"na\u006de":1}"#.to_owned(),
            format!("{{{nine}}}"),
            "[1,2]".to_owned(),
            r#""_meta""#.to_owned(),
        ] {
            assert!(walk_object(&left).is_none(), "{left}");
        }
    }

    #[test]
    fn meta_follows_a_member_replaced_before_it() {
        let text = r#"{"name":"fed__echo","_meta":{"progressToken":5,"k":"v"},"arguments":{}}"#;
        let value = lazy(text);
        let _ = value.meta_member("k");
        let Ok(renamed) = value.with_member("name", "echo") else {
            panic!("the spans are known");
        };
        assert_eq!(
            renamed.text(),
            Some(r#"{"name":"echo","_meta":{"progressToken":5,"k":"v"},"arguments":{}}"#)
        );
        assert_eq!(
            renamed.meta_member("k").and_then(MetaMember::as_str).as_deref(),
            Some("v")
        );
        assert_eq!(
            renamed.meta_member("progressToken").map(MetaMember::to_value),
            Some(json!(5))
        );
        assert_eq!(renamed.meta(), Some(&json!({"progressToken":5,"k":"v"})));
    }

    #[test]
    fn a_string_member_is_read_without_the_tree() {
        let cases = [
            (r#"{"name":"t","arguments":{"name":"inner"}}"#, Some("t")),
            (r#"{"name":"a","name":"b"}"#, Some("b")),
            (r#"{"name":7}"#, None),
            (r#"{"na\u006de":"esc"}"#, Some("esc")),
            (r#"{"other":"x"}"#, None),
            (r#"["name"]"#, None),
        ];
        for (text, expected) in cases {
            let value = lazy(text);
            assert_eq!(ParamsView::str_member(&value, "name").as_deref(), expected, "{text}");
            assert!(value.read.get().is_none(), "{text}: the tree was built");
            let tree: Value = serde_json::from_str(text).unwrap();
            assert_eq!(tree.str_member("name").as_deref(), expected, "{text}");
        }
    }

    #[test]
    fn the_meta_pass_locates_the_members() {
        let many = format!(
            "{{{},\"_meta\":{{}}}}",
            (0..SPAN_LIMIT)
                .map(|i| format!("\"m{i}\":{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let cases: [(&str, Option<&[&str]>); 8] = [
            // (text, the members' texts as located: None where spans are not kept)
            (
                r#"{"name":"t","arguments":{"a":[1,"}"]},"_meta":{"k":1}}"#,
                Some(&[r#""name":"t""#, r#""arguments":{"a":[1,"}"]}"#, r#""_meta":{"k":1}"#]),
            ),
            (
                " { \"_meta\" :\t{ } ,\r\n \"s\" : \"a\\\",\" , \"n\" : null } ",
                Some(&[r#""_meta" :	{ }"#, r#""s" : "a\",""#, r#""n" : null"#]),
            ),
            (r#"{"_meta":1}"#, Some(&[r#""_meta":1"#])),
            (r#"{"name":"t"}"#, None),
            (r#"{"n\u0061me":"t","_meta":{}}"#, None),
            (&many, None),
            (r#"[{"_meta":1}]"#, None),
            ("{}", None),
        ];
        for (text, expected) in cases {
            let value = lazy(text);
            let _ = value.meta();
            let located = value
                .spans()
                .map(|(text, members)| members.iter().map(|m| &text[m.member()]).collect::<Vec<_>>());
            assert_eq!(located.as_deref(), expected, "{text}");
            let tree: Value = serde_json::from_str(text).unwrap();
            for name in ["name", "s", "_meta", "absent"] {
                assert_eq!(
                    ParamsView::str_member(&value, name),
                    tree.str_member(name),
                    "{text} {name}"
                );
                if let Some(has) = value.has_member(name) {
                    assert_eq!(has, tree.get(name).is_some(), "{text} {name}");
                }
            }
            assert!(value.read.get().is_none(), "{text}: the tree was built");
        }
    }

    #[test]
    fn edited_members_are_the_tree_edited() {
        let replaced = json!({"new": [1]});
        let cases = [
            r#"{"a":1,"_meta":{"k":1},"b":"x"}"#,
            r#" { "b" : 2 , "_meta" : 3 , "a" : { "b" : 1 } } "#,
            r#"{"_meta":{},"b":1,"b":2}"#,
            r#"{"_meta":{}}"#,
        ];
        for text in cases {
            let value = lazy(text);
            let _ = value.meta();
            // Drop `b`, replace `a`, keep the rest: as the tree, where the last of a name wins.
            let edited = value.edit_members(|name, last| match (name, last) {
                ("b", _) => MemberEdit::Drop,
                ("a", true) => MemberEdit::Replace(&replaced),
                _ => MemberEdit::Keep,
            });
            let mut tree: Value = serde_json::from_str(text).unwrap();
            let object = tree.as_object_mut().unwrap();
            let changed = object.remove("b").is_some() | object.contains_key("a");
            if object.contains_key("a") {
                object.insert("a".into(), replaced.clone());
            }
            match edited {
                Some(Edited::Written(written)) => {
                    assert!(changed, "{text}");
                    assert_eq!(*written, tree, "{text}");
                    assert!(written.text().is_some(), "{text}");
                }
                Some(Edited::Unchanged) => assert!(!changed, "{text}"),
                None => panic!("{text}: spans not found"),
            }
        }
        assert!(lazy(r#"{"b":1}"#).edit_members(|_, _| MemberEdit::Drop).is_none());
    }

    #[test]
    fn a_member_written_anew_keeps_the_meta_pass() {
        let cases = [
            r#"{"name":"a_echo","arguments":{"name":"x"},"_meta":{"k":1}}"#,
            r#" { "_meta" : { } , "name" : "a_long_prefixed_name" , "z" : [1, "}"] } "#,
            r#"{"_meta":{"name":1},"name":"n"}"#,
            r#"{"name":"\u0061_x","_meta":null}"#,
        ];
        for text in cases {
            let value = lazy(text);
            let _ = value.meta();
            let Ok(written) = value.with_member("name", "own \"one\"") else {
                panic!("{text}: not written");
            };
            let mut tree: Value = serde_json::from_str(text).unwrap();
            tree["name"] = json!("own \"one\"");
            // The pass came along, with the spans a pass over the new text finds.
            let again = lazy(written.text().unwrap());
            let _ = again.meta();
            assert_eq!(written.spans(), again.spans(), "{text}");
            assert_eq!(written.meta(), tree.get("_meta"), "{text}");
            for name in ["name", "z", "_meta", "arguments"] {
                assert_eq!(
                    ParamsView::str_member(&written, name),
                    tree.str_member(name),
                    "{text} {name}"
                );
            }
            assert!(written.read.get().is_none(), "{text}: the tree was built");
            assert_eq!(*written, tree, "{text}");
        }
        let refused = [
            r#"{"name":"t"}"#,
            r#"{"_meta":{},"name":"a","name":"b"}"#,
            r#"{"_meta":{}}"#,
            r#"["name"]"#,
        ];
        for text in refused {
            let value = lazy(text);
            let _ = value.meta();
            let back = value.with_member("name", "own").err();
            assert_eq!(back.as_ref().and_then(LazyJson::text), Some(text), "{text}");
        }
        let value = lazy(r#"{"_meta":{}}"#);
        let _ = value.meta();
        assert!(value.with_member("_meta", &json!({})).is_err(), "_meta is the pass's");
    }

    #[test]
    fn equality_is_of_values_not_spelling() {
        let cases = [
            (r#"{"a":1,"b":2}"#, r#"{"b":2,"a":1}"#, true),
            (r#"{"a":1}"#, r#"{ "a": 1 }"#, true),
            (r#"{"a":1}"#, r#"{"a":2}"#, false),
        ];
        for (a, b, equal) in cases {
            assert_eq!(lazy(a) == lazy(b), equal, "{a} {b}");
            assert_eq!(lazy(a) == serde_json::from_str::<Value>(b).unwrap(), equal);
        }
        assert_eq!(lazy(r#"{"a":1}"#).clone(), lazy(r#"{"a":1}"#));
    }

    #[test]
    fn text_members_and_objects_written_from_them_read_as_the_tree() {
        let many = format!(
            "{{{}}}",
            (0..12).map(|n| format!(r#""m{n}":{n}"#)).collect::<Vec<_>>().join(",")
        );
        let cases = [
            r#"{"a":1,"b":{"c":[1,"}"]},"_meta":{"k":"v"}}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"\u0061":1,"b\"":2}"#,
            r#" {"s":"x\ty"} "#.trim(),
            many.as_str(),
            "{}",
        ];
        for text in cases {
            let value = lazy(text);
            // Reading `_meta` first makes the pass that keeps the spans.
            for read_meta_first in [false, true] {
                if read_meta_first {
                    let _ = value.meta();
                }
                let members = value.text_members().unwrap();
                let tree: Value = serde_json::from_str(text).unwrap();
                for (name, member) in tree.as_object().unwrap() {
                    let last = members.iter().rev().find(|(n, _)| n == name).unwrap().1;
                    assert_eq!(&serde_json::from_str::<Value>(last).unwrap(), member, "{text}: {name}");
                }
                let written = LazyJson::object_with(
                    members
                        .iter()
                        .map(|(name, text)| (name.as_ref(), MemberValue::Text(text))),
                );
                assert_eq!(*written, tree, "{text}");
            }
        }
        assert!(lazy("[1]").text_members().is_none());
        let with_tree = LazyJson::object_with([("a\"", MemberValue::Tree(&json!({"b": [1]})))]);
        assert_eq!(with_tree.text(), Some(r#"{"a\"":{"b":[1]}}"#));
    }
}
