//! The one error of this crate: the input (filter, sort, bookmark) is wrong.
//! Every error is a 400 `bad_request` for the API; the message is for people
//! and the path says where (`filter.conditions[2].value`, `sort[1]`,
//! `bookmark`).

/// Invalid client input, with where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct Error {
    /// Where in the input: `filter`, `filter.conditions[0].conditions[3].op`,
    /// `sort[2]`, `bookmark`.
    pub path: String,
    /// What is wrong, a full sentence (`Unknown field 'Foo'.`).
    pub message: String,
}

impl Error {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error {
            path: path.into(),
            message: message.into(),
        }
    }
}
