//! `Content-Disposition` values that carry a stored filename safely
//! (RFC 6266 with RFC 8187's `filename*`): whatever the name holds (quotes,
//! backslashes, line breaks, non-ASCII), the header stays one well-formed
//! line, and browsers show the original name.

/// Whether a browser shows the file or saves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    Inline,
    Attachment,
}

/// `inline; filename="plain ASCII"; filename*=UTF-8''percent-encoded`.
pub fn content_disposition(disposition: Disposition, filename: &str) -> String {
    let kind = match disposition {
        Disposition::Inline => "inline",
        Disposition::Attachment => "attachment",
    };
    format!(
        "{kind}; filename=\"{}\"; filename*=UTF-8''{}",
        ascii_fallback(filename),
        percent_encode(filename)
    )
}

/// The name for clients that ignore `filename*`: printable ASCII, with `"`,
/// `\`, `/`, `%` and anything else replaced by `_`.
fn ascii_fallback(filename: &str) -> String {
    let name: String = filename
        .chars()
        .filter(|c| !c.is_control())
        .map(|c| match c {
            ' '..='~' if !matches!(c, '"' | '\\' | '/' | '%') => c,
            _ => '_',
        })
        .collect();
    if name.trim().is_empty() {
        "file".into()
    } else {
        name
    }
}

/// RFC 8187 `value-chars`: `attr-char` as is, every other byte `%XX`.
fn percent_encode(filename: &str) -> String {
    let mut out = String::with_capacity(filename.len());
    for b in filename.bytes() {
        let attr_char = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#' | b'$' | b'&' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~'
            );
        if attr_char {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_through() {
        assert_eq!(
            content_disposition(Disposition::Attachment, "report.pdf"),
            "attachment; filename=\"report.pdf\"; filename*=UTF-8''report.pdf"
        );
    }

    #[test]
    fn hostile_names_stay_one_safe_line() {
        let v = content_disposition(Disposition::Inline, "a\"b\\c\r\nSet-Cookie: x=1;.txt");
        assert_eq!(
            v,
            "inline; filename=\"a_b_cSet-Cookie: x=1;.txt\"; \
             filename*=UTF-8''a%22b%5Cc%0D%0ASet-Cookie%3A%20x%3D1%3B.txt"
        );
        assert!(!v.contains('\r') && !v.contains('\n'));
    }

    #[test]
    fn non_ascii_names_are_percent_encoded() {
        assert_eq!(
            content_disposition(Disposition::Attachment, "résumé 1.pdf"),
            "attachment; filename=\"r_sum_ 1.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%201.pdf"
        );
        assert_eq!(
            content_disposition(Disposition::Attachment, "日本"),
            "attachment; filename=\"__\"; filename*=UTF-8''%E6%97%A5%E6%9C%AC"
        );
        assert!(content_disposition(Disposition::Attachment, "\n").contains("filename=\"file\""));
    }
}
