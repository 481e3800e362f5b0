//! The OpenAPI document's metadata: title, description, tags, and the bearer scheme.
//! The routes add their own paths (see `router::api_router`).

use utoipa::{
    Modify, OpenApi,
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
};

/// Top-level document metadata.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "feishu-bridge",
        description = "Feishu (Lark) event URL for AI-agent bots: verified ingress, durable inbox, \
                       deterministic thread context, and explanations of every context decision. \
                       Every error is `{\"error\": {\"code\", \"message\"}}`; besides the answers \
                       listed per route, any route may answer 405 `method_not_allowed` or 408 \
                       `request_timeout`.",
        license(name = "Apache-2.0")
    ),
    modifiers(&BearerScheme),
    tags(
        (name = "ingress", description = "Feishu callbacks"),
        (name = "operations", description = "Health, status and metrics"),
        (name = "sessions", description = "Session mappings"),
        (name = "explain", description = "Why the bot did or did not answer"),
        (name = "agents", description = "Callbacks from webhook agents"),
        (name = "turns", description = "Requests handed to agents, and what became of them"),
        (name = "feed", description = "The batched feed of un-mentioned group messages"),
        (name = "digest", description = "The daily digest: each session summarized, then started afresh"),
    )
)]
pub struct ApiDoc;

struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("`server.admin_token`"))
                    .build(),
            ),
        );
    }
}
