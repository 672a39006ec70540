//! Job dependencies, as Slurm's `--dependency=afterok:N[:M],afterany:N,singleton`.

use crate::job::JobId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// When a dependency is satisfied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DependencyKind {
    /// The other job ended with COMPLETED.
    AfterOk,
    /// The other job ended, however.
    AfterAny,
    /// The other job ended without COMPLETED.
    AfterNotOk,
}

/// One dependency of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Dependency {
    /// When it is satisfied.
    pub kind: DependencyKind,
    /// On which job.
    pub job: JobId,
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            DependencyKind::AfterOk => "afterok",
            DependencyKind::AfterAny => "afterany",
            DependencyKind::AfterNotOk => "afternotok",
        };
        write!(f, "{kind}:{}", self.job)
    }
}

/// Why a dependency list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid --dependency '{0}': write afterok:JOB[:JOB...], afterany:JOB, afternotok:JOB or singleton, comma-separated (e.g. afterok:12:13,afterany:9)"
)]
pub struct DependencyParseError(pub String);

/// Parses `afterok:12:13,afterany:9`; `singleton` is read by [`wants_singleton`].
///
/// ```
/// use labpool_scheduler::dependency::{parse_dependencies, DependencyKind};
/// let d = parse_dependencies("afterok:12:13,afterany:9").unwrap();
/// assert_eq!(d.len(), 3);
/// assert_eq!(d[2].kind, DependencyKind::AfterAny);
/// ```
pub fn parse_dependencies(text: &str) -> Result<Vec<Dependency>, DependencyParseError> {
    let err = || DependencyParseError(text.to_string());
    let mut out = Vec::new();
    for item in text.split(',') {
        if item.trim().eq_ignore_ascii_case("singleton") {
            continue;
        }
        let mut parts = item.trim().split(':');
        let kind = match parts.next().map(str::to_ascii_lowercase).as_deref() {
            Some("afterok") => DependencyKind::AfterOk,
            Some("afterany") => DependencyKind::AfterAny,
            Some("afternotok") => DependencyKind::AfterNotOk,
            _ => return Err(err()),
        };
        let mut any = false;
        for id in parts {
            // Slurm accepts JOB_TASK for array tasks; labpool's tasks are jobs of their own.
            let id: u64 = id.trim().parse().map_err(|_| err())?;
            out.push(Dependency {
                kind,
                job: JobId(id),
            });
            any = true;
        }
        if !any {
            return Err(err());
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Whether a dependency list has `singleton`: the job waits until every earlier job of its
/// user with the same name has ended.
pub fn wants_singleton(text: &str) -> bool {
    text.split(',')
        .any(|item| item.trim().eq_ignore_ascii_case("singleton"))
}

/// Where a dependency stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependencyState {
    /// The job it waits for has not ended.
    Waiting,
    /// Satisfied.
    Satisfied,
    /// Can never be satisfied (e.g. afterok on a job that failed).
    Never,
}

impl Dependency {
    /// Where this dependency stands, given how the other job ended (`None`: not yet;
    /// `Some(true)`: COMPLETED; `Some(false)`: any other end).
    pub fn state(&self, ended_ok: Option<bool>) -> DependencyState {
        match (self.kind, ended_ok) {
            (_, None) => DependencyState::Waiting,
            (DependencyKind::AfterAny, Some(_)) => DependencyState::Satisfied,
            (DependencyKind::AfterOk, Some(ok)) | (DependencyKind::AfterNotOk, Some(ok)) => {
                if ok == (self.kind == DependencyKind::AfterOk) {
                    DependencyState::Satisfied
                } else {
                    DependencyState::Never
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_and_states() {
        assert!(parse_dependencies("afterok").is_err());
        assert!(parse_dependencies("after:3").is_err());
        assert!(parse_dependencies("afterok:x").is_err());
        let d = parse_dependencies("afterok:5").unwrap().pop().unwrap();
        assert_eq!(d.state(None), DependencyState::Waiting);
        assert_eq!(d.state(Some(true)), DependencyState::Satisfied);
        assert_eq!(d.state(Some(false)), DependencyState::Never);
        let n = Dependency {
            kind: DependencyKind::AfterNotOk,
            job: JobId(1),
        };
        assert_eq!(n.state(Some(false)), DependencyState::Satisfied);
        assert_eq!(d.to_string(), "afterok:5");
        assert_eq!(parse_dependencies("singleton,afterok:5").unwrap().len(), 1);
        assert!(parse_dependencies("singleton").unwrap().is_empty());
        assert!(wants_singleton("afterok:5, Singleton") && !wants_singleton("afterok:5"));
    }
}
