//! Tokens of the formula language. See `parser.rs` for the grammar.

use crate::error::{Res, SpanError};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// Decimal number as written, validated by the lexer.
    Number(String),
    /// String literal, escapes already resolved.
    Str(String),
    /// `{...}` reference, escapes already resolved.
    Field(String),
    Ident(String),
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    Amp,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Eof,
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
}

pub(crate) fn describe(t: &Tok) -> String {
    match t {
        Tok::Number(n) => format!("number {n}"),
        Tok::Str(_) => "a text literal".into(),
        Tok::Field(_) => "a field reference".into(),
        Tok::Ident(i) => format!("'{i}'"),
        Tok::LParen => "'('".into(),
        Tok::RParen => "')'".into(),
        Tok::Comma => "','".into(),
        Tok::Plus => "'+'".into(),
        Tok::Minus => "'-'".into(),
        Tok::Star => "'*'".into(),
        Tok::Slash => "'/'".into(),
        Tok::Amp => "'&'".into(),
        Tok::Eq => "'='".into(),
        Tok::Ne => "'!='".into(),
        Tok::Lt => "'<'".into(),
        Tok::Le => "'<='".into(),
        Tok::Gt => "'>'".into(),
        Tok::Ge => "'>='".into(),
        Tok::Eof => "the end of the formula".into(),
    }
}

pub(crate) fn tokenize(src: &str) -> Res<Vec<Token>> {
    let chars: Vec<(usize, char)> = src.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let byte_at = |i: usize| chars.get(i).map(|c| c.0).unwrap_or(src.len());
    while i < chars.len() {
        let (start, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let simple = match c {
            '(' => Some(Tok::LParen),
            ')' => Some(Tok::RParen),
            ',' => Some(Tok::Comma),
            '+' => Some(Tok::Plus),
            '-' => Some(Tok::Minus),
            '*' => Some(Tok::Star),
            '/' => Some(Tok::Slash),
            '&' => Some(Tok::Amp),
            '=' => Some(Tok::Eq),
            _ => None,
        };
        if let Some(tok) = simple {
            i += 1;
            out.push(Token {
                tok,
                start,
                end: byte_at(i),
            });
            continue;
        }
        let next = chars.get(i + 1).map(|c| c.1);
        let (tok, len) = match (c, next) {
            ('!', Some('=')) => (Some(Tok::Ne), 2),
            ('<', Some('>')) => (Some(Tok::Ne), 2),
            ('<', Some('=')) => (Some(Tok::Le), 2),
            ('>', Some('=')) => (Some(Tok::Ge), 2),
            ('<', _) => (Some(Tok::Lt), 1),
            ('>', _) => (Some(Tok::Gt), 1),
            _ => (None, 0),
        };
        if let Some(tok) = tok {
            i += len;
            out.push(Token {
                tok,
                start,
                end: byte_at(i),
            });
            continue;
        }
        if c == '"' || c == '\'' {
            let (s, ni) = quoted(&chars, i, c, src)?;
            i = ni;
            out.push(Token {
                tok: Tok::Str(s),
                start,
                end: byte_at(i),
            });
            continue;
        }
        if c == '{' {
            let (s, ni) = braced(&chars, i, src)?;
            i = ni;
            out.push(Token {
                tok: Tok::Field(s),
                start,
                end: byte_at(i),
            });
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && next.is_some_and(|n| n.is_ascii_digit())) {
            let (s, ni) = number(&chars, i)?;
            i = ni;
            out.push(Token {
                tok: Tok::Number(s),
                start,
                end: byte_at(i),
            });
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let mut s = String::new();
            while let Some(&(_, ch)) = chars.get(i) {
                if ch.is_alphanumeric() || ch == '_' {
                    s.push(ch);
                    i += 1;
                } else {
                    break;
                }
            }
            out.push(Token {
                tok: Tok::Ident(s),
                start,
                end: byte_at(i),
            });
            continue;
        }
        return Err(SpanError::new(
            start,
            format!("Unexpected character '{}'", c.escape_default()),
        ));
    }
    out.push(Token {
        tok: Tok::Eof,
        start: src.len(),
        end: src.len(),
    });
    Ok(out)
}

fn quoted(chars: &[(usize, char)], open: usize, q: char, _src: &str) -> Res<(String, usize)> {
    let start = chars[open].0;
    let mut s = String::new();
    let mut i = open + 1;
    loop {
        let Some(&(at, c)) = chars.get(i) else {
            return Err(SpanError::new(start, "Unterminated text literal"));
        };
        if c == q {
            return Ok((s, i + 1));
        }
        if c == '\0' {
            return Err(SpanError::new(at, "Text may not contain the NUL character"));
        }
        if c == '\\' {
            let Some(&(_, e)) = chars.get(i + 1) else {
                return Err(SpanError::new(start, "Unterminated text literal"));
            };
            s.push(match e {
                '\\' => '\\',
                '"' => '"',
                '\'' => '\'',
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                other => {
                    return Err(SpanError::new(
                        at,
                        format!(
                            "Unknown escape '\\{}' in text (use \\\\, \\\", \\', \\n, \\t or \\r)",
                            other.escape_default()
                        ),
                    ))
                }
            });
            i += 2;
            continue;
        }
        s.push(c);
        i += 1;
    }
}

fn braced(chars: &[(usize, char)], open: usize, _src: &str) -> Res<(String, usize)> {
    let start = chars[open].0;
    let mut s = String::new();
    let mut i = open + 1;
    loop {
        let Some(&(at, c)) = chars.get(i) else {
            return Err(SpanError::new(
                start,
                "Unterminated field reference: missing '}'",
            ));
        };
        match c {
            '}' => {
                if s.is_empty() {
                    return Err(SpanError::new(start, "Empty field reference '{}'"));
                }
                return Ok((s, i + 1));
            }
            '\\' => match chars.get(i + 1).map(|c| c.1) {
                Some(e @ ('\\' | '{' | '}')) => {
                    s.push(e);
                    i += 2;
                }
                _ => {
                    return Err(SpanError::new(
                        at,
                        "In a field reference a backslash must be followed by '\\', '{' or '}'",
                    ))
                }
            },
            '{' => {
                return Err(SpanError::new(
                    at,
                    "Unexpected '{' inside a field reference (write \\{ for a brace in a name)",
                ))
            }
            _ => {
                s.push(c);
                i += 1;
            }
        }
    }
}

/// `digits [ "." digits ] [ ("e"|"E") ["+"|"-"] digits ]` or `"." digits ...`.
fn number(chars: &[(usize, char)], open: usize) -> Res<(String, usize)> {
    let start = chars[open].0;
    let mut s = String::new();
    let mut i = open;
    let peek = |i: usize| chars.get(i).map(|c| c.1);
    while let Some(c) = peek(i).filter(|c| c.is_ascii_digit()) {
        s.push(c);
        i += 1;
    }
    if peek(i) == Some('.') {
        s.push('.');
        i += 1;
        while let Some(c) = peek(i).filter(|c| c.is_ascii_digit()) {
            s.push(c);
            i += 1;
        }
    }
    if matches!(peek(i), Some('e' | 'E')) {
        let mut j = i + 1;
        let mut exp = String::from("e");
        if let Some(sign @ ('+' | '-')) = peek(j) {
            exp.push(sign);
            j += 1;
        }
        let digits_from = j;
        while let Some(c) = peek(j).filter(|c| c.is_ascii_digit()) {
            exp.push(c);
            j += 1;
        }
        if j == digits_from {
            return Err(SpanError::new(
                start,
                "Malformed number: exponent has no digits",
            ));
        }
        s.push_str(&exp);
        i = j;
    }
    if s.len() > 100 {
        return Err(SpanError::new(
            start,
            "Number literal is too long (at most 100 characters)",
        ));
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v.abs() < 1e300 => {}
        _ => return Err(SpanError::new(start, "Number is too large (at most 1e300)")),
    }
    if let Some(&(at, c)) = chars.get(i) {
        if c.is_alphanumeric() || c == '_' {
            return Err(SpanError::new(
                at,
                format!("Unexpected '{c}' after a number"),
            ));
        }
    }
    Ok((s, i))
}
