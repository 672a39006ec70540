//! The mount table (`/proc/self/mountinfo`): where mounts are, so walks stop at them, and a
//! file system's type and options (`noatime`, `usrquota`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted.
    pub point: PathBuf,
    /// File-system type (`btrfs`, `ext4`, `xfs`, `tmpfs`...).
    pub fstype: String,
    /// Per-mount options (`rw`, `noatime`, `relatime`...).
    pub options: Vec<String>,
    /// Per-superblock options (`usrquota`, `prjquota`...).
    pub super_options: Vec<String>,
    /// What is mounted (device or source).
    pub source: String,
}

impl Mount {
    /// Whether an option is set on the mount or its superblock.
    pub fn has_option(&self, name: &str) -> bool {
        self.options
            .iter()
            .chain(&self.super_options)
            .any(|o| o == name)
    }
}

/// The mount table.
#[derive(Debug, Clone, Default)]
pub struct Mounts {
    mounts: Vec<Mount>,
}

/// Undoes mountinfo's octal escapes (`\040` is a space).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Mounts {
    /// Reads this process's mount table; empty if it cannot be read.
    pub fn read() -> Mounts {
        std::fs::read_to_string("/proc/self/mountinfo")
            .map(|t| Mounts::parse(&t))
            .unwrap_or_default()
    }

    /// Parses mountinfo text.
    pub fn parse(text: &str) -> Mounts {
        let mounts = text
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split(' ').collect();
                let dash = fields.iter().position(|f| *f == "-")?;
                let split = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
                Some(Mount {
                    point: PathBuf::from(unescape(fields.get(4)?)),
                    options: split(fields.get(5)?),
                    fstype: fields.get(dash + 1)?.to_string(),
                    source: unescape(fields.get(dash + 2)?),
                    super_options: split(fields.get(dash + 3).unwrap_or(&"")),
                })
            })
            .collect();
        Mounts { mounts }
    }

    /// Mount points strictly under `root` (which should be canonical).
    pub fn points_under(&self, root: &Path) -> BTreeSet<PathBuf> {
        self.mounts
            .iter()
            .filter(|m| m.point != root && m.point.starts_with(root))
            .map(|m| m.point.clone())
            .collect()
    }

    /// The mount that holds `path` (canonical): the last-mounted one with the longest point.
    pub fn containing(&self, path: &Path) -> Option<&Mount> {
        // `max_by_key` returns the last of equal maxima: in mount-table order, the one
        // mounted last over that point, which hides those below it.
        self.mounts
            .iter()
            .filter(|m| path.starts_with(&m.point))
            .max_by_key(|m| m.point.as_os_str().len())
    }
}

/// Whether atime is kept on the mount holding `path`: `false` under `noatime`, in which case a
/// file's age is taken from its mtime and ctime alone. (`relatime`, the default, keeps atime
/// within a day, which is enough for a 30-day purge.)
pub fn atime_kept(mount: Option<&Mount>) -> bool {
    mount.is_none_or(|m| !m.has_option("noatime"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 1 0:21 / / rw,relatime - overlay overlay rw,lowerdir=/a
36 22 7:0 / /shared/scratch rw,noatime shared:1 - btrfs /dev/loop0 rw,space_cache=v2,subvolid=5,subvol=/
37 36 0:40 / /shared/scratch/my\\040disk rw,nosuid - tmpfs tmpfs rw,size=1024k
38 22 8:1 / /shared/home rw,relatime - ext4 /dev/sda1 rw,usrquota
";

    #[test]
    fn parses_points_types_and_options() {
        let m = Mounts::parse(SAMPLE);
        let scratch = m.containing(Path::new("/shared/scratch/alice/x")).unwrap();
        assert_eq!(scratch.fstype, "btrfs");
        assert!(!atime_kept(Some(scratch)));
        let spaced = m
            .containing(Path::new("/shared/scratch/my disk/f"))
            .unwrap();
        assert_eq!(spaced.fstype, "tmpfs");
        assert_eq!(
            m.points_under(Path::new("/shared/scratch")),
            BTreeSet::from([PathBuf::from("/shared/scratch/my disk")])
        );
        let home = m.containing(Path::new("/shared/home/bob")).unwrap();
        assert!(home.has_option("usrquota") && atime_kept(Some(home)));
        assert_eq!(m.containing(Path::new("/etc")).unwrap().fstype, "overlay");
    }
}
