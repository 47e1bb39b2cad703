//! Account quotas and usage (`cluster_protocol::control::quotas`).

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use cluster_protocol::control::quotas::{
    AccountQuotas, AccountUsage, QuotaChange, TopUsage, UsageMeasure,
};

use crate::error::{ApiError, ApiResult, Body};
use crate::{service, AppState};

pub async fn show(
    State(state): State<AppState>,
    Path(user_id): Path<String>,
) -> ApiResult<Json<AccountQuotas>> {
    Ok(Json(service::quotas::show(&state, &user_id).await?))
}

pub async fn set(
    State(state): State<AppState>,
    Path(user_id): Path<String>,
    Body(change): Body<QuotaChange>,
) -> ApiResult<Json<AccountQuotas>> {
    Ok(Json(service::quotas::set(&state, &user_id, change).await?))
}

pub async fn usage(
    State(state): State<AppState>,
    Path(user_id): Path<String>,
) -> ApiResult<Json<AccountUsage>> {
    Ok(Json(service::usage::of_user(&state, &user_id).await?))
}

/// `?top=N&by=M` (`by` defaults to `requests_last_day`).
pub fn top_query(q: &HashMap<String, String>) -> ApiResult<(u32, UsageMeasure)> {
    let top = match q.get("top") {
        None => 10,
        Some(t) => t.parse::<u32>().map_err(|_| {
            ApiError::bad_request(format!("top must be a whole number, got {t:?}."))
        })?,
    };
    let by = match q.get("by") {
        None => UsageMeasure::default(),
        Some(b) => UsageMeasure::parse(b).ok_or_else(|| {
            let names: Vec<&str> = UsageMeasure::ALL.iter().map(|m| m.as_str()).collect();
            ApiError::bad_request(format!(
                "by must be one of {}, got {b:?}.",
                names.join(", ")
            ))
        })?,
    };
    Ok((top, by))
}

pub async fn top(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<TopUsage>> {
    let (top, by) = top_query(&q)?;
    Ok(Json(service::usage::top(&state, top, by).await?))
}
