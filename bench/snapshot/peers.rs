//! The tools compared, and how one run calls each: labpool (this binary as a child), `rsync -a`
//! full copies, rsnapshot's `rsync --link-dest` and restic.

use crate::child::CHILD;
use crate::timing::{Ran, measure};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A tool measured.
#[derive(Clone, Copy, PartialEq)]
pub enum Tool {
    Labpool,
    Rsync,
    LinkDest,
    Restic,
}

/// Every tool, in the table's order.
pub const TOOLS: [Tool; 4] = [Tool::Labpool, Tool::Rsync, Tool::LinkDest, Tool::Restic];

/// Where one run keeps each tool's repository, and how to call the tools.
pub struct Setup {
    pub exe: PathBuf,
    pub src: PathBuf,
    pub work: PathBuf,
}

impl Setup {
    /// Where tool `t` keeps its backups.
    pub fn repo(&self, t: Tool) -> PathBuf {
        self.work.join(match t {
            Tool::Labpool => "labpool",
            Tool::Rsync => "rsync",
            Tool::LinkDest => "link-dest",
            Tool::Restic => "restic",
        })
    }

    fn restic_env(&self) -> Vec<(&'static str, OsString)> {
        vec![
            ("RESTIC_PASSWORD", "bench".into()),
            ("XDG_CACHE_HOME", self.work.join("restic-cache").into()),
            ("TMPDIR", self.work.join("tmp").into()),
        ]
    }

    fn restic(&self, args: &[&str], extra: &[OsString]) -> Ran {
        let mut a: Vec<OsString> = vec!["--repo".into(), self.repo(Tool::Restic).into()];
        a.extend(args.iter().map(OsString::from));
        a.extend(extra.iter().cloned());
        measure(Path::new("restic"), &a, &self.restic_env(), &self.work)
    }

    fn labpool(&self, op: &str, args: &[OsString]) -> Ran {
        let mut a = vec![OsString::from(self.repo(Tool::Labpool))];
        a.extend(args.iter().cloned());
        measure(&self.exe, &a, &[(CHILD, op.into())], &self.work)
    }

    fn rsync(&self, args: &[OsString]) -> Ran {
        measure(Path::new("rsync"), args, &[], &self.work)
    }

    /// Fresh repositories and backup directories for every tool.
    pub fn init(&self) {
        std::fs::create_dir_all(self.work.join("tmp")).unwrap();
        self.labpool("init", &[]);
        self.restic(&["init", "-q"], &[]);
        std::fs::create_dir_all(self.repo(Tool::Rsync)).unwrap();
        std::fs::create_dir_all(self.repo(Tool::LinkDest)).unwrap();
    }

    /// Backup number `day` (1, 2, 3).
    pub fn backup(&self, t: Tool, day: u32) -> Ran {
        let src_slash = OsString::from(format!("{}/", self.src.display()));
        let dest = |t| OsString::from(self.repo(t).join(format!("day-{day}")));
        match t {
            Tool::Labpool => self.labpool("backup", &[self.src.clone().into()]),
            Tool::Restic => self.restic(&["backup", "-q"], &[self.src.clone().into()]),
            Tool::Rsync => self.rsync(&["-a".into(), "--delete".into(), src_slash, dest(t)]),
            Tool::LinkDest => {
                let mut a: Vec<OsString> = vec!["-a".into(), "--delete".into()];
                if day > 1 {
                    let prev = self.repo(t).join(format!("day-{}", day - 1));
                    a.push(format!("--link-dest={}", prev.display()).into());
                }
                a.extend([src_slash, dest(t)]);
                self.rsync(&a)
            }
        }
    }

    /// Restores `file` (absolute, in the source) from the latest backup into the fresh
    /// directory `target`; returns where it landed.
    pub fn restore_one(&self, t: Tool, file: &Path, target: &Path) -> (Ran, PathBuf) {
        std::fs::create_dir_all(target).unwrap();
        let rel = file.strip_prefix(&self.src).unwrap();
        let name = target.join(file.file_name().unwrap());
        match t {
            Tool::Labpool => (
                self.labpool("restore-one", &[file.into(), target.into()]),
                name,
            ),
            Tool::Restic => (
                self.restic(
                    &["restore", "latest", "-q", "--target"],
                    &[target.into(), "--include".into(), file.into()],
                ),
                target.join(file.strip_prefix("/").unwrap()),
            ),
            Tool::Rsync | Tool::LinkDest => (
                self.rsync(&[
                    "-a".into(),
                    self.repo(t).join("day-3").join(rel).into(),
                    format!("{}/", target.display()).into(),
                ]),
                name,
            ),
        }
    }

    /// Restores the whole latest backup into the fresh directory `target`; returns where the
    /// tree's root landed.
    pub fn restore_all(&self, t: Tool, target: &Path) -> (Ran, PathBuf) {
        std::fs::create_dir_all(target).unwrap();
        let src_name = self.src.file_name().unwrap();
        match t {
            Tool::Labpool => (
                self.labpool("restore-all", &[target.into()]),
                target.join(src_name),
            ),
            Tool::Restic => (
                self.restic(&["restore", "latest", "-q", "--target"], &[target.into()]),
                target.join(self.src.strip_prefix("/").unwrap()),
            ),
            Tool::Rsync | Tool::LinkDest => (
                self.rsync(&[
                    "-a".into(),
                    format!("{}/", self.repo(t).join("day-3").display()).into(),
                    target.join(src_name).into(),
                ]),
                target.join(src_name),
            ),
        }
    }

    /// A full verify reading all data; `None` for a tool with nothing to verify against.
    pub fn verify(&self, t: Tool) -> Option<Ran> {
        match t {
            Tool::Labpool => Some(self.labpool("check", &[])),
            Tool::Restic => Some(self.restic(&["check", "-q", "--read-data"], &[])),
            Tool::Rsync | Tool::LinkDest => None,
        }
    }
}
