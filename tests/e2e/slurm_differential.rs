//! The differential test of issue 17: every script of `tests/fixtures/sbatch/` goes through
//! Slurm 22.05 (`sbatch --test-only`, `sbatch --hold` + `scontrol show job`) and through
//! `labpool submit --test-only --json` on a pool of the same shape (gn1..gn4, 8 × a100, 64
//! cores, 480 GiB, the same features and partitions). labpool must accept what Slurm accepts,
//! and compute the same nodes, tasks, GPUs, cores, memory and time limit.
//!
//! Differences by design, each written here and in the corpus README:
//! - a script that sets `CUDA_VISIBLE_DEVICES` itself is refused (it would break isolation);
//! - no memory option: Slurm (with no `DefMemPerCPU`) gives the whole node, labpool reserves
//!   none; both are read as 0;
//! - `--exclusive`: Slurm widens the job to the whole node, labpool holds only what was asked
//!   (with a warning); the cores compared are the request's (`NumCPUs` of the held job).

use crate::nodes::Cluster;
use crate::slurm_peer::{SlurmView, make_output_dirs, slurm, slurm_view};
use serde_json::Value;
use std::path::Path;

/// Scripts labpool refuses although Slurm accepts them, and why (`|` between reasons that
/// may each come first). Each must still be refused, with its reason, so that the list
/// shrinks as labpool learns.
const REFUSED_BY_DESIGN: &[(&str, &str)] = &[
    // They set CUDA_VISIBLE_DEVICES themselves.
    ("42-llmc-2node-fs.sbatch", "CUDA_VISIBLE_DEVICES"),
    ("43-open-clip-4node.sbatch", "CUDA_VISIBLE_DEVICES"),
];

fn corpus() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sbatch");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sbatch"))
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(&n)).unwrap();
            (n, text)
        })
        .collect();
    files.sort();
    files
}

/// Four agents shaped as the Slurm cluster's nodes.
fn pool_like_the_slurm_cluster() -> Cluster {
    let mut c = Cluster::new("127.0.0.1", "30s");
    for name in ["gn1", "gn2", "gn3", "gn4"] {
        let features = if matches!(name, "gn1" | "gn2") {
            r#"["a100", "ib", "nvlink", "gpu"]"#
        } else {
            r#"["a100", "ib", "gpu"]"#
        };
        let i = c.add_agent(name, "8:a100", "127.0.0.1");
        let config = &c.agents[i].config;
        let text = std::fs::read_to_string(config).unwrap();
        let mut out = Vec::new();
        for line in text.lines() {
            out.push(match line {
                l if l.starts_with("cpus = ") => "cpus = 64".to_string(),
                l if l.starts_with("memory = ") => "memory = \"480G\"".to_string(),
                l if l.starts_with("# features = ") => format!("features = {features}"),
                l => l.to_string(),
            });
        }
        std::fs::write(config, out.join("\n") + "\n").unwrap();
    }
    // The Slurm cluster's partitions are labpool's shipped ones without two policies Slurm
    // has no partition option for (its AllowAccounts needs an accounting database): debug's
    // one-GPU cap and high's deadline account.
    c.ctrl.edit_config(|t| {
        t.replace("allow_accounts = [\"deadline\"]\n", "")
            .replace("max_gpus_per_job = 1\n", "")
    });
    c.ctrl.start();
    for i in 0..4 {
        c.start_agent(i);
    }
    // The corpus's account (the substitution rule's lab-a), with the test's user in it.
    let me = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .name;
    c.ctrl.ok(&["account", "add", "lab-a"]);
    c.ctrl.ok(&["account", "add-user", "lab-a", &me]);
    c
}

#[test]
fn labpool_reads_every_script_of_the_corpus_as_slurm_does() {
    let Some(conf) = slurm("labpool_reads_every_script_of_the_corpus_as_slurm_does") else {
        return;
    };
    let corpus = corpus();
    assert!(
        corpus.len() >= 40,
        "the corpus has {} scripts",
        corpus.len()
    );
    let cluster = pool_like_the_slurm_cluster();
    let work = cluster.ctrl.work.join("sbatch");
    std::fs::create_dir_all(&work).unwrap();
    let mut problems = Vec::new();
    let mut compared = 0;
    for (file, text) in &corpus {
        std::fs::write(work.join(file), text).unwrap();
        make_output_dirs(&work, text);
        let slurm = slurm_view(&conf, &work, file);
        let out = cluster
            .ctrl
            .command(&["submit", "--test-only", "--json", file])
            .current_dir(&work)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        let by_design = REFUSED_BY_DESIGN.iter().find(|(f, _)| f == file);
        match (slurm.accepted, out.status.success(), by_design) {
            (_, false, Some((_, why))) => {
                if !why.split('|').any(|w| err.contains(w)) {
                    problems.push(format!("{file}: refused, but not for {why}: {err}"));
                }
            }
            (_, true, Some((_, why))) => problems.push(format!(
                "{file}: now accepted; take it off REFUSED_BY_DESIGN ({why})"
            )),
            (false, _, None) => {} // What Slurm refuses, labpool may refuse or read.
            (true, false, None) => problems.push(format!(
                "{file}: Slurm accepts it ({}), labpool refuses it: {err}",
                slurm.said
            )),
            (true, true, None) => {
                let ours: Value = serde_json::from_slice(&out.stdout).unwrap();
                compared += 1;
                problems.extend(differences(file, text, &slurm, &ours));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} scripts differ from Slurm:\n{}",
        problems.len(),
        corpus.len(),
        problems.join("\n")
    );
    assert!(compared >= 36, "only {compared} scripts were compared");
}

/// Each figure labpool computes that Slurm computes otherwise.
fn differences(file: &str, text: &str, slurm: &SlurmView, ours: &Value) -> Vec<String> {
    let exclusive = text
        .lines()
        .any(|l| l.starts_with("#SBATCH") && l.contains("--exclusive"));
    let cpus = if exclusive {
        slurm.cpus_asked
    } else {
        slurm.cpus
    };
    let want = [
        ("nodes", slurm.nodes),
        ("tasks", slurm.tasks),
        ("gpus", slurm.gpus),
        ("cpus", cpus),
        ("mem_mib", slurm.mem_mib),
        ("time_limit_s", slurm.time_limit_s),
    ];
    want.iter()
        .filter(|(k, v)| ours[*k].as_u64() != Some(*v))
        .map(|(k, v)| format!("{file}: {k}: Slurm {v}, labpool {}", ours[*k]))
        .collect()
}
