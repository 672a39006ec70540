//! Registering a dataset: the rules for its name and its source directory, and making the
//! source read-only for members, so that what the manifest records stays true.

use crate::error::CacheError;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Longest dataset name.
pub const MAX_NAME: usize = 64;

/// Checks a dataset name: letters, digits, `-`, `_` and `.`, starting with a letter or digit,
/// at most [`MAX_NAME`] bytes. Names become directory names and environment variable names.
pub fn check_name(name: &str) -> Result<(), CacheError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(CacheError::InvalidName {
            name: name.to_string(),
        })
    }
}

/// The variable a job reads its local copy of `name` from: `LABPOOL_DATASET_` and the name in
/// upper case, with `-` and `.` as `_` (`imagenet-1k` gives `LABPOOL_DATASET_IMAGENET_1K`).
pub fn env_var(name: &str) -> String {
    let upper: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("LABPOOL_DATASET_{upper}")
}

/// Checks a source directory for registration and returns its canonical path: it must exist, be
/// a directory, not be a symlink itself, and lie strictly under `root` once every link in its
/// path is resolved.
pub fn check_source(root: &Path, path: &Path) -> Result<PathBuf, CacheError> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CacheError::MissingSource {
                path: path.to_path_buf(),
                root: root.to_path_buf(),
            });
        }
        other => other.map_err(|e| CacheError::io(path, e))?,
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).map_err(|e| CacheError::io(path, e))?;
        return Err(CacheError::SymlinkSource {
            path: path.to_path_buf(),
            target,
        });
    }
    if !meta.is_dir() {
        return Err(CacheError::NotADirectory {
            path: path.to_path_buf(),
        });
    }
    let root_real = std::fs::canonicalize(root).map_err(|e| CacheError::io(root, e))?;
    let real = std::fs::canonicalize(path).map_err(|e| CacheError::io(path, e))?;
    if real == root_real || !real.starts_with(&root_real) {
        return Err(CacheError::OutsideRoot {
            path: real,
            root: root_real,
        });
    }
    Ok(real)
}

/// Takes group and other write permission off every file and directory under `path` (symlinks
/// have no mode of their own; ownership is left alone). Returns how many entries changed.
pub fn make_read_only(path: &Path) -> Result<u64, CacheError> {
    let mut changed = 0;
    for entry in ignore::WalkBuilder::new(path)
        .standard_filters(false)
        .hidden(false)
        .follow_links(false)
        .build()
    {
        let entry = entry.map_err(|e| CacheError::Walk(e.to_string()))?;
        let p = entry.path();
        let meta = std::fs::symlink_metadata(p).map_err(|e| CacheError::io(p, e))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o022 != 0 {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode & !0o022))
                .map_err(|e| CacheError::io(p, e))?;
            changed += 1;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn names() {
        for ok in ["imagenet", "imagenet-1k", "coco_2017", "v1.2", "9tiles"] {
            check_name(ok).unwrap();
        }
        for bad in ["", "-x", ".hidden", "a/b", "a b", "ü", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(env_var("imagenet-1k.v2"), "LABPOOL_DATASET_IMAGENET_1K_V2");
    }

    #[test]
    fn sources_must_be_real_directories_under_the_root() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("datasets");
        std::fs::create_dir_all(root.join("coco/train")).unwrap();
        std::fs::create_dir_all(t.path().join("elsewhere")).unwrap();
        std::fs::write(root.join("file"), "x").unwrap();
        symlink(t.path().join("elsewhere"), root.join("link")).unwrap();
        symlink(root.join("coco"), root.join("inside-link")).unwrap();

        let real = check_source(&root, &root.join("coco")).unwrap();
        assert_eq!(real, std::fs::canonicalize(root.join("coco")).unwrap());
        assert!(matches!(
            check_source(&root, &root.join("link")),
            Err(CacheError::SymlinkSource { .. })
        ));
        assert!(matches!(
            check_source(&root, &root.join("inside-link")),
            Err(CacheError::SymlinkSource { .. })
        ));
        assert!(matches!(
            check_source(&root, &t.path().join("elsewhere")),
            Err(CacheError::OutsideRoot { .. })
        ));
        assert!(matches!(
            check_source(&root, &root.join("coco/../../elsewhere")),
            Err(CacheError::OutsideRoot { .. })
        ));
        assert!(matches!(
            check_source(&root, &root),
            Err(CacheError::OutsideRoot { .. })
        ));
        assert!(matches!(
            check_source(&root, &root.join("file")),
            Err(CacheError::NotADirectory { .. })
        ));
        assert!(matches!(
            check_source(&root, &root.join("missing")),
            Err(CacheError::MissingSource { .. })
        ));
    }

    #[test]
    fn read_only_takes_write_bits_from_group_and_others_only() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("sub");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("a"), "a").unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::set_permissions(d.join("a"), std::fs::Permissions::from_mode(0o664)).unwrap();
        symlink("a", d.join("l")).unwrap();
        let n = make_read_only(t.path()).unwrap();
        assert!(n >= 2, "{n}");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&d), 0o755);
        assert_eq!(mode(&d.join("a")), 0o644);
        assert_eq!(
            make_read_only(t.path()).unwrap(),
            0,
            "nothing left to change"
        );
    }
}
