//! Test harness: per-test databases, a real bridge on an ephemeral port, and Feishu
//! callbacks built with the real crypto.

pub mod app;
pub mod cards;
pub mod certs;
pub mod cli;
pub mod connect_proxy;
pub mod crash;
pub mod db;
pub mod db_lock;
pub mod environment;
pub mod fake_feishu;
pub mod fake_longconn;
pub mod fake_openai;
pub mod fake_summarizer;
pub mod feishu;
pub mod full_disk;
pub mod gated_agent;
#[path = "../../faults/support/pg_bin.rs"]
mod pg_bin;
pub mod pg_cluster;
pub mod probe;
pub mod proxy;
pub mod raw;
pub mod webdriver;

pub use app::{ADMIN, Answer, TestApp, config, config_toml, config_with_env};
pub use db::{Kind, TestDb};
pub use feishu::{Request, Signer};

/// Waits (at most 30 s, event-driven: no sleeps) for the next message on `rx` that
/// `wanted` accepts; a lagging receiver just reads on.
pub async fn next_matching<T: Clone>(
    rx: &mut tokio::sync::broadcast::Receiver<T>,
    what: &str,
    mut wanted: impl FnMut(&T) -> bool,
) -> T {
    use tokio::sync::broadcast::error::RecvError;
    let wait = async {
        loop {
            match rx.recv().await {
                Ok(m) if wanted(&m) => return m,
                Ok(_) | Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => panic!("channel closed while waiting for {what}"),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Runs a test body once per backend. The Postgres variant is compiled as ignored when
/// the build found Postgres unreachable (see `build.rs` and [`environment`]), so the
/// summary counts it as ignored, never as passed.
#[macro_export]
macro_rules! both_backends {
    ($name:ident, $body:ident) => {
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                let db = $crate::support::TestDb::sqlite();
                super::$body(db).await;
            }
            #[tokio::test]
            #[cfg_attr(
                pg_unreachable,
                ignore = "Postgres was unreachable when the tests were built"
            )]
            async fn postgres() {
                let db = $crate::support::TestDb::postgres().await;
                super::$body(db).await;
            }
        }
    };
}
