//! The gate's side: the same jobs submitted to labpool (`labpool submit`), each declaring its
//! dataset with `#LABPOOL --dataset`, run by Slurm where labpool placed them once the node's
//! agent has staged the data.

use crate::mix::{Dataset, Job, pace};
use crate::pool::Gate;
use crate::seed::script;
use crate::{Run, now_ms, wait_files};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// Milliseconds since the epoch of an event's RFC 3339 time.
fn ms(t: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(t.as_str().unwrap())
        .unwrap()
        .timestamp_millis()
}

/// The time of the first event named `name`.
fn event(j: &Value, name: &str) -> Option<i64> {
    j["events"]
        .as_array()?
        .iter()
        .find(|e| e["event"] == name)
        .map(|e| ms(&e["time"]))
}

/// What labpool recorded of one job: its decision (the placement: the `staging` event, or
/// `start` when the data was on the node already), when its data was staged, and its attempt.
pub struct Recorded {
    pub decision_ms: i64,
    pub staged_ms: i64,
    pub attempt: u64,
    pub state: String,
}

/// Reads job `id`'s events.
pub fn recorded(gate: &Gate, id: u64) -> Recorded {
    let j = gate.show(id);
    let start = event(&j, "start").unwrap_or_else(|| panic!("job {id} never started: {j:#}"));
    let decision = event(&j, "staging").unwrap_or(start);
    Recorded {
        decision_ms: decision,
        staged_ms: event(&j, "staged").unwrap_or(decision),
        attempt: j["attempt"].as_u64().unwrap_or(0),
        state: j["state"].as_str().unwrap_or_default().to_string(),
    }
}

/// Replays `jobs` through labpool on Slurm; one [`Run`] per job, in the mix's order. The
/// datasets are registered first (before the clock starts).
pub fn replay(gate: &Gate, data: &[Dataset], jobs: &[Job], work: f64) -> Vec<Run> {
    for d in data {
        gate.add_dataset(&d.name, &d.dir);
    }
    let results = gate.work.join("results");
    std::fs::create_dir_all(&results).unwrap();
    // One script per job: its dataset is a `#LABPOOL` line, its index is in its text.
    let scripts: Vec<_> = jobs
        .iter()
        .map(|j| {
            let name = &data[j.dataset].name;
            let var = format!("LABPOOL_DATASET_{}", name.to_uppercase());
            let text = format!(
                "#!/bin/bash\n#LABPOOL --dataset {name}\n#SBATCH --gres=gpu:1\n#SBATCH --output=/dev/null\n\
                 t0=$(date +%s.%N)\nn=$(ls \"${var}\" | wc -l)\nsleep {work}\n\
                 echo \"{i} $LABPOOL_JOB_ID $SLURMD_NODENAME $t0 $n\" > {r}/lab-{i}.tmp\n\
                 mv {r}/lab-{i}.tmp {r}/lab-{i}\n",
                i = j.index,
                r = results.display()
            );
            script(&gate.work.join(format!("job-{}.sh", j.index)), &text)
        })
        .collect();
    let t0 = Instant::now();
    let mut submitted = Vec::with_capacity(jobs.len());
    for j in jobs {
        pace(t0, j.at);
        let at = now_ms();
        let id = gate.submit(&scripts[j.index], &[]);
        submitted.push((at, id));
    }
    let lines = wait_files(&results, "lab-", jobs.len(), Duration::from_secs(600));
    gate.wait("every job to end", Duration::from_secs(60), |g| {
        (g.active() == 0).then_some(())
    });
    let held = gate.held_times();
    jobs.iter()
        .map(|j| {
            let (submit_ms, id) = submitted[j.index];
            let f: Vec<&str> = lines[&j.index].split_whitespace().collect();
            assert_eq!(f[1], id.to_string(), "job {} ran as {}", j.index, f[1]);
            let files: usize = f[4].parse().unwrap();
            assert_eq!(
                files, data[j.dataset].files,
                "labpool job {id} found {files} files"
            );
            let rec = recorded(gate, id);
            assert_eq!(rec.state, "COMPLETED", "job {id}");
            let running_ms = (f[3].parse::<f64>().unwrap() * 1e3) as i64;
            Run {
                submit_ms,
                decision_ms: rec.decision_ms,
                queued_ms: held[&id],
                running_ms,
                data_ms: running_ms,
                wait_ms: rec.staged_ms - rec.decision_ms,
                node: f[2].to_string(),
                source_bytes: 0,
                attempts: rec.attempt,
            }
        })
        .collect()
}

/// One `labpool submit` of a job (no dataset) whose first line writes the time to `mark`;
/// the job's id.
pub fn one(gate: &Gate, mark: &Path) -> u64 {
    let s = script(
        &gate.work.join("plain.sh"),
        &format!(
            "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --output=/dev/null\ndate +%s.%N > {m}.tmp\nmv {m}.tmp {m}\n",
            m = mark.display()
        ),
    );
    gate.submit(&s, &[])
}
