//! `labpool man-pages DIR`: the man pages, generated from the CLI's own definitions so they
//! never disagree with `--help`: `labpool(1)`, `labpool-COMMAND(1)` for each command, and
//! `labpool-sbatch(1)` and the other Slurm names, saying what labpool does with each of Slurm's
//! options. For packagers (`/usr/share/man/man1`) and for `man -l`.

use crate::cli::Cli;
use anyhow::Context;
use clap::CommandFactory;
use std::path::{Path, PathBuf};

/// Writes every page into `dir` (created if missing); the files written.
pub fn write(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cli = Cli::command();
    let version = cli.get_version().unwrap_or("").to_string();
    let mut pages: Vec<(String, Vec<u8>)> = Vec::new();
    let mut top = Vec::new();
    clap_mangen::Man::new(cli.clone()).render(&mut top)?;
    pages.push(("labpool.1".into(), top));
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("labpool-{}", sub.get_name());
        let mut text = Vec::new();
        clap_mangen::Man::new(sub.clone().name(&name).version(version.clone()))
            .render(&mut text)?;
        pages.push((format!("{name}.1"), text));
    }
    for (file, text) in crate::slurm_commands::compat::man::pages(&version) {
        pages.push((file, text.into_bytes()));
    }
    let mut written = Vec::new();
    for (file, text) in pages {
        let path = dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The command: writes the pages and says how many and where.
pub fn run(dir: &Path) -> anyhow::Result<()> {
    let written = write(dir)?;
    crate::out!(
        "wrote {} man pages in {} (read one with: man -l {})",
        written.len(),
        dir.display(),
        dir.join("labpool-submit.1").display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
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
        let written = super::write(dir.path()).unwrap();
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
