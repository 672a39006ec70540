//! `labpool man-pages DIR`: the man pages, generated from the CLI's own definitions so they
//! never disagree with `--help`: `labpool(1)`, `labpool-COMMAND(1)` for each command, and
//! `labpool-sbatch(1)` and the other Slurm names, saying what labpool does with each of Slurm's
//! options. For packagers (`/usr/share/man/man1`) and for `man -l`.

use crate::args::Cli;
use anyhow::Context;
use clap::CommandFactory;
use std::path::{Path, PathBuf};

/// Writes every page into `dir` (created if missing); the files written.
/// (`slurm` gives the Slurm names' pages.)
pub fn write(dir: &Path, slurm: &dyn crate::SlurmNames) -> anyhow::Result<Vec<PathBuf>> {
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
    for (file, text) in slurm.man_pages(&version) {
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
pub fn run(dir: &Path, slurm: &dyn crate::SlurmNames) -> anyhow::Result<()> {
    let written = write(dir, slurm)?;
    crate::out!(
        "wrote {} man pages in {} (read one with: man -l {})",
        written.len(),
        dir.display(),
        dir.join("labpool-submit.1").display()
    );
    Ok(())
}
