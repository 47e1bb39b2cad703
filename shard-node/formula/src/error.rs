//! The one error type of the crate: what went wrong and where.

/// A formula the language refuses. `position` counts characters (not bytes)
/// from the start of the expression the user wrote, starting at 0; `message`
/// is written for people and may be shown to them as is (it never contains
/// SQL or datastore text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[error("{message} (at character {})", position + 1)]
pub struct FormulaError {
    pub position: usize,
    pub message: String,
}

/// Internal error: a byte offset into the source being processed. Turned into
/// a [`FormulaError`] (character position) at the edge of each formula.
#[derive(Debug, Clone)]
pub(crate) struct SpanError {
    pub at: usize,
    pub message: String,
}

impl SpanError {
    pub(crate) fn new(at: usize, message: impl Into<String>) -> Self {
        SpanError {
            at,
            message: message.into(),
        }
    }

    pub(crate) fn into_public(self, src: &str) -> FormulaError {
        let at = self.at.min(src.len());
        // `at` is always a char boundary: spans come from `char_indices`.
        let position = src.get(..at).map(|s| s.chars().count()).unwrap_or_default();
        FormulaError {
            position,
            message: self.message,
        }
    }
}

pub(crate) type Res<T> = Result<T, SpanError>;
