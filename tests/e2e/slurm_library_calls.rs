//! The calls Slurm libraries make, differential: the same history on labpool and on the Slurm
//! 22.05 test cluster (a completed job, a failed one with an `srun` step, a cancelled one, an
//! array with a failed task, and at the end a running job with a running step), then each library's call on both, outputs compared once ids and
//! node names are normalised and rows sorted (slurmdbd returns rows in its own insertion order).
//! A new call is covered by adding a row to `CALLS`; `scontrol show job` is compared on the
//! fields libraries read a job's end from.

use crate::pool::{Pool, wait_until};
use crate::slurm_peer::slurm;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

/// (who calls it, the arguments; `{all}` is every job's id as one `-j` each, `{ids}` the same
/// comma-separated, `{array}` the array's id, `{failed}` the failed job's).
const CALLS: &[(&str, &str)] = &[
    (
        "submitit",
        "sacct -o JobID,State,NodeList --parsable2 {all}",
    ),
    (
        "submitit, one job",
        "sacct -o JobID,State,NodeList --parsable2 -j {failed}",
    ),
    (
        "snakemake",
        "sacct -X --parsable2 --clusters all --noheader --format=JobIdRaw,State -j {ids}",
    ),
    (
        "exit codes",
        "sacct -X -n -P -o JobID,State,ExitCode -j {ids}",
    ),
    (
        "an array by its id",
        "sacct -X -n -P -o JobID,State -j {array}",
    ),
    ("by state", "sacct -X -n -P -s F -o JobID,State -j {ids}"),
    ("brief", "sacct -X -n -P -b -j {ids}"),
    (
        "delimiter",
        "sacct -X -n -p --delimiter=; -o JobID,State -j {failed}",
    ),
    (
        "snakemake, a step's reason",
        "sacct -P -n -j {failed}.0 -o JobID,Reason,State",
    ),
    (
        "a batch step",
        "sacct -P -n -j {failed}.batch -o JobID,State",
    ),
    ("no such step", "sacct -P -n -j {failed}.7 -o JobID,State"),
    ("parsl, dask-jobqueue", "squeue -h -t all -o %i|%t -j {ids}"),
    (
        "squeue by job id",
        "squeue -h -t all -o %i|%T|%j -j {failed}",
    ),
];

/// The history: (completed, failed, cancelled, array) ids as the system gave them.
struct History {
    ids: Vec<String>,
}

fn make_history(
    sbatch: &dyn Fn(&[&str]) -> String,
    squeue_state: &dyn Fn(&str) -> String,
    cancel: &dyn Fn(&str),
) -> History {
    let done = sbatch(&["--wrap", "true"]);
    let failed = sbatch(&["--wrap", "srun true; exit 3"]);
    let array = sbatch(&["--array=0-1", "--wrap", "exit $SLURM_ARRAY_TASK_ID"]);
    // Its script says when it runs, in a directory of this history's own.
    let marks = tempfile::Builder::new()
        .prefix("lp-marks-")
        .tempdir_in("/tmp")
        .unwrap();
    let script = format!("touch {}/$SLURM_JOB_ID; sleep 60", marks.path().display());
    let cancelled = sbatch(&["--wrap", &script]);
    // Cancelled once its script runs: a job cancelled while it waits has no node and no batch
    // line, and one Slurm calls RUNNING before its batch script started ends 0:0, not 0:15.
    wait_until(
        Duration::from_secs(60),
        || squeue_state(&cancelled) == "RUNNING" && marks.path().join(&cancelled).exists(),
        || format!("job {cancelled} never ran"),
    );
    cancel(&cancelled);
    History {
        ids: vec![done, failed, array, cancelled],
    }
}

fn expand(call: &str, h: &History) -> Vec<String> {
    let all: Vec<String> = h.ids.iter().map(|i| format!("-j {i}")).collect();
    call.replace("{all}", &all.join(" "))
        .replace("{ids}", &h.ids.join(","))
        .replace("{array}", &h.ids[2])
        .replace("{failed}", &h.ids[1])
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Ids to their role, node names to NODE, rows sorted.
fn normalise(
    out: &str,
    h: &History,
    nodes: &[&str],
    raw_tasks: &BTreeMap<String, String>,
) -> String {
    let names = ["DONE", "FAILED_JOB", "ARRAY", "CANCELLED_JOB"];
    let mut lines: Vec<String> = out
        .lines()
        .map(|l| {
            let mut l = l.to_string();
            for (raw, task) in raw_tasks {
                l = l.replace(&format!("{raw}|"), &format!("{task}|"));
            }
            // Whole ids only: the leading number of each field (`12`, `12_1`, `12.batch`).
            l = l
                .split('|')
                .map(|field| {
                    let end = field.find(['_', '.', ';']).unwrap_or(field.len());
                    match h.ids.iter().position(|id| *id == field[..end]) {
                        Some(i) => format!("{}{}", names[i], &field[end..]),
                        None => field.to_string(),
                    }
                })
                .collect::<Vec<_>>()
                .join("|");
            for n in nodes {
                l = l.replace(n, "NODE");
            }
            l
        })
        .collect();
    let header = (lines.first().is_some_and(|l| l.starts_with("JobID"))).then(|| lines.remove(0));
    lines.sort();
    header
        .into_iter()
        .chain(lines)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until `sacct` says every job of `h` has ended.
fn settle(sacct: &dyn Fn(&[String]) -> String, h: &History) {
    let t0 = Instant::now();
    loop {
        let out = sacct(&expand("sacct -X -n -P -o State -j {ids}", h)[1..]);
        let ended = out.lines().count() == 5
            && out
                .lines()
                .all(|l| !matches!(l, "PENDING" | "RUNNING" | "REQUEUED" | "COMPLETING"));
        if ended {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "never settled:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn strs(w: &[String]) -> Vec<&str> {
    w.iter().map(String::as_str).collect()
}

/// An array task's raw id (`JobIdRaw`) is its own job id; both systems number them alike
/// relative to the array, so each is named by its task (`ARRAY_0`, `ARRAY_1`).
fn raw_task_ids(sacct: &dyn Fn(&[String]) -> String, array: &str) -> BTreeMap<String, String> {
    let out = sacct(&["-X", "-n", "-P", "-o", "JobIDRaw,JobID", "-j", array].map(String::from));
    out.lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(raw, id)| (raw.to_string(), id.replace(array, "ARRAY")))
        .collect()
}

#[test]
fn the_calls_slurm_libraries_make_answer_as_slurm_answers() {
    let Some(conf) = slurm("the_calls_slurm_libraries_make_answer_as_slurm_answers") else {
        return;
    };
    let mut pool = Pool::new("2:a100");
    pool.start();
    let ours_sacct = |args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        pool.slurm("sacct", &args)
    };
    let ours = make_history(
        &|args| {
            let mut all = vec!["--parsable"];
            all.extend_from_slice(args);
            pool.slurm("sbatch", &all).trim().to_string()
        },
        &|id| {
            pool.slurm("squeue", &["-h", "-o", "%T", "-j", id])
                .trim()
                .to_string()
        },
        &|id| {
            pool.slurm("scancel", &[id]);
        },
    );
    let slurm_cmd = |name: &str, args: &[&str]| {
        let out = Command::new(name)
            .args(args)
            .env("SLURM_CONF", &conf)
            .current_dir("/tmp")
            .output()
            .unwrap();
        assert!(out.status.success(), "{name} {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let theirs_sacct = |args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        slurm_cmd("sacct", &args)
    };
    let theirs = make_history(
        &|args| {
            let mut all = vec!["--parsable"];
            all.extend_from_slice(args);
            slurm_cmd("sbatch", &all).trim().to_string()
        },
        &|id| {
            slurm_cmd("squeue", &["-h", "-o", "%T", "-j", id])
                .trim()
                .to_string()
        },
        &|id| {
            slurm_cmd("scancel", &[id]);
        },
    );
    settle(&ours_sacct, &ours);
    settle(&theirs_sacct, &theirs);
    let our_node = crate::pool::s(&pool.job(ours.ids[0].parse().unwrap()), "node").to_string();
    let (our_raw, their_raw) = (
        raw_task_ids(&ours_sacct, &ours.ids[2]),
        raw_task_ids(&theirs_sacct, &theirs.ids[2]),
    );
    let mut differ = Vec::new();
    for (who, call) in CALLS {
        let (mine, peer) = (expand(call, &ours), expand(call, &theirs));
        let a = normalise(
            &pool.slurm(&mine[0], &strs(&mine[1..])),
            &ours,
            &[&our_node],
            &our_raw,
        );
        let b = normalise(
            &slurm_cmd(&peer[0], &strs(&peer[1..])),
            &theirs,
            &["gn1", "gn2", "gn3", "gn4"],
            &their_raw,
        );
        if a != b {
            differ.push(format!("{who}: {call}\nlabpool:\n{a}\nSlurm:\n{b}\n"));
        }
    }
    // `scontrol show job ID`, as libraries read a job's end from it.
    let fields = |text: &str| -> Vec<String> {
        text.split_whitespace()
            .filter(|w| {
                ["JobState=", "Reason=", "ExitCode="]
                    .iter()
                    .any(|k| w.starts_with(k))
            })
            .map(str::to_string)
            .collect()
    };
    for (i, name) in [(0, "DONE"), (1, "FAILED_JOB"), (3, "CANCELLED_JOB")] {
        let a = fields(&pool.slurm("scontrol", &["show", "job", &ours.ids[i]]));
        let b = fields(&slurm_cmd("scontrol", &["show", "job", &theirs.ids[i]]));
        if a != b {
            differ.push(format!(
                "scontrol show job {name}\nlabpool: {a:?}\nSlurm: {b:?}\n"
            ));
        }
    }
    // A running job with a running step: listed by both while it runs.
    let running = |sbatch: &dyn Fn(&[&str]) -> String, sacct: &dyn Fn(&[String]) -> String| {
        let id = sbatch(&["--parsable", "--wrap", "srun sleep 60"])
            .trim()
            .to_string();
        let args = ["-P", "-n", "-j", &id, "-o", "JobID,State"].map(String::from);
        let t0 = Instant::now();
        loop {
            let out = sacct(&args);
            // slurmdbd records the job's start a moment after its steps'.
            if out.contains(&format!("{id}.0|RUNNING")) && out.contains(&format!("{id}|RUNNING")) {
                let mut lines: Vec<String> = out.lines().map(|l| l.replace(&id, "RUN")).collect();
                lines.sort();
                return (id, lines);
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the running step of {id} is never listed:\n{out}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    let (our_run, a) = running(&|args| pool.slurm("sbatch", args), &ours_sacct);
    let (their_run, b) = running(&|args| slurm_cmd("sbatch", args), &theirs_sacct);
    pool.slurm("scancel", &[&our_run]);
    slurm_cmd("scancel", &[&their_run]);
    if a != b {
        differ.push(format!(
            "a running step: sacct -P -n -j ID -o JobID,State\nlabpool: {a:?}\nSlurm: {b:?}\n"
        ));
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
