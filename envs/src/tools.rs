//! The programs builds and launches need, found once, with what to install when one is missing.

use std::path::{Path, PathBuf};

/// Where the tools are; `None` where a tool is not installed.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Tools {
    /// The Python that venvs are built with (default: /usr/bin/python3, else python3 on PATH).
    pub python: Option<PathBuf>,
    /// uv, preferred for locking and installing when present.
    pub uv: Option<PathBuf>,
    /// micromamba, else conda.
    pub conda: Option<PathBuf>,
    /// apptainer, else singularity.
    pub apptainer: Option<PathBuf>,
    /// Charliecloud's ch-run.
    pub ch_run: Option<PathBuf>,
    /// Lmod's bash init script (e.g. /usr/share/lmod/lmod/init/bash).
    pub lmod_init: Option<PathBuf>,
}

/// Where Lmod's init script usually is, in the order tried (then `$LMOD_PKG/init/bash`).
const LMOD_INITS: [&str; 3] = [
    "/usr/share/lmod/lmod/init/bash",
    "/usr/share/lmod/lmod/init/sh",
    "/opt/lmod/lmod/init/bash",
];

impl Tools {
    /// Where `tool` is, or the error that says it is missing for `kind` and how to install it.
    pub fn require(&self, tool: Tool, kind: crate::EnvKind) -> Result<&Path, crate::EnvError> {
        let found = match tool {
            Tool::PythonVenv => &self.python,
            Tool::Conda => &self.conda,
            Tool::ChRun => &self.ch_run,
            Tool::Apptainer => &self.apptainer,
            Tool::Lmod => &self.lmod_init,
        };
        found
            .as_deref()
            .ok_or(crate::EnvError::MissingTool { tool, kind })
    }

    /// Looks for each tool on `PATH` and in the usual places; `python` overrides the Python.
    pub fn detect(python: Option<PathBuf>) -> Tools {
        let system_python = Path::new("/usr/bin/python3");
        let python = python.or_else(|| {
            if system_python.is_file() {
                Some(system_python.to_path_buf())
            } else {
                which("python3")
            }
        });
        let lmod_pkg = std::env::var_os("LMOD_PKG").map(|p| PathBuf::from(p).join("init/bash"));
        let lmod_init = LMOD_INITS
            .iter()
            .map(PathBuf::from)
            .chain(lmod_pkg)
            .find(|p| p.is_file());
        Tools {
            python,
            uv: which("uv"),
            conda: which("micromamba").or_else(|| which("conda")),
            apptainer: which("apptainer").or_else(|| which("singularity")),
            ch_run: which("ch-run"),
            lmod_init,
        }
    }
}

/// The first executable file called `name` in the directories of `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A tool an environment needs, for the missing-tool error and its install instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// A Python 3 that can make virtual environments.
    PythonVenv,
    /// micromamba or conda.
    Conda,
    /// Charliecloud's ch-run, for SquashFS images.
    ChRun,
    /// apptainer or singularity, for SIF images.
    Apptainer,
    /// Lmod's shell init script.
    Lmod,
}

impl Tool {
    /// What the tool is called in messages.
    pub fn name(self) -> &'static str {
        match self {
            Tool::PythonVenv => "python3 with the venv module",
            Tool::Conda => "micromamba or conda",
            Tool::ChRun => "ch-run (Charliecloud)",
            Tool::Apptainer => "apptainer or singularity",
            Tool::Lmod => "Lmod",
        }
    }

    /// Exactly how to get it, and how to tell labpool where it is.
    pub fn install(self) -> &'static str {
        match self {
            Tool::PythonVenv => {
                "install it with `apt install python3-venv` (Debian/Ubuntu) or `dnf install python3`, \
                 or set `[envs] python = PATH` to a Python 3 that has venv and pip"
            }
            Tool::Conda => {
                "install micromamba (https://mamba.readthedocs.io, `curl -Ls \
                 https://micro.mamba.pm/api/micromamba/linux-64/latest | tar -xvj bin/micromamba`) \
                 or Miniforge, then put it on PATH on the controller and every node \
                 (e.g. /usr/local/bin/micromamba)"
            }
            Tool::ChRun => {
                "install it with `apt install charliecloud-runtime` (or from \
                 https://hpc.github.io/charliecloud), then put ch-run on PATH"
            }
            Tool::Apptainer => {
                "install Apptainer from the packages at \
                 https://apptainer.org/docs/admin/main/installation.html, then put apptainer on PATH"
            }
            Tool::Lmod => {
                "install it with `apt install lmod` (or from https://lmod.readthedocs.io); labpool \
                 looks for its init script at /usr/share/lmod/lmod/init/bash, \
                 /usr/share/lmod/lmod/init/sh, /opt/lmod/lmod/init/bash and $LMOD_PKG/init/bash"
            }
        }
    }
}
