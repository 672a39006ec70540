//! The real Slurm 22.05 beside labpool: the test cluster of `scripts/slurm-cluster` (gn1..gn4,
//! 8 × a100, 64 cores and 480 GiB each), and what `sbatch --test-only` and `scontrol show job`
//! say of a script, read into the same figures labpool's `submit --test-only --json` gives.

use crate::pool::{have_root, strict};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The cluster, started (idempotent) by the repository's script; None when it cannot run here
/// and the suite is not strict.
pub fn slurm(test: &str) -> Option<PathBuf> {
    if !have_root(test) {
        return None;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = PathBuf::from("/var/tmp/labpool-slurm");
    let out = Command::new(root.join("scripts/slurm-cluster"))
        .arg("start")
        .arg(&run)
        .output()
        .unwrap();
    if !out.status.success() {
        let why = format!(
            "scripts/slurm-cluster start failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!strict(), "{why}");
        eprintln!("SKIPPED {test}: {why}");
        return None;
    }
    Some(run.join("etc/slurm.conf"))
}

/// What Slurm makes of a script.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SlurmView {
    /// `--test-only` accepted it.
    pub accepted: bool,
    /// `--test-only`'s stderr.
    pub said: String,
    /// Nodes, from `--test-only` ("on nodes gn[1-4]").
    pub nodes: u64,
    /// `NumTasks`.
    pub tasks: u64,
    /// Processors, from `--test-only` ("using N processors").
    pub cpus: u64,
    /// `NumCPUs` of the held job (the request before `--exclusive` widens it).
    pub cpus_asked: u64,
    /// GPUs in all.
    pub gpus: u64,
    /// Memory in all, MiB; 0 for "no memory option" (Slurm then gives the whole node).
    pub mem_mib: u64,
    /// `TimeLimit`, seconds.
    pub time_limit_s: u64,
}

/// Runs `FILE` through `sbatch --test-only`, then `sbatch --hold` and `scontrol show job -o`.
pub fn slurm_view(conf: &Path, dir: &Path, file: &str) -> SlurmView {
    let sbatch = |args: &[&str]| {
        Command::new("sbatch")
            .args(args)
            .arg(file)
            .current_dir(dir)
            .env("SLURM_CONF", conf)
            .output()
            .unwrap()
    };
    let test = sbatch(&["--test-only"]);
    let said = String::from_utf8_lossy(&test.stderr).trim().to_string();
    if !test.status.success() {
        return SlurmView {
            said,
            ..SlurmView::default()
        };
    }
    let cpus = said
        .split(" using ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{file}: no processor count in {said:?}"));
    let held = sbatch(&["--hold", "--parsable"]);
    assert!(held.status.success(), "{file}: {held:?}");
    let id = String::from_utf8_lossy(&held.stdout).trim().to_string();
    let id = id.split(';').next().unwrap().to_string();
    let show = Command::new("scontrol")
        .args(["show", "job", "-o", &id])
        .env("SLURM_CONF", conf)
        .output()
        .unwrap();
    let _ = Command::new("scancel")
        .arg(&id)
        .env("SLURM_CONF", conf)
        .status();
    let line = String::from_utf8_lossy(&show.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let field = |key: &str| -> Option<String> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .map(str::to_string)
    };
    let num = |key: &str| -> u64 {
        field(key)
            .and_then(|v| v.split('-').next().and_then(|n| n.parse().ok()))
            .unwrap_or_else(|| panic!("{file}: no {key} in {line}"))
    };
    // The nodes `--test-only` would start it on: a held job's TRES counts only those asked
    // with -N, not those that --ntasks with --ntasks-per-node imply (32 tasks, 8 a node: 4).
    let nodes = said
        .split(" on nodes ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|list| labpool_scheduler::hostlist::expand(list).ok())
        .map(|names| names.len() as u64)
        .unwrap_or_else(|| panic!("{file}: no node list in {said:?}"));
    let tasks = num("NumTasks");
    let per = |key: &str| field(key).as_deref().and_then(gpu_count);
    let gpus = per("TresPerNode").map(|g| g * nodes).unwrap_or(0)
        + per("TresPerJob").unwrap_or(0)
        + per("TresPerTask").map(|g| g * tasks).unwrap_or(0);
    let mem_mib = if let Some(m) = field("MinMemoryCPU") {
        mib(&m) * cpus
    } else if let Some(per_gpu) = field("MemPerTres").and_then(|m| {
        m.strip_prefix("gres:gpu:")
            .and_then(|v| v.parse::<u64>().ok())
    }) {
        per_gpu * gpus
    } else {
        mib(&field("MinMemoryNode").unwrap_or_default()) * nodes
    };
    SlurmView {
        accepted: true,
        said,
        nodes,
        tasks,
        cpus,
        cpus_asked: num("NumCPUs"),
        gpus,
        mem_mib,
        time_limit_s: seconds(&field("TimeLimit").unwrap_or_default()),
    }
}

/// `gres:gpu:4`, `gres:gpu:a100:1` → the count.
fn gpu_count(v: &str) -> Option<u64> {
    v.split(',')
        .find(|g| g.starts_with("gres:gpu"))
        .and_then(|g| g.rsplit(':').next())
        .and_then(|n| n.parse().ok())
}

/// `8G`, `12000M`, `312.50G`, `0` → MiB.
fn mib(v: &str) -> u64 {
    let (num, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(v.len()));
    let n: f64 = num.parse().unwrap_or(0.0);
    let scale = match unit {
        "K" => 1.0 / 1024.0,
        "G" => 1024.0,
        "T" => 1024.0 * 1024.0,
        _ => 1.0,
    };
    (n * scale).round() as u64
}

/// `D-HH:MM:SS`, `HH:MM:SS` → seconds.
fn seconds(v: &str) -> u64 {
    let (days, clock) = match v.split_once('-') {
        Some((d, c)) => (d.parse::<u64>().unwrap_or(0), c),
        None => (0, v),
    };
    let parts: Vec<u64> = clock.split(':').filter_map(|p| p.parse().ok()).collect();
    let hms = parts.iter().fold(0, |acc, p| acc * 60 + p);
    days * 86_400 + hms
}

/// Makes the directories a script's `-o`/`-e` lines name (as a user would have them: labpool,
/// unlike Slurm, refuses a job whose output directory is missing).
pub fn make_output_dirs(dir: &Path, script: &str) {
    for line in script.lines().filter(|l| l.starts_with("#SBATCH")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            let value = if let Some(v) = w
                .strip_prefix("--output=")
                .or_else(|| w.strip_prefix("--error="))
            {
                Some(v)
            } else if matches!(*w, "-o" | "-e" | "--output" | "--error") {
                words.get(i + 1).copied()
            } else {
                None
            };
            if let Some(v) = value {
                let v = v.trim_matches('"');
                if let Some(parent) = Path::new(v).parent()
                    && !parent.as_os_str().is_empty()
                {
                    std::fs::create_dir_all(dir.join(parent)).unwrap();
                }
            }
        }
    }
}

#[test]
fn slurm_figures_are_read_as_slurm_writes_them() {
    assert_eq!(gpu_count("gres:gpu:a100:4"), Some(4));
    assert_eq!(gpu_count("gres:gpu:2"), Some(2));
    assert_eq!(mib("312.50G"), 320_000);
    assert_eq!(mib("12000M"), 12_000);
    assert_eq!(seconds("4-20:40:00"), 4 * 86_400 + 20 * 3600 + 40 * 60);
    assert_eq!(seconds("00:05:00"), 300);
}
