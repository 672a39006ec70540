//! Where a step's tasks write: `srun`'s own output, or the files of `--output`/`--error`, whose
//! patterns (`%j_%t_log.out`) are expanded per task as Slurm's step daemon expands them, so that
//! each rank of a step can have its own log (submitit reads rank N's from `%j_%t_log.out`).
//!
//! Tasks whose patterns give the same path share one open file, as Slurm's do, so that two
//! ranks writing to one log do not truncate each other. `--open-mode` (or the job's
//! `SLURM_OPEN_MODE`, which `sbatch --open-mode` sets) chooses append or truncate.

use labpool_scheduler::options::{PatternValues, expand_pattern};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A task's place in its step, for its file names.
#[derive(Debug, Clone, Copy)]
pub struct TaskPlace<'a> {
    /// Global rank (`%t`).
    pub rank: u32,
    /// The index of its node in the job (`%n`).
    pub node_index: u32,
    /// Its node's name (`%N`).
    pub node: &'a str,
}

/// What one stream (standard output or error) of the step's tasks goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sink {
    /// `srun`'s own stream.
    Srun,
    /// Nowhere (`none`, or a task other than the one `--output=N` names).
    Discard,
    /// A file per pattern.
    Pattern(String),
    /// Only this rank's lines reach `srun`'s stream (`--output=N`); the others are discarded.
    OnlyRank(u32),
}

impl Sink {
    fn parse(value: Option<&str>) -> Self {
        match value {
            None => Self::Srun,
            Some(v) if v.eq_ignore_ascii_case("none") => Self::Discard,
            Some(v) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
                v.parse().map_or(Self::Discard, Self::OnlyRank)
            }
            Some(v) => Self::Pattern(v.to_string()),
        }
    }
}

/// Where a step's tasks write.
pub struct StepOutput {
    out: Sink,
    err: Sink,
    append: bool,
    job_id: u64,
    step: u32,
    job_name: String,
    user: String,
    array: Option<(u64, u32)>,
    cwd: PathBuf,
    open: Mutex<BTreeMap<PathBuf, File>>,
}

/// A task's two streams: `None` is `srun`'s own.
pub struct TaskFiles {
    /// Standard output.
    pub out: Option<File>,
    /// Standard error.
    pub err: Option<File>,
}

impl StepOutput {
    /// The step's sinks from `srun`'s `--output`, `--error` and `--open-mode`, with the job's
    /// values read from its environment (`var`).
    pub fn new(
        output: Option<&str>,
        error: Option<&str>,
        open_mode: Option<&str>,
        job_id: u64,
        step: u32,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let out = Sink::parse(output);
        // As in Slurm, standard error follows --output when --error is not given.
        let err = match error {
            Some(_) => Sink::parse(error),
            None => out.clone(),
        };
        let mode = open_mode
            .map(str::to_string)
            .or_else(|| var("SLURM_OPEN_MODE"));
        let array = var("SLURM_ARRAY_JOB_ID")
            .and_then(|a| a.parse().ok())
            .zip(var("SLURM_ARRAY_TASK_ID").and_then(|t| t.parse().ok()));
        Self {
            out,
            err,
            append: mode.is_some_and(|m| m.starts_with('a') || m.starts_with('A')),
            job_id,
            step,
            job_name: var("SLURM_JOB_NAME").unwrap_or_default(),
            user: var("SLURM_JOB_USER")
                .or_else(|| var("USER"))
                .unwrap_or_default(),
            array,
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            open: Mutex::new(BTreeMap::new()),
        }
    }

    /// A task's files; `None` for a stream that goes through `srun`.
    pub fn files(&self, at: TaskPlace<'_>) -> Result<TaskFiles, String> {
        Ok(TaskFiles {
            out: self.file(&self.out, at)?,
            err: self.file(&self.err, at)?,
        })
    }

    /// Writes one line a task printed (on another node, or under `-l`), to its file or to
    /// `srun`'s own stream, with the rank first under `-l`.
    pub fn line(&self, to_stderr: bool, at: TaskPlace<'_>, line: &str, label: Option<usize>) {
        let sink = if to_stderr { &self.err } else { &self.out };
        let text = match label {
            Some(width) => format!("{:>width$}: {line}\n", at.rank),
            None => format!("{line}\n"),
        };
        match self.file(sink, at) {
            Ok(Some(mut f)) => {
                let _ = f.write_all(text.as_bytes());
            }
            Ok(None) if Self::passes(sink, at.rank) => {
                let _ = if to_stderr {
                    std::io::stderr().write_all(text.as_bytes())
                } else {
                    std::io::stdout().write_all(text.as_bytes())
                };
            }
            Ok(None) => {}
            Err(e) => eprintln!("srun: error: {e}"),
        }
    }

    fn passes(sink: &Sink, rank: u32) -> bool {
        match sink {
            Sink::Srun => true,
            Sink::OnlyRank(r) => *r == rank,
            Sink::Discard | Sink::Pattern(_) => false,
        }
    }

    fn file(&self, sink: &Sink, at: TaskPlace<'_>) -> Result<Option<File>, String> {
        let path = match sink {
            Sink::Srun => return Ok(None),
            Sink::OnlyRank(r) if *r == at.rank => return Ok(None),
            Sink::OnlyRank(_) | Sink::Discard => PathBuf::from("/dev/null"),
            Sink::Pattern(p) => {
                let values = PatternValues {
                    job_id: self.job_id,
                    job_name: &self.job_name,
                    user: &self.user,
                    node: at.node,
                    array: self.array,
                    step: self.step,
                    task: at.rank,
                    node_index: at.node_index,
                };
                self.cwd.join(expand_pattern(p, &values))
            }
        };
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = open.get(&path) {
            return f.try_clone().map(Some).map_err(|e| e.to_string());
        }
        let f = open_file(&path, self.append)?;
        let mine = f.try_clone().map_err(|e| e.to_string())?;
        open.insert(path, f);
        Ok(Some(mine))
    }
}

fn open_file(path: &Path, append: bool) -> Result<File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .append(append)
        .truncate(!append)
        .mode(0o644)
        .open(path)
        .map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "; create its directory first"
            } else {
                ""
            };
            format!("cannot open output file {}: {e}{hint}", path.display())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_get_their_own_files_and_share_a_common_one() {
        let dir = tempfile::tempdir().unwrap();
        let pattern = dir.path().join("%j_%t_log.out").display().to_string();
        let shared = dir.path().join("all-%s.err").display().to_string();
        let env = |k: &str| (k == "SLURM_OPEN_MODE").then(|| "a".to_string());
        let o = StepOutput::new(Some(&pattern), Some(&shared), None, 42, 3, &env);
        for rank in 0..2 {
            let at = TaskPlace {
                rank,
                node_index: 0,
                node: "n1",
            };
            let files = o.files(at).unwrap();
            writeln!(files.out.unwrap(), "out {rank}").unwrap();
            writeln!(files.err.unwrap(), "err {rank}").unwrap();
        }
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("42_0_log.out"), "out 0\n");
        assert_eq!(read("42_1_log.out"), "out 1\n");
        assert_eq!(read("all-3.err"), "err 0\nerr 1\n");
    }

    #[test]
    fn numbers_and_none() {
        let env = |_: &str| None;
        let o = StepOutput::new(Some("1"), Some("none"), None, 1, 0, &env);
        let at = |rank| TaskPlace {
            rank,
            node_index: 0,
            node: "n",
        };
        assert!(o.files(at(1)).unwrap().out.is_none());
        assert!(o.files(at(0)).unwrap().out.is_some());
        assert!(o.files(at(1)).unwrap().err.is_some());
    }
}
