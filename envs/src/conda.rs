//! Conda environments from an `environment.yml`, built with micromamba or conda.
//!
//! The lock is the spec normalised (comments, blank lines and `name:`/`prefix:` dropped), not a
//! solved package list: two builds of one lock can differ if the channels changed between them.
//! Pin versions in the spec (`numpy=1.26.4`) for repeatable builds.

use crate::run;
use crate::tools::{Tool, Tools};
use crate::{EnvError, EnvKind};
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// Locks the spec at `path` (content `text`). Fails when no conda tool is installed, since
/// nothing could build it.
pub(crate) fn lock(path: &Path, text: &str, tools: &Tools) -> Result<String, EnvError> {
    conda(tools)?;
    let lines: Vec<&str> = text
        .lines()
        .map(strip_comment)
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !l.starts_with("name:") && !l.starts_with("prefix:"))
        .collect();
    if !lines.iter().any(|l| l.starts_with("dependencies:")) {
        return Err(EnvError::BadSpec {
            path: path.to_path_buf(),
            why: "has no top-level `dependencies:` list, so it is not a conda environment file; \
                  add one (see `conda env export --from-history`)"
                .to_string(),
        });
    }
    Ok(lines.join("\n") + "\n")
}

/// Builds `lock` (the normalised spec) into `dest`, an existing empty directory.
pub(crate) fn build(
    lock: &str,
    dest: &Path,
    tools: &Tools,
    log: &mut dyn Write,
) -> Result<(), EnvError> {
    let conda = conda(tools)?;
    let tmp = tempfile::tempdir().map_err(EnvError::io(
        "create a temporary directory in",
        std::env::temp_dir(),
    ))?;
    // conda tells a spec's format by its file name, so it must end in .yml.
    let spec = tmp.path().join("environment.yml");
    std::fs::write(&spec, lock).map_err(EnvError::io("write", &spec))?;
    let mut cmd = Command::new(conda);
    let is_micromamba = conda
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("mamba"));
    if is_micromamba {
        cmd.args(["create", "-y", "-p"]);
    } else {
        cmd.args(["env", "create", "-p"]);
    }
    cmd.arg(dest).arg("-f").arg(&spec);
    run::step("creating the conda environment", &mut cmd, log)?;
    Ok(())
}

fn conda(tools: &Tools) -> Result<&Path, EnvError> {
    tools.require(Tool::Conda, EnvKind::Conda)
}

/// The line without a YAML comment: from a `#` at the start or after a space, when the line
/// has no quotes (where `#` could be inside a string).
fn strip_comment(line: &str) -> &str {
    if line.trim_start().starts_with('#') {
        return "";
    }
    if line.contains(['"', '\'']) {
        return line;
    }
    line.find(" #").map_or(line, |i| &line[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_is_normalised() {
        let tools = Tools {
            conda: Some("/usr/bin/micromamba".into()),
            ..Tools::default()
        };
        let text = "# mine\nname: exp\nchannels:\n  - conda-forge   \n\ndependencies:\n  - numpy=1.26 # pinned\n  - python=3.11\n";
        let lock = lock(Path::new("environment.yml"), text, &tools).unwrap();
        assert_eq!(
            lock,
            "channels:\n  - conda-forge\ndependencies:\n  - numpy=1.26\n  - python=3.11\n"
        );
        let err = super::lock(Path::new("e.yml"), "name: x\n", &tools).unwrap_err();
        assert!(err.to_string().contains("dependencies:"), "{err}");
    }
}
