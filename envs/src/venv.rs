//! Python virtual environments: locking a `requirements.txt` or `pyproject.toml` into
//! hash-pinned `name==version --hash=sha256:...` lines, and building a venv from them.
//!
//! With uv on PATH, uv resolves (`uv pip compile --generate-hashes`) and installs; otherwise
//! pip does, from a throwaway venv made with the same Python (`pip install --dry-run --report`).
//! Either way the build installs with `--require-hashes --no-deps`, so it gets exactly the
//! locked files or fails.

use crate::run::{self, note};
use crate::tools::{Tool, Tools};
use crate::{EnvError, EnvKind};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where a build keeps its lock, inside the venv.
pub(crate) const LOCK_FILE: &str = ".labpool/requirements.lock";

/// Locks the spec at `path` (content `text`): the lock text, one requirement a line, sorted.
pub(crate) fn lock(
    path: &Path,
    text: &str,
    tools: &Tools,
    log: &mut dyn Write,
) -> Result<String, EnvError> {
    let python = python(tools)?;
    let tmp = tempfile::tempdir().map_err(EnvError::io(
        "create a temporary directory in",
        std::env::temp_dir(),
    ))?;
    let is_pyproject = path.file_name().is_some_and(|n| n == "pyproject.toml");
    let requirements = if is_pyproject {
        let deps = pyproject_dependencies(path, text)?;
        let file = tmp.path().join("requirements.in");
        std::fs::write(&file, deps.join("\n") + "\n").map_err(EnvError::io("write", &file))?;
        file
    } else {
        std::path::absolute(path).map_err(EnvError::io("resolve", path))?
    };
    let cwd = requirements_dir(path);
    let mut lines = match &tools.uv {
        Some(uv) => uv_compile(uv, python, &requirements, &cwd, tmp.path(), log)?,
        None => pip_report(python, &requirements, &cwd, tmp.path(), log)?,
    };
    lines.sort_by_key(|l| normalise_name(l.split(['=', ' ']).next().unwrap_or(l)));
    let mut out: Vec<String> = if is_pyproject {
        Vec::new()
    } else {
        index_options(text)
    };
    out.extend(lines);
    Ok(out.join("\n") + "\n")
}

/// Builds a venv at `dest` (existing, empty) from `lock`, the lock text.
pub(crate) fn build(
    lock: &str,
    dest: &Path,
    tools: &Tools,
    log: &mut dyn Write,
) -> Result<(), EnvError> {
    let python = python(tools)?;
    match &tools.uv {
        Some(uv) => {
            let mut cmd = Command::new(uv);
            cmd.args(["venv", "--seed", "--python"])
                .arg(python)
                .arg(dest);
            run::step("creating the venv", &mut cmd, log)?;
        }
        None => make_venv(python, dest, log)?,
    }
    let lock_file = dest.join(LOCK_FILE);
    let lock_dir = dest.join(".labpool");
    std::fs::create_dir_all(&lock_dir).map_err(EnvError::io("create directory", &lock_dir))?;
    std::fs::write(&lock_file, lock).map_err(EnvError::io("write", &lock_file))?;
    let venv_python = dest.join("bin/python");
    let mut cmd;
    match &tools.uv {
        Some(uv) => {
            cmd = Command::new(uv);
            cmd.args([
                "pip",
                "install",
                "--require-hashes",
                "--no-deps",
                "--python",
            ]);
            cmd.arg(&venv_python).arg("-r").arg(&lock_file);
        }
        None => {
            cmd = Command::new(&venv_python);
            cmd.args([
                "-m",
                "pip",
                "install",
                "--no-deps",
                "--require-hashes",
                "--no-input",
            ]);
            cmd.args(["--disable-pip-version-check", "-r"])
                .arg(&lock_file);
        }
    }
    run::step("installing the locked requirements", &mut cmd, log)?;
    Ok(())
}

fn python(tools: &Tools) -> Result<&Path, EnvError> {
    tools.require(Tool::PythonVenv, EnvKind::Venv)
}

/// A venv that pip resolves in (`--dry-run` installs nothing into it). It is kept in the
/// user's cache (`$XDG_CACHE_HOME` or `~/.cache`, `labpool/resolver-*`), one per Python, because
/// making one takes seconds; without a usable cache directory it is made under `tmp`.
fn resolver_venv(python: &Path, tmp: &Path, log: &mut dyn Write) -> Result<PathBuf, EnvError> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("labpool"));
    let key = blake3::hash(python.as_os_str().as_encoded_bytes()).to_hex();
    if let Some(cache) = cache
        && std::fs::create_dir_all(&cache).is_ok()
    {
        let venv = cache.join(format!("resolver-{}", &key[..16]));
        let works = |v: &Path| {
            Command::new(v.join("bin/python"))
                .args(["-m", "pip", "--version"])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if works(&venv) {
            return Ok(venv);
        }
        note(log, &format!("making the resolver venv {}", venv.display()));
        let pid = std::process::id();
        let partial = cache.join(format!("resolver-{}.{pid}", &key[..16]));
        let _ = std::fs::remove_dir_all(&partial);
        if make_venv(python, &partial, log).is_ok() {
            // Another lock may have made one meanwhile, and may be using it: a working one is
            // never replaced; a broken one (its Python upgraded) is moved aside first.
            if venv.exists() && !works(&venv) {
                let stale = cache.join(format!("resolver-{}.stale.{pid}", &key[..16]));
                if std::fs::rename(&venv, &stale).is_ok() {
                    let _ = std::fs::remove_dir_all(&stale);
                }
            }
            if std::fs::rename(&partial, &venv).is_ok() || works(&venv) {
                let _ = std::fs::remove_dir_all(&partial);
                return Ok(venv);
            }
        }
        let _ = std::fs::remove_dir_all(&partial);
    }
    let venv = tmp.join("venv");
    note(
        log,
        "making a throwaway venv to resolve the requirements in",
    );
    make_venv(python, &venv, log)?;
    Ok(venv)
}

/// `python -m venv dest`; a Python without venv/ensurepip (Debian without python3-venv) is a
/// missing tool, not a failed step.
fn make_venv(python: &Path, dest: &Path, log: &mut dyn Write) -> Result<(), EnvError> {
    let mut cmd = Command::new(python);
    cmd.args(["-m", "venv"]).arg(dest);
    let (status, output) = run::stream(&mut cmd, log)?;
    if status.success() {
        Ok(())
    } else if output.contains("ensurepip") || output.contains("No module named venv") {
        Err(EnvError::MissingTool {
            tool: Tool::PythonVenv,
            kind: EnvKind::Venv,
        })
    } else {
        Err(run::failed("creating a venv", &cmd, status, &output))
    }
}

/// The directory relative requirements (`-e ./pkg`, `-r base.txt`) are resolved from.
fn requirements_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Resolves with uv into `name==version --hash=... --hash=...` lines.
fn uv_compile(
    uv: &Path,
    python: &Path,
    requirements: &Path,
    cwd: &Path,
    tmp: &Path,
    log: &mut dyn Write,
) -> Result<Vec<String>, EnvError> {
    let out = tmp.join("requirements.lock");
    let mut cmd = Command::new(uv);
    cmd.args([
        "pip",
        "compile",
        "--quiet",
        "--generate-hashes",
        "--no-header",
        "--no-annotate",
    ]);
    cmd.arg("--python")
        .arg(python)
        .arg(requirements)
        .arg("-o")
        .arg(&out);
    cmd.current_dir(cwd);
    run::step(
        &format!("resolving {}", requirements.display()),
        &mut cmd,
        log,
    )?;
    let text = std::fs::read_to_string(&out).map_err(EnvError::io("read", &out))?;
    Ok(text
        .replace("\\\n", " ")
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('-'))
        .collect())
}

/// Resolves with pip in a throwaway venv into `name==version --hash=sha256:...` lines.
fn pip_report(
    python: &Path,
    requirements: &Path,
    cwd: &Path,
    tmp: &Path,
    log: &mut dyn Write,
) -> Result<Vec<String>, EnvError> {
    let venv = resolver_venv(python, tmp, log)?;
    let report = tmp.join("report.json");
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.args([
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--quiet",
    ]);
    cmd.args(["--disable-pip-version-check", "--no-input", "--report"])
        .arg(&report);
    cmd.arg("-r").arg(requirements).current_dir(cwd);
    run::step(
        &format!("resolving {}", requirements.display()),
        &mut cmd,
        log,
    )?;
    let text =
        std::fs::read_to_string(&report).map_err(EnvError::io("read pip's report", &report))?;
    let report: Value = serde_json::from_str(&text).map_err(|e| EnvError::BadSpec {
        path: requirements.to_path_buf(),
        why: format!("pip's --report output is not JSON ({e}); upgrade pip to 23.0 or later"),
    })?;
    let installs = report["install"].as_array().cloned().unwrap_or_default();
    installs.iter().map(pinned_line).collect()
}

/// `name==version --hash=sha256:HEX` for one `install[]` item of pip's report.
fn pinned_line(item: &Value) -> Result<String, EnvError> {
    let name = item["metadata"]["name"].as_str().unwrap_or("?");
    let version = item["metadata"]["version"].as_str().unwrap_or("?");
    let info = &item["download_info"];
    let archive = &info["archive_info"];
    let hash = archive["hashes"]["sha256"].as_str().or_else(|| {
        archive["hash"]
            .as_str()
            .and_then(|h| h.strip_prefix("sha256="))
    });
    match hash {
        // A direct URL (`pkg @ https://...`) stays one, or the build would look in the index.
        Some(hash) if item["is_direct"].as_bool() == Some(true) => {
            let url = info["url"].as_str().unwrap_or_default();
            Ok(format!(
                "{} @ {url} --hash=sha256:{hash}",
                normalise_name(name)
            ))
        }
        Some(hash) => Ok(format!(
            "{}=={version} --hash=sha256:{hash}",
            normalise_name(name)
        )),
        None => {
            let url = info["url"].as_str().unwrap_or("an unknown place");
            let why = if !info["dir_info"].is_null() {
                format!("it is a local directory ({url})")
            } else if !info["vcs_info"].is_null() {
                format!("it comes from version control ({url})")
            } else {
                format!("its archive {url} has no sha256")
            };
            Err(EnvError::Unhashed {
                name: name.to_string(),
                version: version.to_string(),
                why,
            })
        }
    }
}

/// A package name as PEP 503 compares it: lower case, runs of `-_.` as one `-`.
fn normalise_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The index options of a requirements file (`--index-url`, `--extra-index-url`,
/// `--find-links` and their short forms), kept so the build installs from the same places.
fn index_options(text: &str) -> Vec<String> {
    const OPTIONS: [&str; 5] = [
        "--index-url",
        "--extra-index-url",
        "--find-links",
        "-i ",
        "-f ",
    ];
    text.lines()
        .map(|l| l.split(" #").next().unwrap_or("").trim())
        .filter(|l| OPTIONS.iter().any(|o| l.starts_with(o)))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// The `[project] dependencies` of a pyproject.toml.
fn pyproject_dependencies(path: &Path, text: &str) -> Result<Vec<String>, EnvError> {
    let doc: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| EnvError::BadSpec {
            path: path.to_path_buf(),
            why: format!("not valid TOML: {}; fix it and lock again", e.message()),
        })?;
    let deps = doc
        .get("project")
        .and_then(|p| p.get("dependencies"))
        .and_then(|d| d.as_array())
        .ok_or_else(|| EnvError::BadSpec {
            path: path.to_path_buf(),
            why: "has no `[project] dependencies = [...]` list (Poetry's and other tools' tables \
                  are not read); add one, or export a requirements.txt and lock that"
                .to_string(),
        })?;
    deps.iter()
        .map(|d| {
            d.as_str()
                .map(str::to_string)
                .ok_or_else(|| EnvError::BadSpec {
                    path: path.to_path_buf(),
                    why: format!("`[project] dependencies` holds {d}, which is not a string"),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalise_as_pep_503_says() {
        assert_eq!(normalise_name("Foo.Bar__baz"), "foo-bar-baz");
    }

    #[test]
    fn index_options_are_kept() {
        let text = "--index-url https://x/simple  # ours\nsix\n-f  /wheels\n";
        assert_eq!(
            index_options(text),
            ["--index-url https://x/simple", "-f /wheels"]
        );
    }

    #[test]
    fn pyproject_dependencies_are_read() {
        let text = "[project]\nname = \"x\"\ndependencies = [\"six==1.16.0\", \"attrs\"]\n";
        let deps = pyproject_dependencies(Path::new("pyproject.toml"), text).unwrap();
        assert_eq!(deps, ["six==1.16.0", "attrs"]);
        let err =
            pyproject_dependencies(Path::new("pyproject.toml"), "[tool.poetry]\n").unwrap_err();
        assert!(err.to_string().contains("[project] dependencies"), "{err}");
    }

    #[test]
    fn a_report_item_without_a_hash_is_refused() {
        let item = serde_json::json!({
            "metadata": {"name": "mine", "version": "0.1"},
            "download_info": {"url": "file:///src/mine", "dir_info": {}}
        });
        let err = pinned_line(&item).unwrap_err().to_string();
        assert!(
            err.contains("mine 0.1") && err.contains("local directory"),
            "{err}"
        );
        let item = serde_json::json!({
            "metadata": {"name": "Six", "version": "1.16.0"},
            "download_info": {"url": "https://x", "archive_info": {"hash": "sha256=ab"}}
        });
        assert_eq!(pinned_line(&item).unwrap(), "six==1.16.0 --hash=sha256:ab");
    }
}
