//! The proxy variables, read as curl reads them: `HTTPS_PROXY`, `HTTP_PROXY`,
//! `ALL_PROXY` (the fallback for both) and `NO_PROXY`, each in upper or lower case (the
//! upper-case one first when both are set; an empty value counts as unset), into the
//! one [`Egress`] every outbound connection follows.
//!
//! Only `http://` proxies are taken (a value without a scheme means one, as in curl):
//! the long connection's WebSocket goes through the proxy with HTTP CONNECT, and a
//! scheme it could not use is refused at load rather than honoured by half of the
//! connections. A refusal names the variable, never its value (it may hold a password).

use hyper_util::client::proxy::matcher::Matcher;
use secrecy::SecretString;

use super::{
    ConfigError,
    egress::{Egress, Proxy},
    problems::Problems,
};

/// The variables naming a proxy, as `(upper, lower)` case.
const ALL: (&str, &str) = ("ALL_PROXY", "all_proxy");
const HTTP: (&str, &str) = ("HTTP_PROXY", "http_proxy");
const HTTPS: (&str, &str) = ("HTTPS_PROXY", "https_proxy");
const NO: (&str, &str) = ("NO_PROXY", "no_proxy");

/// Reads the proxy variables from `env`; a value that is not an `http://` proxy URL is
/// a problem in `out` (and the connections go direct meanwhile: the load fails anyway).
pub(super) fn read(env: &dyn Fn(&str) -> Option<String>, out: &mut Problems) -> Egress {
    let var = |(upper, lower): (&'static str, &'static str)| {
        [upper, lower].into_iter().find_map(|name| {
            let value = env(name)?.trim().to_string();
            (!value.is_empty()).then_some((name, value))
        })
    };
    let mut proxy = |names: (&'static str, &'static str)| {
        var(names).and_then(|(name, value)| parse(name, &value, out))
    };
    let all = proxy(ALL);
    let http = proxy(HTTP).or_else(|| all.clone());
    let https = proxy(HTTPS).or(all);
    let no_proxy = var(NO).map(|(_, v)| v).unwrap_or_default();
    Egress::new(http, https, no_proxy)
}

/// `value` of variable `var` as a proxy; a problem (never quoting the value, which may
/// hold a password) when it is not an `http://[user:password@]host[:port]` URL.
fn parse(var: &'static str, value: &str, out: &mut Problems) -> Option<Proxy> {
    let value = if value.contains("://") {
        value.to_string()
    } else {
        format!("http://{value}")
    };
    let refuse = |out: &mut Problems, why: String| {
        out.push(ConfigError::new(
            var,
            format!("{why} (from the environment)"),
        ));
        None
    };
    let Ok(url) = url::Url::parse(&value) else {
        return refuse(
            out,
            "not a proxy URL; expected http://[user:password@]host:port".into(),
        );
    };
    if url.scheme() != "http" {
        return refuse(
            out,
            format!(
                "only http:// proxies are supported (the long connection goes through the \
                 proxy with HTTP CONNECT); this one is {}://",
                url.scheme()
            ),
        );
    }
    let (Some(host), Some(port)) = (url.host(), url.port_or_known_default()) else {
        return refuse(
            out,
            "not a proxy URL; expected http://[user:password@]host:port".into(),
        );
    };
    // The matcher parses the value itself; where it cannot, say so now instead of
    // letting the connections go direct.
    let probe = Matcher::builder().all(value.as_str()).build();
    if probe
        .intercept(&hyper::Uri::from_static("http://probe/"))
        .is_none()
    {
        return refuse(
            out,
            "not a proxy URL the proxy rules can read; expected http://[user:password@]host:port"
                .into(),
        );
    }
    let credentials = !url.username().is_empty() || url.password().is_some();
    Some(Proxy::new(
        var,
        format!("{host}:{port}"),
        credentials,
        SecretString::from(value),
    ))
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::HashMap;

    use super::*;

    pub(in crate::config) fn egress(pairs: &[(&str, &str)]) -> Result<Egress, Vec<ConfigError>> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut out = Problems::default();
        let e = read(&|k| map.get(k).cloned(), &mut out);
        let problems = out.into_vec();
        if problems.is_empty() {
            Ok(e)
        } else {
            Err(problems)
        }
    }

    pub(in crate::config) fn via(e: &Egress, target: &str) -> Option<String> {
        let url = url::Url::parse(target).expect("a URL");
        e.route(&url).map(|r| r.addr().to_string())
    }

    #[test]
    fn without_variables_everything_goes_direct() {
        let e = egress(&[]).expect("valid");
        assert!(e.is_direct());
        assert_eq!(via(&e, "https://open.feishu.cn/x"), None);
        let blank = egress(&[("HTTPS_PROXY", "  ")]).expect("valid");
        assert!(blank.is_direct(), "an empty value is no value");
    }

    #[test]
    fn all_proxy_is_the_fallback_and_upper_case_wins() {
        let e = egress(&[
            ("all_proxy", "http://all.corp:1"),
            ("HTTPS_PROXY", "http://upper.corp:2"),
            ("https_proxy", "http://lower.corp:3"),
        ])
        .expect("valid");
        assert_eq!(via(&e, "wss://a/").as_deref(), Some("upper.corp:2"));
        assert_eq!(via(&e, "ws://a/").as_deref(), Some("all.corp:1"));
        let port80 = egress(&[("HTTP_PROXY", "http://p.corp")]).expect("valid");
        assert_eq!(via(&port80, "ws://a/").as_deref(), Some("p.corp:80"));
    }

    #[test]
    fn what_is_not_an_http_proxy_is_a_problem_naming_the_variable_not_the_value() {
        for (var, value) in [
            ("HTTPS_PROXY", "socks5://u:pw@p:1080"),
            ("http_proxy", "https://u:pw@p:443"),
            ("ALL_PROXY", "http://u:pw@"),
        ] {
            let problems = egress(&[(var, value)]).expect_err(value);
            assert_eq!(problems.len(), 1, "{problems:?}");
            let shown = problems[0].to_string();
            assert!(shown.starts_with(&format!("{var}: ")), "{shown}");
            assert!(!shown.contains("pw"), "the value is not quoted: {shown}");
        }
    }
}
