//! The scratch purge on real files: only entries past the age limit go; warned ones stay; a
//! running job's directory and a `.labpool-keep` tree survive whole; symlinks are removed as
//! links and never followed, also when a file or a directory is swapped for one between the
//! plan and the execution; a file used after the plan is kept; the audit log lists exactly
//! what vanished. And the purge notice is written safely into a home the user controls.
//!
//! A file's ctime cannot be set back, so instead of making files old the tests move the clock
//! forward: `ctx.now` is 40 days from now, so a file made now is 40 days old, and a file is
//! made "new" or "warned" by setting its atime and mtime close to `ctx.now`.

mod common;

use common::*;
use labpool_quotas::Progress;
use labpool_quotas::notice::{NOTICE_FILE, notice_text, write_notice};
use labpool_quotas::purge::{
    KEEP_MARKER, PurgeContext, PurgeOutcome, PurgePlan, PurgePolicy, Removed, execute, plan,
};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

/// A scratch root and a directory outside it, in one temp dir.
struct Scratch {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    ctx: PurgeContext,
}

impl Scratch {
    fn new() -> Scratch {
        let tmp = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        let root = base.join("scratch");
        let outside = base.join("outside");
        fs::create_dir(&root).unwrap();
        fs::create_dir(&outside).unwrap();
        Scratch {
            _tmp: tmp,
            root,
            outside,
            ctx: PurgeContext {
                now: now_secs() + 40 * DAY,
                protected: vec![],
            },
        }
    }

    /// A file of `len` bytes at `rel`, last used `days` before `ctx.now` (`None`: made now,
    /// so 40 days old at `ctx.now`).
    fn file(&self, rel: &str, len: usize, days: Option<i64>) -> PathBuf {
        let p = self.root.join(rel);
        write_file(&p, len);
        if let Some(d) = days {
            set_times(&p, self.ctx.now - d * DAY);
        }
        p
    }

    fn plan(&self) -> PurgePlan {
        let policy = PurgePolicy {
            threads: 4,
            ..PurgePolicy::default()
        };
        plan(&self.root, &policy, &self.ctx, &Progress::default()).unwrap()
    }

    /// Executes `plan`, checks the audit log against the outcome and the disk, and returns
    /// both.
    fn execute(&self, plan: &PurgePlan) -> (PurgeOutcome, Vec<Removed>) {
        let before = tree(&self.root);
        let mut log = Vec::new();
        let progress = Progress::default();
        let outcome = execute(plan, &self.ctx, &mut log, &progress).unwrap();
        let logged: Vec<Removed> = String::from_utf8(log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
            .collect();
        assert_eq!(logged, outcome.removed, "the log is what was removed");
        // The log lists exactly the entries that vanished from the scratch tree.
        let vanished: BTreeSet<PathBuf> = before.difference(&tree(&self.root)).cloned().collect();
        let in_log: BTreeSet<PathBuf> = logged.iter().map(|r| r.path.clone()).collect();
        assert_eq!(
            in_log.len(),
            logged.len(),
            "a path logged twice: {logged:?}"
        );
        assert_eq!(in_log, vanished, "logged vs vanished");
        assert_eq!(Progress::get(&progress.removed), logged.len() as u64);
        (outcome, logged)
    }
}

/// Every path under `root` (not following links), `root` itself left out.
fn tree(root: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
            out.insert(e.path());
        }
    }
    out
}

fn exists(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok()
}

fn rels(root: &Path, list: &[labpool_quotas::purge::Candidate]) -> BTreeSet<PathBuf> {
    list.iter().map(|c| root.join(&c.path)).collect()
}

fn skipped_for<'a>(outcome: &'a PurgeOutcome, p: &Path) -> &'a str {
    outcome
        .skipped
        .iter()
        .find(|(s, _)| s == p)
        .map(|(_, why)| why.as_str())
        .unwrap_or_else(|| {
            panic!(
                "{} not among the skipped: {:?}",
                p.display(),
                outcome.skipped
            )
        })
}

#[test]
fn only_files_past_the_age_go_and_warned_ones_stay() {
    let s = Scratch::new();
    let old = [
        s.file("alice/old.bin", 5000, None),
        s.file("alice/sub/deeper/old.bin", 100, None),
        s.file("bob/old-by-mtime.bin", 10, Some(31)),
        s.file("top-level-old", 1, None),
    ];
    let new = [
        s.file("alice/new.bin", 5000, Some(1)),
        s.file("alice/sub/new.bin", 10, Some(22)),
    ];
    let warned = [
        s.file("alice/warned.bin", 5000, Some(25)),
        s.file("bob/warned-too", 10, Some(29)),
    ];
    fs::create_dir_all(s.root.join("empty/dir")).unwrap();

    let p = s.plan();
    assert_eq!(rels(&s.root, &p.delete), old.iter().cloned().collect());
    assert_eq!(rels(&s.root, &p.warn), warned.iter().cloned().collect());
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    // Oldest first; soonest due first.
    assert!(p.delete.windows(2).all(|w| w[0].touched <= w[1].touched));
    assert_eq!(p.warn[0].path, PathBuf::from("bob/warned-too"));
    assert_eq!(p.due(&p.warn[0]), s.ctx.now + DAY);
    assert_eq!(p.total().files, 4);

    let (outcome, logged) = s.execute(&p);
    assert!(outcome.skipped.is_empty(), "{:?}", outcome.skipped);
    assert_eq!(logged.len(), old.len());
    for f in &old {
        assert!(!exists(f), "{} should be gone", f.display());
    }
    for f in new.iter().chain(&warned) {
        assert!(exists(f), "{} should stay", f.display());
    }
    // Directories stay, empty or not.
    assert!(s.root.join("alice/sub/deeper").is_dir());
    assert!(s.root.join("empty/dir").is_dir());
    let me = nix::unistd::geteuid().as_raw();
    assert!(
        logged
            .iter()
            .all(|r| r.uid == me && r.age_days >= 30 && !r.symlink)
    );
}

#[test]
fn a_running_jobs_directory_and_a_keep_marker_protect_their_trees() {
    let mut s = Scratch::new();
    let job = [
        s.file("alice/job-17/out.bin", 100, None),
        s.file("alice/job-17/ckpt/step-1.pt", 100, None),
    ];
    let kept = [
        s.file("bob/results/final.csv", 100, None),
        s.file("bob/results/raw/run-1.bin", 100, None),
        s.file(&format!("bob/results/{KEEP_MARKER}"), 0, None),
    ];
    let gone = s.file("bob/tmp.bin", 100, None);
    s.ctx.protected = vec![s.root.join("alice/job-17")];

    let p = s.plan();
    assert_eq!(rels(&s.root, &p.delete), BTreeSet::from([gone.clone()]));
    assert_eq!(p.jobs_skipped, vec![s.root.join("alice/job-17")]);
    assert_eq!(p.kept, vec![s.root.join("bob/results")]);

    let (outcome, _) = s.execute(&p);
    assert!(!exists(&gone));
    for f in job.iter().chain(&kept) {
        assert!(exists(f), "{} should survive", f.display());
    }
    assert!(outcome.skipped.is_empty(), "{:?}", outcome.skipped);
}

#[test]
fn a_marker_or_a_job_appearing_after_the_plan_still_protects() {
    let mut s = Scratch::new();
    let a = s.file("alice/a/old.bin", 100, None);
    let b = s.file("bob/b/old.bin", 100, None);
    let p = s.plan();
    assert_eq!(p.delete.len(), 2);
    // After the plan: a marker in one directory, a job started in the other's parent.
    write_file(&s.root.join("alice").join(KEEP_MARKER), 0);
    s.ctx.protected = vec![s.root.join("bob")];
    let (outcome, logged) = s.execute(&p);
    assert!(logged.is_empty(), "{logged:?}");
    assert!(exists(&a) && exists(&b));
    assert!(skipped_for(&outcome, &a).contains(KEEP_MARKER));
    assert!(skipped_for(&outcome, &b).contains("running job"));
}

#[test]
fn a_planted_link_to_outside_is_removed_as_a_link_and_never_followed() {
    let s = Scratch::new();
    let precious = s.outside.join("dir/precious.bin");
    write_file(&precious, 1000);
    set_times(&precious, s.ctx.now - 90 * DAY);
    set_times(&s.outside.join("dir"), s.ctx.now - 90 * DAY);
    let file_target = s.outside.join("victim.txt");
    write_file(&file_target, 10);
    set_times(&file_target, s.ctx.now - 90 * DAY);
    fs::create_dir_all(s.root.join("mallory")).unwrap();
    let dir_link = s.root.join("mallory/escape");
    let file_link = s.root.join("mallory/victim");
    symlink(s.outside.join("dir"), &dir_link).unwrap();
    symlink(&file_target, &file_link).unwrap();
    // The links' own times are old; what they point to does not matter.
    set_times(&dir_link, s.ctx.now - 60 * DAY);
    set_times(&file_link, s.ctx.now - 60 * DAY);

    let p = s.plan();
    assert_eq!(
        rels(&s.root, &p.delete),
        BTreeSet::from([dir_link.clone(), file_link.clone()])
    );
    assert!(p.delete.iter().all(|c| c.symlink));
    let (_, logged) = s.execute(&p);
    assert_eq!(logged.len(), 2);
    assert!(logged.iter().all(|r| r.symlink));
    assert!(!exists(&dir_link) && !exists(&file_link));
    assert_eq!(fs::read(&precious).unwrap().len(), 1000);
    assert_eq!(fs::read(&file_target).unwrap().len(), 10);
}

#[test]
fn entries_swapped_for_links_after_the_plan_are_not_followed() {
    let s = Scratch::new();
    // Outside: an old file the swapped file's link points at, and an old file with the same
    // name as a planned one, in a directory a swapped directory's link points at.
    let victim = s.outside.join("victim.txt");
    write_file(&victim, 10);
    set_times(&victim, s.ctx.now - 90 * DAY);
    let decoy = s.outside.join("decoy/target.bin");
    write_file(&decoy, 20);
    set_times(&decoy, s.ctx.now - 90 * DAY);

    let swapped_file = s.file("mallory/swapfile", 100, None);
    let swapped_dir_file = s.file("mallory/swapdir/target.bin", 100, None);
    let plain = s.file("mallory/plain.bin", 100, None);
    let p = s.plan();
    assert_eq!(p.delete.len(), 3, "{:?}", p.delete);

    // Between plan and execute: the file becomes a link to the victim; the directory becomes a
    // link to the decoy's directory. The file is moved away rather than deleted so that its
    // inode number is not reused for the link (ext4 reuses it at once; the link would then
    // pass the inode check, and, with this test's clock 40 days ahead, the age check too, and
    // be removed as a link; in real time a new link is never old enough to go).
    fs::rename(&swapped_file, s.outside.join("moved-away")).unwrap();
    symlink(&victim, &swapped_file).unwrap();
    set_times(&swapped_file, s.ctx.now - 60 * DAY);
    fs::remove_dir_all(s.root.join("mallory/swapdir")).unwrap();
    symlink(s.outside.join("decoy"), s.root.join("mallory/swapdir")).unwrap();

    let (outcome, logged) = s.execute(&p);
    assert_eq!(
        logged.iter().map(|r| &r.path).collect::<Vec<_>>(),
        vec![&plain]
    );
    // The link stands, its target untouched; the decoy's file is untouched.
    assert!(fs::symlink_metadata(&swapped_file).unwrap().is_symlink());
    assert_eq!(fs::read(&victim).unwrap().len(), 10);
    assert_eq!(fs::read(&decoy).unwrap().len(), 20);
    assert!(skipped_for(&outcome, &swapped_file).contains("replaced"));
    assert!(skipped_for(&outcome, &swapped_dir_file).contains("symlink"));
}

#[test]
fn a_file_used_after_the_plan_is_kept_and_a_vanished_one_is_skipped() {
    let s = Scratch::new();
    let touched = s.file("alice/touched.bin", 100, None);
    let deleted = s.file("alice/deleted.bin", 100, None);
    let gone = s.file("alice/gone.bin", 100, None);
    let p = s.plan();
    assert_eq!(p.delete.len(), 3);
    // A day before ctx.now the owner touches one file; another they delete themselves.
    set_times(&touched, s.ctx.now - DAY);
    fs::remove_file(&deleted).unwrap();
    let before = fs::read(&touched).unwrap();

    let mut log = Vec::new();
    let outcome = execute(&p, &s.ctx, &mut log, &Progress::default()).unwrap();
    assert_eq!(outcome.removed.len(), 1);
    assert_eq!(outcome.removed[0].path, gone);
    assert!(!exists(&gone));
    assert_eq!(fs::read(&touched).unwrap(), before);
    assert!(skipped_for(&outcome, &touched).contains("used since the plan"));
    assert!(skipped_for(&outcome, &deleted).contains("gone"));
    assert_eq!(String::from_utf8(log).unwrap().lines().count(), 1);
}

/// A temp dir with a "home" owned by `uid`.
fn home_of(uid: u32) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let home = fs::canonicalize(tmp.path()).unwrap().join("home");
    fs::create_dir(&home).unwrap();
    give(&home, uid, uid);
    (tmp, home)
}

#[test]
fn the_notice_is_written_for_its_reader_and_replaces_a_planted_link() {
    if !is_root() {
        skipped("not root: the notice is written as root for another uid");
        return;
    }
    let s = Scratch::new();
    let warned = s.file("alice/warned.bin", 3000, Some(25));
    s.file("alice/old.bin", 10, None);
    let p = s.plan();
    let files: Vec<_> = p.warned_per_user()[&nix::unistd::geteuid().as_raw()].clone();
    let text = notice_text(&p, &files, &|t| format!("day-{}", t / DAY));
    assert!(text.contains(&warned.display().to_string()), "{text}");
    assert!(text.contains(KEEP_MARKER));
    assert!(!text.contains("old.bin"), "{text}");

    // A fresh home: .labpool is made for the user, the notice is the user's.
    let (_tmp, home) = home_of(5001);
    let written = write_notice(&home, 5001, 5001, &text).unwrap();
    assert_eq!(written, home.join(".labpool").join(NOTICE_FILE));
    assert_eq!(fs::read_to_string(&written).unwrap(), text);
    let m = fs::symlink_metadata(&written).unwrap();
    assert!(m.is_file());
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (5001, 5001, 0o644));
    let d = fs::symlink_metadata(home.join(".labpool")).unwrap();
    assert_eq!((d.uid(), d.gid()), (5001, 5001));

    // The user plants a link where the notice goes: it is replaced, never written through.
    let victim = s.outside.join("victim");
    write_file(&victim, 5);
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
    let before = fs::read(&victim).unwrap();
    fs::remove_file(&written).unwrap();
    symlink(&victim, &written).unwrap();
    write_notice(&home, 5001, 5001, "second notice\n").unwrap();
    assert_eq!(fs::read(&victim).unwrap(), before);
    let v = fs::metadata(&victim).unwrap();
    assert_eq!((v.uid(), v.mode() & 0o7777), (0, 0o600));
    let m = fs::symlink_metadata(&written).unwrap();
    assert!(m.is_file() && m.uid() == 5001);
    assert_eq!(fs::read_to_string(&written).unwrap(), "second notice\n");
    // No temp file is left behind.
    let names: Vec<_> = fs::read_dir(home.join(".labpool"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from(NOTICE_FILE)]);
}

#[test]
fn a_labpool_link_or_a_home_of_someone_else_is_refused() {
    if !is_root() {
        skipped("not root: the notice is written as root for another uid");
        return;
    }
    let (tmp, home) = home_of(5001);
    let elsewhere = tmp.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    give(&elsewhere, 5001, 5001);
    symlink(&elsewhere, home.join(".labpool")).unwrap();
    let e = write_notice(&home, 5001, 5001, "x").unwrap_err();
    assert!(e.to_string().contains(".labpool"), "{e}");
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(
        fs::symlink_metadata(home.join(".labpool"))
            .unwrap()
            .is_symlink()
    );

    // A home owned by someone else gets nothing either.
    let (_tmp2, bobs) = home_of(5002);
    let e = write_notice(&bobs, 5001, 5001, "x").unwrap_err();
    assert!(e.to_string().contains("owned by uid 5002"), "{e}");
    assert_eq!(fs::read_dir(&bobs).unwrap().count(), 0);
}
