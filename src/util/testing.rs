//! Helpers for unit tests: local HTTP servers standing in for outside services.

use std::net::SocketAddr;

/// Serves `router` on an ephemeral port of 127.0.0.1; its address.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// An address of 127.0.0.1 nobody listens on (bound, then released).
pub fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
}
