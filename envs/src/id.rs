//! An environment's id: the hash of its kind, its lock and the platform.

use crate::tools::{Tool, Tools};
use crate::{EnvError, EnvKind};

/// The platform a build is for: OS, machine, libc and (for venvs) the Python version, e.g.
/// `linux-x86_64-glibc2.36-py3.11`. Two nodes with the same platform can share builds.
pub fn platform(kind: EnvKind, tools: &Tools) -> Result<String, EnvError> {
    let mut platform = format!(
        "{}-{}-{}",
        std::env::consts::OS,
        std::env::consts::ARCH,
        libc_version()
    );
    if kind == EnvKind::Venv {
        platform.push_str("-py");
        platform.push_str(&python_version(tools)?);
    }
    Ok(platform)
}

/// The id: 24 hex digits of BLAKE3 over kind, lock and platform.
pub fn env_id(kind: EnvKind, lock: &str, platform: &str) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(kind.as_str().as_bytes());
    hasher.update(&[0]);
    hasher.update(lock.as_bytes());
    hasher.update(&[0]);
    hasher.update(platform.as_bytes());
    hasher.finalize().to_hex()[..24].to_string()
}

/// `glibc2.36` from the C library this process runs with.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn libc_version() -> String {
    // SAFETY: gnu_get_libc_version takes no arguments and returns a pointer to a static,
    // NUL-terminated string that lives as long as the process.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    format!("glibc{}", version.to_string_lossy())
}

/// The C library's name where it is not glibc (its version is not queryable).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn libc_version() -> String {
    std::env::consts::FAMILY.to_string()
        + "-"
        + if cfg!(target_env = "musl") {
            "musl"
        } else {
            "libc"
        }
}

/// `3.11`: the major.minor version of the Python that venvs are built with.
fn python_version(tools: &Tools) -> Result<String, EnvError> {
    let python = tools.python.as_deref().ok_or(EnvError::MissingTool {
        tool: Tool::PythonVenv,
        kind: EnvKind::Venv,
    })?;
    let script = "import sys;print('%d.%d' % sys.version_info[:2])";
    let mut cmd = std::process::Command::new(python);
    cmd.args(["-c", script]);
    let out = crate::run::capture("asking Python its version", &mut cmd)?;
    Ok(out.trim().to_string())
}
