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

/// A script call (`EVALSHA sha numkeys key... arg...`) written straight
/// into a connection's buffer, so naming its keys allocates nothing: give
/// the keys, then the arguments, then [`ScriptCall::finish`].
pub struct ScriptCall<'a> {
    out: &'a mut Vec<u8>,
    keys: usize,
    args: usize,
}

impl<'a> ScriptCall<'a> {
    /// Starts a call in `out` (cleared).
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        out.clear();
        Self {
            out,
            keys: 0,
            args: 0,
        }
    }

    /// A key: the concatenation of `parts`, then `number` in decimal if given.
    pub fn key(&mut self, parts: &[&str], number: Option<u64>) {
        debug_assert_eq!(self.args, 0, "keys come before arguments");
        self.bulk(parts, number);
        self.keys += 1;
    }

    pub fn arg(&mut self, n: u64) {
        self.bulk(&[], Some(n));
        self.args += 1;
    }

    /// Prepends the array header, `verb`, `script` and the key count
    /// (written after the body, then rotated in front of it).
    pub fn finish(mut self, verb: &str, script: &str) {
        let body = self.out.len();
        self.out.push(b'*');
        push_decimal(self.out, (3 + self.keys + self.args) as u64);
        self.out.extend_from_slice(b"\r\n");
        self.bulk(&[verb], None);
        self.bulk(&[script], None);
        let keys = self.keys as u64;
        self.bulk(&[], Some(keys));
        let head = self.out.len() - body;
        self.out.rotate_right(head);
    }

    fn bulk(&mut self, parts: &[&str], number: Option<u64>) {
        let mut digits = [0u8; 20];
        let digits = number.map_or(&[][..], |n| decimal(n, &mut digits));
        let len = parts.iter().map(|p| p.len()).sum::<usize>() + digits.len();
        self.out.push(b'$');
        push_decimal(self.out, len as u64);
        self.out.extend_from_slice(b"\r\n");
        for part in parts {
            self.out.extend_from_slice(part.as_bytes());
        }
        self.out.extend_from_slice(digits);
        self.out.extend_from_slice(b"\r\n");
    }
}

/// `n` in decimal, in the tail of `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

fn push_decimal(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    out.extend_from_slice(decimal(n, &mut buf));
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
    fn encodes_a_script_call_in_place() {
        let mut out = b"left over".to_vec();
        let mut call = ScriptCall::new(&mut out);
        call.key(&["rl:", "1.2.3.4", ":"], Some(42));
        call.key(&["k"], None);
        call.arg(60_000);
        call.arg(0);
        call.arg(u64::MAX);
        call.finish("EVALSHA", "abc");
        let mut expected = Vec::new();
        let args: [&[u8]; 8] = [
            b"EVALSHA",
            b"abc",
            b"2",
            b"rl:1.2.3.4:42",
            b"k",
            b"60000",
            b"0",
            b"18446744073709551615",
        ];
        encode(&mut expected, args.into_iter());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            String::from_utf8(expected).unwrap()
        );
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
