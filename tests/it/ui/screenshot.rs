//! The screenshot in the docs: a demo thread's timeline in headless Chromium, as a PNG.
//!
//! It always renders and checks the image; with `FEISHU_BRIDGE_UI_SCREENSHOT=1` it also
//! writes it to `docs/img/ui-timeline.png`:
//!
//! ```text
//! FEISHU_BRIDGE_UI_SCREENSHOT=1 cargo test --test it ui::screenshot
//! ```

use crate::support::{
    ADMIN, TestApp, TestDb, config, config_toml,
    feishu::{Msg, now_ms},
    probe::required,
    webdriver::Browser,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    browser_missing,
    ignore = "chromium or chromedriver was missing when the tests were built"
)]
async fn the_timeline_screenshot() {
    let db = TestDb::sqlite();
    let extra = "[context]\nshared_thread_enabled = true\nthread_context_limit = 3\n";
    let mut app = TestApp::spawn(config(&config_toml(&db, extra))).await;
    let t0 = now_ms() - 600_000;
    app.route(&Msg::group("om_release", "Release 2.0 checklist").at(t0))
        .await;
    let talk = [
        ("om_r1", "ou_bob", "CI is green on main since this morning"),
        (
            "om_r2",
            "ou_carol",
            "Changelog still misses the migration notes",
        ),
        (
            "om_r3",
            "ou_bob",
            "I will write the migration notes after lunch",
        ),
        ("om_r4", "ou_carol", "Docs preview is up, please review"),
    ];
    for (i, (id, by, text)) in (1..).zip(talk) {
        let m = Msg::group(id, text)
            .in_thread("om_release")
            .by(by)
            .at(t0 + i * 60_000);
        app.route(&m).await;
    }
    let ask = Msg::group("om_r5", "what is still open before we tag?")
        .at_bot()
        .in_thread("om_release")
        .at(t0 + 400_000);
    assert_eq!(app.ask(&ask).await, "answered");

    let b = Browser::start().await;
    let next = "%2Fui%2Fthreads%2Fom_release%3Fprofile%3Dplanner";
    b.goto(&format!("{}/ui/login?next={next}", app.base)).await;
    b.type_into(&b.find("#token").await, ADMIN).await;
    b.click(&b.find("#sign-in").await).await;
    b.wait_for_url("/ui/threads/om_release").await;
    assert!(!b.find_all("#decisions tr.item.excluded").await.is_empty());
    let png = b.full_page_screenshot(1280).await;
    b.quit();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(png.len() > 10_000, "a real picture: {} bytes", png.len());
    if required("FEISHU_BRIDGE_UI_SCREENSHOT") {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img/ui-timeline.png");
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("docs/img");
        std::fs::write(&path, &png).expect("the screenshot is written");
    }
    app.stop().await.expect("clean stop");
}
