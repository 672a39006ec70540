//! A hub folder's refs: each branch or tag name and the commit it names, read with bounds,
//! for the model list (controller) and for a job's own copy of them (agent).

use std::io::{self, Read};
use std::path::Path;

/// The most refs read from one hub folder.
pub const MAX_REFS: usize = 1024;

/// The bytes read of one ref: a commit is 40 hex digits.
const MAX_REF_BYTES: u64 = 128;

/// The refs in `dir` (a hub folder's `refs/`) and the commit each names, trimmed, in name
/// order. Only regular files with plain names count (not dot files, and not the hub's
/// `refs/pr/` folder); at most [`MAX_REFS`] are read, each to at most 128 bytes. None when
/// `dir` is missing.
pub fn read_refs(dir: &Path) -> io::Result<Vec<(String, String)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .take(MAX_REFS)
        .collect();
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let mut text = String::new();
        std::fs::File::open(dir.join(&name))?
            .take(MAX_REF_BYTES)
            .read_to_string(&mut text)?;
        out.push((name, text.trim().to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_read_in_name_order_with_bounds_and_the_pr_folder_is_passed_over() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("refs");
        assert!(read_refs(&dir).unwrap().is_empty(), "no refs/ at all");
        std::fs::create_dir_all(dir.join("pr")).unwrap();
        std::fs::write(dir.join("pr/1"), "c".repeat(40)).unwrap();
        std::fs::write(dir.join("v1"), format!("{}\n", "b".repeat(40))).unwrap();
        std::fs::write(dir.join("main"), "a".repeat(40)).unwrap();
        std::fs::write(dir.join(".lock"), "x").unwrap();
        std::fs::write(dir.join("huge"), "d".repeat(10_000)).unwrap();
        let refs = read_refs(&dir).unwrap();
        let names: Vec<&str> = refs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["huge", "main", "v1"]);
        assert_eq!(refs[0].1.len(), 128, "read to 128 bytes at most");
        assert_eq!(refs[2].1, "b".repeat(40), "trimmed");
    }
}
