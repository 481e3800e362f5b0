//! The ceiling for any webhook receiver on this stack: axum on the default
//! multi-threaded tokio runtime (as the real server uses), reading the whole body of a
//! POST to any path and answering 200 `{"msg":"success"}`, with no verification and no
//! storage.
//!
//! ```text
//! cargo run --release --example bare_axum -- 127.0.0.1:18080
//! ```

use axum::{Router, body::Bytes, http::header, response::IntoResponse, routing::post};

async fn ack(body: Bytes) -> impl IntoResponse {
    // Reading the body is part of the work any receiver must do.
    std::hint::black_box(body.len());
    (
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"msg":"success"}"#,
    )
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18080".to_string());
    let app = Router::new()
        .route("/", post(ack))
        .route("/{*path}", post(ack));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("bare_axum listening on {addr}");
    axum::serve(listener, app).await
}
