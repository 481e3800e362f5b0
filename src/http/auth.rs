//! The admin bearer token, as an extractor. Health routes simply do not take it.

use axum::{extract::FromRequestParts, http::request::Parts};

use super::{ApiError, AppState};
use crate::protocol::crypto::ct_eq;

/// Proof that the request carried the admin token (or that none is configured, which
/// is only allowed on loopback or with `allow_unauthenticated`).
#[derive(Debug, Clone, Copy)]
pub struct AdminAuth;

/// The application state, handed only to a request that carried the admin token: an
/// admin route takes this instead of the plain state, so it cannot forget the check.
#[derive(Debug, Clone)]
pub struct Admin(pub AppState);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        check(&parts.headers, state)?;
        Ok(Self(state.clone()))
    }
}

/// Checks `Authorization: Bearer <admin_token>` in constant time.
pub fn check(headers: &axum::http::HeaderMap, state: &AppState) -> Result<AdminAuth, ApiError> {
    let Some(expected) = state.config.server.admin_token() else {
        return Ok(AdminAuth);
    };
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if ct_eq(given.trim().as_bytes(), expected.as_bytes()) {
        Ok(AdminAuth)
    } else {
        Err(ApiError::Unauthorized)
    }
}
