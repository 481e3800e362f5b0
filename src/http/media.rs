//! `GET /media/{token}`: an image or file a turn's message carries, for the webhook
//! agent the turn's signed URL was given to. The token is the credential: signed with a
//! key derived from the profile's agent secret, expiring, naming one resource of one
//! message. The bytes are fetched from Feishu as the URL is read (a file streamed on as
//! it arrives); nothing is stored.

use axum::{
    body::Body,
    extract::State,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use secrecy::ExposeSecret;

use super::{ApiError, AppState, ErrorBody, extract::Path};
use crate::{
    config::FEISHU_IMAGE_MAX_BYTES,
    feishu_api::{
        codes::{self, RESOURCE_GONE},
        media::Answered,
    },
    media::{
        self,
        token::{self, TokenError},
    },
    util::now_secs,
};

/// The most bytes of a file served (Feishu's own limit on a file message is 100 MB).
const FILE_MAX_BYTES: usize = 100 * 1024 * 1024;

fn refused(status: StatusCode, code: &'static str, message: &str) -> ApiError {
    ApiError::Media(status, code, message.to_string())
}

/// Serves the resource a media token names.
#[utoipa::path(get, path = "/media/{token}", tag = "agents",
    params(("token" = String, Path, description = "The token of a signed media URL given with a turn (`media[].url`)")),
    responses(
        (status = 200, description = "The image or file's bytes, with its content type", content_type = "application/octet-stream"),
        (status = 403, description = "`bad_media_token`: malformed, altered, or signed with another secret", body = ErrorBody),
        (status = 404, description = "`unknown_profile`, or `media_unavailable`: Feishu no longer serves it to the bot", body = ErrorBody),
        (status = 410, description = "`media_expired`: past its expiry; or `media_gone`: its message was recalled", body = ErrorBody),
        (status = 413, description = "`media_too_large`: an image over `media.max_image_bytes`", body = ErrorBody),
        (status = 502, description = "`media_fetch_failed`: the Open API failed", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    ))]
pub async fn get(
    State(app): State<AppState>,
    Path(token): Path<String>,
) -> Result<Response, ApiError> {
    let bad = || {
        refused(
            StatusCode::FORBIDDEN,
            "bad_media_token",
            "the media token is not valid",
        )
    };
    let peeked = token::peek(&token).map_err(|_| bad())?;
    let profile = app
        .config
        .profile(&peeked.profile)
        .ok_or_else(|| ApiError::UnknownProfile(peeked.profile.clone()))?;
    let secret = profile
        .agent
        .secret
        .as_ref()
        .map(|s| s.expose_secret().to_string())
        .unwrap_or_default();
    let claims = match token::verify(&secret, &token, now_secs()) {
        Ok(c) if !secret.is_empty() => c,
        Err(TokenError::Expired) => {
            return Err(refused(
                StatusCode::GONE,
                "media_expired",
                "this media URL has expired",
            ));
        }
        _ => return Err(bad()),
    };
    // A recall takes the message's references with it: its URLs stop serving.
    let ids = [claims.message_id.clone()];
    let refs = media::refs_of(&*app.store, &claims.profile, &ids)
        .await
        .map_err(ApiError::store)?;
    let still_there = refs
        .iter()
        .flat_map(|(_, r)| r)
        .any(|r| r.key() == Some(claims.key.as_str()));
    if !still_there {
        return Err(refused(
            StatusCode::GONE,
            "media_gone",
            "the message carrying this media was recalled or is no longer recorded",
        ));
    }
    let Some(client) = app.clients.get(&claims.profile) else {
        return Err(ApiError::UnknownProfile(claims.profile));
    };
    let failed = |e: crate::feishu_api::OpenApiError| {
        if e.code().is_some_and(|c| codes::is(&RESOURCE_GONE, c)) {
            refused(
                StatusCode::NOT_FOUND,
                "media_unavailable",
                "Feishu no longer serves this media to the bot",
            )
        } else {
            tracing::warn!(profile = %claims.profile, error = %e, "a media URL's bytes could not be fetched");
            refused(
                StatusCode::BAD_GATEWAY,
                "media_fetch_failed",
                "the Open API failed; try again",
            )
        }
    };
    let too_large = || {
        refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            "media_too_large",
            "the media is larger than the bridge serves",
        )
    };
    if claims.kind == "image" {
        // An image is read whole (within its budget), as a turn reads it.
        let cap = app.config.media.max_image_bytes.min(FEISHU_IMAGE_MAX_BYTES);
        let got = client
            .resource(&claims.message_id, &claims.key, "image", cap)
            .await
            .map_err(failed)?;
        if got.cut {
            return Err(too_large());
        }
        return Ok(served(got.content_type, Body::from(got.bytes), None));
    }
    // A file is streamed on as it arrives.
    let answer = client
        .resource_answer(&claims.message_id, &claims.key, "file", FILE_MAX_BYTES)
        .await
        .map_err(failed)?;
    match answer {
        Answered::Open(resp, content_type) => {
            let size = resp.content_length();
            if size.is_some_and(|s| s > FILE_MAX_BYTES as u64) {
                return Err(too_large());
            }
            let chunks = futures_util::stream::unfold(Some(resp), |resp| async move {
                let mut resp = resp?;
                match resp.chunk().await {
                    Ok(Some(chunk)) => Some((Ok(chunk), Some(resp))),
                    Ok(None) => None,
                    Err(e) => Some((Err(e), None)),
                }
            });
            Ok(served(content_type, Body::from_stream(chunks), size))
        }
        Answered::Read(got) if got.cut => Err(too_large()),
        Answered::Read(got) => Ok(served(got.content_type, Body::from(got.bytes), None)),
    }
}

/// The answer serving `body`: its content type (never an Open API JSON one), its length
/// when known, and no caching.
fn served(content_type: Option<String>, body: Body, size: Option<u64>) -> Response {
    let content_type = content_type
        .filter(|t| !t.starts_with("application/json"))
        .unwrap_or_else(|| "application/octet-stream".into());
    let mut resp = (StatusCode::OK, body).into_response();
    let headers = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    if let Some(size) = size {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    resp
}
