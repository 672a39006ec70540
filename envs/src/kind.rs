//! The kinds of environment, and telling the kind from a spec file.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// What an environment is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvKind {
    /// A Python virtual environment from `requirements.txt` or `pyproject.toml`.
    Venv,
    /// A conda environment from `environment.yml` (conda or micromamba).
    Conda,
    /// An Apptainer/Singularity `.sif` or a Charliecloud SquashFS image.
    Container,
    /// Lmod `module load` lines.
    Modules,
}

impl EnvKind {
    /// The word used in specs, the CLI and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            EnvKind::Venv => "venv",
            EnvKind::Conda => "conda",
            EnvKind::Container => "container",
            EnvKind::Modules => "modules",
        }
    }

    /// The kind a spec file implies, from its name and, where the name does not say, its
    /// first bytes (SquashFS and SIF magic numbers, `module load` lines).
    ///
    /// Magic numbers win over names, so an image called `x.img` is still a container.
    pub fn detect(path: &Path, head: &[u8]) -> Result<EnvKind, crate::EnvError> {
        if image_format(head).is_some() {
            return Ok(EnvKind::Container);
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
        let text = String::from_utf8_lossy(head);
        if name == "modules.txt" || ext == "modules" {
            Ok(EnvKind::Modules)
        } else if (name.starts_with("requirements") && ext == "txt")
            || ext == "in"
            || name == "pyproject.toml"
        {
            Ok(EnvKind::Venv)
        } else if name == "environment.yml"
            || name == "environment.yaml"
            || ((ext == "yml" || ext == "yaml")
                && text.lines().any(|l| l.starts_with("dependencies:")))
        {
            Ok(EnvKind::Conda)
        } else if matches!(ext, "sif" | "sqfs" | "squashfs" | "squash") {
            Ok(EnvKind::Container)
        } else if is_module_lines(&text) {
            Ok(EnvKind::Modules)
        } else {
            Err(crate::EnvError::UnknownSpec {
                path: path.to_path_buf(),
            })
        }
    }
}

impl std::str::FromStr for EnvKind {
    type Err = crate::EnvError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            EnvKind::Venv,
            EnvKind::Conda,
            EnvKind::Container,
            EnvKind::Modules,
        ]
        .into_iter()
        .find(|k| k.as_str() == s.trim().to_lowercase())
        .ok_or_else(|| crate::EnvError::UnknownKind {
            word: s.to_string(),
        })
    }
}

impl std::fmt::Display for EnvKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The two container image formats labpool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// Apptainer/Singularity Image Format, run with apptainer.
    Sif,
    /// A SquashFS filesystem, run with Charliecloud's ch-run.
    Squashfs,
}

impl ImageFormat {
    /// The file name the build gives the image inside the environment directory.
    pub fn file_name(self) -> &'static str {
        match self {
            ImageFormat::Sif => "image.sif",
            ImageFormat::Squashfs => "image.sqfs",
        }
    }
}

/// The image format `head` (a file's first bytes, at least 41 for SIF) shows, if any. A SIF
/// starts with a 32-byte `#!` launch line, then `SIF_MAGIC`; SquashFS starts with `hsqs`.
pub fn image_format(head: &[u8]) -> Option<ImageFormat> {
    if head.starts_with(b"hsqs") {
        Some(ImageFormat::Squashfs)
    } else if head.get(32..41) == Some(b"SIF_MAGIC") || head.starts_with(b"SIF_MAGIC") {
        Some(ImageFormat::Sif)
    } else {
        None
    }
}

/// True when every line that is not blank or a comment starts with `module `, and there is one.
/// `text` may be cut short, so a last line without a newline need only begin like one.
fn is_module_lines(text: &str) -> bool {
    let cut_short = !text.ends_with('\n');
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let last = lines.len().saturating_sub(1);
    let mut seen = false;
    for (i, line) in lines.iter().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let partial = cut_short && i == last && i > 0 && "module ".starts_with(line);
        if !line.starts_with("module ") && !partial {
            return false;
        }
        seen = true;
    }
    seen
}
