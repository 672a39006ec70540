//! Lmod environments: a list of `module use DIR`, `module load NAME/VERSION` and `module purge`
//! lines, tried at lock time and run before the job's command.
//!
//! Nothing is installed: the build writes the lines to `modules.sh`, and the launch wrapper
//! sources Lmod's init and that file, then `exec`s the job, stopping at the first line that
//! fails.

use crate::run::{self, quote};
use crate::tools::{Tool, Tools};
use crate::{EnvError, EnvKind};
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// The file the build writes, sourced by the wrapper.
pub(crate) const SCRIPT: &str = "modules.sh";

/// What a failing line prints to stderr in the check, so the error can name it.
const MARKER: &str = "labpool-failed-line:";

/// Locks the spec at `path` (content `text`): its lines, normalised, once each `module` line has
/// been run with Lmod and succeeded.
pub(crate) fn lock(
    path: &Path,
    text: &str,
    tools: &Tools,
    log: &mut dyn Write,
) -> Result<String, EnvError> {
    let lines = parse(path, text)?;
    let init = lmod_init(tools)?;
    let mut script = format!(
        ". {} || {{ echo '{MARKER} 0' >&2; exit 1; }}\n",
        quote(&init.to_string_lossy())
    );
    for (i, line) in lines.iter().enumerate() {
        script.push_str(&format!(
            "{line} || {{ echo '{MARKER} {}' >&2; exit 1; }}\n",
            i + 1
        ));
    }
    let mut cmd = Command::new("/bin/bash");
    cmd.arg("-c").arg(&script);
    let (status, output) = run::stream(&mut cmd, log)?;
    if status.success() {
        return Ok(lines.join("\n") + "\n");
    }
    let failed_at = output
        .lines()
        .filter_map(|l| l.trim().strip_prefix(MARKER))
        .filter_map(|n| n.trim().parse::<usize>().ok())
        .next_back();
    let message: Vec<&str> = output
        .lines()
        .filter(|l| !l.contains(MARKER) && !l.trim().is_empty())
        .map(|l| l.trim_end())
        .collect();
    match failed_at {
        Some(n) if n >= 1 => Err(EnvError::ModuleFailed {
            line: lines[n - 1].clone(),
            message: message
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
        }),
        _ => Err(run::failed(
            "trying the module lines with Lmod",
            &cmd,
            status,
            &output,
        )),
    }
}

/// Writes `modules.sh` into `dest`: each locked line, returning from the file at the first
/// that fails.
pub(crate) fn build(lock: &str, dest: &Path) -> Result<(), EnvError> {
    let mut script = String::from("# Sourced by labpool after Lmod's init, before the job runs.\n");
    for line in lock.lines().filter(|l| !l.trim().is_empty()) {
        script.push_str(line);
        script.push_str(" || return 1\n");
    }
    let path = dest.join(SCRIPT);
    std::fs::write(&path, script).map_err(EnvError::io("write", &path))
}

/// Lmod's init script, or the missing-tool error.
pub(crate) fn lmod_init(tools: &Tools) -> Result<&Path, EnvError> {
    tools.require(Tool::Lmod, EnvKind::Modules)
}

/// The spec's lines, normalised (single spaces; blank lines and comments dropped). Only
/// `module load|add NAME...`, `module use [-a] DIR` and `module purge` are accepted, with
/// arguments of plain characters (no quotes, `;`, `|`, `&`, redirections or substitutions).
pub(crate) fn parse(path: &Path, text: &str) -> Result<Vec<String>, EnvError> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let bad = |why: &str| EnvError::BadSpecLine {
            path: path.to_path_buf(),
            line: i + 1,
            text: line.to_string(),
            why: why.to_string(),
        };
        let args = &words[words.len().min(2)..];
        let ok = match (words[0], words.get(1).copied()) {
            ("module", Some("load" | "add")) => !args.is_empty(),
            ("module", Some("use")) => args.iter().filter(|a| !a.starts_with('-')).count() == 1,
            ("module", Some("purge")) => args.is_empty(),
            _ => false,
        };
        if !ok {
            return Err(bad(
                "a modules spec takes only `module load NAME/VERSION...`, `module use DIR` and \
                 `module purge` lines",
            ));
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || "-_./+:@%,=~${}".contains(c);
        if let Some(arg) = args.iter().find(|a| !a.chars().all(plain)) {
            return Err(bad(&format!(
                "`{arg}` has characters a module name or directory does not need (quotes, `;`, \
                 `|`, `&`, `<`, `>`, `(`, `)` or backslashes)"
            )));
        }
        lines.push(words.join(" "));
    }
    if lines.is_empty() {
        return Err(EnvError::BadSpec {
            path: path.to_path_buf(),
            why: "has no `module` lines; add `module load NAME/VERSION` lines".to_string(),
        });
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_normalised_and_others_refused() {
        let p = Path::new("env.modules");
        let text =
            "# tools\nmodule   use /opt/mods\n\nmodule load  cuda/12.4 cudnn/9\nmodule purge\n";
        let lines = parse(p, text).unwrap();
        assert_eq!(
            lines,
            [
                "module use /opt/mods",
                "module load cuda/12.4 cudnn/9",
                "module purge"
            ]
        );
        let err = parse(p, "module load a\nexport X=1\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2") && err.contains("export X=1"),
            "{err}"
        );
        let err = parse(p, "module load a;rm -rf x\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1"), "{err}");
        assert!(parse(p, "# nothing\n").is_err());
    }
}
