//! HTML that cannot carry unescaped text: [`Html`] takes markup only as `&'static str`
//! (written in this crate's source) and everything else through [`Html::text`], which
//! escapes it. Message text, names, ids and agent output therefore reach a page only as
//! text, whatever they hold. Also the page shell every view shares, and the one way to
//! put a path segment or query value into a link.

use axum::{
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};

use crate::http::error::Shaped;

/// A fragment of HTML, built from static markup and escaped text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Html(String);

impl Html {
    /// An empty fragment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends markup written in the source.
    pub fn raw(&mut self, markup: &'static str) -> &mut Self {
        self.0.push_str(markup);
        self
    }

    /// Appends text, escaped (valid in element content and in quoted attributes).
    pub fn text(&mut self, text: &str) -> &mut Self {
        escape_into(&mut self.0, text);
        self
    }

    /// Appends a number.
    pub fn num(&mut self, n: impl Into<i64>) -> &mut Self {
        self.0.push_str(&n.into().to_string());
        self
    }

    /// Appends another fragment.
    pub fn html(&mut self, other: &Html) -> &mut Self {
        self.0.push_str(&other.0);
        self
    }

    /// `<tag>text</tag>` for a tag written in the source.
    pub fn el(&mut self, open: &'static str, text: &str, close: &'static str) -> &mut Self {
        self.raw(open).text(text).raw(close)
    }
}

/// The one escaping function: `&`, `<`, `>`, `"` and `'` become entities.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// Percent-encodes everything but the unreserved characters: a path segment or a query
/// value.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Human time of a Unix-ms instant, UTC.
pub fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

/// A whole page: the shell around `body`, with a sign-out form when `csrf` (the
/// session's token) is given.
pub fn page(status: StatusCode, title: &str, csrf: Option<&str>, body: &Html) -> Response {
    let mut h = Html::new();
    h.raw("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
        .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
        .raw("<title>")
        .text(title)
        .raw(" · feishu-bridge</title>")
        .raw("<link rel=\"stylesheet\" href=\"/ui/static/style.css\"></head><body>")
        .raw("<header><a class=\"home\" href=\"/ui/\">feishu-bridge</a>");
    if let Some(token) = csrf {
        h.raw("<form method=\"post\" action=\"/ui/logout\" class=\"logout\">")
            .html(&csrf_field(token))
            .raw("<button type=\"submit\" id=\"logout\">Sign out</button></form>");
    }
    h.raw("</header><main>")
        .html(body)
        .raw("</main></body></html>\n");
    respond(status, h)
}

/// The hidden CSRF field of a form.
pub fn csrf_field(token: &str) -> Html {
    let mut h = Html::new();
    h.raw("<input type=\"hidden\" name=\"csrf\" value=\"")
        .text(token)
        .raw("\">");
    h
}

/// A page with only a heading and a sentence (errors, refusals).
pub fn message(status: StatusCode, title: &str, sentence: &str) -> Response {
    let mut body = Html::new();
    body.el("<h1>", title, "</h1>").el("<p>", sentence, "</p>");
    page(status, title, None, &body)
}

/// `markup` as an HTML response; an error status is marked as answered, so the JSON
/// error layer leaves it alone.
fn respond(status: StatusCode, markup: Html) -> Response {
    let mut resp = (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.0,
    )
        .into_response();
    resp.extensions_mut().insert(Shaped);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_markup_is_not() {
        let mut h = Html::new();
        h.raw("<p title=\"")
            .text("\"'><script>")
            .raw("\">")
            .text("<img src=x onerror=alert(1)> & co")
            .raw("</p>");
        assert_eq!(
            h.0,
            "<p title=\"&quot;&#39;&gt;&lt;script&gt;\">\
             &lt;img src=x onerror=alert(1)&gt; &amp; co</p>"
        );
    }

    #[test]
    fn encoding_keeps_only_unreserved_characters() {
        assert_eq!(encode("om_a-1.b~"), "om_a-1.b~");
        assert_eq!(encode("a/b?c=d&e f"), "a%2Fb%3Fc%3Dd%26e%20f");
        assert_eq!(encode("页"), "%E9%A1%B5");
    }

    #[test]
    fn times_are_utc() {
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
    }
}
