//! `docs/slurm-compatibility.md`, generated from the commands' parsers and [`super::tables`]:
//! each of the nine commands' options, honoured, warned or refused, and why.

use super::{Extra, How};
use clap::CommandFactory;

/// Options of `labpool submit` that are read and warned about when the job is submitted
/// (see `JobOptions::resolve`).
const WARNED_AT_SUBMIT: &[&str] = &["exclusive", "qos"];

/// One row: the option as written, what labpool does, and the note.
pub(super) struct Row {
    /// The option's spellings, in backquotes (`` `-o`, `--output` ``).
    pub(super) option: String,
    /// honoured, warned or refused.
    pub(super) how: &'static str,
    /// Why, or what it does.
    pub(super) note: String,
}

/// The rows of a clap command: honoured, but for those its help calls refused or ignored.
fn clap_rows(cmd: &clap::Command, warned_ids: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else {
            continue;
        };
        if long == "help" {
            continue;
        }
        let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
        let mut option = match arg.get_short() {
            Some(c) => format!("`-{c}`, `--{long}`"),
            None => format!("`--{long}`"),
        };
        for alias in arg.get_visible_aliases().unwrap_or_default() {
            option.push_str(&format!(", `--{alias}`"));
        }
        let (how, note) = if let Some(why) = help.strip_prefix("Refused: ") {
            ("refused", why.to_string())
        } else if warned_ids.iter().any(|id| id == arg.get_id().as_str())
            || help.contains("accepted and ignored")
        {
            ("warned", help.replace("; accepted and ignored", ":"))
        } else if let Some(why) = help
            .strip_prefix("Accepted for Slurm scripts; ")
            .filter(|_| WARNED_AT_SUBMIT.contains(&long))
        {
            ("warned", why.to_string())
        } else {
            ("honoured", help)
        };
        rows.push(Row { option, how, note });
    }
    rows
}

/// A command's rows: those of its parser, then those of its table of Slurm's other options.
fn rows_of(cmd: &clap::Command, extras: &[Extra], warned_ids: &[String]) -> Vec<Row> {
    let mut rows = clap_rows(cmd, warned_ids);
    rows.extend(extra_rows(extras));
    rows
}

fn extra_rows(extras: &[Extra]) -> Vec<Row> {
    extras
        .iter()
        .map(|e| {
            let option = match e.short {
                Some(c) => format!("`-{c}`, `--{}`", e.long),
                None => format!("`--{}`", e.long),
            };
            let (how, note) = match e.how {
                How::Same(n) => ("honoured", n),
                How::Warned(n) => ("warned", n),
                How::Refused(n) => ("refused", n),
            };
            Row {
                option,
                how,
                note: note.to_string(),
            }
        })
        .collect()
}

/// What every command answers to alike.
fn common_rows() -> Vec<Row> {
    vec![
        Row {
            option: "`-V`, `--version`".into(),
            how: "honoured",
            note: format!("prints `slurm {}`", super::SLURM_VERSION),
        },
        Row {
            option: "`--usage`".into(),
            how: "honoured",
            note: "a short usage line".into(),
        },
    ]
}

fn srun_rows() -> Vec<Row> {
    use crate::args::{HONOURED, LONG_WITH_VALUE, OTHER_OPTIONS};
    let mut names: Vec<&str> = LONG_WITH_VALUE
        .iter()
        .chain(OTHER_OPTIONS)
        .copied()
        .collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| match HONOURED.iter().find(|(n, _)| *n == name) {
            Some((_, what)) => Row {
                option: format!("`--{name}`"),
                how: "honoured",
                note: (*what).to_string(),
            },
            None => Row {
                option: format!("`--{name}`"),
                how: "warned",
                note: "inside a job, not acted on (the step runs on the job's own cores and GPUs); outside one, the job takes it where `sbatch` does".into(),
            },
        })
        .collect()
}

fn scontrol_rows() -> Vec<Row> {
    let mut rows = vec![Row {
        option: "`-o`, `--oneliner`".into(),
        how: "honoured",
        note: "one line per record".into(),
    }];
    rows.extend(extra_rows(super::tables::SCONTROL));
    rows.push(Row {
        option: "commands".into(),
        how: "honoured",
        note: "`show job [ID]`, `show node [NAME]`, `show partition [NAME]`, `show hostnames [LIST]`, `show config`, `hold`, `uhold`, `release`, `requeue`, `update JobId=ID` (`TimeLimit=`, `Partition=`, `Dependency=`, `NumNodes=1`); others are refused with the list".into(),
    });
    rows
}

fn ignored_ids() -> Vec<String> {
    let cmd = labpool_scheduler::options::ignored::IgnoredOptions::augment_args(
        clap::Command::new("ignored"),
    );
    cmd.get_arguments()
        .map(|a| a.get_id().to_string())
        .collect()
}

use clap::Args as _;

/// Each command: its name, a sentence on how labpool answers it, and its options' rows in
/// order (those every command shares included).
pub(super) fn sections() -> Vec<(&'static str, &'static str, Vec<Row>)> {
    let ignored = ignored_ids();
    let alloc = crate::cli::alloc_command();
    let mut sections: Vec<(&str, &str, Vec<Row>)> = vec![
        (
            "sbatch",
            "`labpool submit`'s options, in `#SBATCH` lines too.",
            clap_rows(&crate::Sbatch::command(), &ignored),
        ),
        (
            "srun",
            "Inside a job, a step; outside one, an allocation for one step (the job takes the options `sbatch` reads), or with `--pty` a session. srun reads every option of Slurm's; those it does not act on are named in one warning.",
            srun_rows(),
        ),
        (
            "salloc",
            "An allocation with a shell (`labpool alloc`), where `srun` runs steps.",
            rows_of(&alloc, super::tables::SALLOC, &ignored),
        ),
        (
            "squeue",
            "",
            rows_of(
                &crate::squeue::SqueueArgs::command(),
                super::tables::SQUEUE,
                &ignored,
            ),
        ),
        (
            "sacct",
            "",
            rows_of(
                &crate::sacct::SacctArgs::command(),
                super::tables::SACCT,
                &ignored,
            ),
        ),
        (
            "scancel",
            "A filter labpool cannot apply is refused: cancelling without it would cancel more than asked.",
            rows_of(
                &crate::scancel::ScancelArgs::command(),
                super::tables::SCANCEL,
                &ignored,
            ),
        ),
        ("scontrol", "", scontrol_rows()),
        (
            "sattach",
            "Joins a running interactive session again (`srun --pty`, `salloc`, `labpool run --pty`), as `labpool attach` does, with its screen redrawn; Ctrl-] then d detaches. Slurm's sattach joins a step's input and output; a session is one task on one node.",
            rows_of(
                &crate::sattach::SattachArgs::command(),
                &[],
                &["label".to_string(), "verbose".to_string()],
            ),
        ),
        (
            "sinfo",
            "",
            rows_of(
                &crate::sinfo::SinfoArgs::command(),
                super::tables::SINFO,
                &ignored,
            ),
        ),
    ];
    for (_, _, rows) in &mut sections {
        rows.extend(common_rows());
        rows.sort_by_key(|r| r.option.to_lowercase());
    }
    sections
}

/// The whole document.
pub fn markdown() -> String {
    let sections = sections();
    let mut out = String::from(
        "# Slurm compatibility\n\n\
         <!-- Generated from the code (slurm_commands/src/compat); a test keeps it current: LABPOOL_UPDATE_SNAPSHOTS=1 cargo test the_compatibility_table_is_current -->\n\n\
         What labpool's `sbatch`, `srun`, `salloc`, `squeue`, `sacct`, `scancel`, `scontrol`, `sattach` and `sinfo` \
         (`labpool install-slurm-commands DIR`) do with each of Slurm 22.05's options. **honoured**: \
         as Slurm does, or nothing where nothing is needed here (the note says why); **warned**: read, \
         not acted on, with one warning line (`sinfo: warning: --long ignored: …`) giving the reason; \
         **refused**: the command stops with the reason and changes nothing.\n",
    );
    for (name, intro, rows) in &sections {
        out.push_str(&format!("\n## {name}\n\n"));
        if !intro.is_empty() {
            out.push_str(&format!("{intro}\n\n"));
        }
        out.push_str("| option | here | note |\n| --- | --- | --- |\n");
        for r in rows.iter() {
            let note = r.note.replace('|', "\\|").replace('\n', " ");
            out.push_str(&format!("| {} | {} | {note} |\n", r.option, r.how));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// The committed document is the one the code generates (`LABPOOL_UPDATE_SNAPSHOTS=1`
    /// rewrites it).
    #[test]
    fn the_compatibility_table_is_current() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/slurm-compatibility.md");
        let now = super::markdown();
        if std::env::var_os("LABPOOL_UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(&path, &now).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == now,
            "docs/slurm-compatibility.md is stale: run `LABPOOL_UPDATE_SNAPSHOTS=1 cargo test the_compatibility_table_is_current`"
        );
    }
}
