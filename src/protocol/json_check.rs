//! The one pass over a message's text that both checks it is JSON and finds
//! where the members of its top-level object lie.
//!
//! A proxied call reads two messages (the client's request, the upstream's
//! answer), and [`check_object`] checks each and finds its envelope in one walk
//! over the bytes. It is deliberately narrower than JSON: it accepts only
//! text that serde_json's tree parse accepts as well, and answers `None` for
//! anything it does not judge itself (malformed text, an exponent, a number of
//! hundreds of digits, a surrogate escape, nesting past [`MAX_DEPTH`], an
//! escaped top-level name). The caller then leaves the text to the tree parse,
//! which accepts or refuses it and names the mistake exactly as before.

/// Nesting deeper than this is left to the tree parse (serde_json stops at 128).
pub(crate) const MAX_DEPTH: usize = 100;
/// A number longer than this might not fit an `f64`: left to the tree parse.
const MAX_NUMBER_LEN: usize = 300;

/// What [`check_object`] found besides the members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Checked {
    /// Whether whitespace between tokens holds `\n` or `\r` (inside a string
    /// they can only appear escaped).
    pub(crate) line_breaks: bool,
}

/// Checks that `text` is one JSON object, and calls `member(name, value)` for
/// each of its members in order, `value` being the member's text as written.
/// Members are reported while the walk goes on, so the caller must drop what it
/// was told when the answer is `None` (the text is not one the walk judges).
pub(crate) fn check_object<'t>(text: &'t str, mut member: impl FnMut(&'t str, &'t str)) -> Option<Checked> {
    let mut walk = Walk {
        bytes: text.as_bytes(),
        at: 0,
        line_breaks: false,
    };
    walk.blank();
    if walk.peek() != Some(b'{') {
        return None;
    }
    // Bit `d` of `arrays` is set while the container at depth `d` is an array.
    let mut arrays: u128 = 0;
    let mut depth = 0usize;
    // The top-level member being read: its name and where its value starts.
    let mut name: &'t str = "";
    let mut value_start = 0usize;
    'value: loop {
        // A value starts at `at` (whitespace skipped).
        match walk.peek()? {
            open @ (b'{' | b'[') => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return None;
                }
                let is_array = open == b'[';
                arrays = (arrays & !(1 << depth)) | (u128::from(is_array) << depth);
                walk.at += 1;
                walk.blank();
                let close = if is_array { b']' } else { b'}' };
                if walk.peek() == Some(close) {
                    walk.at += 1;
                    depth -= 1;
                } else if is_array {
                    continue 'value;
                } else {
                    let read = walk.name(depth == 1)?;
                    if depth == 1 {
                        (name, value_start) = (text.get(read)?, walk.at);
                    }
                    continue 'value;
                }
            }
            b'"' => {
                walk.at += 1;
                walk.string()?;
            }
            b'-' | b'0'..=b'9' => walk.number()?,
            b't' => walk.literal(b"true")?,
            b'f' => walk.literal(b"false")?,
            b'n' => walk.literal(b"null")?,
            _ => return None,
        }
        // A value ended at `at`; close containers until another value is due.
        loop {
            if depth == 1 {
                member(name, text.get(value_start..walk.at)?);
            }
            walk.blank();
            if depth == 0 {
                return (walk.at == walk.bytes.len()).then_some(Checked {
                    line_breaks: walk.line_breaks,
                });
            }
            let in_array = arrays & (1 << depth) != 0;
            match walk.peek()? {
                b',' => {
                    walk.at += 1;
                    walk.blank();
                    if !in_array {
                        let read = walk.name(depth == 1)?;
                        if depth == 1 {
                            (name, value_start) = (text.get(read)?, walk.at);
                        }
                    }
                    continue 'value;
                }
                b']' if in_array => {}
                b'}' if !in_array => {}
                _ => return None,
            }
            walk.at += 1;
            depth -= 1;
        }
    }
}

/// The position of a walk over checked-as-it-goes bytes.
struct Walk<'t> {
    bytes: &'t [u8],
    at: usize,
    line_breaks: bool,
}

impl Walk<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Skips whitespace, noting line breaks.
    fn blank(&mut self) {
        while let Some(byte) = self.peek() {
            match byte {
                b' ' | b'\t' => {}
                b'\n' | b'\r' => self.line_breaks = true,
                _ => return,
            }
            self.at += 1;
        }
    }

    /// A member name, its colon and the whitespace after: the name's span
    /// (between its quotes). `plain` asks for a name without escapes, whose span
    /// spells it; an escaped one is then left to the tree parse.
    fn name(&mut self, plain: bool) -> Option<std::ops::Range<usize>> {
        if self.peek() != Some(b'"') {
            return None;
        }
        self.at += 1;
        let start = self.at;
        let escaped = self.string()?;
        if plain && escaped {
            return None;
        }
        let span = start..self.at - 1;
        self.blank();
        if self.peek() != Some(b':') {
            return None;
        }
        self.at += 1;
        self.blank();
        Some(span)
    }

    /// The rest of a string whose opening quote was read; `at` ends past the
    /// closing quote. `Some(true)` when it held an escape.
    fn string(&mut self) -> Option<bool> {
        let mut escaped = false;
        loop {
            self.at = special_byte(self.bytes, self.at);
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return Some(escaped);
                }
                b'\\' => {
                    escaped = true;
                    match self.bytes.get(self.at + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 2,
                        b'u' => {
                            let hex = self.bytes.get(self.at + 2..self.at + 6)?;
                            // Surrogates must pair: the tree parse judges them.
                            if !hex.iter().all(u8::is_ascii_hexdigit) || matches!(hex[0], b'd' | b'D') {
                                return None;
                            }
                            self.at += 6;
                        }
                        _ => return None,
                    }
                }
                // A control character, which JSON strings may not hold raw.
                _ => return None,
            }
        }
    }

    /// A number without an exponent: `-? (0 | [1-9][0-9]*) (. [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) || self.at - start > MAX_NUMBER_LEN {
            return None;
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.bytes.get(self.at..self.at + word.len())? != word {
            return None;
        }
        self.at += word.len();
        Some(())
    }
}

/// The first byte at or after `at` that a string cannot simply hold (a quote, a
/// backslash or a control character), or the end: eight bytes at a time, most
/// of a message's bytes being inside strings. In checked text no control
/// character lies in a string, so the walks over it (`lazy_json`) find the
/// string's closing quote or its next escape with it.
pub(crate) fn special_byte(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const QUOTES: u64 = ONES * b'"' as u64;
    const ESCAPES: u64 = ONES * b'\\' as u64;
    const SPACES: u64 = ONES * b' ' as u64;
    while let Some(Ok(chunk)) = bytes.get(at..at + 8).map(<[u8; 8]>::try_from) {
        let word = u64::from_le_bytes(chunk);
        // `(x - ONES) & !x & HIGHS` flags the bytes of `x` that are zero, and
        // `(w - n * ONES) & !w & HIGHS` those of `w` below `n` (n ≤ 128); the
        // lowest flag raised is the first such byte.
        let (quote, escape) = (word ^ QUOTES, word ^ ESCAPES);
        let found = ((quote.wrapping_sub(ONES) & !quote)
            | (escape.wrapping_sub(ONES) & !escape)
            | (word.wrapping_sub(SPACES) & !word))
            & HIGHS;
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while bytes.get(at).is_some_and(|&b| b != b'"' && b != b'\\' && b >= b' ') {
        at += 1;
    }
    at.min(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn members(text: &str) -> Option<(Vec<(&str, &str)>, Checked)> {
        let mut found = Vec::new();
        let checked = check_object(text, |name, value| found.push((name, value)))?;
        Some((found, checked))
    }

    #[test]
    fn accepted_text_is_what_serde_json_accepts_with_the_same_members() {
        let cases = [
            r#"{}"#,
            r#" { } "#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b","result":{"content":[{"type":"text","text":"x}]\"{"}],"isError":false}}"#,
            "{\"a\" :\n[1, -2.5, 0, -0, 0.125, true, false, null, \"\\u00e9\\n\\/\"] ,\r\n\"b\":{\"c\":[[],{}]}}",
            r#"{"a":1,"a":2}"#,
            r#"{"ab":{"\n":1}}"#,
            r#"{"e":"1e400","t":true,"f":false,"s":"\u00e9\"\\"}"#,
            r#"{"long":"0123456789abcdefghijklmnopqrstuvwxyz é ü 日本"}"#,
            r#"{"deep":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]}"#,
        ];
        for text in cases {
            let (found, _) = members(text).unwrap_or_else(|| panic!("{text}: left to the tree parse"));
            let tree: Value = serde_json::from_str(text).unwrap();
            let object = tree.as_object().unwrap();
            // Every member the tree keeps is the last of its name the walk reported.
            for (name, value) in object {
                let last = found.iter().rev().find(|(n, _)| n == name).unwrap().1;
                assert_eq!(&serde_json::from_str::<Value>(last).unwrap(), value, "{text}: {name}");
            }
            assert!(found.iter().all(|(name, _)| object.contains_key(*name)), "{text}");
        }
    }

    #[test]
    fn line_breaks_between_tokens_are_noted() {
        let cases = [
            (r#"{"a":"x\ny"}"#, false),
            ("{\"a\":\n1}", true),
            ("{\"a\":1}\r", true),
            ("{\"a\":[1,\t2]}", false),
        ];
        for (text, line_breaks) in cases {
            assert_eq!(members(text).unwrap().1, Checked { line_breaks }, "{text}");
        }
    }

    #[test]
    fn anything_it_does_not_judge_is_left_to_the_tree_parse() {
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        let long = format!("{{\"a\":{}}}", "1".repeat(MAX_NUMBER_LEN + 1));
        let cases = [
            // not an object, or not one value
            "",
            "[]",
            "1",
            "{} {}",
            "{}x",
            // malformed
            "{",
            r#"{"a"}"#,
            r#"{"a":}"#,
            r#"{"a":1,}"#,
            r#"{,"a":1}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":[1 2]}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":[}"#,
            r#"{"a":{]}"#,
            r#"{a:1}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":-}"#,
            r#"{"a":+1}"#,
            r#"{"a":tru}"#,
            r#"{"a":nul}"#,
            r#"{"a":True}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"\u12g4"}"#,
            "{\"a\":\"tab\there\"}",
            "{\"a\":\"\u{1}\"}",
            "{\"a\":1}\u{b}",
            r#"{"a":"unterminated}"#,
            // what the tree parse alone judges
            r#"{"a":1e5}"#,
            r#"{"a":1.5E-3}"#,
            r#"{"a":2.e3}"#,
            r#"{"a":"\ud83d\ude00"}"#,
            r#"{"a":"\uDC00"}"#,
            r#"{"\u0069d":1}"#,
            deep.as_str(),
            long.as_str(),
        ];
        for text in cases {
            assert!(members(text).is_none(), "{text:?} was accepted");
        }
        // One level less than the bound is still judged here.
        let nested = format!("{{\"a\":{}{}}}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert!(members(&nested).is_some());
        assert!(serde_json::from_str::<Value>(&nested).is_ok());
    }

    #[test]
    fn nested_names_may_hold_escapes() {
        let text = r#"{"a":{"\u0069d":"\"q\""}}"#;
        let (found, _) = members(text).unwrap();
        assert_eq!(found, [("a", r#"{"\u0069d":"\"q\""}"#)]);
    }

    #[test]
    fn the_byte_search_finds_the_first_special_byte() {
        let cases: [(&str, usize, usize); 13] = [
            // (bytes, from, found)
            ("", 0, 0),
            ("abc", 0, 3),
            ("abc\"", 0, 3),
            ("ab\\c\"", 0, 2),
            ("0123456789abcdef\"", 0, 16),
            ("0123456\"89abcdef\"", 0, 7),
            ("01234567\\9abcdef\"", 0, 8),
            ("\"\"\"\"\"\"\"\"\"x", 3, 3),
            ("\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\"\u{e9}", 1, 10),
            ("abcdefgh\u{1f}", 0, 8),
            ("abcdefghij\t", 2, 10),
            ("é日本語テキストです\"", 0, 29),
            ("no end at all here", 0, 18),
        ];
        for (text, from, found) in cases {
            assert_eq!(special_byte(text.as_bytes(), from), found, "{text:?} from {from}");
        }
        // Every position of every byte value, against the plain search.
        let bytes: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
        for from in 0..bytes.len() {
            let plain = bytes[from..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < b' ')
                .map_or(bytes.len(), |i| from + i);
            assert_eq!(special_byte(&bytes, from), plain, "from {from}");
        }
    }
}
