//! One attempt as an `sbatch` call: the arguments that pin it to the node labpool chose and tag
//! it, the environment it starts with, and the batch script that wraps the member's own.
//!
//! The member's script is not given to sbatch as it is: sbatch would read its `#SBATCH` lines
//! again (an `--array` there would make Slurm run it many times), and labpool has already read
//! them. The wrapper has no directives; it checks that every dataset the job was given is
//! complete on the node (the `VERSION.complete` marker), writes the member's script to a private
//! temporary file, and runs it with its arguments.

use crate::api::agent::Launch;
use crate::slurm_gate::queue::tag;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;

/// What the gate needs to submit one attempt.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The attempt as the agents get it.
    pub launch: Launch,
    /// The node labpool chose.
    pub node: String,
    /// Each dataset's directory on that node (a streamed one's shared source), by name.
    pub data: Vec<(String, PathBuf)>,
    /// The directories that must be complete in the node's cache before the job starts.
    pub staged: Vec<PathBuf>,
    /// Memory to ask Slurm for, MiB: the job's own, or its GPUs' share of the node's.
    pub mem_mib: u64,
}

/// Exit status of the wrapper when a dataset is not complete on the node.
pub const NOT_STAGED_EXIT: i32 = 97;

/// The comment: the tag, the pool (`;pool=ID`), then the data directories the Prolog checks
/// (`;data=DIR,DIR`).
pub fn comment(s: &Submission, pool: &str) -> String {
    let mut c = tag(s.launch.job, s.launch.attempt);
    c.push_str(";pool=");
    c.push_str(pool);
    if !s.staged.is_empty() {
        c.push_str(";data=");
        let dirs: Vec<String> = s.staged.iter().map(|d| d.display().to_string()).collect();
        c.push_str(&dirs.join(","));
    }
    c
}

/// `sbatch`'s arguments, the script on its standard input last (none: it reads stdin).
pub fn sbatch_args(s: &Submission, as_root: bool, pool: &str) -> Vec<String> {
    let l = &s.launch;
    let mut a = vec![
        "--parsable".to_string(),
        "--hold".to_string(),
        format!("--comment={}", comment(s, pool)),
        format!("--job-name={}", l.name),
        format!("--partition={}", l.partition),
        format!("--nodelist={}", s.node),
        "--nodes=1".to_string(),
        format!("--ntasks={}", l.ntasks.max(1)),
        format!("--cpus-per-task={}", (l.cpus / l.ntasks.max(1)).max(1)),
        format!("--mem={}M", s.mem_mib.max(1)),
        format!("--chdir={}", l.workdir.display()),
        format!("--output={}", l.stdout.display()),
        format!("--error={}", l.stderr.display()),
        // labpool requeues by its own rules, under a new attempt: Slurm ends a lost job.
        "--no-requeue".to_string(),
        "--export=ALL".to_string(),
    ];
    if as_root {
        a.push(format!("--uid={}", l.uid));
        a.push(format!("--gid={}", l.gid));
    }
    if !l.gpus.is_empty() {
        a.push(format!("--gres=gpu:{}", l.gpus.len()));
    }
    if let Some(t) = l.time_limit_s {
        a.push(format!("--time={}:{:02}", t / 60, t % 60));
    }
    if let Some(sig) = &l.signal {
        let b = if sig.batch_only { "B:" } else { "" };
        a.push(format!("--signal={b}{}@{}", sig.signal, sig.before_s));
    }
    if l.open_append {
        a.push("--open-mode=append".to_string());
    }
    if let Some(acct) = &l.account {
        a.push(format!("--account={acct}"));
    }
    // The script's arguments are set in the wrapper: sbatch reads the wrapper on stdin, so an
    // argument here would be taken for the script's file name.
    a
}

/// The environment sbatch runs with, which `--export=ALL` gives the job: labpool's job
/// environment (the submit environment, login defaults, dataset paths, GPU hygiene), less what
/// Slurm sets itself on the node (the GPUs it picked, its own job id and node list).
pub fn environment(s: &Submission) -> BTreeMap<String, String> {
    let mut env = crate::agent::environment::job_environment(&s.launch, &s.node, "", None, &s.data);
    env.retain(|k, _| {
        !(k.starts_with("SLURM_")
            || k == "CUDA_VISIBLE_DEVICES"
            || k == "GPU_DEVICE_ORDINAL"
            || k == crate::env_vars::LABPOOL_GPUS
            || k == crate::agent::procs::JOB_KEY_VAR)
    });
    env
}

/// Single quotes for the shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The batch script sbatch gets.
pub fn wrapper(s: &Submission) -> String {
    let l = &s.launch;
    let mut end = format!("LABPOOL_SCRIPT_{}_{}", l.job, l.attempt);
    while l.script.contains(&end) {
        end.push('_');
    }
    let mut w = String::new();
    let _ = writeln!(w, "#!/bin/sh");
    let _ = writeln!(
        w,
        "# labpool job {} attempt {}: the member's script, as submitted, follows.",
        l.job, l.attempt
    );
    for dir in &s.staged {
        let d = quote(&dir.display().to_string());
        let _ = writeln!(
            w,
            "[ -e {d}.complete ] || {{ echo \"labpool: \"{d}\" is not complete on $(hostname); the job does not start\" >&2; exit {NOT_STAGED_EXIT}; }}"
        );
    }
    let _ = writeln!(
        w,
        "script=$(mktemp \"${{TMPDIR:-/tmp}}/labpool-{}.XXXXXX\") || exit 98",
        l.job
    );
    let _ = writeln!(w, "cat > \"$script\" <<'{end}'");
    w.push_str(&l.script);
    if !l.script.ends_with('\n') {
        w.push('\n');
    }
    let _ = writeln!(w, "{end}");
    let _ = writeln!(w, "chmod 700 \"$script\"");
    if !l.args.is_empty() {
        let args: Vec<String> = l.args.iter().map(|a| quote(a)).collect();
        let _ = writeln!(w, "set -- {}", args.join(" "));
    }
    let _ = writeln!(w, "\"$script\" \"$@\"");
    let _ = writeln!(w, "rc=$?");
    let _ = writeln!(w, "rm -f \"$script\"");
    let _ = writeln!(w, "exit $rc");
    w
}
