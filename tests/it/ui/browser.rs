//! The web view in a real headless Chromium, on both backends: a thread link sends the
//! browser to sign in and back; the timeline shows a selected item and one the context
//! limit excluded, with its reason; hostile message text stays text; the cookies are
//! `HttpOnly` and `SameSite=Strict` and hold no admin token; what-if with a smaller
//! thread context shows the item it would drop; signing out ends the session.

use super::{HOSTILE, seeded};
use crate::{
    browser_both_backends,
    support::{ADMIN, TestDb, webdriver::Browser},
};

async fn thread_in_a_browser(db: TestDb) {
    let app = seeded(&db, "").await;
    let b = Browser::start().await;
    let thread = format!("{}/ui/threads/om_root?profile=planner", app.base);

    // Not signed in: the sign-in form, which leads back to the thread.
    b.goto(&thread).await;
    assert!(
        b.url().await.contains("/ui/login?next="),
        "{}",
        b.url().await
    );
    let token = b.find("#token").await;
    b.type_into(&token, ADMIN).await;
    b.click(&b.find("#sign-in").await).await;
    assert_eq!(b.wait_for_url("/ui/threads/").await, thread);
    assert_eq!(b.title().await, "Thread om_root · feishu-bridge");

    // The decision: what was selected, and what the limit of 2 left out, and why.
    let selected = b.find_all("#decisions tr.item.selected").await;
    assert!(!selected.is_empty(), "a selected item is shown");
    let mut shown = String::new();
    for row in &selected {
        shown.push_str(&b.text(row).await);
        shown.push('\n');
    }
    assert!(shown.contains("second: tag the build"), "{shown}");
    let excluded = b.find_all("#decisions tr.item.excluded").await;
    let mut left_out = Vec::new();
    for row in &excluded {
        left_out.push(b.text(row).await);
    }
    assert!(
        left_out
            .iter()
            .any(|r| r.contains("limit") && r.contains("first: check the changelog")),
        "{left_out:?}"
    );
    // The message rows carry their verdicts.
    let ask = b.text(&b.find("tr[id=\"msg-om_ask\"]").await).await;
    assert!(ask.contains("invoked") && ask.contains("mention"), "{ask}");

    // The hostile message is shown as its literal text, and nothing of it ran.
    let evil = b
        .text(&b.find("tr[id=\"msg-om_evil\"] td.text").await)
        .await;
    assert_eq!(evil, HOSTILE);
    assert_eq!(b.title().await, "Thread om_root · feishu-bridge");
    let images = b.script("return document.images.length;").await;
    assert_eq!(images, 0, "no <img> was made from message text");
    let scripts = b.script("return document.scripts.length;").await;
    assert_eq!(scripts, 0);

    // The cookies, as the browser holds them.
    let cookies = b.cookies().await;
    let session = cookies
        .iter()
        .find(|c| c["name"] == "fb_ui_session")
        .expect("the session cookie");
    assert_eq!(session["httpOnly"], true);
    assert_eq!(session["sameSite"], "Strict");
    assert_eq!(session["path"], "/ui");
    assert!(
        b.script("return document.cookie;").await == "",
        "no cookie is readable by script"
    );
    for c in &cookies {
        assert!(!c.to_string().contains(ADMIN), "{c}");
    }
    assert!(!b.source().await.contains(ADMIN));

    // What if the thread context had held one item: the older of the two selected
    // messages drops out, for the limit.
    b.click(&b.find("details.what-if summary").await).await;
    let limit = b
        .find("form.what-if input[name=\"thread_context_limit\"]")
        .await;
    b.type_into(&limit, "1").await;
    b.click(&b.find("form.what-if button[type=\"submit\"]").await)
        .await;
    b.wait_for_url("/what-if").await;
    assert!(
        b.title().await.starts_with("What if · decision "),
        "{}",
        b.title().await
    );
    let changed = b.text(&b.find("table.settings tr.changed").await).await;
    assert!(changed.contains("thread_context_limit 2 1"), "{changed}");
    let dropped = b.find_all("#diff tr.item.dropped").await;
    assert_eq!(dropped.len(), 1, "one item dropped");
    let row = b.text(&dropped[0]).await;
    assert!(row.contains("limit"), "{row}");
    assert!(b.find_all("#diff tr.item.added").await.is_empty());
    assert!(b.find_all("#unchanged").await.is_empty());
    b.click(&b.find("#back").await).await;
    assert!(
        b.url().await.contains("/ui/threads/om_root"),
        "back to the thread"
    );

    // Sign out: back at the form, and the thread needs a new sign-in.
    b.click(&b.find("#logout").await).await;
    assert!(b.wait_for_url("/ui/login").await.ends_with("/ui/login"));
    b.goto(&thread).await;
    assert!(b.url().await.contains("/ui/login?next="));
    b.quit();
    app.stop().await.expect("clean stop");
}

browser_both_backends!(a_thread_s_timeline_in_a_browser, thread_in_a_browser);
