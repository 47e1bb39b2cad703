//! What an attachment cell write says (part A's write shape): a list whose
//! items are an `att_` id (a string or `{id}`), a URL to fetch (a string)
//! or `{url, filename}`; an object with both id and url is its id. Also
//! the filename rules of a fetched file (part B, "Attachment URLs in
//! cells"). Plain functions, no I/O.

use std::collections::HashSet;

use cluster_protocol::ids::{self, Kind};
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

/// One item of an attachment cell as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// An uploaded (or already placed) attachment.
    Id(String),
    /// A file to fetch; `pos` is the item's position in its cell, which
    /// (with the record's position and the field) names the fetch.
    Url {
        pos: usize,
        url: String,
        filename: Option<String>,
    },
}

/// Whether `s` is meant as a URL (any letter case of the scheme).
fn looks_like_url(s: &str) -> bool {
    let lower = |n: usize| s.get(..n).map(str::to_ascii_lowercase);
    lower(8).as_deref() == Some("https://") || lower(7).as_deref() == Some("http://")
}

fn bad(field: &str, what: &str) -> ApiError {
    ApiError::bad_request(format!("Field '{field}' {what}"))
}

const TAKES: &str = "takes a list of attachment ids, URLs or {url, filename} objects.";

fn id_item(field: &str, id: &str) -> ApiResult<Item> {
    if !ids::is_valid(Kind::Attachment, id) {
        return Err(bad(
            field,
            &format!("cannot hold '{id}': not an attachment id."),
        ));
    }
    Ok(Item::Id(id.to_owned()))
}

fn object_item(field: &str, o: &Map<String, Value>, pos: usize) -> ApiResult<Item> {
    match (o.get("id"), o.get("url")) {
        (Some(Value::String(id)), _) => id_item(field, id),
        (None | Some(Value::Null), Some(Value::String(url))) => {
            if !looks_like_url(url) {
                return Err(bad(
                    field,
                    &format!("cannot fetch '{url}': a URL must start with https://."),
                ));
            }
            let filename = match o.get("filename") {
                None | Some(Value::Null) => None,
                Some(Value::String(f)) if f.trim().is_empty() => None,
                Some(Value::String(f)) if f.contains('\0') => {
                    return Err(bad(field, "takes a filename without NUL characters."))
                }
                Some(Value::String(f)) => Some(f.clone()),
                Some(_) => return Err(bad(field, "takes a filename that is a string.")),
            };
            Ok(Item::Url {
                pos,
                url: url.clone(),
                filename,
            })
        }
        _ => Err(bad(field, TAKES)),
    }
}

/// The items of one attachment cell written to the field named `field`,
/// in order; an id given twice is kept once (its first place). Null and
/// `[]` are no items.
pub fn parse_cell(field: &str, value: &Value) -> ApiResult<Vec<Item>> {
    let list = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(list) => list,
        _ => return Err(bad(field, TAKES)),
    };
    let mut out = Vec::with_capacity(list.len());
    let mut seen: HashSet<String> = HashSet::new();
    for (pos, v) in list.iter().enumerate() {
        let item = match v {
            Value::String(s) if looks_like_url(s) => Item::Url {
                pos,
                url: s.clone(),
                filename: None,
            },
            Value::String(s) => id_item(field, s)?,
            Value::Object(o) => object_item(field, o, pos)?,
            _ => return Err(bad(field, TAKES)),
        };
        if let Item::Id(id) = &item {
            if !seen.insert(id.clone()) {
                continue;
            }
        }
        out.push(item);
    }
    Ok(out)
}

/// Whether a cell value could hold a URL item: a cheap look at the JSON,
/// before anything knows which fields are attachment fields.
pub fn may_hold_urls(value: &Value) -> bool {
    let Value::Array(list) = value else {
        return false;
    };
    list.iter().any(|v| match v {
        Value::String(s) => looks_like_url(s),
        Value::Object(o) => o.contains_key("url"),
        _ => false,
    })
}

/// The name a fetched file is stored under: the item's `filename`, else
/// the response's `Content-Disposition` filename, else the URL's last path
/// segment (percent-decoded), else `file` with an extension guessed from
/// the content type.
pub fn filename(
    given: Option<&str>,
    content_disposition: Option<&str>,
    url: &url::Url,
    content_type: &str,
) -> String {
    if let Some(g) = given.filter(|g| !g.trim().is_empty()) {
        return g.to_owned();
    }
    if let Some(name) = content_disposition.and_then(disposition_filename) {
        return name;
    }
    let last = url
        .path_segments()
        .and_then(|mut s| s.next_back())
        .map(percent_decode)
        .filter(|s| !s.trim().is_empty() && !s.contains('\0'));
    if let Some(last) = last {
        return last;
    }
    format!("file{}", extension_for(content_type))
}

/// `%XX` escapes decoded as UTF-8 (lossily); anything else kept.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The filename a `Content-Disposition` header names: `filename*=UTF-8''...`
/// (RFC 5987) first, else `filename=` (quoted or bare). Path parts are cut
/// off (a name never carries a directory).
pub fn disposition_filename(header: &str) -> Option<String> {
    let mut plain = None;
    let mut extended = None;
    for param in split_params(header) {
        let Some((k, v)) = param.split_once('=') else {
            continue;
        };
        let k = k.trim().to_ascii_lowercase();
        let v = v.trim();
        if k == "filename*" {
            let mut parts = v.splitn(3, '\'');
            let (charset, _lang, value) = (parts.next(), parts.next(), parts.next());
            if let (Some(cs), Some(value)) = (charset, value) {
                if cs.eq_ignore_ascii_case("utf-8") {
                    extended = Some(percent_decode(value));
                }
            }
        } else if k == "filename" {
            let v = match v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                Some(q) => q.replace("\\\"", "\"").replace("\\\\", "\\"),
                None => v.to_owned(),
            };
            plain = Some(v);
        }
    }
    let name = extended.or(plain)?;
    let name = name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("")
        .trim()
        .to_owned();
    (!name.is_empty() && !name.contains('\0')).then_some(name)
}

/// `;`-separated parameters, honouring double quotes.
fn split_params(header: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in header.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ';' if !quoted => {
                out.push(&header[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&header[start..]);
    out
}

/// An extension (with its dot) for a content type; empty when unknown.
pub fn extension_for(content_type: &str) -> &'static str {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "image/png" => ".png",
        "image/jpeg" => ".jpg",
        "image/gif" => ".gif",
        "image/webp" => ".webp",
        "image/svg+xml" => ".svg",
        "image/bmp" => ".bmp",
        "image/tiff" => ".tiff",
        "application/pdf" => ".pdf",
        "application/json" => ".json",
        "application/zip" => ".zip",
        "application/xml" | "text/xml" => ".xml",
        "text/plain" => ".txt",
        "text/csv" => ".csv",
        "text/html" => ".html",
        "audio/mpeg" => ".mp3",
        "video/mp4" => ".mp4",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => ".xlsx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => ".docx",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: &str = "att_AAAAAbcdefgh";
    const B: &str = "att_AAAAAbcdefgi";

    #[test]
    fn items_of_every_form_keep_their_order() {
        let cell = json!([
            A,
            "https://example.com/a.png",
            {"url": "HTTPS://example.com/b", "filename": "b.txt"},
            {"id": B, "url": "https://example.com/ignored"},
            A
        ]);
        let items = parse_cell("Files", &cell).unwrap();
        assert_eq!(
            items,
            vec![
                Item::Id(A.into()),
                Item::Url {
                    pos: 1,
                    url: "https://example.com/a.png".into(),
                    filename: None
                },
                Item::Url {
                    pos: 2,
                    url: "HTTPS://example.com/b".into(),
                    filename: Some("b.txt".into())
                },
                Item::Id(B.into()),
            ]
        );
        assert_eq!(parse_cell("Files", &json!(null)).unwrap(), vec![]);
        assert_eq!(parse_cell("Files", &json!([])).unwrap(), vec![]);
    }

    #[test]
    fn bad_items_are_refused_naming_the_field() {
        for bad in [
            json!("att_x"),
            json!(["rec_AAAAAbcdefgh"]),
            json!([1]),
            json!([{"filename": "x"}]),
            json!([{"url": "ftp://example.com/x"}]),
            json!([{"url": "https://example.com/x", "filename": 3}]),
        ] {
            let e = parse_cell("Files", &bad).unwrap_err();
            let ApiError::BadRequest(m) = e else {
                panic!("{e:?}")
            };
            assert!(m.starts_with("Field 'Files' "), "{m}");
        }
    }

    #[test]
    fn url_candidates_are_spotted_before_the_schema_is_known() {
        assert!(may_hold_urls(&json!(["http://x/y"])));
        assert!(may_hold_urls(&json!([{"url": "x"}])));
        assert!(!may_hold_urls(&json!(["att_AAAAAbcdefgh"])));
        assert!(!may_hold_urls(&json!("https://x")));
    }

    #[test]
    fn filenames_follow_the_rules_in_order() {
        let url = url::Url::parse("https://h.example/dir/r%C3%A9sum%C3%A9%20v2.pdf?x=1").unwrap();
        let cd = Some("attachment; filename=\"from-header.pdf\"");
        assert_eq!(
            filename(Some("given.pdf"), cd, &url, "application/pdf"),
            "given.pdf"
        );
        assert_eq!(
            filename(None, cd, &url, "application/pdf"),
            "from-header.pdf"
        );
        assert_eq!(
            filename(Some("  "), None, &url, "application/pdf"),
            "résumé v2.pdf"
        );
        let bare = url::Url::parse("https://h.example/").unwrap();
        assert_eq!(filename(None, None, &bare, "image/png; q=1"), "file.png");
        assert_eq!(filename(None, None, &bare, "application/x-unknown"), "file");
        assert_eq!(
            filename(None, Some("inline"), &bare, "text/plain"),
            "file.txt"
        );
    }

    #[test]
    fn content_disposition_names() {
        let d = disposition_filename;
        assert_eq!(
            d("attachment; filename=plain.txt").as_deref(),
            Some("plain.txt")
        );
        assert_eq!(
            d("attachment; filename=\"a;b \\\"q\\\".txt\"").as_deref(),
            Some("a;b \"q\".txt")
        );
        assert_eq!(
            d("attachment; filename=\"fallback.txt\"; filename*=UTF-8''na%C3%AFve.txt").as_deref(),
            Some("naïve.txt")
        );
        assert_eq!(
            d("attachment; filename=\"../../etc/passwd\"").as_deref(),
            Some("passwd")
        );
        assert_eq!(d("attachment").as_deref(), None);
        assert_eq!(d("attachment; filename=\"\"").as_deref(), None);
    }

    #[test]
    fn percent_decoding_keeps_broken_escapes() {
        assert_eq!(percent_decode("a%20b"), "a b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
