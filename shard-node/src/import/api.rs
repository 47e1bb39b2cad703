//! The handler of `POST /api/databases/{id}/import`: reads the multipart
//! body, then previews (`file` alone; membership not checked, part B) or
//! runs (`file` + `target` + `plan`; editor, with the refusals of every
//! other route: a non-member gets 404 here too).

use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::Json;
use serde_json::Value;

use crate::auth::roles::Need;
use crate::auth::AnyCaller;
use crate::error::{ApiError, ApiResult};
use crate::import::{plan, preview, run, sheet, MAX_DECLARED_BYTES, MAX_FILE_BYTES};
use crate::state::AppState;

/// Largest `target` or `plan` part read.
pub const MAX_JSON_PART_BYTES: usize = 1024 * 1024;

/// The parts of the form the route reads.
#[derive(Debug, Default)]
struct Form {
    file: Option<(String, Vec<u8>)>,
    target: Option<String>,
    plan: Option<String>,
}

pub async fn handler(
    AnyCaller(access): AnyCaller,
    State(state): State<AppState>,
    Path(id): Path<String>,
    request: Request,
) -> ApiResult<Json<Value>> {
    access.database(&id)?;
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_DECLARED_BYTES) {
        return Err(too_large());
    }
    let multipart = Multipart::from_request(request, &state)
        .await
        .map_err(|_| ApiError::bad_request("Request body must be multipart/form-data."))?;
    let form = read_form(multipart, declared).await?;
    let run_parts = match (form.target, form.plan) {
        (None, None) => None,
        (Some(target), Some(plan)) => Some((target, plan)),
        _ => {
            return Err(ApiError::bad_request(
                "An import run needs both target and plan; send file alone to preview.",
            ))
        }
    };
    if run_parts.is_some() {
        access.require(Need::Write)?;
    }
    let Some((filename, bytes)) = form.file else {
        return Err(ApiError::bad_request(
            "The multipart part \"file\" is missing: attach the spreadsheet as file.",
        ));
    };
    match run_parts {
        None => {
            let reply = tokio::task::spawn_blocking(move || {
                preview::preview(&mut sheet::open(&filename, bytes)?)
            })
            .await
            .map_err(|e| ApiError::Internal(e.into()))??;
            Ok(Json(reply))
        }
        Some((target, plan_text)) => {
            let target = plan::parse_target(&target)?;
            let plan = plan::parse_plan(&plan_text)?;
            let reply = run::run(&state, &access, target, plan, filename, bytes).await?;
            Ok(Json(reply))
        }
    }
}

fn too_large() -> ApiError {
    ApiError::bad_request(format!(
        "The file is larger than the {} MB an import reads.",
        MAX_FILE_BYTES / (1024 * 1024)
    ))
}

fn truncated() -> ApiError {
    ApiError::bad_request("The multipart body could not be read: it is malformed or truncated.")
}

/// The form's parts; the file's buffer is sized from the declared length
/// (at most [`MAX_FILE_BYTES`]) so it is not grown by doubling. A file over
/// the limit is refused only once the rest of the form has been read and
/// dropped ([`drain`]): the router streams the body and reads the answer
/// once its write is done, so a refusal sent while it still writes would
/// reach it as a reset connection (a 503) instead of this 400.
async fn read_form(mut multipart: Multipart, declared: Option<u64>) -> ApiResult<Form> {
    let mut form = Form::default();
    // Bytes of the form read so far, once the file is known to be too large.
    let mut refused: Option<u64> = None;
    loop {
        let mut field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(_) if refused.is_some() => break,
            Err(_) => return Err(truncated()),
        };
        if let Some(seen) = refused.as_mut() {
            if !drain(&mut field, seen).await {
                break;
            }
            continue;
        }
        let name = field.name().unwrap_or_default().to_owned();
        match name.as_str() {
            "file" => {
                let filename = field.file_name().unwrap_or_default().to_owned();
                let expected = declared.unwrap_or(0).min(MAX_FILE_BYTES as u64) as usize;
                let mut bytes = Vec::with_capacity(expected);
                while let Some(chunk) = field.chunk().await.map_err(|_| truncated())? {
                    if bytes.len() + chunk.len() > MAX_FILE_BYTES {
                        let mut seen = (bytes.len() + chunk.len()) as u64;
                        bytes = Vec::new();
                        let whole = drain(&mut field, &mut seen).await;
                        refused = Some(seen);
                        if !whole {
                            return Err(too_large());
                        }
                        break;
                    }
                    bytes.extend_from_slice(&chunk);
                }
                if refused.is_some() {
                    continue;
                }
                form.file = Some((filename, bytes));
            }
            "target" | "plan" => {
                let mut bytes = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(|_| truncated())? {
                    if bytes.len() + chunk.len() > MAX_JSON_PART_BYTES {
                        return Err(ApiError::bad_request(format!(
                            "The {name} part is larger than {} KB.",
                            MAX_JSON_PART_BYTES / 1024
                        )));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                let text = String::from_utf8(bytes).map_err(|_| {
                    ApiError::bad_request(format!("The {name} part is not UTF-8 text."))
                })?;
                if name == "target" {
                    form.target = Some(text);
                } else {
                    form.plan = Some(text);
                }
            }
            _ => {}
        }
    }
    match refused {
        Some(_) => Err(too_large()),
        None => Ok(form),
    }
}

/// Reads and drops the rest of `field`, counting into `seen`; false when
/// the form ends badly or passes [`MAX_DECLARED_BYTES`] in all (the node
/// then answers without reading further, as for a larger declared length).
async fn drain(field: &mut axum::extract::multipart::Field<'_>, seen: &mut u64) -> bool {
    loop {
        match field.chunk().await {
            Ok(Some(chunk)) => {
                *seen += chunk.len() as u64;
                if *seen > MAX_DECLARED_BYTES {
                    return false;
                }
            }
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}
