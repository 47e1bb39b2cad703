//! The bytes of the pages' requests: `application/x-www-form-urlencoded`
//! bodies and the `Cookie` header.

use http::{header, HeaderMap};

/// A decoded form: its fields in order (a name may repeat).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Form(pub Vec<(String, String)>);

impl Form {
    /// Decodes a urlencoded body (`+` is a space, `%XX` a byte; bytes that
    /// are not UTF-8 become U+FFFD).
    pub fn parse(body: &[u8]) -> Self {
        let fields = body
            .split(|b| *b == b'&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let mut it = pair.splitn(2, |b| *b == b'=');
                let name = decode(it.next().unwrap_or_default());
                let value = decode(it.next().unwrap_or_default());
                (name, value)
            })
            .collect();
        Form(fields)
    }

    /// The first value of `name`, or "".
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// Every value of `name`, in order.
    pub fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn decode(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = raw.get(i + 1).copied().and_then(hex);
                let lo = raw.get(i + 2).copied().and_then(hex);
                match (hi, lo) {
                    (Some(h), Some(l)) => {
                        out.push(h * 16 + l);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn forms_decode_plus_percent_and_repeats() {
        let f = Form::parse(b"email=a%40b.co&name=A+B%20C&database=db_1&database=db_2&x&bad=%zz%4");
        assert_eq!(f.get("email"), "a@b.co");
        assert_eq!(f.get("name"), "A B C");
        assert_eq!(f.all("database"), ["db_1", "db_2"]);
        assert_eq!(f.get("x"), "");
        assert_eq!(f.get("bad"), "%zz%4");
        assert_eq!(f.get("missing"), "");
        assert_eq!(Form::parse(b"p=%C3%A9").get("p"), "é");
        assert_eq!(Form::parse(b"p=%FF").get("p"), "\u{FFFD}");
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; __Host-session=tok; x__Host-csrf=no"),
        );
        h.append(header::COOKIE, HeaderValue::from_static("__Host-csrf=c"));
        assert_eq!(cookie(&h, "__Host-session"), Some("tok"));
        assert_eq!(cookie(&h, "__Host-csrf"), Some("c"));
        assert_eq!(cookie(&h, "session"), None);
    }
}
