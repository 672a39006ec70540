//! One attempt as an `sbatch` call: the arguments that pin it to the node labpool chose and tag
//! it, the environment it starts with, and the batch script that wraps the member's own.
//!
//! The member's script is not given to sbatch as it is: sbatch would read its `#SBATCH` lines
//! again (an `--array` there would make Slurm run it many times), and labpool has already read
//! them. The wrapper has no directives; it checks that every dataset the job was given is
//! complete on the node (the `VERSION.complete` marker), writes the member's script to a private
//! temporary file, and becomes it (`exec`) with its arguments, through an open descriptor of
//! the file it has already removed. A sliced job's script is reached through `labpool
//! slice-exec`, which holds it to its slice first (see the CLI's `slice_exec`).
//!
//! A multi-node job (a gang) is one Slurm job pinned to all of its nodes (`--nodelist`,
//! `--nodes`); its tasks on the other nodes are Slurm's to start, with Slurm's own `srun`. Its
//! `LABPOOL_DATASET_*` paths are the batch node's: Slurm gives every task one environment, so a
//! gang over Slurm expects `[cache] dir` to be the same path on all nodes (the default is).

use crate::api::agent::Launch;
use crate::slurm_gate::queue::tag;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

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
    /// Slurm shards to ask for, when the attempt holds a slice of a card (`--gres=shard:N`).
    pub shards: Option<u32>,
}

/// Exit status of the wrapper when a dataset is not complete on the node.
pub const NOT_STAGED_EXIT: i32 = 97;

/// Exit status of the wrapper when it cannot write the member's script on the node.
pub const NO_SCRIPT_EXIT: i32 = 98;

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
        format!("--nodelist={}", nodelist(s)),
        format!("--nodes={}", l.gang.as_ref().map_or(1, |g| g.nodes.len())),
        format!("--ntasks={}", l.ntasks.max(1)),
        format!("--cpus-per-task={}", cpus_per_task(l)),
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
    a.extend(match s.shards {
        Some(n) => Some(format!("--gres=shard:{n}")),
        None => gpus(l),
    });
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

/// The nodes labpool chose, in Slurm's compressed form.
fn nodelist(s: &Submission) -> String {
    s.launch
        .gang
        .as_ref()
        .map_or_else(|| s.node.clone(), |g| g.nodelist())
}

/// Cores per task: the batch node's cores over its tasks (a gang's cores are per node).
fn cpus_per_task(l: &Launch) -> u32 {
    let tasks = match &l.gang {
        Some(g) => g.tasks_per_node.first().copied().unwrap_or(1),
        None => l.ntasks,
    };
    (l.cpus / tasks.max(1)).max(1)
}

/// The GPU request: `--gres` is per node, so a gang with the same count on every node asks
/// for that; one whose nodes hold different counts asks for its total (`--gpus`), which Slurm
/// spreads over the nodes it was pinned to.
fn gpus(l: &Launch) -> Option<String> {
    let per_node: Vec<usize> = match &l.gang {
        Some(g) => g.nodes.iter().map(|n| n.gpus.len()).collect(),
        None => vec![l.gpus.len()],
    };
    let total: usize = per_node.iter().sum();
    if total == 0 {
        None
    } else if per_node.iter().all(|n| *n == per_node[0]) {
        Some(format!("--gres=gpu:{}", per_node[0]))
    } else {
        Some(format!("--gpus={total}"))
    }
}

/// The environment sbatch runs with, which `--export=ALL` gives the job: labpool's job
/// environment (the submit environment, login defaults, dataset paths, GPU hygiene), less what
/// Slurm sets itself on the node (the GPUs it picked, its own job id and node list).
pub fn environment(s: &Submission) -> BTreeMap<String, String> {
    let mut env =
        labpool_host::job_environment::job_environment(&s.launch, &s.node, "", None, &s.data);
    env.retain(|k, _| {
        // Each labpool array task is a Slurm job of its own: its array variables are labpool's.
        // The member's SBATCH_* and SALLOC_* would be read by sbatch as options.
        k.starts_with("SLURM_ARRAY_")
            || !(k.starts_with("SLURM_")
                || k.starts_with("SBATCH_")
                || k.starts_with("SALLOC_")
                || k == "CUDA_VISIBLE_DEVICES"
                || k == "GPU_DEVICE_ORDINAL"
                || k == crate::env_vars::LABPOOL_GPUS
                || k == crate::env_vars::LABPOOL_JOB_KEY)
    });
    // labpool's own commands (`labpool session-host` hosts an interactive session): agents put
    // them first on a job's PATH; here the controller's install directory comes last, as labs
    // install labpool at one path on every node.
    if let Some(dir) = std::env::current_exe()
        .ok()
        .as_deref()
        .and_then(Path::parent)
    {
        let path = env.entry("PATH".to_string()).or_default();
        if !path.split(':').any(|p| Path::new(p) == dir) {
            path.push(':');
            path.push_str(&dir.display().to_string());
        }
    }
    // The leased ports, and where rank 0 listens: the first node's address, as on agents.
    if let Some(p) = s.launch.ports {
        let master = s
            .launch
            .gang
            .as_ref()
            .and_then(|g| g.nodes.first())
            .map_or_else(|| s.node.clone(), |n| n.host.clone());
        env.insert(
            crate::env_vars::LABPOOL_PORTS.to_string(),
            format!("{}-{}", p.first, p.end() - 1),
        );
        env.insert("MASTER_ADDR".to_string(), master);
        env.insert("MASTER_PORT".to_string(), p.first.to_string());
    }
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
        "script=$(mktemp \"${{TMPDIR:-/tmp}}/labpool-{j}.XXXXXX\" 2>/dev/null || mktemp /tmp/labpool-{j}.XXXXXX) || {{ echo \"labpool: cannot write the job's script to $TMPDIR or /tmp on $(hostname)\" >&2; exit {NO_SCRIPT_EXIT}; }}",
        j = l.job
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
    // The script is run through an open descriptor of its file, which is already removed: the
    // batch shell becomes the script itself (`exec`), so the signals Slurm sends the batch shell
    // alone (`--signal=B:`, `scancel --batch`) and its exit status are the script's own, and no
    // file is left behind however the job ends.
    let _ = writeln!(w, "exec 9<\"$script\"");
    let _ = writeln!(w, "rm -f \"$script\"");
    match l.slice_mib {
        // A sliced job is held to its slice as the agent holds it on labpool's own nodes:
        // `labpool slice-exec` sets the library and the job's account up, kept open on the
        // job's first process and removed from the disk at once, and becomes the script.
        Some(mib) => {
            let labpool = std::env::current_exe()
                .map_or_else(|_| "labpool".to_string(), |p| p.display().to_string());
            let _ = writeln!(
                w,
                "exec {} slice-exec --mib {mib} -- /dev/fd/9 \"$@\"",
                quote(&labpool)
            );
        }
        None => {
            let _ = writeln!(w, "exec /dev/fd/9 \"$@\"");
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::gang::{Gang, GangNode};

    fn submission(script: &str, args: &[&str]) -> Submission {
        let launch: Launch = serde_json::from_value(serde_json::json!({
            "job": 7, "attempt": 2, "name": "t", "user": "u", "uid": 1000, "gid": 1000,
            "partition": "normal", "script": script, "args": args, "workdir": "/w",
            "stdout": "/w/o", "stderr": "/w/e", "environment": {}, "gpus": [0, 1],
            "cpus": 8, "mem_mib": 0, "kill_grace_ms": 1000, "umask": 18, "datasets": [],
            "ntasks": 4,
        }))
        .unwrap();
        Submission {
            launch,
            node: "gn1".into(),
            data: Vec::new(),
            staged: Vec::new(),
            mem_mib: 100,
            shards: None,
        }
    }

    fn gang(gpus: &[&[u32]]) -> Gang {
        Gang {
            nodes: gpus
                .iter()
                .enumerate()
                .map(|(i, g)| GangNode {
                    name: format!("gn{}", i + 1),
                    host: format!("10.0.0.{}", i + 1),
                    gpus: g.to_vec(),
                })
                .collect(),
            index: 0,
            tasks_per_node: vec![2; gpus.len()],
            secret: String::new(),
        }
    }

    #[test]
    fn a_gang_is_one_slurm_job_pinned_to_all_of_its_nodes() {
        let mut s = submission("true", &[]);
        let one = sbatch_args(&s, false, "p");
        for want in [
            "--nodelist=gn1",
            "--nodes=1",
            "--cpus-per-task=2",
            "--gres=gpu:2",
        ] {
            assert!(one.iter().any(|a| a == want), "{want} in {one:?}");
        }
        s.launch.gang = Some(gang(&[&[0, 1], &[4, 5]]));
        let two = sbatch_args(&s, false, "p");
        for want in [
            "--nodelist=gn[1-2]",
            "--nodes=2",
            "--ntasks=4",
            "--cpus-per-task=4",
            "--gres=gpu:2",
        ] {
            assert!(two.iter().any(|a| a == want), "{want} in {two:?}");
        }
        s.launch.gang = Some(gang(&[&[0, 1, 2], &[4]]));
        let uneven = sbatch_args(&s, false, "p");
        assert!(uneven.iter().any(|a| a == "--gpus=4"), "{uneven:?}");
        assert!(
            !uneven.iter().any(|a| a.starts_with("--gres")),
            "{uneven:?}"
        );
    }

    #[test]
    fn the_wrapper_becomes_the_script_with_its_arguments_and_leaves_no_file() {
        let tmp = tempfile::tempdir().unwrap();
        let s = submission(
            "#!/bin/sh\ntrap 'echo usr1' USR1\necho \"$1|$2\"\nsleep 1\nexit 5\n",
            &["a b", "it's"],
        );
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(wrapper(&s))
            .env("TMPDIR", tmp.path())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert_eq!(line, "a b|it's\n");
        // The batch shell's signal is the script's own: it is the same process.
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGUSR1,
        )
        .unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        assert_eq!(rest, "usr1\n");
        assert_eq!(child.wait().unwrap().code(), Some(5));
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
