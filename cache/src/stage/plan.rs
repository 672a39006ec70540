//! The first step of a stage: what to do with each file, decided before anything is written.

use crate::error::CacheError;
use crate::layout::{JOURNAL, MANIFEST, TAKEN, read_journal};
use crate::manifest::{Entry, Kind, Manifest, pairs};
use crate::store::NodeCache;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

/// A file of another complete version that a new version can hard-link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Donor {
    /// The file, in the other version's directory.
    pub path: PathBuf,
    /// Its BLAKE3, from that version's staged manifest.
    pub hash: String,
}

/// What a stage does with one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileAction {
    /// Kept in place in the version taken over: unchanged, so its staged hash holds.
    Reuse {
        /// Its BLAKE3.
        hash: String,
    },
    /// Finished by an interrupted stage, per the journal. Done again (from `donor` when there
    /// is one) if the file is not there at its size.
    Resume {
        /// Its BLAKE3, from the journal.
        hash: String,
        /// Where to link it from if it must be done again.
        donor: Option<Donor>,
    },
    /// Hard-linked from an older complete version; copied if the link fails.
    Link(Donor),
    /// Copied: from the peer where there is one, else from the source.
    Copy,
}

/// A file of the manifest and what to do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile<'m> {
    /// The file.
    pub entry: &'m Entry,
    /// What to do.
    pub action: FileAction,
}

/// Files and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Files.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl Tally {
    fn add(&mut self, e: &Entry) {
        self.files += 1;
        self.bytes += e.size;
    }
}

/// A plan's files by action.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanCounts {
    /// Kept in place in the version taken over.
    pub reuse: Tally,
    /// Found done in the journal.
    pub resume: Tally,
    /// To hard-link from an older version.
    pub link: Tally,
    /// To copy from the peer or the source.
    pub copy: Tally,
}

/// A complete version that the stage turns into the new one (see [`super::StageOptions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeOver {
    /// The version taken over.
    pub version: String,
    /// Its staged manifest: what the new version does not hold is removed from it.
    pub manifest: Arc<Manifest>,
    /// The base its staged manifest is kept against on disk, when it is kept as changes; the
    /// new version keeps that base. Without one, `manifest` itself becomes the base.
    pub base: Option<Arc<Manifest>>,
}

/// What staging a version will do. Computed from the cache's markers, journal and staged
/// manifests; nothing is written until [`NodeCache::execute_stage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagePlan<'m> {
    /// Dataset.
    pub name: String,
    /// Version.
    pub version: String,
    /// What the version holds.
    pub manifest: &'m Manifest,
    /// Staged already: there is nothing to do.
    pub complete: bool,
    /// The version's directory exists (an interrupted stage or take-over): what it holds that
    /// the manifest does not is removed first.
    pub resuming: bool,
    /// The version to take over, if any.
    pub take_over: Option<TakeOver>,
    /// Resuming a take-over: the base it left, which the staged manifest is written against.
    pub resumed_base: Option<Arc<Manifest>>,
    /// Every file of the manifest, in its order.
    pub files: Vec<PlannedFile<'m>>,
}

impl StagePlan<'_> {
    /// The base the version's staged manifest is written against, if any: the one its
    /// take-over brings (see [`crate::staged`]).
    pub fn base(&self) -> Option<&Arc<Manifest>> {
        match &self.take_over {
            Some(t) => Some(t.base.as_ref().unwrap_or(&t.manifest)),
            None => self.resumed_base.as_ref(),
        }
    }

    /// Files and bytes by action.
    pub fn counts(&self) -> PlanCounts {
        let mut c = PlanCounts::default();
        for f in &self.files {
            match f.action {
                FileAction::Reuse { .. } => c.reuse.add(f.entry),
                FileAction::Resume { .. } => c.resume.add(f.entry),
                FileAction::Link(_) => c.link.add(f.entry),
                FileAction::Copy => c.copy.add(f.entry),
            }
        }
        c
    }
}

impl NodeCache {
    /// Plans staging `manifest` as `name`/`version`: which complete version of `take_over` (if
    /// any, and only for a fresh stage) to turn into it, and each file's action. Writes nothing.
    pub fn plan_stage<'m>(
        &self,
        name: &str,
        version: &str,
        manifest: &'m Manifest,
        take_over: &[String],
    ) -> Result<StagePlan<'m>, CacheError> {
        let mut plan = StagePlan {
            name: name.to_string(),
            version: version.to_string(),
            manifest,
            complete: self.is_complete(name, version),
            resuming: false,
            take_over: None,
            resumed_base: None,
            files: Vec::new(),
        };
        if plan.complete {
            return Ok(plan);
        }
        plan.resuming = self.dir(name, version).exists();
        if !plan.resuming {
            // Of the versions offered, the one with the most files in common.
            plan.take_over = take_over
                .iter()
                .filter(|v| *v != version && self.is_complete(name, v))
                .filter_map(|v| Some((v, self.read_staged(name, v, MANIFEST).ok()?)))
                .map(|(v, m)| (kept(&m.whole, manifest).count(), v, m))
                .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(a.1)))
                .map(|(_, v, m)| TakeOver {
                    version: v.clone(),
                    manifest: m.whole,
                    base: m.base,
                });
        }
        let mut done = BTreeMap::new();
        let (reused, except) = match &plan.take_over {
            // A take-over starts the journal afresh: the files it keeps are known from the
            // manifest it took over, which it keeps on disk until the version is complete.
            Some(t) => (
                kept(&t.manifest, manifest)
                    .map(|(e, h)| (e, h.to_string()))
                    .collect(),
                vec![version, t.version.as_str()],
            ),
            None => {
                done = read_journal(&self.side(name, version, JOURNAL))?;
                // An interrupted take-over: what it kept is done, as in a journal.
                plan.resumed_base = self.staged_base(name, version)?;
                if let Some(base) = &plan.resumed_base {
                    let taken = match self.side(name, version, TAKEN).exists() {
                        true => self.read_staged(name, version, TAKEN)?.whole,
                        false => Arc::clone(base),
                    };
                    for (e, h) in kept(&taken, manifest) {
                        done.entry(e.path.clone()).or_insert_with(|| h.to_string());
                    }
                }
                (Vec::new(), vec![version])
            }
        };
        let donors = self.donors(name, &except)?;
        plan.files = plan_files(manifest, reused, &done, &donors);
        Ok(plan)
    }

    /// Bytes that staging `manifest` as `name`/`version` would copy from the source: files
    /// neither staged already (a resumed stage) nor linkable from another complete version.
    pub fn bytes_to_stage(
        &self,
        name: &str,
        version: &str,
        manifest: &Manifest,
    ) -> Result<u64, CacheError> {
        Ok(self
            .plan_stage(name, version, manifest, &[])?
            .counts()
            .copy
            .bytes)
    }

    /// Files of complete versions of `name` other than `except`, by what makes them the same
    /// file; the first version in name order wins.
    fn donors(&self, name: &str, except: &[&str]) -> Result<BTreeMap<DonorKey, Donor>, CacheError> {
        let mut out = BTreeMap::new();
        for v in self.complete_versions(name, except) {
            let m = self.read_staged(name, &v, MANIFEST)?.whole;
            let base = self.dir(name, &v);
            for e in m.files() {
                if let Some(h) = &e.hash {
                    out.entry(DonorKey::of(e)).or_insert_with(|| Donor {
                        path: base.join(&e.path),
                        hash: h.clone(),
                    });
                }
            }
        }
        Ok(out)
    }
}

/// Each file's action, in this order of preference: kept by the take-over (`reused`, the
/// manifest's own entries in its order), done per the journal (`done`), linkable from a donor,
/// else copied.
fn plan_files<'m>(
    manifest: &'m Manifest,
    reused: Vec<(&'m Entry, String)>,
    done: &BTreeMap<String, String>,
    donors: &BTreeMap<DonorKey, Donor>,
) -> Vec<PlannedFile<'m>> {
    let mut reused = reused.into_iter().peekable();
    manifest
        .files()
        .map(|entry| {
            let donor = || donors.get(&DonorKey::of(entry)).cloned();
            let action = if let Some((_, hash)) = reused.next_if(|(e, _)| std::ptr::eq(*e, entry)) {
                FileAction::Reuse { hash }
            } else if let Some(hash) = done.get(&entry.path) {
                FileAction::Resume {
                    hash: hash.clone(),
                    donor: donor(),
                }
            } else if let Some(d) = donor() {
                FileAction::Link(d)
            } else {
                FileAction::Copy
            };
            PlannedFile { entry, action }
        })
        .collect()
}

/// Bytes that staging `new` would copy when the `donors` (other versions of the same dataset,
/// complete on the node) are there to link from.
pub fn bytes_to_stage(new: &Manifest, donors: &[&Manifest]) -> u64 {
    let have: BTreeSet<DonorKey> = donors
        .iter()
        .flat_map(|m| m.files().map(DonorKey::of))
        .collect();
    new.files()
        .filter(|e| !have.contains(&DonorKey::of(e)))
        .map(|e| e.size)
        .sum()
}

/// Files of `new` that `old` (a staged manifest, with hashes) holds unchanged at the same path,
/// with their hashes.
fn kept<'o, 'n>(
    old: &'o Manifest,
    new: &'n Manifest,
) -> impl Iterator<Item = (&'n Entry, &'o str)> {
    pairs(old, new).filter_map(|(o, e)| {
        let (o, e) = (o?, e?);
        // Paired by path already: compare the rest of the key without building it.
        (o.kind == Kind::File
            && e.kind == Kind::File
            && (o.size, o.mtime_ns, o.mode) == (e.size, e.mtime_ns, e.mode))
            .then_some(())
            .and(o.hash.as_deref())
            .map(|h| (e, h))
    })
}

/// What makes a file in an older version usable for a new one: same path, size, mtime, mode.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct DonorKey(String, u64, i64, u32);

impl DonorKey {
    fn of(e: &Entry) -> DonorKey {
        DonorKey(e.path.clone(), e.size, e.mtime_ns, e.mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{rescan, scan};
    use crate::stage::StageOptions;

    /// A cache holding `v1` of a three-file tree, and `v2`: `b.bin` changed, `d.bin` added.
    fn two_versions() -> (
        tempfile::TempDir,
        tempfile::TempDir,
        NodeCache,
        Manifest,
        Manifest,
    ) {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("a.bin"), vec![1u8; 100]).unwrap();
        std::fs::write(src.path().join("b.bin"), vec![2u8; 200]).unwrap();
        std::fs::write(src.path().join("sub/c.bin"), vec![3u8; 300]).unwrap();
        let root = tempfile::tempdir().unwrap();
        let cache = NodeCache::open(root.path()).unwrap();
        let v1 = scan(src.path(), 1, &|_| {}).unwrap();
        let opts = StageOptions::default();
        cache
            .stage("ds", &v1.version(), &v1, src.path(), &opts, &|_| {})
            .unwrap();
        std::fs::write(src.path().join("b.bin"), vec![9u8; 250]).unwrap();
        std::fs::write(src.path().join("d.bin"), vec![4u8; 40]).unwrap();
        let (v2, _) = rescan(src.path(), &v1, 1).unwrap();
        (src, root, cache, v1, v2)
    }

    fn actions<'p>(plan: &'p StagePlan) -> BTreeMap<&'p str, &'p FileAction> {
        plan.files
            .iter()
            .map(|f| (f.entry.path.as_str(), &f.action))
            .collect()
    }

    #[test]
    fn a_plan_over_an_older_version_links_unchanged_files_and_copies_changed_ones() {
        let (_src, _root, cache, v1, v2) = two_versions();
        let plan = cache.plan_stage("ds", &v2.version(), &v2, &[]).unwrap();
        assert!(!plan.complete && !plan.resuming && plan.take_over.is_none());
        let by = actions(&plan);
        let staged = cache.staged_manifest("ds", &v1.version()).unwrap();
        let old = |p: &str| Donor {
            path: cache.dir("ds", &v1.version()).join(p),
            hash: staged.by_path()[p].hash.clone().unwrap(),
        };
        assert_eq!(by["a.bin"], &FileAction::Link(old("a.bin")));
        assert_eq!(by["sub/c.bin"], &FileAction::Link(old("sub/c.bin")));
        assert_eq!(by["b.bin"], &FileAction::Copy, "changed since v1");
        assert_eq!(by["d.bin"], &FileAction::Copy, "new in v2");
        let c = plan.counts();
        assert_eq!((c.link.files, c.link.bytes), (2, 400));
        assert_eq!((c.copy.files, c.copy.bytes), (2, 290));
        assert_eq!((c.reuse, c.resume), (Tally::default(), Tally::default()));
        assert_eq!(cache.bytes_to_stage("ds", &v2.version(), &v2).unwrap(), 290);
        assert!(
            !cache.dir("ds", &v2.version()).exists(),
            "planning wrote nothing"
        );
        let done = cache.plan_stage("ds", &v1.version(), &v1, &[]).unwrap();
        assert!(
            done.complete && done.files.is_empty(),
            "v1 is staged already"
        );
    }

    #[test]
    fn a_take_over_plan_reuses_unchanged_files_and_a_journal_resumes_finished_ones() {
        let (_src, _root, cache, v1, v2) = two_versions();
        let plan = cache
            .plan_stage("ds", &v2.version(), &v2, &[v1.version()])
            .unwrap();
        assert_eq!(plan.take_over.as_ref().unwrap().version, v1.version());
        let by = actions(&plan);
        assert!(matches!(by["a.bin"], FileAction::Reuse { .. }), "{by:?}");
        assert!(
            matches!(by["sub/c.bin"], FileAction::Reuse { .. }),
            "{by:?}"
        );
        assert_eq!(by["b.bin"], &FileAction::Copy, "changed since v1");
        assert_eq!(
            plan.counts().reuse,
            Tally {
                files: 2,
                bytes: 400
            }
        );
        assert!(
            cache.is_complete("ds", &v1.version()),
            "planning took nothing over"
        );

        // An interrupted stage of v2 that finished d.bin: it resumes, the rest links or copies.
        std::fs::create_dir_all(cache.dir("ds", &v2.version())).unwrap();
        let h = "d".repeat(64);
        let journal = cache.side("ds", &v2.version(), JOURNAL);
        std::fs::write(&journal, crate::layout::journal_line(&h, "d.bin")).unwrap();
        let plan = cache
            .plan_stage("ds", &v2.version(), &v2, &[v1.version()])
            .unwrap();
        assert!(plan.resuming && plan.take_over.is_none(), "{plan:?}");
        let by = actions(&plan);
        assert_eq!(
            by["d.bin"],
            &FileAction::Resume {
                hash: h,
                donor: None
            }
        );
        assert!(matches!(by["a.bin"], FileAction::Link(_)), "{by:?}");
        assert_eq!(by["b.bin"], &FileAction::Copy);
    }
}
