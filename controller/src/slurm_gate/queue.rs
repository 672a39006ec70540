//! Slurm's queue as `squeue --json` writes it (Slurm 22.05, OpenAPI v0.0.38), read into what the
//! gate needs: labpool's jobs by their comment tag, and the GPUs foreign jobs hold on each node.
//! In 22.05 `--json` ignores squeue's filters, so the whole queue is read and filtered here.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The prefix of the comment that tags a job labpool submitted: `labpool:<job>:<attempt>`.
pub const TAG_PREFIX: &str = "labpool:";

/// The tag for an attempt.
pub fn tag(job: u64, attempt: u32) -> String {
    format!("{TAG_PREFIX}{job}:{attempt}")
}

/// The pool a tagged comment names (`;pool=ID`), if any.
pub fn pool_of(comment: &str) -> Option<&str> {
    comment
        .split(';')
        .find_map(|part| part.strip_prefix("pool="))
}

/// The (job, attempt) a comment tags, if it is labpool's (`labpool:<job>:<attempt>`, then
/// anything after a `;`).
pub fn parse_tag(comment: &str) -> Option<(u64, u32)> {
    let rest = comment.strip_prefix(TAG_PREFIX)?;
    let rest = rest.split(';').next()?;
    let (job, attempt) = rest.split_once(':')?;
    Some((job.parse().ok()?, attempt.parse().ok()?))
}

/// One job as squeue shows it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SlurmJob {
    /// Slurm's job id.
    pub job_id: u64,
    /// `PENDING`, `RUNNING`, `COMPLETED`, `FAILED`, `CANCELLED`, `TIMEOUT`, `NODE_FAIL`, ...
    pub job_state: String,
    /// Why it pends (`JobHeldAdmin`, `Resources`, ...), or `None`.
    pub state_reason: String,
    /// The comment: labpool's tag, for its jobs.
    pub comment: String,
    /// The nodes it holds, as a hostlist (`gn[1-2]`); empty while pending.
    pub nodes: String,
    /// The nodes it asked for (`--nodelist`).
    pub required_nodes: String,
    /// Start and end, seconds since the epoch (0: not yet).
    pub start_time: i64,
    /// End, or the expected end while running.
    pub end_time: i64,
    /// The batch script's wait status: exit code × 256 + signal.
    pub exit_code: i64,
    /// GPUs held on each of its nodes, in node order: `gpu:a100:2(IDX:0-1)`.
    pub gres_detail: Vec<String>,
    /// The owner's uid.
    pub user_id: u32,
}

impl SlurmJob {
    /// The nodes it holds, or while pending those it asked for.
    pub fn node_names(&self) -> Vec<String> {
        let list = if self.nodes.is_empty() {
            &self.required_nodes
        } else {
            &self.nodes
        };
        labpool_scheduler::hostlist::expand(list).unwrap_or_default()
    }

    /// The (job, attempt), when this pool submitted it: a job another labpool pool submitted
    /// to the same Slurm is foreign load here.
    pub fn labpool(&self, pool: &str) -> Option<(u64, u32)> {
        parse_tag(&self.comment).filter(|_| pool_of(&self.comment) == Some(pool))
    }

    /// True once it can change no more.
    pub fn is_final(&self) -> bool {
        !matches!(
            self.job_state.as_str(),
            "PENDING"
                | "RUNNING"
                | "CONFIGURING"
                | "COMPLETING"
                | "SUSPENDED"
                | "REQUEUED"
                | "REQUEUE_HOLD"
                | "REQUEUE_FED"
                | "RESIZING"
                | "SIGNALING"
                | "STAGE_OUT"
                | "STOPPED"
        )
    }

    /// True while it holds its nodes' resources.
    pub fn holds_resources(&self) -> bool {
        matches!(
            self.job_state.as_str(),
            "RUNNING" | "CONFIGURING" | "COMPLETING" | "SUSPENDED" | "SIGNALING" | "STOPPED"
        )
    }

    /// The GPUs it holds per node and type: `gres_detail` read against its node list.
    pub fn gpus_by_node(&self) -> BTreeMap<String, BTreeMap<Option<String>, u32>> {
        let mut out: BTreeMap<String, BTreeMap<Option<String>, u32>> = BTreeMap::new();
        let nodes = labpool_scheduler::hostlist::expand(&self.nodes).unwrap_or_default();
        for (node, detail) in nodes.iter().zip(&self.gres_detail) {
            for (gpu_type, n) in crate::slurm_gate::node::gres_items(detail) {
                *out.entry(node.clone())
                    .or_default()
                    .entry(gpu_type.map(str::to_string))
                    .or_default() += n;
            }
        }
        out
    }
}

#[derive(Deserialize)]
struct Queue {
    #[serde(default)]
    jobs: Vec<SlurmJob>,
    #[serde(default)]
    errors: Vec<serde_json::Value>,
}

/// Why squeue's answer could not be used.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// Not the JSON expected.
    #[error("squeue --json wrote what labpool cannot read: {0}")]
    Json(#[from] serde_json::Error),
    /// Slurm said it failed (slurmctld not answering, most often).
    #[error("squeue --json reported errors: {0}")]
    Slurm(String),
}

/// Reads `squeue --json`.
pub fn parse(text: &[u8]) -> Result<Vec<SlurmJob>, QueueError> {
    let q: Queue = serde_json::from_slice(text)?;
    if !q.errors.is_empty() {
        return Err(QueueError::Slurm(
            q.errors
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    Ok(q.jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_gres_are_read_as_slurm_writes_them() {
        assert_eq!(parse_tag("labpool:12:3"), Some((12, 3)));
        assert_eq!(parse_tag("labpool:12:3;data=/c/a/v1"), Some((12, 3)));
        assert_eq!(pool_of("labpool:12:3;pool=ab12;data=/c/a/v1"), Some("ab12"));
        let mine = SlurmJob {
            comment: "labpool:12:3;pool=ab12".into(),
            ..Default::default()
        };
        assert_eq!(mine.labpool("ab12"), Some((12, 3)));
        assert_eq!(mine.labpool("other"), None);
        assert_eq!(parse_tag("labpool:x:3"), None);
        assert_eq!(parse_tag("my own comment"), None);
        assert_eq!(tag(7, 2), "labpool:7:2");
        use crate::slurm_gate::node::gres_items;
        assert_eq!(
            gres_items("gpu:a100:2(IDX:0-1),gpu:t4:1(IDX:3)"),
            [(Some("a100"), 2), (Some("t4"), 1)]
        );
        assert_eq!(gres_items("gpu:2"), [(None, 2)]);
        assert!(gres_items("").is_empty());
        let job = SlurmJob {
            nodes: "gn[1-2]".into(),
            gres_detail: vec!["gpu:a100:8(IDX:0-7)".into(), "gpu:a100:1(IDX:2)".into()],
            ..Default::default()
        };
        let by = job.gpus_by_node();
        assert_eq!(by["gn1"][&Some("a100".into())], 8);
        assert_eq!(by["gn2"][&Some("a100".into())], 1);
        let e = parse(br#"{"errors":[{"error":"Unspecified error"}],"jobs":[]}"#).unwrap_err();
        assert!(e.to_string().contains("Unspecified error"), "{e}");
    }
}
