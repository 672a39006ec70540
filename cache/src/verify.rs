//! Verifying a staged version against the hashes it was staged with, and repairing it.

use crate::copy::{Limiter, copy_file};
use crate::error::CacheError;
use crate::layout::COMPLETE;
use crate::manifest::hash_file;
use crate::store::NodeCache;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What `verify` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Files checked.
    pub files: u64,
    /// Files whose contents no longer match their hash, or that are missing.
    pub mismatched: Vec<String>,
    /// Of those, files re-staged from the source.
    pub repaired: Vec<String>,
}

impl NodeCache {
    /// Re-hashes a complete version's files against its staged manifest. With `source`, files
    /// that do not match are staged again from it.
    pub fn verify(
        &self,
        name: &str,
        version: &str,
        source: Option<&Path>,
    ) -> Result<VerifyReport, CacheError> {
        let m = self.staged_manifest(name, version)?;
        let dir = self.dir(name, version);
        let mut report = VerifyReport::default();
        let limiter = Limiter::new(None);
        for e in m.files() {
            report.files += 1;
            let p = dir.join(&e.path);
            let ok = match (&e.hash, hash_file(&p)) {
                (Some(expected), Ok(actual)) => expected == &actual,
                _ => false,
            };
            if ok {
                continue;
            }
            report.mismatched.push(e.path.clone());
            // A hard-linked file is shared with other versions: it is replaced (through its
            // `.partial` and a rename), never written through.
            let repaired = source.is_some_and(|src| {
                copy_file(&src.join(&e.path), &p, e, &limiter)
                    .is_ok_and(|hash| Some(&hash) == e.hash.as_ref())
            });
            if repaired {
                report.repaired.push(e.path.clone());
            }
        }
        if report.repaired.len() < report.mismatched.len() {
            // Damage that could not be repaired: the version is no longer complete, so no job
            // is handed it, no new version links from it, and it is staged again when needed.
            let marker = self.side(name, version, COMPLETE);
            std::fs::remove_file(&marker).map_err(|e| CacheError::io(&marker, e))?;
        }
        Ok(report)
    }
}
