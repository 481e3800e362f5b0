//! Running the service: bind, serve, stop on SIGTERM or Ctrl-C.

use anyhow::Context as _;
use tokio::net::TcpListener;

use super::bridge::Bridge;
use crate::config::Config;

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C; stopping");
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// Binds the configured address and serves until SIGTERM or Ctrl-C.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let addr = config.server.listen_addr();
    if config.profiles.is_empty() {
        tracing::warn!(
            "no profiles configured in {}: add a [[profiles]] table (name, app_id, verification_token, \
             optional encrypt_key) to the config file, or point --config / FEISHU_BRIDGE_CONFIG at one",
            config.source_label()
        );
    }
    if config.server.admin_token().is_none() {
        tracing::warn!(%addr, "no admin_token: REST routes are open to anyone who can reach this address");
    }
    let bridge = Bridge::start(config).await?;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    tracing::info!(addr = %bound, backend = bridge.state().store.backend().as_str(), "feishu-bridge listening");
    bridge.serve(listener, shutdown_signal()).await
}
