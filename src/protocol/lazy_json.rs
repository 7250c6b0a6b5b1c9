//! `params` and `result` kept as the peer's JSON text until a stage looks inside.
//!
//! A proxied call needs only the envelope of its messages (id, method and a few
//! `_meta` keys); building a `serde_json::Value` tree of every `params` and
//! `result`, dropping it and writing it out again was a fifth of the
//! instructions of a legacy call (bench/NOTES.md, issue 17). A [`LazyJson`]
//! read from the wire keeps the text and writes it out byte for byte (member
//! order, number spelling and unknown fields untouched); the tree is built the
//! first time a stage dereferences it, and the text is given up only when a
//! stage changes the tree (`DerefMut`). `_meta` alone can be read without the
//! tree ([`LazyJson::meta`]).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON value kept as text until needed as a tree. Either holds the text
/// (with the tree and `_meta` built on first look) or a tree of its own.
#[derive(Default)]
pub struct LazyJson {
    /// The text as it came (line breaks turned into spaces); `None` once the tree is owned.
    text: Option<Box<RawValue>>,
    /// The tree, when there is no text: given, or changed by a stage (boxed, as `read`).
    owned: Option<Box<Value>>,
    /// The tree of `text`, built on first look (boxed: a message stays small to move).
    read: OnceLock<Box<Value>>,
    /// `_meta` of `text` (when it is an object), read without building the tree.
    meta: OnceLock<Option<Box<Value>>>,
}

impl LazyJson {
    /// Keeps a JSON text that serde_json has checked (`Message::parse` does).
    /// Whitespace line breaks become spaces, so a message still writes as one
    /// line (stdio framing): inside a JSON string they can only appear escaped.
    pub fn from_checked_text(text: &RawValue) -> LazyJson {
        let bytes = text.get().as_bytes();
        LazyJson::from_text(text, bytes.iter().any(|b| matches!(b, b'\n' | b'\r')))
    }

    /// [`LazyJson::from_checked_text`] when the caller knows whether the text holds line breaks.
    pub(crate) fn from_text(text: &RawValue, line_breaks: bool) -> LazyJson {
        let text = if line_breaks {
            let flat: String = text.get().replace(['\n', '\r'], " ");
            // Whitespace for whitespace: still the same JSON.
            match RawValue::from_string(flat) {
                Ok(raw) => raw,
                Err(_) => return LazyJson::from(serde_json::from_str::<Value>(text.get()).unwrap_or_default()),
            }
        } else {
            text.to_owned()
        };
        LazyJson {
            text: Some(text),
            ..LazyJson::default()
        }
    }

    /// The text this value will be written as, when it is still the peer's.
    pub fn text(&self) -> Option<&str> {
        self.text.as_deref().map(RawValue::get)
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
        self.meta.get_or_init(|| meta_of(text).map(Box::new)).as_deref()
    }
}

/// Request params as a stage reads them: `_meta` alone (cheap on a [`LazyJson`])
/// or the whole tree. Lets the pure classifiers take either form.
pub trait ParamsView {
    /// The `_meta` member, when `self` is an object that has one.
    fn meta(&self) -> Option<&Value>;
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

    fn tree(&self) -> &Value {
        self
    }

    /// Read from the text alone while the tree is not built (one pass, nothing else built).
    fn str_member(&self, key: &str) -> Option<String> {
        match (&self.owned, self.read.get(), self.text.as_deref()) {
            (None, None, Some(text)) => {
                let mut deserializer = serde_json::Deserializer::from_str(text.get());
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
pub enum MemberValue<'a> {
    /// The text as it was.
    Text(&'a RawValue),
    /// A tree, written as JSON.
    Tree(&'a Value),
}

impl LazyJson {
    /// The members of an object still held as text, in order, their values unbuilt
    /// (`None` for a tree, or a text that is not an object: the caller uses the tree).
    pub fn text_members(&self) -> Option<Vec<(std::borrow::Cow<'_, str>, &RawValue)>> {
        let text = self.text.as_deref()?;
        if !text.get().starts_with('{') {
            return None;
        }
        let members: TextMembers<'_> = serde_json::from_str(text.get()).ok()?;
        Some(members.0)
    }

    /// An object written from members: text values copied as they are, trees
    /// written as JSON. What a stage that adds or drops a few members of an
    /// object uses instead of building (and writing out) the whole tree.
    pub fn object_with<'a>(members: impl IntoIterator<Item = (&'a str, MemberValue<'a>)>) -> LazyJson {
        let members: Vec<(&str, MemberValue<'_>)> = members.into_iter().collect();
        let has_meta = members.iter().any(|(key, _)| *key == "_meta");
        // Written, not parsed again: every piece is JSON already.
        let Ok(text) = serde_json::value::to_raw_value(&WrittenObject(&members)) else {
            // Cannot happen (strings and trees always serialise); the tree of nothing is null.
            return LazyJson::from(Value::Null);
        };
        let lazy = LazyJson {
            text: Some(text),
            ..LazyJson::default()
        };
        if !has_meta {
            // Known without a look: later stages asking for `_meta` skip a pass.
            let _ = lazy.meta.set(None);
        }
        lazy
    }
}

/// Members written as one JSON object (text values as they are).
struct WrittenObject<'a, 'b>(&'b [(&'a str, MemberValue<'a>)]);

impl serde::Serialize for WrittenObject<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            match value {
                MemberValue::Text(text) => map.serialize_entry(key, text)?,
                MemberValue::Tree(tree) => map.serialize_entry(key, tree)?,
            }
        }
        map.end()
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
            self.meta = OnceLock::new();
        }
        self.owned.get_or_insert_with(Box::default)
    }
}

impl Clone for LazyJson {
    fn clone(&self) -> LazyJson {
        LazyJson {
            text: self.text.clone(),
            owned: self.owned.clone(),
            ..LazyJson::default()
        }
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
        match &self.text {
            Some(text) => text.serialize(serializer),
            None => (**self).serialize(serializer),
        }
    }
}

impl<'de> serde::Deserialize<'de> for LazyJson {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<LazyJson, D::Error> {
        Value::deserialize(deserializer).map(LazyJson::from)
    }
}

/// The tree of a checked text (`Null` for none; a checked text always parses).
fn tree_of(text: Option<&RawValue>) -> Value {
    text.and_then(|text| serde_json::from_str(text.get()).ok())
        .unwrap_or_default()
}

/// `_meta` of a checked text that is an object; the other members are skipped unbuilt.
fn meta_of(text: &RawValue) -> Option<Value> {
    let mut deserializer = serde_json::Deserializer::from_str(text.get());
    MetaOnly.deserialize(&mut deserializer).ok().flatten()
}

/// Reads one object's `_meta` member (the last, as a tree would keep).
struct MetaOnly;

impl<'de> DeserializeSeed<'de> for MetaOnly {
    type Value = Option<Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Option<Value>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetaOnly {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
        let mut meta = None;
        while let Some(key) = map.next_key::<MemberName>()? {
            if key.0 {
                meta = Some(map.next_value::<Value>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(meta)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Option<Value>, A::Error> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Option<Value>, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Option<Value>, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Option<Value>, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Option<Value>, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Option<Value>, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Option<Value>, E> {
        Ok(None)
    }
}

/// Whether an object's member name is `_meta`.
struct MemberName(bool);

impl<'de> serde::Deserialize<'de> for MemberName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<MemberName, D::Error> {
        struct IsMeta;
        impl Visitor<'_> for IsMeta {
            type Value = MemberName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E>(self, name: &str) -> Result<MemberName, E> {
                Ok(MemberName(name == "_meta"))
            }
        }
        deserializer.deserialize_str(IsMeta)
    }
}

/// What a quick look at a message's bytes found (see [`look`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Look {
    /// Nothing a tree parse could refuse once the text is well formed; `line_breaks`
    /// when whitespace between tokens holds `\n` or `\r`.
    Plain {
        /// Whether a line break lies between tokens.
        line_breaks: bool,
    },
    /// Something only a tree parse can judge: leave the text to it.
    Unusual,
}

/// Nesting deeper than this is left to the tree parse (serde_json stops at 128).
const PLAIN_DEPTH: u32 = 100;
/// A run of digits longer than this might not fit an `f64`: left to the tree parse.
const PLAIN_DIGITS: u32 = 300;

/// One pass over a JSON text for what a lean parse (serde_json skipping values
/// unbuilt) accepts and a tree parse refuses: invalid UTF-8, nesting past
/// serde_json's limit, numbers out of `f64` range (an exponent, or hundreds of
/// digits) and surrogate escapes (`\uD800`–`\uDFFF`, which must pair). Each makes
/// the text [`Look::Unusual`], so that it is read as a tree, which accepts or
/// refuses it exactly as before. Syntax itself is left to the lean parse.
pub(crate) fn look(bytes: &[u8]) -> Look {
    if std::str::from_utf8(bytes).is_err() {
        return Look::Unusual;
    }
    let mut depth = 0u32;
    let mut digits = 0u32;
    let mut line_breaks = false;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        at += 1;
        match byte {
            b'"' => {
                digits = 0;
                // Inside a string: only a quote or an escape matters.
                while at < bytes.len() {
                    match bytes[at] {
                        b'"' => break,
                        b'\\' => {
                            if bytes.get(at + 1) == Some(&b'u') && matches!(bytes.get(at + 2), Some(b'd' | b'D')) {
                                return Look::Unusual;
                            }
                            at += 2;
                            continue;
                        }
                        _ => at += 1,
                    }
                }
                at += 1;
            }
            b'0'..=b'9' => {
                digits += 1;
                if digits > PLAIN_DIGITS {
                    return Look::Unusual;
                }
            }
            b'e' | b'E' if digits > 0 || bytes.get(at.wrapping_sub(2)) == Some(&b'.') => return Look::Unusual,
            b'{' | b'[' => {
                digits = 0;
                depth += 1;
                if depth > PLAIN_DEPTH {
                    return Look::Unusual;
                }
            }
            b'}' | b']' => {
                digits = 0;
                depth = depth.saturating_sub(1);
            }
            b'\n' | b'\r' => {
                digits = 0;
                line_breaks = true;
            }
            b'.' => {}
            _ => digits = 0,
        }
    }
    Look::Plain { line_breaks }
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
    fn a_plain_look_means_a_tree_parse_accepts_what_is_well_formed() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let shallow = format!("{}{}", "[".repeat(50), "]".repeat(50));
        let long = format!("[{}]", "9".repeat(400));
        let cases: [(&str, Look); 14] = [
            (
                r#"{"a":[1,2.5,-3,"x",true,false,null,{}]}"#,
                Look::Plain { line_breaks: false },
            ),
            ("{\"a\":\n1,\r\n\"s\":\"x\\ny\"}", Look::Plain { line_breaks: true }),
            (
                r#"{"e":"1e400","t":true,"f":false}"#,
                Look::Plain { line_breaks: false },
            ),
            (r#"{"a":1e400}"#, Look::Unusual),
            (r#"{"a":1.5E3}"#, Look::Unusual),
            (r#"{"a":2.e3}"#, Look::Unusual),
            (r#"{"a":"\ud800"}"#, Look::Unusual),
            (r#"{"a":"\uDC00x"}"#, Look::Unusual),
            (r#"{"a":"\u00e9\"\\"}"#, Look::Plain { line_breaks: false }),
            (&deep, Look::Unusual),
            (&shallow, Look::Plain { line_breaks: false }),
            (&long, Look::Unusual),
            ("[\"\\\"]\"]", Look::Plain { line_breaks: false }),
            ("{\"a\":\"\u{e9}\"}", Look::Plain { line_breaks: false }),
        ];
        for (text, expected) in cases {
            assert_eq!(look(text.as_bytes()), expected, "{text}");
            if expected != Look::Unusual {
                assert!(serde_json::from_str::<Value>(text).is_ok(), "{text}");
            }
        }
        assert_eq!(look(b"{\"a\":\"\xff\"}"), Look::Unusual);
        for refused in [r#"{"a":1e400}"#, r#"{"a":"\ud800"}"#, &deep, &long] {
            assert!(serde_json::from_str::<Value>(refused).is_err(), "{refused}");
        }
    }
}
