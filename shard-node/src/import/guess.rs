//! The costume a column's values suggest, among the 14 importable ones.
//!
//! Deterministic and simple: every non-empty value (trimmed) must fit a
//! costume for it to be guessed, tried in this order: checkbox
//! (`true`/`false`/`yes`/`no`/`checked`/`unchecked`), number, percent
//! (`12%`), currency (`$`, `€`, `£` before a number), date (`YYYY-MM-DD`,
//! optionally with a time), email, url (`http://`/`https://`), long text
//! (a value with a line break), single select (at most
//! [`MAX_SELECT_CHOICES`] distinct values, at most 100 characters each, and
//! some value repeated), otherwise single line text. Phone, rating,
//! duration and multi select are never guessed: they are chosen in the plan.

use serde_json::{json, Value};

/// Most distinct values a column may have to be guessed a single select.
pub const MAX_SELECT_CHOICES: usize = 10;

/// A guessed costume and its options (`{choices:[{name}]}` for a select,
/// `{}` otherwise).
#[derive(Debug, Clone, PartialEq)]
pub struct Guess {
    pub costume: &'static str,
    pub options: Value,
}

impl Guess {
    fn plain(costume: &'static str) -> Guess {
        Guess {
            costume,
            options: json!({}),
        }
    }
}

/// Longest value a guessed select choice may be (characters).
const MAX_CHOICE_CHARS: usize = 100;

type Test = fn(&str) -> bool;

/// The scalar costumes, in the order they are tried.
const SCALARS: [(&str, Test); 7] = [
    ("checkbox", is_checkbox),
    ("number", is_number),
    ("percent", is_percent),
    ("currency", is_currency),
    ("date", is_date),
    ("email", is_email),
    ("url", is_url),
];

/// A column's guess built one value at a time, holding at most
/// [`MAX_SELECT_CHOICES`] + 1 short distinct values.
#[derive(Debug, Clone)]
pub struct Guesser {
    /// Non-empty values seen.
    values: usize,
    /// Per scalar costume: every value so far fits it.
    fits: [bool; 7],
    line_break: bool,
    /// Distinct values in first-seen order, while a select is possible.
    distinct: Vec<String>,
    /// More than [`MAX_SELECT_CHOICES`] distinct values, or one too long:
    /// not a select.
    no_select: bool,
}

impl Default for Guesser {
    fn default() -> Self {
        Guesser {
            values: 0,
            fits: [true; 7],
            line_break: false,
            distinct: Vec::new(),
            no_select: false,
        }
    }
}

impl Guesser {
    pub fn add(&mut self, value: &str) {
        let v = value.trim();
        if v.is_empty() {
            return;
        }
        self.values += 1;
        for (fits, (_, test)) in self.fits.iter_mut().zip(SCALARS) {
            *fits = *fits && test(v);
        }
        self.line_break |= v.contains('\n');
        if self.no_select || self.distinct.iter().any(|d| d == v) {
            return;
        }
        if self.distinct.len() == MAX_SELECT_CHOICES || v.chars().count() > MAX_CHOICE_CHARS {
            self.no_select = true;
            self.distinct = Vec::new();
        } else {
            self.distinct.push(v.to_owned());
        }
    }

    pub fn guess(&self) -> Guess {
        if self.values == 0 {
            return Guess::plain("single_line_text");
        }
        if let Some(((costume, _), _)) = SCALARS.iter().zip(self.fits).find(|(_, fits)| *fits) {
            return Guess::plain(costume);
        }
        if self.line_break {
            return Guess::plain("long_text");
        }
        if !self.no_select && self.distinct.len() < self.values {
            let choices: Vec<Value> = self.distinct.iter().map(|v| json!({ "name": v })).collect();
            return Guess {
                costume: "single_select",
                options: json!({ "choices": choices }),
            };
        }
        Guess::plain("single_line_text")
    }
}

pub fn guess<'a>(values: impl IntoIterator<Item = &'a str>) -> Guess {
    let mut g = Guesser::default();
    for v in values {
        g.add(v);
    }
    g.guess()
}

fn is_checkbox(v: &str) -> bool {
    ["true", "false", "yes", "no", "checked", "unchecked"]
        .iter()
        .any(|w| v.eq_ignore_ascii_case(w))
}

fn is_number(v: &str) -> bool {
    let v = v.replace(',', "");
    !v.is_empty()
        && v.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c))
        && v.chars().any(|c| c.is_ascii_digit())
        && v.parse::<f64>().is_ok_and(f64::is_finite)
}

fn is_percent(v: &str) -> bool {
    v.strip_suffix('%').is_some_and(|n| is_number(n.trim()))
}

fn is_currency(v: &str) -> bool {
    let v = v.strip_prefix('-').unwrap_or(v);
    ['$', '€', '£']
        .iter()
        .any(|s| v.strip_prefix(*s).is_some_and(|n| is_number(n.trim())))
}

fn is_date(v: &str) -> bool {
    use chrono::{DateTime, NaiveDate, NaiveDateTime};
    NaiveDate::parse_from_str(v, "%Y-%m-%d").is_ok()
        || NaiveDateTime::parse_from_str(v, "%Y-%m-%dT%H:%M:%S").is_ok()
        || NaiveDateTime::parse_from_str(v, "%Y-%m-%d %H:%M:%S").is_ok()
        || NaiveDateTime::parse_from_str(v, "%Y-%m-%d %H:%M").is_ok()
        || DateTime::parse_from_rfc3339(v).is_ok()
}

fn is_email(v: &str) -> bool {
    let Some((local, domain)) = v.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !v.chars().any(char::is_whitespace)
}

fn is_url(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://"))
        && url::Url::parse(v).is_ok()
        && !v.chars().any(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costume(values: &[&str]) -> &'static str {
        guess(values.iter().copied()).costume
    }

    #[test]
    fn scalar_costumes() {
        assert_eq!(costume(&["1", "2.5", "-3", "1,200"]), "number");
        assert_eq!(costume(&["Yes", "no", "TRUE"]), "checkbox");
        assert_eq!(costume(&["12%", "3.5 %"]), "percent");
        assert_eq!(costume(&["$12.00", "€3", "-£4"]), "currency");
        assert_eq!(costume(&["2024-01-31", "2024-02-01 10:30"]), "date");
        assert_eq!(costume(&["a@b.co", "x.y@z.org"]), "email");
        assert_eq!(costume(&["https://a.example/x", "http://b.example"]), "url");
        assert_eq!(costume(&["line one\nline two", "short"]), "long_text");
    }

    #[test]
    fn empty_values_are_ignored() {
        assert_eq!(costume(&["", " ", "4"]), "number");
        assert_eq!(costume(&["", ""]), "single_line_text");
    }

    #[test]
    fn one_odd_value_falls_back_to_text() {
        assert_eq!(costume(&["1", "2", "n/a", "x"]), "single_line_text");
        assert_eq!(costume(&["2024-01-31", "soon"]), "single_line_text");
        assert_eq!(costume(&["1e5x"]), "single_line_text");
    }

    #[test]
    fn few_repeated_values_are_a_select_in_first_seen_order() {
        let g = guess(["Open", "Done", "Open", "Blocked"]);
        assert_eq!(g.costume, "single_select");
        assert_eq!(
            g.options,
            json!({"choices": [{"name": "Open"}, {"name": "Done"}, {"name": "Blocked"}]})
        );
    }

    #[test]
    fn all_distinct_or_many_values_are_text() {
        assert_eq!(costume(&["Ann", "Bob", "Cy"]), "single_line_text");
        let many: Vec<String> = (0..30).map(|i| format!("v{}", i % 11)).collect();
        assert_eq!(
            guess(many.iter().map(String::as_str)).costume,
            "single_line_text"
        );
    }
}
