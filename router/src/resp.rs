//! The small part of RESP2 the limiter needs: encoding a command from byte
//! arguments, and decoding one reply (status, error, integer, bulk, array)
//! from a buffer that may not hold all of it yet.

use std::io::Write;

/// Appends `*N\r\n` and then `$len\r\narg\r\n` for each argument.
pub fn encode<'a>(out: &mut Vec<u8>, args: impl ExactSizeIterator<Item = &'a [u8]>) {
    let _ = write!(out, "*{}\r\n", args.len());
    for arg in args {
        let _ = write!(out, "${}\r\n", arg.len());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Status(String),
    Error(String),
    Integer(i64),
    /// `None` is the nil bulk string (`$-1`), which a Lua `false` becomes.
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Reply {
    /// An integer, or a bulk string holding one; anything else is `None`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Reply::Integer(n) => Some(*n),
            Reply::Bulk(Some(b)) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct ProtocolError;

/// Decodes one reply from the front of `buf`: `Ok(None)` when more bytes are
/// needed, else the reply and how many bytes it took.
pub fn decode(buf: &[u8]) -> Result<Option<(Reply, usize)>, ProtocolError> {
    let Some(line_end) = find_crlf(buf) else {
        return Ok(None);
    };
    let line = &buf[1..line_end];
    let after = line_end + 2;
    let text = || String::from_utf8_lossy(line).into_owned();
    let number = || -> Result<i64, ProtocolError> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or(ProtocolError)
    };
    match buf.first() {
        Some(b'+') => Ok(Some((Reply::Status(text()), after))),
        Some(b'-') => Ok(Some((Reply::Error(text()), after))),
        Some(b':') => Ok(Some((Reply::Integer(number()?), after))),
        Some(b'$') => {
            let len = number()?;
            if len < 0 {
                return Ok(Some((Reply::Bulk(None), after)));
            }
            let end = after + len as usize;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError);
            }
            Ok(Some((Reply::Bulk(Some(buf[after..end].to_vec())), end + 2)))
        }
        Some(b'*') => {
            let len = number()?;
            if len < 0 {
                return Ok(Some((Reply::Bulk(None), after)));
            }
            let mut items = Vec::with_capacity(len.min(64) as usize);
            let mut at = after;
            for _ in 0..len {
                match decode(&buf[at..])? {
                    Some((item, used)) => {
                        items.push(item);
                        at += used;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Reply::Array(items), at)))
        }
        _ => Err(ProtocolError),
    }
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_a_command() {
        let mut out = Vec::new();
        encode(&mut out, [&b"GET"[..], b"k"].into_iter());
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }

    #[test]
    fn decodes_a_script_reply_and_waits_for_the_rest() {
        let full = b"*4\r\n:1\r\n$3\r\n123\r\n$-1\r\n:-7\r\n+OK\r\n";
        let (reply, used) = decode(full).unwrap().unwrap();
        assert_eq!(used, full.len() - 5);
        let Reply::Array(items) = reply else {
            panic!("not an array")
        };
        let values: Vec<_> = items.iter().map(Reply::as_i64).collect();
        assert_eq!(values, [Some(1), Some(123), None, Some(-7)]);
        for cut in 0..used {
            assert_eq!(decode(&full[..cut]), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn decodes_errors_and_status() {
        assert_eq!(
            decode(b"-NOSCRIPT No matching script\r\n").unwrap(),
            Some((Reply::Error("NOSCRIPT No matching script".into()), 30))
        );
        assert_eq!(
            decode(b"+OK\r\n").unwrap(),
            Some((Reply::Status("OK".into()), 5))
        );
        assert_eq!(decode(b"?what\r\n"), Err(ProtocolError));
        assert_eq!(decode(b"$3\r\nabcd\r\n"), Err(ProtocolError));
    }
}
