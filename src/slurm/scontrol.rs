//! `scontrol` for job scripts: `scontrol show hostnames [LIST]` expands a Slurm host list
//! (default `$SLURM_JOB_NODELIST`), one name a line, as scripts use it to find their first
//! node. Other subcommands are not here yet and say so.

use labpool_scheduler::hostlist::expand;
use std::process::ExitCode;

/// Runs `scontrol ARGS`.
pub fn main(args: &[String]) -> ExitCode {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["show", "hostnames" | "hostname", rest @ ..] => {
            let list = match rest.first() {
                Some(l) => l.to_string(),
                None => std::env::var("SLURM_JOB_NODELIST").unwrap_or_default(),
            };
            match expand(&list) {
                Ok(names) => {
                    for n in names {
                        crate::out!("{n}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("scontrol: error: {e}");
                    ExitCode::from(1)
                }
            }
        }
        _ => {
            eprintln!(
                "scontrol: error: only `scontrol show hostnames` is here so far; use `labpool show`, `labpool hold` and `labpool release` for jobs"
            );
            ExitCode::from(1)
        }
    }
}
