//! Where the bridge's own outbound connections go: straight to their host, or through
//! the HTTP proxy the environment names (curl's variables, read once by the config
//! loader through the environment it was given: see `proxy_vars.rs`).
//!
//! One [`Egress`] answers for every outbound connection: the HTTP clients (Open API,
//! the long connection's endpoint, agents, the digest's summarizer) and the long
//! connection's WebSocket, which asks as `http` for `ws://` and as `https` for `wss://`.
//! The rules themselves (curl's `NO_PROXY`: host names with their subdomains, IP
//! addresses and CIDR ranges, `*`; credentials in the proxy URL as Basic auth) are
//! hyper-util's proxy matcher, the one reqwest uses.
//!
//! A proxy URL may carry credentials: the URL is a secret, and only the proxy's
//! `host:port` is shown.

use std::{fmt, sync::Arc};

use hyper_util::client::proxy::matcher::Matcher;
use secrecy::{ExposeSecret, SecretString};

/// How outbound connections leave: direct unless the environment names a proxy.
#[derive(Clone, Default)]
pub struct Egress {
    rules: Option<Arc<Rules>>,
}

struct Rules {
    matcher: Matcher,
    http: Option<Proxy>,
    https: Option<Proxy>,
    no_proxy: String,
}

/// One proxy the environment names.
#[derive(Clone)]
pub(super) struct Proxy {
    /// The variable that named it, as it was spelled.
    var: &'static str,
    /// `host:port`: where to connect, and all that messages show of it.
    addr: String,
    /// Whether the URL carries credentials.
    credentials: bool,
    /// The URL as given, credentials and all.
    url: SecretString,
}

/// The way through a proxy to one destination.
#[derive(Clone)]
pub struct Route {
    proxy: Proxy,
    /// `Basic …` for `Proxy-Authorization`, from the URL's credentials.
    authorization: Option<SecretString>,
}

impl Route {
    /// The proxy's `host:port` (never its credentials).
    pub fn addr(&self) -> &str {
        &self.proxy.addr
    }

    /// The `Proxy-Authorization` value, when the proxy URL has credentials.
    pub fn authorization(&self) -> Option<&SecretString> {
        self.authorization.as_ref()
    }

    /// The proxy URL with its credentials, for an HTTP client to parse as its proxy.
    pub fn url(&self) -> &SecretString {
        &self.proxy.url
    }
}

impl Proxy {
    /// The proxy `url` (credentials and all) that variable `var` names, reached at
    /// `addr` (`host:port`).
    pub(super) fn new(
        var: &'static str,
        addr: String,
        credentials: bool,
        url: SecretString,
    ) -> Self {
        Self {
            var,
            addr,
            credentials,
            url,
        }
    }
}

impl Egress {
    /// Through `http` for `http`/`ws` destinations and `https` for `https`/`wss` ones,
    /// except to the hosts `no_proxy` lists (curl's syntax).
    pub(super) fn new(http: Option<Proxy>, https: Option<Proxy>, no_proxy: String) -> Self {
        if http.is_none() && https.is_none() {
            return Self::default();
        }
        let exposed = |p: &Option<Proxy>| {
            p.as_ref()
                .map(|p| p.url.expose_secret().to_string())
                .unwrap_or_default()
        };
        let matcher = Matcher::builder()
            .http(exposed(&http))
            .https(exposed(&https))
            .no(no_proxy.as_str())
            .build();
        Self {
            rules: Some(Arc::new(Rules {
                matcher,
                http,
                https,
                no_proxy,
            })),
        }
    }

    /// The route to `target` (`http`, `https`, `ws` or `wss`) through a proxy, or `None`
    /// when it goes direct (no proxy for its scheme, or `NO_PROXY` covers its host).
    pub fn route(&self, target: &url::Url) -> Option<Route> {
        let rules = self.rules.as_ref()?;
        let (scheme, proxy) = match target.scheme() {
            "https" | "wss" => ("https", rules.https.as_ref()?),
            "http" | "ws" => ("http", rules.http.as_ref()?),
            _ => return None,
        };
        let host = target.host()?;
        let port = target.port_or_known_default()?;
        let uri: hyper::Uri = format!("{scheme}://{host}:{port}/").parse().ok()?;
        let hit = rules.matcher.intercept(&uri)?;
        let authorization = hit
            .basic_auth()
            .and_then(|v| v.to_str().ok())
            .map(|v| SecretString::from(v.to_string()));
        Some(Route {
            proxy: proxy.clone(),
            authorization,
        })
    }

    /// Whether no proxy is named: every connection goes direct.
    pub fn is_direct(&self) -> bool {
        self.rules.is_none()
    }

    /// One line for `check-config`: which proxy serves which scheme, without credentials.
    pub fn describe(&self) -> String {
        let Some(rules) = &self.rules else {
            return "direct (no HTTPS_PROXY, HTTP_PROXY or ALL_PROXY set)".into();
        };
        let one = |scheme: &str, p: &Option<Proxy>| match p {
            Some(p) => format!(
                "{scheme} through {} ({}{})",
                p.addr,
                p.var,
                if p.credentials {
                    ", with credentials"
                } else {
                    ""
                }
            ),
            None => format!("{scheme} direct"),
        };
        let no = if rules.no_proxy.is_empty() {
            String::new()
        } else {
            format!("; direct to {} (NO_PROXY)", rules.no_proxy)
        };
        format!(
            "{}, {}{no}",
            one("https/wss", &rules.https),
            one("http/ws", &rules.http)
        )
    }
}

/// Shows the proxies' addresses only.
impl fmt::Debug for Egress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Egress(")?;
        f.write_str(&self.describe())?;
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::{super::proxy_vars::tests::*, *};

    #[test]
    fn websocket_schemes_ask_as_their_http_counterparts() {
        let e = egress(&[
            ("HTTPS_PROXY", "http://secure.corp:3128"),
            ("http_proxy", "plain.corp:8080"),
        ])
        .expect("valid");
        let wss = "wss://msg-frontier.feishu.cn/ws/v2?ticket=t";
        assert_eq!(via(&e, wss).as_deref(), Some("secure.corp:3128"));
        assert_eq!(
            via(&e, "https://open.feishu.cn/").as_deref(),
            Some("secure.corp:3128")
        );
        assert_eq!(
            via(&e, "ws://127.0.0.1:9/ws").as_deref(),
            Some("plain.corp:8080"),
            "no scheme means http://, lower case is read"
        );
        assert_eq!(via(&e, "ftp://x/"), None);
    }

    #[test]
    fn no_proxy_follows_curl() {
        let e = egress(&[
            ("HTTPS_PROXY", "http://p:3128"),
            ("NO_PROXY", ".internal, feishu.cn,10.0.0.0/8 , ::1"),
        ])
        .expect("valid");
        for direct in [
            "wss://msg-frontier.feishu.cn/",
            "https://feishu.cn/",
            "https://a.internal/",
            "https://10.1.2.3/",
            "https://[::1]:8443/",
        ] {
            assert_eq!(via(&e, direct), None, "{direct}");
        }
        for proxied in ["https://larksuite.com/", "https://notfeishu.cn/"] {
            assert!(via(&e, proxied).is_some(), "{proxied}");
        }
        let star = egress(&[("HTTPS_PROXY", "p:1"), ("no_proxy", "*")]).expect("valid");
        assert_eq!(via(&star, "https://anything/"), None);
    }

    #[test]
    fn credentials_become_basic_auth_and_are_never_shown() {
        let e = egress(&[("HTTPS_PROXY", "http://bob:s3cr%40t@p.corp:3128")]).expect("valid");
        let route = e
            .route(&url::Url::parse("wss://h/").expect("url"))
            .expect("proxied");
        let auth = route.authorization().expect("credentials").expose_secret();
        // base64("bob:s3cr@t"): the password is percent-decoded first.
        assert_eq!(auth, "Basic Ym9iOnMzY3JAdA==");
        let shown = format!("{e:?} {}", e.describe());
        assert!(shown.contains("p.corp:3128"), "{shown}");
        assert!(shown.contains("with credentials"), "{shown}");
        for secret in ["bob", "s3cr", "Ym9i"] {
            assert!(!shown.contains(secret), "{secret} shown: {shown}");
        }
    }
}
