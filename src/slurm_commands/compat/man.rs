//! The man pages of Slurm's command names as labpool answers them (`labpool-sbatch(1)`, …):
//! for each of the eight commands, what labpool does with each of Slurm 22.05's options, from
//! the same rows as `docs/slurm-compatibility.md`. Named `labpool-<command>` so they never
//! shadow a real Slurm's own pages.

use clap_mangen::roff::{Roff, bold, roman};

/// `(file name, roff text)` for each command.
pub fn pages(version: &str) -> Vec<(String, String)> {
    super::doc::sections()
        .into_iter()
        .map(|(name, intro, rows)| {
            let title = format!("labpool-{name}");
            let mut page = Roff::new();
            page.control(
                "TH",
                [title.to_uppercase().as_str(), "1", "", &format!("labpool {version}")],
            );
            page.control("SH", ["NAME"]);
            page.text([roman(format!(
                "{title} - Slurm's {name}, as labpool answers it"
            ))]);
            page.control("SH", ["DESCRIPTION"]);
            page.text([roman(format!(
                "labpool install-slurm-commands DIR puts {name} in DIR; it takes every option of Slurm {}'s {name}. Honoured: as Slurm does, or nothing where nothing is needed here. Warned: read, not acted on, with one warning line giving the reason. Refused: the command stops with the reason and changes nothing. {}",
                super::SLURM_VERSION,
                intro.replace('`', "")
            ))]);
            page.control("SH", ["OPTIONS"]);
            for r in rows {
                page.control("TP", [] as [&str; 0]);
                page.text([bold(r.option.replace('`', ""))]);
                page.text([roman(format!("{}: {}", r.how, r.note.replace('`', "")))]);
            }
            page.control("SH", ["SEE ALSO"]);
            page.text([roman(format!(
                "{name}(1) for Slurm's own page; labpool(1); docs/slurm-compatibility.md"
            ))]);
            (format!("{title}.1"), page.render())
        })
        .collect()
}
