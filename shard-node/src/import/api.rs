//! The handler of `POST /api/databases/{id}/import`: reads the multipart
//! body and answers the preview. Membership is not checked on the preview
//! (part B); the run (`target` + `plan`) is not built yet and answers 404,
//! as the route did before it existed.

use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::Json;
use serde_json::Value;

use crate::auth::AnyCaller;
use crate::error::{ApiError, ApiResult};
use crate::import::{preview, sheet, MAX_DECLARED_BYTES, MAX_FILE_BYTES};
use crate::state::AppState;

/// The parts of the form the route reads.
#[derive(Debug, Default)]
struct Form {
    file: Option<(String, Vec<u8>)>,
    target: bool,
    plan: bool,
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
    let form = read_form(multipart).await?;
    match (form.target, form.plan) {
        (false, false) => {}
        (true, true) => return Err(ApiError::NotFound),
        _ => {
            return Err(ApiError::bad_request(
                "An import run needs both target and plan; send file alone to preview.",
            ))
        }
    }
    let Some((filename, bytes)) = form.file else {
        return Err(ApiError::bad_request(
            "The multipart part \"file\" is missing: attach the spreadsheet as file.",
        ));
    };
    let sheet = tokio::task::spawn_blocking(move || sheet::read(&filename, &bytes))
        .await
        .map_err(|e| ApiError::Internal(e.into()))??;
    Ok(Json(preview::preview(&sheet)))
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

async fn read_form(mut multipart: Multipart) -> ApiResult<Form> {
    let mut form = Form::default();
    while let Some(mut field) = multipart.next_field().await.map_err(|_| truncated())? {
        match field.name().unwrap_or_default() {
            "file" => {
                let filename = field.file_name().unwrap_or_default().to_owned();
                let mut bytes = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(|_| truncated())? {
                    if bytes.len() + chunk.len() > MAX_FILE_BYTES {
                        return Err(too_large());
                    }
                    bytes.extend_from_slice(&chunk);
                }
                form.file = Some((filename, bytes));
            }
            "target" => form.target = true,
            "plan" => form.plan = true,
            _ => {}
        }
    }
    Ok(form)
}
