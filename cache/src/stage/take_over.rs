//! Taking over a complete version that no job needs any more: the new version starts as it,
//! so only changed files are written.

use super::plan::{FileAction, StagePlan};
use crate::error::CacheError;
use crate::layout::{COMPLETE, JOURNAL, MANIFEST, STATS, journal_line, write_atomic};
use crate::manifest::{Entry, Kind, Manifest, pairs};
use crate::store::NodeCache;

impl NodeCache {
    /// Turns complete version `old` (staged as `previous`) into the start of the plan's
    /// version: the files the plan reuses are journaled as done, `old` is renamed, and what the
    /// new manifest does not hold is removed. `old` stops being complete first, so no job is
    /// handed it half-changed; a crash part-way leaves an incomplete version that a later stage
    /// resumes.
    pub(super) fn take_over(
        &self,
        plan: &StagePlan<'_>,
        old: &str,
        previous: &Manifest,
    ) -> Result<(), CacheError> {
        let (name, version) = (plan.name.as_str(), plan.version.as_str());
        let journal: String = plan
            .files
            .iter()
            .filter_map(|f| match &f.action {
                FileAction::Reuse { hash } => Some(journal_line(hash, &f.entry.path)),
                _ => None,
            })
            .collect();
        write_atomic(&self.side(name, version, JOURNAL), journal.as_bytes())?;
        let marker = self.side(name, old, COMPLETE);
        std::fs::remove_file(&marker).map_err(|e| CacheError::io(&marker, e))?;
        let (from, to) = (self.dir(name, old), self.dir(name, version));
        std::fs::rename(&from, &to).map_err(|e| CacheError::io(&from, e))?;
        for suffix in [MANIFEST, STATS] {
            let _ = std::fs::remove_file(self.side(name, old, suffix));
        }
        // What the new version does not hold goes, deepest first.
        let gone: Vec<&Entry> = pairs(previous, plan.manifest)
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
