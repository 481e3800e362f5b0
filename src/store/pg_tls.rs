//! Postgres over TLS: what a database URL's `sslmode` and `sslrootcert` ask for, checked
//! before connecting, and a failed handshake put in words an operator can act on.
//!
//! sqlx does the TLS (rustls, with the public webpki roots): `prefer` (the default)
//! encrypts when the server offers it, `require` insists on encryption without checking
//! the certificate, `verify-full` checks that it chains to a trusted CA and names the
//! host of the URL. `verify-ca` is meant to skip the name, but sqlx 0.8.6 misses the
//! error variant rustls returns since 0.23.24, so it checks the name as well (stricter,
//! never looser). The CAs of a `sslrootcert` file are trusted besides the public roots.
//! This module owns no connection; `postgres.rs` calls it.

use std::path::PathBuf;

use rustls::{CertificateError, Error as TlsError};
use sqlx::postgres::{PgConnectOptions, PgSslMode};

/// The options `url` was parsed into, adjusted and checked for TLS: a `sslrootcert`
/// with `sslmode=require` verifies the CA, as libpq does (an operator who names a CA
/// expects it to be checked), and a CA file that cannot be used is refused here, in
/// words, rather than as a bare I/O error from inside the handshake.
pub(super) fn prepare(url: &str, options: PgConnectOptions) -> Result<PgConnectOptions, String> {
    let Some(root) = root_cert(url) else {
        return Ok(options);
    };
    let options = match options.get_ssl_mode() {
        PgSslMode::Require => options.ssl_mode(PgSslMode::VerifyCa),
        _ => options,
    };
    if let (RootCert::File(path), PgSslMode::VerifyCa | PgSslMode::VerifyFull) =
        (&root, options.get_ssl_mode())
    {
        check_ca_file(path)?;
    }
    Ok(options)
}

/// Where the CA certificates come from.
enum RootCert {
    File(PathBuf),
    Inline,
}

/// The `sslrootcert` sqlx will use: the URL's (its last, under any of sqlx's names),
/// else `$PGSSLROOTCERT`, which may also hold the PEM text itself.
fn root_cert(url: &str) -> Option<RootCert> {
    let from_url = url::Url::parse(url).ok().and_then(|u| {
        u.query_pairs()
            .filter(|(k, _)| matches!(&**k, "sslrootcert" | "ssl-root-cert" | "ssl-ca"))
            .map(|(_, v)| v.into_owned())
            .last()
    });
    if let Some(path) = from_url {
        return Some(RootCert::File(PathBuf::from(path)));
    }
    let env = std::env::var("PGSSLROOTCERT").ok()?;
    let trimmed = env.trim();
    Some(
        if trimmed.starts_with("-----BEGIN") && trimmed.ends_with("-----") {
            RootCert::Inline
        } else {
            RootCert::File(PathBuf::from(env))
        },
    )
}

/// A CA file the handshake can use: readable, with at least one PEM certificate.
fn check_ca_file(path: &std::path::Path) -> Result<(), String> {
    let shown = path.display();
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "cannot be verified: the sslrootcert file {shown} cannot be read ({e}); give the \
             path of a PEM file with the CA certificate(s) of the server, readable by the bridge"
        )
    })?;
    let has_cert = text
        .windows(CERT_MARK.len())
        .any(|w| w == CERT_MARK.as_bytes());
    if has_cert {
        Ok(())
    } else {
        Err(format!(
            "cannot be verified: the sslrootcert file {shown} holds no PEM certificate \
             (\"{CERT_MARK}\"); give the CA bundle of the server, not its key or a DER file"
        ))
    }
}

const CERT_MARK: &str = "-----BEGIN CERTIFICATE-----";

/// A failure to set up TLS in words, when `e` is one; `None` for any other error.
pub(super) fn failure(options: &PgConnectOptions, e: &sqlx::Error) -> Option<String> {
    match e {
        // The handshake runs inside sqlx's socket, so rustls's verdict arrives as I/O.
        sqlx::Error::Io(io) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<TlsError>())
            .map(|tls| handshake(options, tls)),
        sqlx::Error::Tls(t) => Some(match t.downcast_ref::<TlsError>() {
            Some(tls) => handshake(options, tls),
            None if t.to_string().contains("does not support TLS") => format!(
                "does not offer TLS (its ssl setting is off), and the URL asks for \
                 sslmode={}: turn ssl on at the server, or connect to one that has it",
                mode_name(options.get_ssl_mode())
            ),
            None => format!("failed to set up TLS: {t}"),
        }),
        _ => None,
    }
}

/// What rustls refused, and what to do about it.
fn handshake(options: &PgConnectOptions, e: &TlsError) -> String {
    let host = options.get_host();
    let TlsError::InvalidCertificate(cert) = e else {
        return format!("failed the TLS handshake: {e}");
    };
    match cert {
        CertificateError::UnknownIssuer => "presented a TLS certificate not signed by a trusted \
             CA (trusted: the public web roots, and the URL's sslrootcert file if any): give \
             the CA certificate(s) that signed it (for a hosted database, its provider's CA \
             bundle) with sslrootcert=/path/ca.pem in the URL"
            .to_string(),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            let names = match cert {
                CertificateError::NotValidForNameContext { presented, .. }
                    if !presented.is_empty() =>
                {
                    let names: Vec<&str> = presented.iter().map(|n| bare_name(n)).collect();
                    format!(" (it names {})", names.join(", "))
                }
                _ => String::new(),
            };
            // sqlx 0.8's rustls verifier skips the name check only for the variant rustls
            // stopped returning in 0.23.24, so verify-ca checks the name as well.
            let also = match options.get_ssl_mode() {
                PgSslMode::VerifyCa => " (verify-ca checks the host name too in this build)",
                _ => "",
            };
            format!(
                "presented a TLS certificate that is not for the host name {host}{names}: \
                 connect by a name the certificate holds{also}"
            )
        }
        CertificateError::Expired
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYet
        | CertificateError::NotValidYetContext { .. } => format!(
            "presented a TLS certificate outside its validity period ({e}): renew the server \
             certificate, or check this machine's clock"
        ),
        _ => format!("presented a TLS certificate that failed verification: {e}"),
    }
}

/// `localhost` for rustls's `DnsName("localhost")`, `127.0.0.1` for `IpAddress(127.0.0.1)`.
fn bare_name(name: &str) -> &str {
    let inner = name
        .strip_prefix("DnsName(")
        .or_else(|| name.strip_prefix("IpAddress("))
        .and_then(|rest| rest.strip_suffix(')'));
    inner.map_or(name, |n| n.trim_matches('"'))
}

/// The URL spelling of a mode.
fn mode_name(mode: PgSslMode) -> &'static str {
    match mode {
        PgSslMode::Disable => "disable",
        PgSslMode::Allow => "allow",
        PgSslMode::Prefer => "prefer",
        PgSslMode::Require => "require",
        PgSslMode::VerifyCa => "verify-ca",
        PgSslMode::VerifyFull => "verify-full",
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn prepared(url: &str) -> Result<PgSslMode, String> {
        let options = PgConnectOptions::from_str(url).expect("parses");
        prepare(url, options).map(|o| o.get_ssl_mode())
    }

    #[test]
    fn a_root_cert_makes_require_verify_the_ca_and_leaves_the_other_modes() {
        let dir = tempfile::tempdir().expect("dir");
        let ca = dir.path().join("ca.pem");
        std::fs::write(
            &ca,
            format!("{CERT_MARK}\nAAAA\n-----END CERTIFICATE-----\n"),
        )
        .expect("write");
        let url = |mode: &str| {
            format!(
                "postgres://u@db/x?sslmode={mode}&sslrootcert={}",
                ca.display()
            )
        };
        assert!(matches!(prepared(&url("require")), Ok(PgSslMode::VerifyCa)));
        assert!(matches!(
            prepared(&url("verify-full")),
            Ok(PgSslMode::VerifyFull)
        ));
        assert!(matches!(prepared(&url("prefer")), Ok(PgSslMode::Prefer)));
        assert!(matches!(
            prepared("postgres://u@db/x?sslmode=require"),
            Ok(PgSslMode::Require)
        ));
    }

    #[test]
    fn an_unusable_ca_file_is_named_with_what_to_do() {
        let dir = tempfile::tempdir().expect("dir");
        let missing = dir.path().join("missing.pem");
        let url = format!(
            "postgres://u:pw@db/x?sslmode=verify-full&sslrootcert={}",
            missing.display()
        );
        let err = prepared(&url).expect_err("missing file");
        assert!(
            err.contains("sslrootcert file") && err.contains("cannot be read"),
            "{err}"
        );
        let key = dir.path().join("key.pem");
        std::fs::write(&key, "-----BEGIN PRIVATE KEY-----\n").expect("write");
        let url = format!(
            "postgres://u@db/x?sslmode=verify-ca&ssl-root-cert={}",
            key.display()
        );
        let err = prepared(&url).expect_err("no certificate");
        assert!(err.contains("holds no PEM certificate"), "{err}");
    }
}
