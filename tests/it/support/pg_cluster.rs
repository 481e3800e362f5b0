//! A private Postgres cluster for one test, with or without TLS: `initdb` into a temporary
//! directory, a free port on 127.0.0.1 (and 127.0.0.2, a loopback address the server
//! certificate does not name), password logins (scram), `pg_ctl start -w`; stopped and
//! removed on drop, also when the test fails. The shared test server is never touched.
//!
//! The binaries are found at run time (`$PG_BIN`, else the newest
//! `/usr/lib/postgresql/<version>/bin`). When the build found none, the tests using this
//! are compiled as ignored (`build.rs`; `environment.rs` notices when that changes),
//! unless `FEISHU_BRIDGE_TEST_REQUIRE_PG=1`: then they run and fail here. Postgres refuses to run as root, so as root every Postgres
//! tool runs as the `postgres` user.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use super::certs::Certs;

/// The password of the `postgres` user in every private cluster; the tests check it is
/// never shown.
pub const PASSWORD: &str = "pw-never-shown-7c1e";

/// A running private cluster; stopped and removed on drop.
pub struct PgCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    certs: Option<Certs>,
}

impl PgCluster {
    /// A cluster with `ssl = on`, serving a certificate of its own chain ([`Self::certs`]).
    pub fn with_tls() -> Self {
        Self::start(true)
    }

    /// A cluster with `ssl = off`.
    pub fn without_tls() -> Self {
        Self::start(false)
    }

    fn start(tls: bool) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("feishu-bridge-it-pg.")
            .tempdir()
            .expect("temp dir");
        // The guard exists before anything is started, so a failure below still cleans up.
        let mut pg = Self {
            bin: pg_bin(),
            port: free_port(),
            as_postgres: is_root(),
            certs: None,
            dir,
        };
        if tls {
            let tls_dir = pg.dir.path().join("tls");
            std::fs::create_dir(&tls_dir).expect("tls dir");
            pg.certs = Some(Certs::generate(&tls_dir));
        }
        let pwfile = pg.dir.path().join("pwfile");
        std::fs::write(&pwfile, PASSWORD).expect("pwfile");
        if pg.as_postgres {
            let mut chown = Command::new("chown");
            chown.arg("-R").arg("postgres:postgres").arg(pg.dir.path());
            run(chown);
        }
        if let Some(certs) = &pg.certs {
            // Postgres takes only a key file no one else may read.
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&certs.server_key, std::fs::Permissions::from_mode(0o600))
                .expect("chmod server key");
        }
        let mut initdb = pg.tool("initdb");
        initdb
            .arg("-D")
            .arg(pg.data())
            .args(["-U", "postgres", "--auth-local=trust"])
            .args(["--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"])
            .arg(format!("--pwfile={}", pwfile.display()));
        run(initdb);
        pg.configure();
        let mut ctl = pg.tool("pg_ctl");
        ctl.arg("-D")
            .arg(pg.data())
            .arg("-l")
            .arg(pg.log())
            .args(["-w", "-t", "60", "start"]);
        let started = ctl.output().expect("pg_ctl runs");
        assert!(
            started.status.success(),
            "pg_ctl start failed: {}\n{}",
            String::from_utf8_lossy(&started.stderr),
            std::fs::read_to_string(pg.log()).unwrap_or_default()
        );
        pg
    }

    /// Its settings, after initdb's: where it listens, TLS, and host logins by password
    /// from any loopback address.
    fn configure(&self) {
        let mut conf = format!(
            "\nlisten_addresses = '127.0.0.1,127.0.0.2'\nport = {}\n\
             unix_socket_directories = '{}'\nmax_connections = 40\n",
            self.port,
            self.dir.path().display()
        );
        match &self.certs {
            Some(c) => conf.push_str(&format!(
                "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
                c.server_cert.display(),
                c.server_key.display()
            )),
            None => conf.push_str("ssl = off\n"),
        }
        append(&self.data().join("postgresql.conf"), &conf);
        append(
            &self.data().join("pg_hba.conf"),
            "host all all 127.0.0.0/8 scram-sha-256\n",
        );
    }

    /// The certificate chain of a TLS cluster.
    pub fn certs(&self) -> &Certs {
        self.certs.as_ref().expect("a cluster started with_tls")
    }

    /// `postgres://postgres:<password>@<host>:<port>/postgres?<params>`.
    pub fn url(&self, host: &str, params: &str) -> String {
        format!(
            "postgres://postgres:{PASSWORD}@{host}:{}/postgres?{params}",
            self.port
        )
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port`, as the bridge's messages name the database.
    pub fn at(&self, host: &str) -> String {
        format!("{host}:{}", self.port)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// A Postgres tool, as `postgres` when we are root, run in the cluster's directory
    /// (which that user may enter, unlike perhaps ours).
    fn tool(&self, name: &str) -> Command {
        let path = self.bin.join(name);
        let mut c = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        c.current_dir(self.dir.path());
        c
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // Synchronous: drop may run while a panic unwinds. Stopping a cluster that never
        // started fails harmlessly; the directory goes with the TempDir.
        let mut ctl = self.tool("pg_ctl");
        ctl.arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "-t", "30", "stop"])
            .output()
            .ok();
    }
}

/// `$PG_BIN`, else the newest `/usr/lib/postgresql/<version>/bin` holding `initdb`.
fn pg_bin() -> PathBuf {
    super::environment::check();
    super::pg_bin::pg_bin().expect(
        "no initdb under /usr/lib/postgresql/*/bin (install Postgres, or set PG_BIN); \
         either FEISHU_BRIDGE_TEST_REQUIRE_PG=1 requires the private-cluster tests to run, \
         or the programs were there when the tests were built (the next `cargo test` \
         builds these tests as ignored)",
    )
}

/// A loopback port nothing listens on at the moment (bound, then released).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// True when this process runs as root (then Postgres must run as `postgres`).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn append(path: &Path, text: &str) {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap_or_else(|e| panic!("append to {}: {e}", path.display()));
}

/// Runs a setup step; a failure panics with its output.
fn run(mut cmd: Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} cannot run: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
