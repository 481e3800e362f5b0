//! The OpenAPI document, generated from the same declarations as the routes.
//!
//! `openapi.yaml` at the top of the repository is this document serialised; a test fails
//! when they differ. Regenerate with `cargo run -- openapi > openapi.yaml`.

/// The document generated from the routes.
pub fn document() -> utoipa::openapi::OpenApi {
    let (_, mut api) = super::router::api_router().split_for_parts();
    api.info.version = env!("CARGO_PKG_VERSION").to_string();
    api
}

/// The document as YAML, exactly as committed in `openapi.yaml`.
pub fn yaml() -> String {
    document().to_yaml().unwrap_or_default()
}
