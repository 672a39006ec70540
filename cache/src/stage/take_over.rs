//! Taking over a complete version that no job needs any more: the new version starts as it,
//! so only changed files are written.

use super::plan::{StagePlan, TakeOver};
use crate::error::CacheError;
use crate::layout::{BASE, COMPLETE, JOURNAL, MANIFEST, STATS, TAKEN};
use crate::manifest::{Entry, Kind, pairs};
use crate::store::NodeCache;
use std::path::Path;

impl NodeCache {
    /// Turns complete version `old` into the start of the plan's version: `old` is renamed,
    /// and what the new manifest does not hold is removed. `old` stops being complete first,
    /// so no job is handed it half-changed; a crash part-way leaves an incomplete version that
    /// a later stage resumes.
    ///
    /// Nothing is written per file: `old`'s staged manifest files are renamed to the new
    /// version's base (and, when `old` was kept as changes, its taken changes), which say
    /// which files were kept should the stage be resumed, and which the new version's staged
    /// manifest is written against (see [`crate::staged`]).
    pub(super) fn take_over(&self, plan: &StagePlan<'_>, old: &TakeOver) -> Result<(), CacheError> {
        let (name, version, from) = (
            plan.name.as_str(),
            plan.version.as_str(),
            old.version.as_str(),
        );
        let marker = self.side(name, from, COMPLETE);
        std::fs::remove_file(&marker).map_err(|e| CacheError::io(&marker, e))?;
        // Leftovers of an earlier try at this version would name files it does not hold.
        for suffix in [JOURNAL, BASE, TAKEN] {
            remove_if_there(&self.side(name, version, suffix))?;
        }
        let moves = match old.base {
            Some(_) => vec![(BASE, BASE), (MANIFEST, TAKEN)],
            None => vec![(MANIFEST, BASE)],
        };
        for (suffix, to) in moves {
            let (a, b) = (self.side(name, from, suffix), self.side(name, version, to));
            std::fs::rename(&a, &b).map_err(|e| CacheError::io(&a, e))?;
        }
        let (src, to) = (self.dir(name, from), self.dir(name, version));
        std::fs::rename(&src, &to).map_err(|e| CacheError::io(&src, e))?;
        remove_if_there(&self.side(name, from, STATS))?;
        // What the new version does not hold goes, deepest first.
        let gone: Vec<&Entry> = pairs(&old.manifest, plan.manifest)
            .filter_map(|(o, n)| match (o, n) {
                (Some(o), Some(n)) if n.kind == o.kind => None,
                (o, _) => o,
            })
            .collect();
        for o in gone.into_iter().rev() {
            let p = to.join(&o.path);
            let gone = if o.kind == Kind::Dir {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            match gone {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(CacheError::io(&p, e));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Removes a file; one that is not there is fine.
pub(crate) fn remove_if_there(p: &Path) -> Result<(), CacheError> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CacheError::io(p, e)),
        _ => Ok(()),
    }
}
