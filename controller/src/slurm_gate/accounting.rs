//! Slurm's accounting (`sacct`), for attempts that left Slurm's queue while the controller was
//! away (longer than `MinJobAge`) or that slurmctld forgot across a restart.
//!
//! It reads `sacct`'s text form, not `--json`: in 22.05 `--json` ignores the filters (every
//! job ever is read), and its job-level exit code is not the script's (a script that ran
//! `exit 2` shows `return_code: 0`). `SLURM_TIME_FORMAT=%s` makes the times plain epoch seconds.
//! Comments are kept only with `AccountingStoreFlags=job_comment`, which `labpool doctor`
//! checks.

use crate::slurm_gate::queue::SlurmJob;

/// The fields asked for, in order; the comment last, since it is free text.
pub const FORMAT: &str = "JobID,State,ExitCode,Start,End,NodeList,Comment%4000";

/// Reads `sacct -X -P --noheader -o FORMAT` into queue-like records.
pub fn parse(text: &str) -> Vec<SlurmJob> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.splitn(7, '|');
            let id = f.next()?.parse().ok()?;
            let state = f.next()?;
            // `CANCELLED by 0`: the state is the first word.
            let state = state.split(' ').next().unwrap_or_default().to_string();
            let (code, signal) = f.next()?.split_once(':')?;
            let code: i64 = code.parse().ok()?;
            let signal: i64 = signal.parse().ok()?;
            let start = f.next()?.parse().unwrap_or(0);
            let end = f.next()?.parse().unwrap_or(0);
            let nodes = f.next()?.to_string();
            let comment = f.next().unwrap_or_default().to_string();
            Some(SlurmJob {
                job_id: id,
                job_state: state,
                comment,
                nodes: if nodes == "None assigned" {
                    String::new()
                } else {
                    nodes
                },
                start_time: start,
                end_time: end,
                exit_code: code * 256 + signal,
                ..Default::default()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sacct_lines_are_read_as_sacct_writes_them() {
        let text = "2426|FAILED|2:0|1796463617|1796463618|gn1|labpool:1:1;pool=ab\n\
                    2427|CANCELLED by 0|0:15|1796463620|1796463630|gn2|\n\
                    2428|PENDING|0:0|Unknown|Unknown|None assigned|labpool:3:1;pool=ab;data=/c/x/v\n";
        let jobs = parse(text);
        assert_eq!(jobs.len(), 3);
        assert_eq!(
            (jobs[0].job_id, jobs[0].job_state.as_str()),
            (2426, "FAILED")
        );
        assert_eq!(jobs[0].exit_code, 2 * 256);
        assert_eq!(
            (jobs[0].start_time, jobs[0].end_time),
            (1796463617, 1796463618)
        );
        assert_eq!(jobs[0].labpool("ab"), Some((1, 1)));
        assert_eq!(jobs[1].job_state, "CANCELLED");
        assert_eq!(jobs[1].exit_code, 15);
        assert_eq!(jobs[2].start_time, 0);
        assert!(jobs[2].nodes.is_empty());
        assert_eq!(jobs[2].labpool("ab"), Some((3, 1)));
    }
}
