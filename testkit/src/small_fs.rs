//! A small tmpfs for unit tests of what happens on a full or nearly full disk. Mounting needs
//! root: without it the test skips, loudly, unless `LABPOOL_TEST_STRICT=1` says it must not.

use std::path::Path;

/// A tmpfs mounted on a fresh directory, unmounted when dropped.
pub struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    /// A tmpfs of `size` (`256k`, `96m`); `None` (the test skips) when not root.
    pub fn mount(size: &str) -> Option<SmallFs> {
        if !nix::unistd::geteuid().is_root() {
            crate::skip("needs root to mount a small tmpfs");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(mounted.success(), "mount tmpfs at {}", dir.path().display());
        Some(SmallFs { dir })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
