//! The seed's method: plain `sbatch` (no labpool), every job first `rsync -a` of its dataset
//! from shared storage into the local cache directory of the node Slurm gave it, then its work.

use crate::common::run;
use crate::mix::{Dataset, Job, pace};
use crate::slurm_peer::Slurm;
use crate::{Run, now_ms, wait_files};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Every Slurm job this benchmark submits without labpool carries this name.
pub const NAME: &str = "lp-gate-bench";

/// The job script: `$1` index, `$2` dataset, `$3` its shared directory, `$4` the root of the
/// node-local caches, `$5` where results go, `$6` seconds of work. It writes one line:
/// `INDEX SLURM_JOB NODE T_START T_DATA BYTES FILES` (times in seconds since the epoch).
const SCRIPT: &str = r#"#!/bin/bash
t0=$(date +%s.%N)
dst="$4/$SLURMD_NODENAME/$2"
mkdir -p "$dst"
stats=$(rsync -a --stats "$3/" "$dst/") || exit 1
t1=$(date +%s.%N)
n=$(ls "$dst" | wc -l)
bytes=$(printf '%s\n' "$stats" | sed -n 's/^Total transferred file size: \([0-9,]*\).*/\1/p' | tr -d ,)
sleep "$6"
echo "$1 $SLURM_JOB_ID $SLURMD_NODENAME $t0 $t1 ${bytes:-0} $n" > "$5/seed-$1.tmp"
mv "$5/seed-$1.tmp" "$5/seed-$1"
"#;

/// `sbatch` with the options every seed job gets: one GPU, one core, 1 GiB, not on gn4 (the
/// gate has agents on gn1..gn3 only).
fn sbatch(slurm: &Slurm, dir: &Path) -> std::process::Command {
    let mut c = slurm.cmd("sbatch");
    c.current_dir(dir).args([
        "--parsable",
        &format!("--job-name={NAME}"),
        "--exclude=gn4",
        "--gres=gpu:1",
        "--cpus-per-task=1",
        "--mem=1G",
        "--output=/dev/null",
    ]);
    c
}

/// Writes an executable script.
pub fn script(path: &Path, text: &str) -> PathBuf {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// Replays `jobs` through plain Slurm; one [`Run`] per job, in the mix's order.
pub fn replay(slurm: &Slurm, dir: &Path, data: &[Dataset], jobs: &[Job], work: f64) -> Vec<Run> {
    let results = dir.join("seed-results");
    let cache = dir.join("seed-node-cache");
    std::fs::create_dir_all(&results).unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    let job_script = script(&dir.join("seed-job.sh"), SCRIPT);
    let t0 = Instant::now();
    let mut submitted = Vec::with_capacity(jobs.len());
    for j in jobs {
        pace(t0, j.at);
        let d = &data[j.dataset];
        let at = now_ms();
        let mut sbatch_job = sbatch(slurm, dir);
        sbatch_job
            .arg(format!(
                "--error={}/seed-{}.err",
                results.display(),
                j.index
            ))
            .arg(&job_script)
            .arg(j.index.to_string())
            .arg(&d.name)
            .arg(&d.dir)
            .arg(&cache)
            .arg(&results)
            .arg(format!("{work}"));
        run(&mut sbatch_job);
        submitted.push((at, now_ms()));
    }
    let lines = wait_files(&results, "seed-", jobs.len(), Duration::from_secs(600));
    jobs.iter()
        .map(|j| {
            let f: Vec<&str> = lines[&j.index].split_whitespace().collect();
            let secs = |s: &str| (s.parse::<f64>().unwrap() * 1e3) as i64;
            let files: usize = f[6].parse().unwrap();
            assert_eq!(
                files, data[j.dataset].files,
                "seed job {} found {files} files",
                j.index
            );
            Run {
                submit_ms: submitted[j.index].0,
                decision_ms: submitted[j.index].0,
                queued_ms: submitted[j.index].1,
                running_ms: secs(f[3]),
                data_ms: secs(f[4]),
                wait_ms: secs(f[4]) - secs(f[3]),
                node: f[2].to_string(),
                source_bytes: f[5].parse().unwrap(),
                attempts: 1,
            }
        })
        .collect()
}

/// One plain `sbatch` of a job whose first line writes the time to `mark`; the job's id.
pub fn one(slurm: &Slurm, dir: &Path, mark: &Path) -> String {
    let s = script(
        &dir.join("plain.sh"),
        "#!/bin/bash\ndate +%s.%N > \"$1.tmp\"\nmv \"$1.tmp\" \"$1\"\n",
    );
    run(sbatch(slurm, dir).arg(&s).arg(mark))
        .trim()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string()
}
