//! Button settings: `label` (default `Button`, truncated to 40 characters),
//! `color`, `action` (`link` or `webhook`, inferred from `webhook_id` when
//! absent), `url_template` (http/https, at most 2000 characters) for a link
//! action, `webhook_id` for a webhook action (its existence is checked by
//! the caller: 404), and `condition` (any relative-date value inside must
//! be valid). Unknown keys are dropped.

use serde_json::{json, Map, Value};

use super::opt_str;
use crate::config::{MAX_BUTTON_LABEL_CHARS, MAX_BUTTON_URL_CHARS};
use crate::error::{ApiError, ApiResult};

pub const DEFAULT_LABEL: &str = "Button";
/// How deep `condition` is searched for relative dates.
const MAX_CONDITION_DEPTH: usize = 16;

/// The settings to store, and the webhook id to check.
pub fn settle(sent: &Map<String, Value>) -> ApiResult<(Map<String, Value>, Option<String>)> {
    let label: String = match opt_str(sent, "label")? {
        Some(l) if !l.trim().is_empty() => l.chars().take(MAX_BUTTON_LABEL_CHARS).collect(),
        _ => DEFAULT_LABEL.to_owned(),
    };
    let webhook_id = opt_str(sent, "webhook_id")?.filter(|s| !s.is_empty());
    let action = match opt_str(sent, "action")? {
        Some("link") => "link",
        Some("webhook") => "webhook",
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Unknown button action '{other}'. Valid actions: link, webhook."
            )))
        }
        None if webhook_id.is_some() => "webhook",
        None => "link",
    };
    let mut out = Map::new();
    out.insert("label".into(), json!(label));
    out.insert("action".into(), json!(action));
    if let Some(color) = sent.get("color") {
        out.insert("color".into(), color.clone());
    }
    let mut webhook = None;
    if action == "link" {
        let Some(url) = opt_str(sent, "url_template")?.filter(|u| !u.trim().is_empty()) else {
            return Err(ApiError::bad_request(
                "A link button needs options.url_template.",
            ));
        };
        if url.chars().count() > MAX_BUTTON_URL_CHARS {
            return Err(ApiError::bad_request(format!(
                "options.url_template can be at most {MAX_BUTTON_URL_CHARS} characters."
            )));
        }
        let lower = url.trim_start().to_ascii_lowercase();
        if !(lower.starts_with("https://") || lower.starts_with("http://")) {
            return Err(ApiError::bad_request(
                "options.url_template must start with http:// or https://.",
            ));
        }
        out.insert("url_template".into(), json!(url));
    } else {
        let Some(id) = webhook_id else {
            return Err(ApiError::bad_request(
                "A webhook button needs options.webhook_id.",
            ));
        };
        out.insert("webhook_id".into(), json!(id));
        webhook = Some(id.to_owned());
    }
    if let Some(condition) = sent.get("condition").filter(|c| !c.is_null()) {
        check_relative_dates(condition, 0)?;
        out.insert("condition".into(), condition.clone());
    }
    Ok((out, webhook))
}

/// Every `{relative, ...}` object inside must be a valid relative date.
fn check_relative_dates(v: &Value, depth: usize) -> ApiResult<()> {
    if depth > MAX_CONDITION_DEPTH {
        return Err(ApiError::bad_request(
            "options.condition is nested too deeply.",
        ));
    }
    match v {
        Value::Object(m) => {
            if m.contains_key("relative") {
                filter_lang::dates::parse_relative(m)
                    .map_err(|e| ApiError::bad_request(format!("options.condition: {e}")))?;
                return Ok(());
            }
            m.values()
                .try_for_each(|x| check_relative_dates(x, depth + 1))
        }
        Value::Array(l) => l
            .iter()
            .try_for_each(|x| check_relative_dates(x, depth + 1)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn buttons() {
        let (o, w) = settle(&obj(json!({"url_template": "https://x.test/{id}"}))).unwrap();
        assert_eq!(o["label"], "Button");
        assert_eq!(o["action"], "link");
        assert!(w.is_none());
        let (o, w) = settle(&obj(
            json!({"webhook_id": "whk_x", "label": "y".repeat(50)}),
        ))
        .unwrap();
        assert_eq!(o["action"], "webhook");
        assert_eq!(o["label"].as_str().unwrap().len(), 40);
        assert_eq!(w.as_deref(), Some("whk_x"));
        assert!(settle(&obj(json!({"url_template": "ftp://x"}))).is_err());
        assert!(settle(&obj(json!({"action": "webhook"}))).is_err());
        assert!(settle(&obj(
            json!({"url_template": format!("https://{}", "a".repeat(2000))})
        ))
        .is_err());
        assert!(settle(&obj(json!({"url_template": "https://x", "condition":
            {"conditions": [{"field": "d", "op": "is", "value": {"relative": "yesterday"}}]}})))
        .is_err());
        assert!(settle(&obj(json!({"url_template": "https://x", "condition":
            {"conditions": [{"field": "d", "op": "is", "value": {"relative": "today", "offset": -3}}]}}))).is_ok());
    }
}
