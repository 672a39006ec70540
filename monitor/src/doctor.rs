//! `labpool doctor`: the seed lab's ten-minute weekly checklist as one pass over facts the
//! controller gathers. Each check gives one finding when all is well (so the report reads as
//! the checklist) and one per problem otherwise, each with the fix. Deterministic: facts and
//! limits in, findings out, in a fixed order.

use serde::{Deserialize, Serialize};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// Someone should look this week.
    Warn,
    /// Someone should look now.
    Fail,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The check: `nodes`, `waiting`, `disks`, ….
    pub check: String,
    /// How it came out.
    pub status: Status,
    /// What it is about (a node, a job, a path), or `-`.
    pub subject: String,
    /// What was found, with the values.
    pub what: String,
    /// What to do; empty when nothing.
    pub fix: String,
}

/// A node as the doctor sees it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NodeFact {
    /// Name.
    pub name: String,
    /// `IDLE`, `DOWN`, `DRAINED`, ….
    pub state: String,
    /// Why it is down or drained.
    pub reason: Option<String>,
    /// The isolation it offers, as `labpool nodes` prints it.
    pub isolation: String,
    /// GPUs the pool schedules on it.
    pub gpus_scheduled: u32,
    /// GPUs NVML reports there, when known.
    pub gpus_nvml: Option<u32>,
    /// Its agent's clock minus the controller's, ms, when it is a remote agent.
    pub skew_ms: Option<i64>,
    /// The labpool version its agent runs, when known.
    #[serde(default)]
    pub agent_version: Option<String>,
}

/// A job as the doctor sees it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct JobFact {
    /// Id.
    pub id: u64,
    /// Owner.
    pub user: String,
    /// Submitted (waiting jobs) or started (running jobs), ms.
    pub since_ms: i64,
    /// Why it waits, for waiting jobs.
    pub reason: Option<String>,
}

/// A GPU's health.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GpuFact {
    /// Node.
    pub node: String,
    /// Index.
    pub index: u32,
    /// °C.
    pub temp_c: Option<u32>,
    /// Volatile double-bit ECC errors.
    pub ecc_dbe: Option<u64>,
    /// Aggregate single-bit ECC errors.
    pub ecc_sbe_aggregate: Option<u64>,
    /// Retired pages, single-bit and double-bit.
    pub retired_pages: Option<(u64, u64)>,
    /// The last XID error, if any was seen.
    pub xid: Option<u64>,
}

/// A snapshot source's runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SnapshotFact {
    /// Source name.
    pub source: String,
    /// The last successful run, ms.
    pub last_ok_ms: Option<i64>,
    /// Why the last run failed, if it did.
    pub failure: Option<String>,
}

/// A member's use of one quota file system.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QuotaFact {
    /// Member.
    pub user: String,
    /// `home` or `scratch`.
    pub fs: String,
    /// Percent of the hard limit (or soft, where there is no hard one).
    pub percent: f64,
}

/// A mounted file system the pool uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mount {
    /// What the pool uses it for: `datasets`, `home`, `scratch`.
    pub role: String,
    /// Mount point.
    pub target: String,
    /// File system type (`nfs`, `nfs4`, `ext4`).
    pub fstype: String,
    /// Mount options, comma-separated.
    pub options: String,
}

/// Everything the doctor looks at.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Facts {
    /// Now, ms.
    pub now_ms: i64,
    /// Nodes.
    pub nodes: Vec<NodeFact>,
    /// Waiting jobs.
    pub waiting: Vec<JobFact>,
    /// Running jobs.
    pub running: Vec<JobFact>,
    /// Disks and their fill, percent.
    pub disks: Vec<(String, f64)>,
    /// GPUs.
    pub gpus: Vec<GpuFact>,
    /// Zombies found: job, member, kind, since.
    pub zombies: Vec<(u64, String, String, i64)>,
    /// Jobs below the low mark, not yet for long enough: job, member, since.
    pub low_use: Vec<(u64, String, i64)>,
    /// Snapshot sources.
    pub snapshots: Vec<SnapshotFact>,
    /// Quota use.
    pub quotas: Vec<QuotaFact>,
    /// The mounts under the pool's shared directories.
    pub mounts: Vec<Mount>,
    /// The controller's own version.
    #[serde(default)]
    pub controller_version: String,
    /// How the controller runs: under which supervisor, if any.
    #[serde(default)]
    pub service: Service,
}

/// How the controller process was started, for the `service` check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Service {
    /// No systemd runs this machine: something else must keep the daemon running.
    #[default]
    NoSystemd,
    /// systemd runs this machine but did not start the controller.
    OutsideSystemd,
    /// Started by systemd as this unit.
    Unit {
        /// The unit.
        unit: String,
        /// Whether it is enabled (started at boot).
        enabled: bool,
    },
}

/// The doctor's marks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Limits {
    /// A job waiting longer than this, ms, is named.
    pub waiting_ms: i64,
    /// A job running longer than this, ms, is named.
    pub running_ms: i64,
    /// Percent full.
    pub disk_percent: f64,
    /// °C.
    pub temp_c: u32,
    /// Seconds of clock skew.
    pub skew_s: f64,
    /// How old the last snapshot may be, ms.
    pub snapshot_max_age_ms: i64,
    /// Percent of a quota that counts as near.
    pub quota_percent: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            waiting_ms: 24 * 3_600_000,
            running_ms: 7 * 86_400_000,
            disk_percent: 90.0,
            temp_c: 85,
            skew_s: 5.0,
            snapshot_max_age_ms: 26 * 3_600_000,
            quota_percent: 90.0,
        }
    }
}

/// The NFS options the seed lab learnt to use for shared data.
pub const NFS_ADVICE: &str = "rsize=1048576,wsize=1048576,hard";

mod checks;
mod upkeep;
pub use checks::check;

/// The mounts in `/proc/self/mounts` text that hold the pool's `paths` (role, path): for each
/// path, the longest mount point above it.
pub fn mounts_for(mounts_text: &str, paths: &[(String, String)]) -> Vec<Mount> {
    let table: Vec<(String, String, String)> = mounts_text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_src, target, fstype, options) = (f.next()?, f.next()?, f.next()?, f.next()?);
            Some((unescape(target), fstype.to_string(), options.to_string()))
        })
        .collect();
    paths
        .iter()
        .filter_map(|(role, path)| {
            let under = |t: &str| {
                t == "/" || path == t || path.strip_prefix(t).is_some_and(|r| r.starts_with('/'))
            };
            // The last mount on the longest matching point is the one in force.
            let best = table
                .iter()
                .filter(|(t, _, _)| under(t))
                .max_by_key(|(t, _, _)| t.len())?;
            let on_top = table
                .iter()
                .rev()
                .find(|(t, _, _)| *t == best.0)
                .unwrap_or(best);
            Some(Mount {
                role: role.clone(),
                target: on_top.0.clone(),
                fstype: on_top.1.clone(),
                options: on_top.2.clone(),
            })
        })
        .collect()
}

/// `\040` and friends, as the kernel escapes mount points.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(v as char);
            i += 4;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// What is wrong with an NFS mount's options for shared data, if anything.
pub fn nfs_problems(m: &Mount) -> Vec<String> {
    if !m.fstype.starts_with("nfs") {
        return Vec::new();
    }
    let mut problems = Vec::new();
    for opt in m.options.split(',') {
        match opt.split_once('=') {
            Some((k @ ("rsize" | "wsize"), v)) if v.parse::<u64>().is_ok_and(|n| n < 1_048_576) => {
                problems.push(format!("{k}={v} (small reads and writes)"));
            }
            None if opt == "soft" => {
                problems.push("soft (a slow server returns I/O errors to jobs)".to_string());
            }
            _ => {}
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_that_holds_a_path_is_found_and_nfs_options_are_judged() {
        let text = "/dev/vda1 / ext4 rw,relatime 0 0\n\
                    srv:/data /shared nfs4 rw,vers=4.2,rsize=65536,wsize=1048576,soft,proto=tcp 0 0\n\
                    srv:/home /shared/home\\040dir nfs rw,rsize=1048576,wsize=1048576,hard 0 0\n";
        let got = mounts_for(
            text,
            &[
                ("datasets".into(), "/shared/datasets".into()),
                ("home".into(), "/shared/home dir/alice".into()),
                ("scratch".into(), "/scratch".into()),
            ],
        );
        assert_eq!(got[0].target, "/shared");
        assert_eq!(
            nfs_problems(&got[0]),
            vec![
                "rsize=65536 (small reads and writes)".to_string(),
                "soft (a slow server returns I/O errors to jobs)".to_string()
            ]
        );
        assert_eq!(got[1].target, "/shared/home dir");
        assert!(nfs_problems(&got[1]).is_empty());
        assert_eq!(got[2].fstype, "ext4");
        assert!(nfs_problems(&got[2]).is_empty());
    }
}
