//! A private Postgres cluster in a temporary directory, on a free loopback port, that a
//! scenario may stop (`pg_ctl stop -m immediate`: what a crash of the database host
//! looks like to the bridge) and start again. The machine's shared Postgres is never
//! touched.
//!
//! Postgres refuses to run as root, so as root every `initdb`/`pg_ctl` runs as the
//! `postgres` user. `pg_ctl` detaches the server from our process group, so the data
//! directory is listed in `<out>/pg-clusters` until it is stopped: `tests/faults/run`
//! stops any cluster left there by a harness that was killed.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use super::child::{free_port, is_root, run};

/// The private cluster; stopped and removed on drop.
pub struct PrivatePg {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    registry: PathBuf,
    keep_log: PathBuf,
}

const DB: &str = "faults";
const LIMIT: Duration = Duration::from_secs(60);

/// The newest `/usr/lib/postgresql/<version>/bin` holding `initdb`, or `$PG_BIN`.
fn pg_bin() -> PathBuf {
    super::pg_bin::pg_bin().expect("no initdb under /usr/lib/postgresql/*/bin (set PG_BIN)")
}

impl PrivatePg {
    /// `initdb`, start, and a database `faults`. `out` is where the registry of running
    /// clusters lives, and where the server log is copied to (`<name>-postgres.log`)
    /// when the cluster is removed.
    pub async fn start_new(out: &Path, name: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("feishu-bridge-faults-pg.")
            .tempdir()
            .expect("temp dir");
        let as_postgres = is_root();
        if as_postgres {
            let mut chown = Command::new("chown");
            chown.arg("postgres:postgres").arg(dir.path());
            run("chown", chown, LIMIT).await.expect("chown to postgres");
        }
        let pg = Self {
            bin: pg_bin(),
            port: free_port(),
            as_postgres,
            registry: out.join("pg-clusters"),
            keep_log: out.join(format!("{name}-postgres.log")),
            dir,
        };
        let data = pg.data();
        let mut initdb = pg.tool("initdb");
        initdb.arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        run("initdb", initdb, LIMIT).await.expect("initdb");
        pg.register(true);
        pg.start().await;
        let mut create = Command::new(pg.bin.join("createdb"));
        create
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &pg.port.to_string(),
                "-U",
                "postgres",
            ])
            .arg(DB);
        run("createdb", create, LIMIT).await.expect("createdb");
        pg
    }

    /// The bridge's database URL.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{DB}", self.port)
    }

    /// Its server log.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A Postgres tool, as `postgres` when we are root.
    fn tool(&self, name: &str) -> Command {
        let path = self.bin.join(name);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// `pg_ctl start` (waits until it accepts connections).
    pub async fn start(&self) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let mut ctl = self.tool("pg_ctl");
        ctl.arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.log())
            .args(["-o", &options, "-w", "-t", "60", "start"]);
        run("pg_ctl start", ctl, LIMIT).await.expect("pg_ctl start");
    }

    /// `pg_ctl stop -m immediate`: every backend ends at once, nothing is flushed
    /// beyond what was committed; the next start runs crash recovery.
    pub async fn stop_immediate(&self) {
        let mut ctl = self.tool("pg_ctl");
        ctl.arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "-t", "60", "stop"]);
        run("pg_ctl stop", ctl, LIMIT).await.expect("pg_ctl stop");
    }

    /// Adds (or removes) the data directory in the registry of running clusters.
    fn register(&self, add: bool) {
        let data = self.data().display().to_string();
        let old = std::fs::read_to_string(&self.registry).unwrap_or_default();
        let mut lines: Vec<&str> = old.lines().filter(|l| *l != data).collect();
        if add {
            lines.push(&data);
        }
        let mut text = lines.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        std::fs::write(&self.registry, text).ok();
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        // Synchronous: drop may run while a panic unwinds, outside any runtime.
        let mut cmd = if self.as_postgres {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"));
            c
        } else {
            std::process::Command::new(self.bin.join("pg_ctl"))
        };
        cmd.arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "-t", "30", "stop"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .ok();
        std::fs::copy(self.log(), &self.keep_log).ok();
        self.register(false);
    }
}
