//! A small WebDriver client over reqwest, enough for the web view's browser tests: a
//! `chromedriver` of the test's own on an ephemeral port, one headless Chromium session,
//! and the W3C commands the tests use (navigate, find, click, type, read, run a script,
//! cookies, screenshot).
//!
//! The driver is started with `--port=0` and the test reads the port it chose from its
//! first lines of output: it is ready once it has said so, with no polling and no sleep.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::Duration,
};

use base64::Engine;
use serde_json::{Value, json};

use super::probe::on_path;

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A running chromedriver with one browser session; both end on drop.
pub struct Browser {
    driver: Child,
    port: u16,
    /// `http://127.0.0.1:<port>/session/<id>` once the session is made.
    base: String,
    http: reqwest::Client,
    /// The browser's profile directory.
    _profile: tempfile::TempDir,
}

/// A found element.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver and a headless Chromium (1280×900).
    pub async fn start() -> Self {
        let chromium = on_path("chromium").expect("chromium on the PATH");
        let chromedriver = on_path("chromedriver").expect("chromedriver on the PATH");
        let mut driver = Command::new(chromedriver)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let stdout = driver.stdout.take().expect("its output");
        let port = tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stdout).lines();
            let port = lines.by_ref().find_map(|l| {
                let l = l.ok()?;
                let rest = l.split("started successfully on port ").nth(1)?;
                rest.trim_end_matches('.').parse::<u16>().ok()
            });
            // Keep draining, so the driver never blocks on a full pipe.
            std::thread::spawn(move || lines.for_each(drop));
            port
        })
        .await
        .expect("reads the driver's output")
        .expect("chromedriver says which port it listens on");
        let profile = tempfile::tempdir().expect("profile dir");
        let mut browser = Self {
            driver,
            port,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("client"),
            _profile: profile,
        };
        let args = [
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1280,900".into(),
            format!("--user-data-dir={}", browser._profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let created = browser.call("POST", "/session", Some(caps)).await;
        let id = created["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        browser.base = format!("{}/session/{id}", browser.base);
        browser
    }

    /// One command; its `value`. A WebDriver error fails the test with its message.
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_call(method, path, body)
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// One command; its `value`, or the driver's error.
    async fn try_call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.http.request(m, &url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("the driver answers");
        let status = resp.status();
        let v: Value = resp.json().await.expect("a JSON answer");
        if status.is_success() {
            Ok(v["value"].clone())
        } else {
            Err(format!("{status} {}", v["value"]))
        }
    }

    /// Opens `url` and waits for it to load.
    pub async fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({ "url": url }))).await;
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        self.call("GET", "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits until the browser is at a URL containing `part` and the page has loaded
    /// (a click that submits a form can return before the next page is there). Bounded
    /// at 30 s; it asks the browser, it does not sleep.
    pub async fn wait_for_url(&self, part: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let state = json!({"script": "return [location.href, document.readyState];", "args": []});
        loop {
            // Mid-navigation the page may not answer a script: ask again.
            let now = self
                .try_call("POST", "/execute/sync", Some(state.clone()))
                .await
                .unwrap_or_default();
            let url = now[0].as_str().unwrap_or_default().to_string();
            if url.contains(part) && now[1] == "complete" {
                return url;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the browser did not reach {part} (at {url})"
            );
        }
    }

    /// The document's title.
    pub async fn title(&self) -> String {
        self.call("GET", "/title", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The page's HTML as the browser holds it now.
    pub async fn source(&self) -> String {
        self.call("GET", "/source", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Every element matching a CSS selector.
    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        let found = self
            .call(
                "POST",
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[ELEMENT].as_str())
                    .map(|id| Element(id.to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The first element matching a CSS selector (the test fails without one).
    pub async fn find(&self, css: &str) -> Element {
        let found = self
            .call(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        Element(found[ELEMENT].as_str().expect("an element").to_string())
    }

    /// Clicks an element (a submit button waits for the next page to load).
    pub async fn click(&self, e: &Element) {
        self.call("POST", &format!("/element/{}/click", e.0), Some(json!({})))
            .await;
    }

    /// Types into an element.
    pub async fn type_into(&self, e: &Element, text: &str) {
        self.call(
            "POST",
            &format!("/element/{}/value", e.0),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// An element's rendered text.
    pub async fn text(&self, e: &Element) -> String {
        self.call("GET", &format!("/element/{}/text", e.0), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Runs a script in the page; what it returns.
    pub async fn script(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// The browser's cookies for the current page, as WebDriver reports them.
    pub async fn cookies(&self) -> Vec<Value> {
        self.call("GET", "/cookie", None)
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let b64 = self.call("GET", "/screenshot", None).await;
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or_default())
            .expect("base64 PNG")
    }

    /// A PNG of the whole page (up to 4 000 pixels tall), `width` pixels wide.
    pub async fn full_page_screenshot(&self, width: u32) -> Vec<u8> {
        let measure = "return [document.documentElement.scrollHeight, window.innerHeight];";
        let mut height = 900;
        // The window holds the browser's frame besides the page: size it, measure the
        // page against the viewport, and size it again to fit.
        for _ in 0..2 {
            self.call(
                "POST",
                "/window/rect",
                Some(json!({"width": width, "height": height})),
            )
            .await;
            let m = self.script(measure).await;
            let (page, inner) = (m[0].as_u64().unwrap_or(900), m[1].as_u64().unwrap_or(900));
            height = (u64::from(height) + page).saturating_sub(inner).min(4000) as u32;
        }
        self.screenshot().await
    }

    /// Ends the session (which closes the browser) and the driver.
    pub fn quit(self) {
        drop(self);
    }
}

impl Drop for Browser {
    /// Also when a test fails: the session is deleted first, with a plain blocking
    /// request, so no browser outlives its driver.
    fn drop(&mut self) {
        if let Some(path) = self.base.split_once("/session/").map(|(_, id)| id) {
            let request = format!(
                "DELETE /session/{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            );
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                use std::io::{Read, Write};
                let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
                let _ = s.write_all(request.as_bytes());
                let _ = s.read_to_end(&mut Vec::new());
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
