//! Where Postgres's own programs are, for the tests that start a private cluster (the
//! fault harness, and the TLS tests of the main suite, which include this file).

use std::path::PathBuf;

/// `$PG_BIN`, else the newest `/usr/lib/postgresql/<version>/bin` holding `initdb`.
pub fn pg_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}
