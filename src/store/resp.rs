//! RESP2, the Redis wire format, as far as eragate needs it: commands encoded
//! as arrays of bulk strings, and replies parsed from a buffer, bounded. Pure:
//! bytes in, values out; the connection is [`super::redis`]'s.

/// A reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// `+OK`
    Simple(String),
    /// `-ERR ...`
    Error(String),
    /// `:42`
    Integer(i64),
    /// `$3\r\nabc`, or `$-1` (None).
    Bulk(Option<Vec<u8>>),
    /// `*2\r\n...`, or `*-1` (None).
    Array(Option<Vec<Value>>),
}

/// Why a reply could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtocolError {
    /// Not RESP.
    #[error("not a RESP reply: {0}")]
    Malformed(&'static str),
    /// Larger or deeper than eragate ever asks for.
    #[error("RESP reply over eragate's bounds")]
    TooLarge,
}

/// The largest bulk string accepted (counters, and the authorization server's
/// records: a client registration, a grant, the signing keys).
const MAX_BULK: usize = 1024 * 1024;
/// The most items in one array.
const MAX_ITEMS: usize = 1024;
/// The deepest nesting of arrays.
const MAX_DEPTH: usize = 4;

/// `args` as a RESP command.
pub(crate) fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One reply from the start of `buf`: the value and how many bytes it took,
/// `Ok(None)` while it is incomplete.
pub(crate) fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, ProtocolError> {
    parse_at(buf, 0, 0)
}

fn parse_at(buf: &[u8], at: usize, depth: usize) -> Result<Option<(Value, usize)>, ProtocolError> {
    let Some((line, next)) = line(buf, at)? else {
        return Ok(None);
    };
    let (kind, rest) = line.split_first().ok_or(ProtocolError::Malformed("an empty line"))?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    match kind {
        b'+' => Ok(Some((Value::Simple(text()), next))),
        b'-' => Ok(Some((Value::Error(text()), next))),
        b':' => Ok(Some((Value::Integer(number(rest)?), next))),
        b'$' => {
            let Some(len) = length(rest, MAX_BULK)? else {
                return Ok(Some((Value::Bulk(None), next)));
            };
            if buf.len() < next + len + 2 {
                return Ok(None);
            }
            if &buf[next + len..next + len + 2] != b"\r\n" {
                return Err(ProtocolError::Malformed("a bulk string without its CRLF"));
            }
            Ok(Some((
                Value::Bulk(Some(buf[next..next + len].to_vec())),
                next + len + 2,
            )))
        }
        b'*' => {
            if depth >= MAX_DEPTH {
                return Err(ProtocolError::TooLarge);
            }
            let Some(count) = length(rest, MAX_ITEMS)? else {
                return Ok(Some((Value::Array(None), next)));
            };
            let mut items = Vec::with_capacity(count);
            let mut at = next;
            for _ in 0..count {
                let Some((item, after)) = parse_at(buf, at, depth + 1)? else {
                    return Ok(None);
                };
                items.push(item);
                at = after;
            }
            Ok(Some((Value::Array(Some(items)), at)))
        }
        _ => Err(ProtocolError::Malformed("an unknown reply type")),
    }
}

/// The line starting at `at` (without CRLF) and where the next begins.
fn line(buf: &[u8], at: usize) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let rest = buf.get(at..).unwrap_or_default();
    match rest.windows(2).position(|w| w == b"\r\n") {
        Some(end) => Ok(Some((&rest[..end], at + end + 2))),
        None if rest.len() > MAX_BULK => Err(ProtocolError::TooLarge),
        None => Ok(None),
    }
}

fn number(text: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or(ProtocolError::Malformed("not an integer"))
}

/// A length (`None` for -1), at most `max`.
fn length(text: &[u8], max: usize) -> Result<Option<usize>, ProtocolError> {
    match number(text)? {
        -1 => Ok(None),
        n if n < 0 => Err(ProtocolError::Malformed("a negative length")),
        n if n as u64 > max as u64 => Err(ProtocolError::TooLarge),
        n => Ok(Some(n as usize)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        assert_eq!(encode(&[b"INCR", b"k"]), b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n".to_vec());
        assert_eq!(encode(&[b"PING"]), b"*1\r\n$4\r\nPING\r\n".to_vec());
        assert_eq!(encode(&[b""]), b"*1\r\n$0\r\n\r\n".to_vec());
    }

    #[test]
    fn replies_parse_whole_or_wait() {
        use Value::*;
        type Parsed = Result<Option<(Value, usize)>, ProtocolError>;
        let table: Vec<(&[u8], Parsed)> = vec![
            (b"+OK\r\n", Ok(Some((Simple("OK".into()), 5)))),
            (b"-ERR no\r\n", Ok(Some((Error("ERR no".into()), 9)))),
            (b":42\r\n:1", Ok(Some((Integer(42), 5)))),
            (b":-7\r\n", Ok(Some((Integer(-7), 5)))),
            (b"$3\r\nabc\r\n", Ok(Some((Bulk(Some(b"abc".to_vec())), 9)))),
            (b"$-1\r\n", Ok(Some((Bulk(None), 5)))),
            (b"*-1\r\n", Ok(Some((Array(None), 5)))),
            (
                b"*2\r\n:3\r\n:1500\r\n",
                Ok(Some((Array(Some(vec![Integer(3), Integer(1500)])), 15))),
            ),
            (b"*2\r\n:3\r\n", Ok(None)),
            (b"$3\r\nab", Ok(None)),
            (b":42", Ok(None)),
            (b"", Ok(None)),
            (
                b"$3\r\nabcd\r\n",
                Err(ProtocolError::Malformed("a bulk string without its CRLF")),
            ),
            (b"?x\r\n", Err(ProtocolError::Malformed("an unknown reply type"))),
            (b":x\r\n", Err(ProtocolError::Malformed("not an integer"))),
            (b"\r\n", Err(ProtocolError::Malformed("an empty line"))),
            (b"$-2\r\n", Err(ProtocolError::Malformed("a negative length"))),
            (b"$999999999\r\n", Err(ProtocolError::TooLarge)),
            (b"*99999\r\n", Err(ProtocolError::TooLarge)),
            (b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", Err(ProtocolError::TooLarge)),
        ];
        for (bytes, expected) in table {
            assert_eq!(parse(bytes), expected, "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn an_endless_line_is_refused() {
        let long = vec![b'+'; MAX_BULK + 2];
        assert_eq!(parse(&long), Err(ProtocolError::TooLarge));
    }
}
