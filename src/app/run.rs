//! Running the service: bind, serve, stop on SIGTERM or Ctrl-C.

use anyhow::Context as _;
use tokio::net::TcpListener;

use super::bridge::Bridge;
use crate::config::{self, Config};

/// Resolves on SIGTERM or Ctrl-C. The handlers are installed when this is called, not
/// when the future is first polled: a signal sent right after the call is not lost.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C; stopping");
        }
    };
    #[cfg(unix)]
    let term = {
        let registered = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        async move {
            match registered {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    async move {
        tokio::select! {
            () = ctrl_c => {}
            () = term => {}
        }
    }
}

/// Binds the configured address and serves until SIGTERM or Ctrl-C.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let addr = config.server.listen_addr();
    if config.profiles.is_empty() {
        tracing::warn!("{}", no_profiles_hint(&config));
    }
    if config.server.admin_token().is_none() {
        tracing::warn!(%addr, "no admin_token: REST routes are open to anyone who can reach this address");
    }
    // SQLite is one process's: say so at once if another serves the same file.
    let _serving = {
        use secrecy::ExposeSecret;
        let url = config.database.url.expose_secret();
        match url.starts_with("sqlite:") {
            true => crate::store::SqliteStore::lock_for_serving(url).map_err(anyhow::Error::msg)?,
            false => None,
        }
    };
    // Before anything announces the service: a SIGTERM from then on stops it cleanly.
    let stop = shutdown_signal();
    let bridge = Bridge::start(config).await?;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    tracing::info!(addr = %bound, backend = bridge.state().store.backend().as_str(), "feishu-bridge listening");
    bridge.serve(listener, stop).await
}

/// What a run without profiles (the first run, typically) should do next: the config
/// file it read or looked for, what to add there, and the demo that needs no Feishu app.
fn no_profiles_hint(config: &Config) -> String {
    let table = "a [[profiles]] table (name, app_id, app_secret, verification_token, optional \
                 encrypt_key)";
    let next = match config.path() {
        Some(path) => format!(
            "no profiles configured in {}: add {table} to it, or point --config / \
             FEISHU_BRIDGE_CONFIG at another",
            path.display()
        ),
        None => format!(
            "no profiles configured: no config file at {}, so the built-in defaults are used; \
             write one there with {table}, or point --config / FEISHU_BRIDGE_CONFIG at one",
            config::default_path().display()
        ),
    };
    format!(
        "{next}. To see the bridge work without a Feishu app, run `sh examples/demo.sh` in its source tree"
    )
}
