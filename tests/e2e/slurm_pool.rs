//! The harness of the tests of labpool over a real Slurm 22.05 (`[executor] kind = "slurm"`):
//! a controller over the test cluster of `scripts/slurm-cluster`, with or without labpool
//! agents, and what the tests ask of Slurm and of labpool about it.

use crate::nodes::Cluster;
use crate::slurm_peer::slurm;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A labpool controller over the test Slurm, with agents gn1..gn3.
pub(crate) struct SlurmPool {
    pub(crate) c: Cluster,
    pub(crate) conf: PathBuf,
    pub(crate) pool: String,
}

impl SlurmPool {
    pub(crate) fn new(test: &str) -> Option<SlurmPool> {
        SlurmPool::with_config(test, |t| t)
    }

    /// Like [`SlurmPool::new`], with the controller's config edited first. Its partitions
    /// hold gn1..gn3: Slurm's gn4, which has no agent, joins the pool but takes none of the
    /// jobs of these tests, which count on the three nodes with agents.
    pub(crate) fn with_config(
        test: &str,
        edit: impl FnOnce(String) -> String,
    ) -> Option<SlurmPool> {
        SlurmPool::with_agents(test, edit, "8:a100", |t| t)
    }

    /// Like [`SlurmPool::with_config`], with the agents' GPUs (`--virtual-gpus`) and their
    /// configs edited too.
    pub(crate) fn with_agents(
        test: &str,
        edit: impl FnOnce(String) -> String,
        gpus: &str,
        agent_edit: impl Fn(String) -> String,
    ) -> Option<SlurmPool> {
        let mut p = SlurmPool::start(test, |t| {
            edit(t.replace(
                "[[partition]]\n",
                "[[partition]]\nnodes = [\"gn1\", \"gn2\", \"gn3\"]\n",
            ))
        })?;
        for name in ["gn1", "gn2", "gn3"] {
            let i = p.c.add_agent(name, gpus, "127.0.0.1");
            let config = p.c.agents[i].config.clone();
            let text = std::fs::read_to_string(&config).unwrap();
            std::fs::write(&config, agent_edit(text)).unwrap();
            p.c.start_agent(i);
        }
        Some(p)
    }

    /// A controller over the test Slurm with no agents: every Slurm node is scheduled from
    /// Slurm's own description of it.
    pub(crate) fn without_agents(test: &str) -> Option<SlurmPool> {
        SlurmPool::start(test, |t| t)
    }

    /// The controller, started with its config edited; no agents yet.
    fn start(test: &str, edit: impl FnOnce(String) -> String) -> Option<SlurmPool> {
        let conf = slurm(test)?;
        let c = Cluster::new("127.0.0.1", "30s").for_users();
        let conf_text = conf.display().to_string();
        c.ctrl.edit_config(|t| {
            format!(
                "{t}\n[executor]\nkind = \"slurm\"\nslurm_conf = \"{conf_text}\"\npoll = \"200ms\"\nstart_timeout = \"10s\"\n"
            )
        });
        c.ctrl.edit_config(edit);
        let config = labpool::settings::Config::load(&c.ctrl.config).unwrap();
        let pool = labpool::slurm_gate::pool_id(&config);
        let mut p = SlurmPool { c, conf, pool };
        p.c.ctrl.start();
        Some(p)
    }

    /// A Slurm client command.
    pub(crate) fn slurm_cmd(&self, name: &str) -> Command {
        let mut c = Command::new(name);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// Runs a Slurm command; its stdout.
    pub(crate) fn slurm_ok(&self, name: &str, args: &[&str]) -> String {
        let out = self.slurm_cmd(name).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{name} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Every Slurm job this pool submitted, from `squeue --json`.
    pub(crate) fn ours(&self) -> Vec<Value> {
        let v: Value = serde_json::from_str(&self.slurm_ok("squeue", &["--json"])).unwrap();
        let mark = format!(";pool={}", self.pool);
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["comment"].as_str().is_some_and(|c| c.contains(&mark)))
            .cloned()
            .collect()
    }

    /// The Slurm jobs of labpool job `id`, oldest first.
    pub(crate) fn slurm_jobs_of(&self, id: u64) -> Vec<Value> {
        let tag = format!("labpool:{id}:");
        let mut jobs: Vec<Value> = self
            .ours()
            .into_iter()
            .filter(|j| j["comment"].as_str().unwrap().starts_with(&tag))
            .collect();
        jobs.sort_by_key(|j| j["job_id"].as_u64());
        jobs
    }

    /// What `sacct` recorded of Slurm job `id` once it finished: (state, `CODE:SIGNAL`,
    /// elapsed seconds).
    pub(crate) fn sacct(&self, id: u64) -> (String, String, u64) {
        wait("sacct to record the end", Duration::from_secs(30), || {
            let out = self.slurm_ok(
                "sacct",
                &[
                    "-X",
                    "-P",
                    "--noheader",
                    "-j",
                    &id.to_string(),
                    "-o",
                    "State,ExitCode,ElapsedRaw",
                ],
            );
            let f: Vec<&str> = out.trim().split('|').collect();
            let state = f.first()?.split(' ').next()?.to_string();
            if f.len() != 3 || matches!(state.as_str(), "PENDING" | "RUNNING" | "COMPLETING" | "") {
                return None;
            }
            Some((state, f[1].to_string(), f[2].parse().ok()?))
        })
    }

    /// For each labpool job, the state of every Slurm job of this pool that ran for it (had a
    /// start), from `sacct`.
    pub(crate) fn accounted_runs(&self) -> std::collections::BTreeMap<u64, Vec<String>> {
        let out = self
            .slurm_cmd("sacct")
            .env("SLURM_TIME_FORMAT", "%s")
            .args([
                "-X",
                "-P",
                "--noheader",
                "-a",
                "-S",
                "now-1days",
                "-o",
                "State,Start,Comment%4000",
            ])
            .output()
            .unwrap();
        let mark = format!(";pool={}", self.pool);
        let mut runs: std::collections::BTreeMap<u64, Vec<String>> = Default::default();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.splitn(3, '|').collect();
            let (Some(state), Some(start), Some(comment)) = (f.first(), f.get(1), f.get(2)) else {
                continue;
            };
            if !comment.contains(&mark) || start.parse::<u64>().is_err() {
                continue;
            }
            let job = comment
                .trim_start_matches("labpool:")
                .split(':')
                .next()
                .unwrap();
            runs.entry(job.parse().unwrap())
                .or_default()
                .push(state.split(' ').next().unwrap().to_string());
        }
        runs
    }

    /// Waits until labpool job `id` runs in Slurm; its node.
    pub(crate) fn running_in_slurm(&self, id: u64) -> String {
        let j = self
            .c
            .ctrl
            .wait_for(id, Duration::from_secs(30), |j| j["state"] == "RUNNING");
        wait("the Slurm job to run", Duration::from_secs(30), || {
            self.slurm_jobs_of(id)
                .iter()
                .any(|j| j["job_state"] == "RUNNING")
                .then_some(())
        });
        j["node"].as_str().unwrap().to_string()
    }

    /// Submits a Slurm job that did not come through labpool, holding every GPU of `node` for
    /// `secs`; its Slurm id.
    pub(crate) fn foreign_job(&self, node: &str, secs: u32) -> String {
        let out = self.slurm_ok(
            "sbatch",
            &[
                "--parsable",
                "--nodelist",
                node,
                "--gres=gpu:8",
                "--mem=1G",
                "--output=/dev/null",
                "--wrap",
                &format!("sleep {secs}"),
            ],
        );
        out.trim().to_string()
    }

    /// Waits until labpool counts every GPU of `nodes` as taken.
    pub(crate) fn wait_taken(&self, nodes: &[&str]) {
        wait(
            "labpool to see the foreign load",
            Duration::from_secs(20),
            || {
                let n = self.c.nodes();
                let full = |name: &&str| {
                    n.iter()
                        .any(|x| x["name"] == *name && x["state"] == "ALLOCATED")
                };
                nodes.iter().all(full).then_some(())
            },
        );
    }

    /// Submits `script` as `uid`; the job id.
    pub(crate) fn submit_as(&self, uid: u32, gid: u32, script: &Path) -> u64 {
        let out = self.c.ctrl.cli_as(
            uid,
            gid,
            &["submit", "--parsable", script.to_str().unwrap()],
        );
        assert!(
            out.status.success(),
            "submit: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}

impl Drop for SlurmPool {
    fn drop(&mut self) {
        let ids: Vec<String> = self
            .ours()
            .iter()
            .map(|j| j["job_id"].to_string())
            .collect();
        if !ids.is_empty() {
            let _ = self.slurm_cmd("scancel").args(&ids).output();
        }
    }
}

/// Registers a dataset of `files` small files.
pub(crate) fn dataset(p: &SlurmPool, name: &str, files: usize) {
    let src = p.c.ctrl.dir.join("shared/datasets").join(name);
    std::fs::create_dir_all(&src).unwrap();
    for k in 0..files {
        std::fs::write(src.join(format!("{k:04}.bin")), vec![k as u8; 10_000]).unwrap();
    }
    p.c.ctrl
        .ok(&["dataset", "add", name, src.to_str().unwrap()]);
}

pub(crate) fn wait<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
