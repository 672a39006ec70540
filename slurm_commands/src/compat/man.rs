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

#[cfg(test)]
mod tests {
    // The CLI's pages and the Slurm names' together, as `labpool man-pages` writes them.
    /// The pages render with groff, name the options `--help` names, and the Slurm names'
    /// pages say what is refused.
    #[test]
    fn the_man_pages_render_and_follow_the_cli() {
        if std::process::Command::new("groff")
            .arg("-v")
            .output()
            .is_err()
        {
            labpool_testkit::skip("groff is not installed (apt install groff-base)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let written = labpool_cli::commands::man_pages::write(dir.path(), &crate::Names).unwrap();
        assert!(written.len() > 30, "{written:?}");
        let render = |file: &str| -> String {
            let out = std::process::Command::new("groff")
                .args(["-man", "-Tascii", "-P", "-cbou"])
                .arg(dir.path().join(file))
                .output()
                .unwrap();
            assert!(out.status.success(), "{file}: {out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let submit = render("labpool-submit.1");
        assert!(
            submit.contains("--dataset") && submit.contains("--gres"),
            "{submit}"
        );
        let top = render("labpool.1");
        assert!(
            top.contains("labpool-submit(1)") || top.contains("submit"),
            "{top}"
        );
        let scancel = render("labpool-scancel.1");
        assert!(scancel.contains("refused:"), "{scancel}");
        assert!(
            scancel.contains("Slurm's scancel, as labpool answers it"),
            "{scancel}"
        );
        for hidden in ["labpool-shim.1", "labpool-session-host.1"] {
            assert!(
                !dir.path().join(hidden).exists(),
                "{hidden} is not for people"
            );
        }
    }
}
