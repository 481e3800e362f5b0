//! A small file system that really fills: a tmpfs of a given size mounted on a
//! temporary directory (needs root). Filling it writes a ballast file until the kernel
//! answers ENOSPC; making room deletes the ballast. Everything on it (the SQLite file, its WAL
//! and shared-memory index) then meets a real full disk, not a simulated one.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use super::child::run;

/// The mounted file system; unmounted and removed on drop.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `mib` MiB. Fails with the reason (not root, no mount).
    pub async fn mount(mib: u32) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("feishu-bridge-faults-disk.")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let mut mount = Command::new("mount");
        mount
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m,mode=0755")])
            .arg("tmpfs")
            .arg(dir.path());
        run("mount -t tmpfs", mount, Duration::from_secs(20))
            .await
            .map_err(|e| format!("{e} (the disk-full scenario needs root)"))?;
        Ok(Self { dir })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn ballast(&self) -> PathBuf {
        self.path().join("ballast")
    }

    /// Writes the ballast until the file system is full; the bytes written.
    pub fn fill(&self) -> u64 {
        let mut file = match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.ballast())
        {
            Ok(f) => f,
            // Already too full to create a file: full is what we want.
            Err(_) => return 0,
        };
        let mut written = 0u64;
        for chunk in [1 << 20, 4096, 512] {
            let block = vec![0u8; chunk];
            while file.write_all(&block).is_ok() {
                written += chunk as u64;
            }
        }
        file.sync_all().ok();
        written
    }

    /// Free bytes, as `statvfs` reports them (through `df`, to stay without unsafe code).
    pub async fn free_bytes(&self) -> Option<u64> {
        let mut df = Command::new("df");
        df.args(["--output=avail", "-B1"]).arg(self.path());
        let out = run("df", df, Duration::from_secs(10)).await.ok()?;
        out.lines().nth(1)?.trim().parse().ok()
    }

    /// Deletes the ballast: room again.
    pub fn make_room(&self) {
        std::fs::remove_file(self.ballast()).ok();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazy: the bridge may still hold files open if it outlived its guard.
        std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status()
            .ok();
    }
}
