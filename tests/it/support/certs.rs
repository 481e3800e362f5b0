//! A certificate chain made for one test with the `openssl` CLI (already needed by the
//! curl examples of docs/http-api.md): a CA the test trusts, a second CA it does not, and a server
//! certificate for `localhost` and 127.0.0.1 signed by the first. Each is written with its
//! own minimal config, so the machine's `openssl.cnf` cannot change what is made.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The files of a test's chain.
#[derive(Debug, Clone)]
pub struct Certs {
    /// The CA that signed the server certificate (PEM).
    pub ca: PathBuf,
    /// A CA that signed nothing the server presents (PEM).
    pub other_ca: PathBuf,
    /// The server certificate: `DNS:localhost`, `IP:127.0.0.1` (PEM).
    pub server_cert: PathBuf,
    /// Its private key (PEM, unencrypted).
    pub server_key: PathBuf,
}

const CA_CONFIG: &str = "[req]\nprompt = no\ndistinguished_name = dn\nx509_extensions = ext\n\
    [dn]\nCN = NAME\n\
    [ext]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n\
    subjectKeyIdentifier = hash\n";

const SERVER_CONFIG: &str = "[req]\nprompt = no\ndistinguished_name = dn\n[dn]\nCN = localhost\n";

const SERVER_EXTENSIONS: &str = "basicConstraints = critical,CA:FALSE\n\
    keyUsage = critical,digitalSignature,keyEncipherment\nextendedKeyUsage = serverAuth\n\
    subjectAltName = DNS:localhost,IP:127.0.0.1\nauthorityKeyIdentifier = keyid\n";

/// Elliptic-curve keys: quick to make, and taken by both rustls and Postgres.
const KEY: [&str; 4] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];

impl Certs {
    /// Makes the chain in `dir`.
    pub fn generate(dir: &Path) -> Self {
        let ca = make_ca(dir, "ca", "feishu-bridge test CA");
        let other_ca = make_ca(dir, "other-ca", "feishu-bridge untrusted CA");
        let config = write(dir, "server.cnf", SERVER_CONFIG);
        let extensions = write(dir, "server.ext", SERVER_EXTENSIONS);
        let (server_key, csr) = (dir.join("server.key"), dir.join("server.csr"));
        let mut req = openssl();
        req.args(["req", "-new", "-nodes", "-config"])
            .arg(&config)
            .args(KEY)
            .arg("-keyout")
            .arg(&server_key)
            .arg("-out")
            .arg(&csr);
        run(req);
        let server_cert = dir.join("server.pem");
        let serial = format!("0x{:016x}", rand::random::<u64>());
        let mut sign = openssl();
        sign.args(["x509", "-req", "-days", "2", "-set_serial", &serial, "-in"])
            .arg(&csr)
            .arg("-CA")
            .arg(&ca)
            .arg("-CAkey")
            .arg(dir.join("ca.key"))
            .arg("-extfile")
            .arg(&extensions)
            .arg("-out")
            .arg(&server_cert);
        run(sign);
        Self {
            ca,
            other_ca,
            server_cert,
            server_key,
        }
    }
}

/// A self-signed CA `<name>.pem` (key `<name>.key`) in `dir`.
fn make_ca(dir: &Path, name: &str, common_name: &str) -> PathBuf {
    let config = write(
        dir,
        &format!("{name}.cnf"),
        &CA_CONFIG.replace("NAME", common_name),
    );
    let cert = dir.join(format!("{name}.pem"));
    let mut req = openssl();
    req.args(["req", "-x509", "-nodes", "-days", "2", "-config"])
        .arg(&config)
        .args(KEY)
        .arg("-keyout")
        .arg(dir.join(format!("{name}.key")))
        .arg("-out")
        .arg(&cert);
    run(req);
    cert
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

fn openssl() -> Command {
    Command::new("openssl")
}

/// Runs an `openssl` step; a failure panics with its output.
fn run(mut cmd: Command) {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("`openssl` cannot run ({e}): the TLS tests make their certificates with it")
    });
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
