//! `Path` and `Query` extractors that refuse bad input as [`ApiError::BadRequest`], in
//! our JSON shape, instead of axum's plain-text rejections.
//!
//! Their messages name the parameter and what was wrong with it, never its value: a
//! query string or path can carry anything a client typed.

use axum::{
    extract::{
        FromRequestParts,
        path::{ErrorKind, FailedToDeserializePathParams},
        rejection::PathRejection,
    },
    http::request::Parts,
};
use serde::de::DeserializeOwned;

use super::ApiError;
use crate::redact::{decode, echo};

/// Path parameters, percent-decoded; a bad one is `bad_request`.
#[derive(Debug, Clone, Copy)]
pub struct Path<T>(pub T);

/// The query string; a bad parameter is `bad_request`.
#[derive(Debug, Clone, Copy)]
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Self(value)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => Err(path_error(e)),
            Err(_) => Err(ApiError::BadRequest(
                "the path parameters could not be read".into(),
            )),
        }
    }
}

fn path_error(e: FailedToDeserializePathParams) -> ApiError {
    let message = match e.into_kind() {
        ErrorKind::InvalidUtf8InPathParam { key } => format!(
            "path parameter {} is not valid UTF-8 once percent-decoded",
            echo(&key)
        ),
        ErrorKind::ParseErrorAtKey {
            key, expected_type, ..
        } => format!(
            "path parameter {} is not a valid {expected_type}",
            echo(&key)
        ),
        ErrorKind::ParseError { expected_type, .. }
        | ErrorKind::ParseErrorAtIndex { expected_type, .. } => {
            format!("a path parameter is not a valid {expected_type}")
        }
        _ => "the path parameters could not be read".into(),
    };
    ApiError::BadRequest(message)
}

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        decode::from_query(query)
            .map(Self)
            .map_err(|failure| ApiError::BadRequest(format!("invalid query string: {failure}")))
    }
}
