//! Limits the kernel enforces, where it can.
//!
//! - btrfs: each user's directory is a subvolume with a qgroup limit (the hard byte limit;
//!   btrfs has no soft limit and no file-count limit, so those stay labpool's, at submit).
//! - ext4 and XFS mounted with user quotas on (`usrquota`, `uquota`...): `setquota` or
//!   `xfs_quota` sets soft and hard limits on bytes and files, and the grace is labpool's.
//! - Anything else, including ext4/XFS without quota options and kernels built without quota
//!   support: enforcement is scan-based, at submit, and [`Enforcement::describe`] says so.

use crate::QuotaError;
use crate::limits::Limit;
use crate::mounts::{Mount, Mounts};
use crate::walk::BTRFS_SUBVOLUME_INO;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// How limits on one file system are enforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Enforcement {
    /// btrfs qgroups on per-user subvolumes.
    Btrfs {
        /// The mount point.
        mount: PathBuf,
    },
    /// `setquota` (ext4 and others with user quotas on).
    Setquota {
        /// The mount point.
        mount: PathBuf,
    },
    /// `xfs_quota`.
    XfsQuota {
        /// The mount point.
        mount: PathBuf,
    },
    /// Only at submit, from scans.
    ScanOnly {
        /// Why the kernel cannot.
        why: String,
    },
}

impl Enforcement {
    /// One line for `labpool quota`.
    pub fn describe(&self) -> String {
        match self {
            Enforcement::Btrfs { mount } => format!(
                "kernel: btrfs qgroup on each user's subvolume ({}); writes past the hard limit fail",
                mount.display()
            ),
            Enforcement::Setquota { mount } => {
                format!("kernel: user quotas on {} (setquota)", mount.display())
            }
            Enforcement::XfsQuota { mount } => {
                format!("kernel: XFS user quotas on {} (xfs_quota)", mount.display())
            }
            Enforcement::ScanOnly { why } => {
                format!(
                    "at submit, from the last scan: over the limit, new jobs are refused and writes go on. The kernel cannot stop writes here: {why}"
                )
            }
        }
    }

    /// Whether the kernel stops writes.
    pub fn by_kernel(&self) -> bool {
        !matches!(self, Enforcement::ScanOnly { .. })
    }
}

fn tool_exists(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            std::fs::metadata(d.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Decides how limits under `root` can be enforced.
pub fn detect(root: &Path) -> Enforcement {
    let Ok(canonical) = std::fs::canonicalize(root) else {
        return Enforcement::ScanOnly {
            why: format!("{} does not exist yet", root.display()),
        };
    };
    let mounts = Mounts::read();
    let Some(m) = mounts.containing(&canonical) else {
        return Enforcement::ScanOnly {
            why: "the mount table cannot be read".into(),
        };
    };
    detect_on(m, tool_exists)
}

/// [`detect`] for a known mount; `tool` says whether a program is installed.
pub fn detect_on(m: &Mount, tool: impl Fn(&str) -> bool) -> Enforcement {
    let quota_on = ["usrquota", "quota", "uquota", "usrjquota", "uqnoenforce"]
        .iter()
        .any(|o| {
            m.has_option(o)
                || m.options
                    .iter()
                    .chain(&m.super_options)
                    .any(|x| x.starts_with(&format!("{o}=")))
        });
    match m.fstype.as_str() {
        "btrfs" if tool("btrfs") => Enforcement::Btrfs {
            mount: m.point.clone(),
        },
        "btrfs" => Enforcement::ScanOnly {
            why: "btrfs, but the `btrfs` tool is missing: install btrfs-progs".into(),
        },
        "xfs" if quota_on && tool("xfs_quota") => Enforcement::XfsQuota {
            mount: m.point.clone(),
        },
        "ext4" | "ext3" | "ext2" if quota_on && tool("setquota") => Enforcement::Setquota {
            mount: m.point.clone(),
        },
        "xfs" | "ext4" | "ext3" | "ext2" if quota_on => Enforcement::ScanOnly {
            why: format!(
                "{} has user quotas on, but the quota tools are missing: install `quota` (ext4) or `xfsprogs` (XFS)",
                m.point.display()
            ),
        },
        "xfs" | "ext4" | "ext3" | "ext2" => Enforcement::ScanOnly {
            why: format!(
                "{} on {} is mounted without user quotas (no usrquota option)",
                m.fstype,
                m.point.display()
            ),
        },
        other => Enforcement::ScanOnly {
            why: format!(
                "{other} on {} has no per-user limits labpool can set",
                m.point.display()
            ),
        },
    }
}

fn run(cmd: &mut Command) -> Result<String, QuotaError> {
    let line = format!(
        "{} {}",
        cmd.get_program().to_string_lossy(),
        cmd.get_args()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = cmd.output().map_err(|e| QuotaError::Tool {
        command: line.clone(),
        output: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(QuotaError::Tool {
            command: line,
            output: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What applying a limit did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// What the kernel now enforces, or why it does not for this user.
    pub note: String,
    /// Whether the kernel enforces this user's limit.
    pub by_kernel: bool,
}

/// A user whose limit is applied.
#[derive(Debug, Clone)]
pub struct Owner {
    /// Name (for `setquota` and `xfs_quota`).
    pub name: String,
    /// Uid.
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
}

/// Sets `limit` for `owner` in the kernel. `user_dir` is the user's directory under the file
/// system's root; on btrfs it is created as a subvolume (owned by the user, mode 0700) when it
/// does not exist or is an empty directory.
pub fn apply(
    enf: &Enforcement,
    user_dir: &Path,
    owner: &Owner,
    limit: &Limit,
) -> Result<Applied, QuotaError> {
    match enf {
        Enforcement::Btrfs { mount } => apply_btrfs(mount, user_dir, owner, limit),
        Enforcement::Setquota { mount } => {
            run(Command::new("setquota").args(setquota_args(mount, &owner.name, limit)))?;
            Ok(Applied {
                note: format!("setquota on {}", mount.display()),
                by_kernel: true,
            })
        }
        Enforcement::XfsQuota { mount } => {
            run(Command::new("xfs_quota").args(xfs_quota_args(mount, &owner.name, limit)))?;
            Ok(Applied {
                note: format!("xfs_quota on {}", mount.display()),
                by_kernel: true,
            })
        }
        Enforcement::ScanOnly { why } => Ok(Applied {
            note: format!("scan-based ({why})"),
            by_kernel: false,
        }),
    }
}

/// `setquota -u NAME BSOFT BHARD ISOFT IHARD MOUNT` (blocks in KiB; 0 is no limit).
pub fn setquota_args(mount: &Path, user: &str, limit: &Limit) -> Vec<String> {
    let kib = |b: Option<u64>| b.map_or(0, |b| b.div_ceil(1024)).to_string();
    let n = |f: Option<u64>| f.unwrap_or(0).to_string();
    vec![
        "-u".into(),
        user.into(),
        kib(limit.soft_bytes),
        kib(limit.hard_bytes),
        n(limit.soft_files),
        n(limit.hard_files),
        mount.display().to_string(),
    ]
}

/// `xfs_quota -x -c 'limit -u bsoft=.. bhard=.. isoft=.. ihard=.. NAME' MOUNT`.
pub fn xfs_quota_args(mount: &Path, user: &str, limit: &Limit) -> Vec<String> {
    let b = |v: Option<u64>| v.unwrap_or(0).to_string();
    vec![
        "-x".into(),
        "-c".into(),
        format!(
            "limit -u bsoft={} bhard={} isoft={} ihard={} {user}",
            b(limit.soft_bytes),
            b(limit.hard_bytes),
            b(limit.soft_files),
            b(limit.hard_files)
        ),
        mount.display().to_string(),
    ]
}

fn is_empty_dir(p: &Path) -> bool {
    std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_none())
}

fn apply_btrfs(
    mount: &Path,
    user_dir: &Path,
    owner: &Owner,
    limit: &Limit,
) -> Result<Applied, QuotaError> {
    // Quotas on (idempotent; on an fs where they are already on it changes nothing).
    if run(Command::new("btrfs")
        .args(["qgroup", "show", "-r"])
        .arg(mount))
    .is_err()
    {
        run(Command::new("btrfs").args(["quota", "enable"]).arg(mount))?;
    }
    match std::fs::symlink_metadata(user_dir) {
        Ok(m) if m.is_dir() && m.ino() == BTRFS_SUBVOLUME_INO => {}
        Ok(m) if m.is_dir() && is_empty_dir(user_dir) => {
            std::fs::remove_dir(user_dir).map_err(|e| QuotaError::io(user_dir, e))?;
            make_subvolume(user_dir, owner, m.mode() & 0o7777)?;
        }
        Ok(m) if m.is_dir() => {
            return Ok(Applied {
                note: format!(
                    "{} is a plain directory holding data, not a subvolume: the kernel cannot limit it; the limit is applied at submit. To have the kernel enforce it, move the data into a subvolume (btrfs subvolume create), or remove the directory and set the limit again",
                    user_dir.display()
                ),
                by_kernel: false,
            });
        }
        Ok(_) => {
            return Err(QuotaError::NotADirectory {
                path: user_dir.to_path_buf(),
                why: "not a directory (a file or a symlink) where the user's directory belongs"
                    .into(),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            make_subvolume(user_dir, owner, 0o700)?
        }
        Err(e) => return Err(QuotaError::io(user_dir, e)),
    }
    let size = limit
        .hard_bytes
        .map_or_else(|| "none".to_string(), |b| b.to_string());
    run(Command::new("btrfs")
        .args(["qgroup", "limit", &size])
        .arg(user_dir))?;
    Ok(Applied {
        note: match limit.hard_bytes {
            Some(b) => format!(
                "btrfs qgroup limit {} on the subvolume {}",
                labpool_units::format_size(b),
                user_dir.display()
            ),
            None => format!("no byte limit on the subvolume {}", user_dir.display()),
        },
        by_kernel: true,
    })
}

fn make_subvolume(dir: &Path, owner: &Owner, mode: u32) -> Result<(), QuotaError> {
    run(Command::new("btrfs").args(["subvolume", "create"]).arg(dir))?;
    std::os::unix::fs::lchown(dir, Some(owner.uid), Some(owner.gid))
        .map_err(|e| QuotaError::io(dir, e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
        .map_err(|e| QuotaError::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(fstype: &str, opts: &str) -> Mount {
        Mount {
            point: PathBuf::from("/shared"),
            fstype: fstype.into(),
            options: vec!["rw".into()],
            super_options: opts.split(',').map(str::to_string).collect(),
            source: "/dev/x".into(),
        }
    }

    #[test]
    fn detection_follows_type_options_and_tools() {
        let all = |_: &str| true;
        let none = |_: &str| false;
        assert!(matches!(
            detect_on(&mount("btrfs", "rw"), all),
            Enforcement::Btrfs { .. }
        ));
        assert!(
            matches!(detect_on(&mount("btrfs", "rw"), none), Enforcement::ScanOnly { why } if why.contains("btrfs-progs"))
        );
        assert!(matches!(
            detect_on(&mount("ext4", "rw,usrquota"), all),
            Enforcement::Setquota { .. }
        ));
        assert!(matches!(
            detect_on(&mount("xfs", "rw,uquota"), all),
            Enforcement::XfsQuota { .. }
        ));
        let e = detect_on(&mount("ext4", "rw"), all);
        assert!(
            e.describe().contains("without user quotas"),
            "{}",
            e.describe()
        );
        assert!(!detect_on(&mount("overlay", "rw"), all).by_kernel());
    }

    #[test]
    fn tool_arguments() {
        let l = Limit {
            soft_bytes: Some(40 << 30),
            hard_bytes: Some(50 << 30),
            soft_files: None,
            hard_files: Some(1_000_000),
            grace_secs: None,
        };
        assert_eq!(
            setquota_args(Path::new("/shared"), "alice", &l),
            [
                "-u", "alice", "41943040", "52428800", "0", "1000000", "/shared"
            ]
        );
        assert_eq!(
            xfs_quota_args(Path::new("/shared"), "alice", &l)[2],
            format!(
                "limit -u bsoft={} bhard={} isoft=0 ihard=1000000 alice",
                40u64 << 30,
                50u64 << 30
            )
        );
    }
}
