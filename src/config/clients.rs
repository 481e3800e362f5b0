//! The bridge's HTTP clients, every one leaving the way the configuration's [`Egress`]
//! says: reqwest's own reading of the proxy variables is turned off and replaced by the
//! routes of the egress, so the HTTP calls and the long connection's WebSocket (which
//! asks the same egress) always agree on which proxy, if any, a host is reached through.

use std::time::Duration;

use secrecy::ExposeSecret;

use crate::config::Egress;

/// A client builder whose requests follow `egress`.
pub(crate) fn builder(egress: &Egress) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder().no_proxy();
    if egress.is_direct() {
        return builder;
    }
    let egress = egress.clone();
    // The URL with its credentials: reqwest turns them into `Proxy-Authorization`, on
    // forwarded requests and on its CONNECT tunnels alike.
    builder.proxy(reqwest::Proxy::custom(move |url| {
        egress
            .route(url)
            .map(|r| r.url().expose_secret().to_string())
    }))
}

/// The Open API's client: each request bounded by `timeout`.
pub(crate) fn open_api(egress: &Egress, timeout: Duration) -> reqwest::Client {
    build(builder(egress).timeout(timeout))
}

/// A client without an overall timeout (each request bounds itself: the agents, the
/// digest's summarizer, the long connection's endpoint).
pub(crate) fn unbounded(egress: &Egress) -> reqwest::Client {
    build(builder(egress))
}

/// Building fails only when the TLS backend cannot start; then reqwest's default client
/// is as good as it gets (it fails the same way on its first request).
fn build(builder: reqwest::ClientBuilder) -> reqwest::Client {
    builder.build().unwrap_or_else(|e| {
        tracing::error!(error = %e, "an HTTP client could not be built; using the default");
        reqwest::Client::default()
    })
}
