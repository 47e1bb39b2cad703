//! Records bookmarks: the server key they are signed with and the
//! fingerprint of what one is valid under (filter-lang's codec signs both).

use filter_lang::bookmark::fingerprint;
use filter_lang::{BookmarkKey, Sort};
use serde_json::Value;

use super::list_params::ListParams;
use crate::catalog::views::View;
use crate::state::AppState;

/// The key bookmarks are signed with: derived from the cluster secret, so
/// every node of the cluster shares it.
pub fn bookmark_key(state: &AppState) -> BookmarkKey {
    BookmarkKey::derive(state.secret.expose().as_bytes())
}

/// A filter as canonical JSON text (a JSON string holding the filter is
/// read as the filter it holds).
fn canonical(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => serde_json::from_str::<Value>(s)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| s.clone()),
        Some(v) => v.to_string(),
    }
}

/// Everything a records bookmark is valid under, by ids (stable across
/// renames, nodes and database moves): the table, the view, where the
/// order comes from and its terms, the request's filter and the view's,
/// and the search term. A bookmark resumed under anything else is a 400.
pub fn bookmark_order(
    table_id: &str,
    view: Option<&View>,
    source: &str,
    sort: &Sort,
    fschema: &filter_lang::Schema,
    p: &ListParams,
) -> String {
    let view_filter = view.and_then(|v| v.config.get("filters"));
    fingerprint(&[
        "records",
        table_id,
        view.map_or("", |v| v.id.as_str()),
        source,
        &sort.fingerprint(fschema),
        &canonical(p.filter.as_ref()),
        &canonical(view_filter),
        p.search.as_deref().map_or("", str::trim),
    ])
}
