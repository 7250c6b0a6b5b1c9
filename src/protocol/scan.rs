//! A linear, allocation-free scan of a JSON text's structure: the top-level
//! kind, how many items a top-level array holds, the deepest nesting and how
//! many values there are in all.
//!
//! serde_json builds a `Value` for every element before anyone can look at it:
//! a 4 MiB `[0,0,…]` becomes two million values (hundreds of MB). The scan
//! runs first and stops at the first bound crossed, so a caller can refuse a
//! batch, or a message with too many elements, before anything is allocated.
//! Nesting is tracked in a fixed 128-bit stack (serde_json's own recursion
//! limit is 128), so the scan never allocates.

/// The kind of a JSON value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `{…}`
    Object,
    /// `[…]`
    Array,
    /// `"…"`
    String,
    /// A number.
    Number,
    /// `true` or `false`.
    Bool,
    /// `null`
    Null,
}

/// What a scan found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The top-level value's kind.
    pub kind: Kind,
    /// Items of the top-level array (0 for anything else).
    pub items: usize,
    /// The deepest nesting: 0 for a scalar, 1 for `[]` or `[1]`, 2 for `[[1]]`.
    pub(crate) depth: usize,
    /// Every value, containers and scalars alike (object keys are not values).
    pub values: usize,
}

/// Bounds a scan stops at; `None` is unbounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bounds {
    /// Most values in all.
    pub values: Option<usize>,
    /// Most items of a top-level array.
    pub items: Option<usize>,
}

/// Why a scan stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// Not JSON (the parser that follows names the mistake).
    #[error("not JSON (at byte {offset})")]
    Malformed {
        /// Where the scan stopped.
        offset: usize,
    },
    /// Nested deeper than `MAX_DEPTH`.
    #[error("nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// More values than the bound.
    #[error("more than {limit} JSON values")]
    TooManyValues {
        /// The bound.
        limit: usize,
    },
    /// A top-level array with more items than the bound.
    #[error("more than {limit} batch items")]
    TooManyItems {
        /// The bound.
        limit: usize,
    },
}

/// The deepest nesting a scan follows (serde_json's default recursion limit).
pub(crate) const MAX_DEPTH: usize = 128;

/// Scans `bytes` (one JSON text, surrounding whitespace allowed) within `bounds`.
pub fn scan(bytes: &[u8], bounds: Bounds) -> Result<Shape, ScanError> {
    Scanner {
        bytes,
        at: 0,
        bounds,
        stack: 0,
        depth: 0,
        shape: Shape {
            kind: Kind::Null,
            items: 0,
            depth: 0,
            values: 0,
        },
    }
    .run()
}

/// Whether `bytes` is too short to cross `bounds`, whatever it holds: then a
/// scan can only find it malformed or too deep, which a parser finds as well.
///
/// Every value the scan counts starts at a byte of its own (a bracket, a quote,
/// a digit, a letter, or the byte it then finds malformed), so a text of `n`
/// bytes never has more than `n` counted, well formed or not. Well-formed text
/// holds at most `(n + 1) / 2`, but that is no bound for the rest: `[[[[` counts
/// four values in four bytes, `[}` two in two (the fuzzer's `jsonrpc` target
/// found the second). Top-level items are values, and only a text opening an
/// array has any.
pub(crate) fn within_by_length(bytes: &[u8], bounds: Bounds) -> bool {
    let most = bytes.len();
    let fits = |bound: Option<usize>| bound.is_none_or(|limit| most <= limit);
    fits(bounds.values) && (fits(bounds.items) || !opens_array(bytes))
}

/// Whether the first byte past leading whitespace opens an array (a batch):
/// the question a caller that refuses batches asks before anything else.
pub fn opens_array(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')) == Some(&b'[')
}

/// Whether `bytes` is a batch: a top-level array, or text opening one that a
/// bound stopped (still a batch, and a large one). Malformed or too deep text
/// is not: its parser names the mistake (-32700) instead.
pub fn is_batch(bytes: &[u8], bounds: Bounds) -> bool {
    opens_array(bytes)
        && !matches!(
            scan(bytes, bounds),
            Err(ScanError::Malformed { .. } | ScanError::TooDeep)
        )
}

/// Where the scanner is in the grammar.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A value (the start, after `:` or after `,` in an array).
    Value,
    /// A value or `]` (just after `[`).
    ValueOrClose,
    /// A key (after `,` in an object).
    Key,
    /// A key or `}` (just after `{`).
    KeyOrClose,
    /// `:` after a key.
    Colon,
    /// `,` or the container's close (or the end at top level).
    CommaOrClose,
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
    bounds: Bounds,
    /// Bit `d` set: the container at depth `d + 1` is an object.
    stack: u128,
    depth: usize,
    shape: Shape,
}

impl Scanner<'_> {
    fn run(mut self) -> Result<Shape, ScanError> {
        let mut expect = Expect::Value;
        loop {
            self.skip_whitespace();
            let Some(&byte) = self.bytes.get(self.at) else {
                return match (expect, self.depth, self.shape.values) {
                    (Expect::CommaOrClose, 0, 1..) => Ok(self.shape),
                    _ => Err(self.malformed()),
                };
            };
            expect = match (expect, byte) {
                (Expect::CommaOrClose, _) if self.depth == 0 => return Err(self.malformed()),
                (Expect::CommaOrClose, b',') => {
                    self.at += 1;
                    if self.in_object() { Expect::Key } else { Expect::Value }
                }
                (Expect::CommaOrClose | Expect::ValueOrClose, b']') if !self.in_object() => self.close(),
                (Expect::CommaOrClose | Expect::KeyOrClose, b'}') if self.in_object() => self.close(),
                (Expect::Key | Expect::KeyOrClose, b'"') => {
                    self.string()?;
                    Expect::Colon
                }
                (Expect::Colon, b':') => {
                    self.at += 1;
                    Expect::Value
                }
                (Expect::Value | Expect::ValueOrClose, _) => self.value(byte)?,
                _ => return Err(self.malformed()),
            };
        }
    }

    /// One value starting with `byte`: a container is opened, a scalar consumed.
    fn value(&mut self, byte: u8) -> Result<Expect, ScanError> {
        self.count(byte)?;
        match byte {
            b'{' | b'[' => {
                if self.depth == MAX_DEPTH {
                    return Err(ScanError::TooDeep);
                }
                let object = byte == b'{';
                self.stack = (self.stack & !(1 << self.depth)) | (u128::from(object) << self.depth);
                self.depth += 1;
                self.shape.depth = self.shape.depth.max(self.depth);
                self.at += 1;
                return Ok(if object {
                    Expect::KeyOrClose
                } else {
                    Expect::ValueOrClose
                });
            }
            b'"' => self.string()?,
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return Err(self.malformed()),
        }
        Ok(Expect::CommaOrClose)
    }

    /// Counts the value starting with `byte` against the bounds.
    fn count(&mut self, byte: u8) -> Result<(), ScanError> {
        self.shape.values += 1;
        if let Some(limit) = self.bounds.values
            && self.shape.values > limit
        {
            return Err(ScanError::TooManyValues { limit });
        }
        if self.depth == 0 {
            self.shape.kind = match byte {
                b'{' => Kind::Object,
                b'[' => Kind::Array,
                b'"' => Kind::String,
                b't' | b'f' => Kind::Bool,
                b'n' => Kind::Null,
                _ => Kind::Number,
            };
        } else if self.depth == 1 && self.shape.kind == Kind::Array {
            self.shape.items += 1;
            if let Some(limit) = self.bounds.items
                && self.shape.items > limit
            {
                return Err(ScanError::TooManyItems { limit });
            }
        }
        Ok(())
    }

    fn close(&mut self) -> Expect {
        self.depth -= 1;
        self.at += 1;
        Expect::CommaOrClose
    }

    fn in_object(&self) -> bool {
        self.depth > 0 && self.stack & (1 << (self.depth - 1)) != 0
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// A string from its opening quote to just past its closing one.
    fn string(&mut self) -> Result<(), ScanError> {
        self.at += 1;
        loop {
            match self.bytes.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(());
                }
                Some(b'\\') => match self.bytes.get(self.at + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.at += 2,
                    Some(b'u') => {
                        let hex = self
                            .bytes
                            .get(self.at + 2..self.at + 6)
                            .ok_or_else(|| self.malformed())?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return Err(self.malformed());
                        }
                        self.at += 6;
                    }
                    _ => return Err(self.malformed()),
                },
                Some(0x00..=0x1f) | None => return Err(self.malformed()),
                Some(_) => self.at += 1,
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), ScanError> {
        if self.bytes.get(self.at..self.at + word.len()) != Some(word) {
            return Err(self.malformed());
        }
        self.at += word.len();
        Ok(())
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Result<(), ScanError> {
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match self.bytes.get(self.at) {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.malformed()),
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            self.required_digits()?;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            self.required_digits()?;
        }
        Ok(())
    }

    fn required_digits(&mut self) -> Result<(), ScanError> {
        match self.bytes.get(self.at) {
            Some(b'0'..=b'9') => {
                self.digits();
                Ok(())
            }
            _ => Err(self.malformed()),
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn malformed(&self) -> ScanError {
        ScanError::Malformed { offset: self.at }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;

    fn shape(text: &str) -> Result<Shape, ScanError> {
        scan(text.as_bytes(), Bounds::default())
    }

    fn ok(kind: Kind, items: usize, depth: usize, values: usize) -> Result<Shape, ScanError> {
        Ok(Shape {
            kind,
            items,
            depth,
            values,
        })
    }

    #[test]
    fn spec_examples() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
                ok(Kind::Object, 0, 3, 8),
            ),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
                ok(Kind::Array, 2, 2, 8),
            ),
            (r#" {"jsonrpc":"2.0","id":"a","result":{}} "#, ok(Kind::Object, 0, 2, 4)),
            ("[]", ok(Kind::Array, 0, 1, 1)),
            ("[[],[[]]]", ok(Kind::Array, 2, 3, 4)),
            ("{}", ok(Kind::Object, 0, 1, 1)),
            (r#""a\"b\u00e9""#, ok(Kind::String, 0, 0, 1)),
            ("-0.5e+10", ok(Kind::Number, 0, 0, 1)),
            ("[true,false,null]", ok(Kind::Array, 3, 1, 4)),
        ];
        for (text, expected) in cases {
            assert_eq!(shape(text), expected, "{text}");
        }
    }

    #[test]
    fn arrays_are_seen_at_the_first_byte() {
        assert!(opens_array(b" \r\n\t[0,"));
        assert!(!opens_array(b"{\"a\":[1]}"));
        assert!(!opens_array(b""));
        let bounded = Bounds {
            values: Some(3),
            items: None,
        };
        assert!(
            is_batch(b"[0,0,0,0,0,0", bounded),
            "stopped by a bound before the text ends"
        );
        assert!(is_batch(b"[]", bounded));
        assert!(!is_batch(b"[[[[", Bounds::default()));
        assert!(!is_batch(b"[0,}", Bounds::default()));
    }

    #[test]
    fn malformed_texts() {
        for text in [
            "",
            " ",
            "[",
            "]",
            "{",
            "[1,]",
            "[,1]",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{1:2}",
            "[1}",
            "{\"a\":1]",
            "1 2",
            "[] []",
            "01",
            "1.",
            "-",
            "1e",
            "tru",
            "nul",
            "\"abc",
            "\"\\x\"",
            "\"\\u12\"",
            "\"a\nb\"",
            "{,}",
        ] {
            assert!(
                matches!(shape(text), Err(ScanError::Malformed { .. })),
                "{text:?}: {:?}",
                shape(text)
            );
        }
    }

    #[test]
    fn bounds_stop_the_scan() {
        let batch = format!("[{}0]", "0,".repeat(99));
        let values = Bounds {
            values: Some(50),
            items: None,
        };
        assert_eq!(
            scan(batch.as_bytes(), values),
            Err(ScanError::TooManyValues { limit: 50 })
        );
        let items = Bounds {
            values: None,
            items: Some(10),
        };
        assert_eq!(
            scan(batch.as_bytes(), items),
            Err(ScanError::TooManyItems { limit: 10 })
        );
        // Items count only at the top level.
        assert!(scan(b"[[1,2,3,4,5,6,7,8,9,10,11,12]]", items).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(shape(&deep), Err(ScanError::TooDeep));
        let deepest = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(shape(&deepest).map(|s| s.depth), Ok(MAX_DEPTH));
    }

    /// A text short enough to be within its bounds by length never crosses them,
    /// malformed or not, and unclosed brackets reach the count it assumes.
    #[test]
    fn short_texts_are_within_their_bounds() {
        let bound = |values, items| Bounds {
            values: Some(values),
            items: Some(items),
        };
        let cases = [
            // (text, bounds, within by length)
            ("0", bound(1, 1), true),
            ("[0,0,0]", bound(7, 7), true),
            ("[0,0,0]", bound(6, 100), false),
            ("[0,0,0]", bound(100, 6), false),
            ("{\"a\":[0,0]}", bound(11, 1), true),
            ("{\"a\":[0,0]}", bound(10, 1), false),
            (" [0] ", bound(5, 5), true),
            (" [0] ", bound(4, 5), false),
            // Malformed text counts up to a value per byte.
            ("[[[[", bound(4, 4), true),
            ("[}", bound(2, 64), true),
        ];
        for (text, bounds, within) in cases {
            assert_eq!(within_by_length(text.as_bytes(), bounds), within, "{text}");
            if within {
                assert!(
                    !matches!(
                        scan(text.as_bytes(), bounds),
                        Err(ScanError::TooManyValues { .. } | ScanError::TooManyItems { .. })
                    ),
                    "{text}"
                );
            }
        }
        assert!(within_by_length(b"[0,0]", Bounds::default()));
        // The fuzzer's find: `[}` counts its `}` as a second value, so one byte
        // short of its length it crosses a bound of one.
        assert_eq!(scan(b"[}", bound(1, 64)), Err(ScanError::TooManyValues { limit: 1 }));
        assert!(!within_by_length(b"[}", bound(1, 64)));
        // Unclosed containers: a value per byte, exactly.
        for k in 1..50 {
            let open = "[".repeat(k);
            assert_eq!(
                scan(open.as_bytes(), bound(k - 1, k)),
                Err(ScanError::TooManyValues { limit: k - 1 }),
                "{open}"
            );
            assert!(!within_by_length(open.as_bytes(), bound(k - 1, k)));
            assert!(within_by_length(open.as_bytes(), bound(k, k)));
        }
    }

    /// The shape of a parsed value, computed the obvious way.
    fn expected(value: &Value) -> Shape {
        fn walk(value: &Value, depth: usize, shape: &mut Shape) {
            shape.values += 1;
            let children: Vec<&Value> = match value {
                Value::Array(items) => items.iter().collect(),
                Value::Object(map) => map.values().collect(),
                _ => return,
            };
            shape.depth = shape.depth.max(depth + 1);
            for child in children {
                walk(child, depth + 1, shape);
            }
        }
        let kind = match value {
            Value::Object(_) => Kind::Object,
            Value::Array(_) => Kind::Array,
            Value::String(_) => Kind::String,
            Value::Number(_) => Kind::Number,
            Value::Bool(_) => Kind::Bool,
            Value::Null => Kind::Null,
        };
        let items = value.as_array().map_or(0, Vec::len);
        let mut shape = Shape {
            kind,
            items,
            depth: 0,
            values: 0,
        };
        walk(value, 0, &mut shape);
        shape
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("\\PC{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn agrees_with_serde_json(value in json_value(), pretty in any::<bool>()) {
            let text = if pretty { serde_json::to_string_pretty(&value) } else { serde_json::to_string(&value) };
            let text = text.unwrap();
            // Distinct keys only: a repeated key collapses in a `Value`, not in the text.
            prop_assert_eq!(shape(&text), Ok(expected(&value)));
        }

        #[test]
        fn within_by_length_is_never_wrong(value in json_value(), pretty in any::<bool>(), slack in 0usize..3) {
            let text = if pretty { serde_json::to_string_pretty(&value) } else { serde_json::to_string(&value) };
            let text = text.unwrap();
            let found = expected(&value);
            let bounds = Bounds { values: Some(found.values.saturating_sub(slack).max(1)), items: Some(found.items.saturating_sub(slack)) };
            if within_by_length(text.as_bytes(), bounds) {
                prop_assert!(scan(text.as_bytes(), bounds).is_ok(), "{}", text);
            }
        }

        #[test]
        fn within_by_length_holds_for_any_text(text in "[\\[\\]{}\":,0-9a-z. \\\\-]{0,24}", values in 1usize..24, items in 0usize..24) {
            let bounds = Bounds { values: Some(values), items: Some(items) };
            if within_by_length(text.as_bytes(), bounds) {
                let crossed = matches!(
                    scan(text.as_bytes(), bounds),
                    Err(ScanError::TooManyValues { .. } | ScanError::TooManyItems { .. })
                );
                prop_assert!(!crossed, "{}", text);
            }
        }

        #[test]
        fn never_accepts_what_serde_json_refuses(text in "[\\[\\]{}\":,0-9a-z. \\\\-]{0,24}") {
            if shape(&text).is_ok() {
                prop_assert!(serde_json::from_str::<Value>(&text).is_ok(), "{}", text);
            }
        }
    }
}
