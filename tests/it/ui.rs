//! The web view under `/ui`: sign-in, CSRF, headers and escaping over plain HTTP
//! (`forms`), the whole flow in a real headless Chromium on both backends (`browser`),
//! and the screenshot in the docs (`screenshot`).

mod browser;
mod forms;
mod screenshot;

use crate::support::{TestApp, TestDb, config, config_toml, feishu::Msg};

/// Message text that would run script if a page did not escape it.
pub const HOSTILE: &str = "<script>document.title='pwned'</script>\
     <img src=x onerror=\"document.title='pwned'\">";

/// Config extra: a thread context of 2 items, so older thread messages are excluded.
pub const SMALL_CONTEXT: &str =
    "[context]\nshared_thread_enabled = true\nthread_context_limit = 2\n";

/// A bridge with the thread `om_root`: the root, three thread messages (the middle one
/// hostile), and a question to the bot that ran a turn. With 2 thread items the oldest
/// message (`om_old`) is excluded by the limit.
pub async fn seeded(db: &TestDb, extra: &str) -> TestApp {
    let text = config_toml(db, &format!("{extra}{SMALL_CONTEXT}"));
    let mut app = TestApp::spawn(config(&text)).await;
    seed_thread(&mut app).await;
    app
}

/// Routes the thread of [`seeded`] through `app`, said a second apart.
pub async fn seed_thread(app: &mut TestApp) {
    let t0 = crate::support::feishu::now_ms() - 60_000;
    app.route(&Msg::group("om_root", "Plan the 2.0 release").at(t0))
        .await;
    let thread = [
        ("om_old", "first: check the changelog", "ou_bob"),
        ("om_evil", HOSTILE, "ou_mallory"),
        ("om_new", "second: tag the build", "ou_alice"),
    ];
    for (i, (id, text, by)) in (1..).zip(thread) {
        let m = Msg::group(id, text)
            .in_thread("om_root")
            .by(by)
            .at(t0 + i * 1_000);
        app.route(&m).await;
    }
    let ask = Msg::group("om_ask", "what is left?")
        .at_bot()
        .in_thread("om_root")
        .at(t0 + 10_000);
    assert_eq!(app.ask(&ask).await, "answered");
}

/// Runs a browser test body once per backend. Compiled as ignored when the build found
/// no chromium or chromedriver (see `build.rs`), or for Postgres when it was unreachable,
/// so the summary counts it as ignored, never as passed.
#[macro_export]
macro_rules! browser_both_backends {
    ($name:ident, $body:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[cfg_attr(
                browser_missing,
                ignore = "chromium or chromedriver was missing when the tests were built"
            )]
            async fn sqlite() {
                let db = $crate::support::TestDb::sqlite();
                super::$body(db).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[cfg_attr(
                any(browser_missing, pg_unreachable),
                ignore = "chromium, chromedriver or Postgres was missing when the tests were built"
            )]
            async fn postgres() {
                let db = $crate::support::TestDb::postgres().await;
                super::$body(db).await;
            }
        }
    };
}
