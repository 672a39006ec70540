//! Real Python venvs: lock against PyPI, build, run, pack and unpack at the same path.

mod common;

use common::{job_env, run, script, show, skip};
use labpool_envs::activate::{WrapRequest, wrap};
use labpool_envs::tools::Tools;
use labpool_envs::{EnvKind, build::build, lock::lock, pack};
use std::path::Path;

/// Tools for venv tests, or None (after a loud skip) when this machine cannot make venvs or
/// reach PyPI.
fn venv_tools() -> Option<Tools> {
    let tools = Tools::detect(None);
    let Some(python) = &tools.python else {
        skip("no python3 here (install python3 and python3-venv)");
        return None;
    };
    let ok = std::process::Command::new(python)
        .args(["-c", "import venv, ensurepip"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip(&format!(
            "{} cannot make venvs (apt install python3-venv)",
            python.display()
        ));
        return None;
    }
    if !common::pypi_reachable() {
        skip("pypi.org is not reachable");
        return None;
    }
    Some(tools)
}

fn python_says(python: &Path, code: &str) -> String {
    let out = std::process::Command::new(python)
        .args(["-c", code])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_requirements_file_locks_builds_packs_and_unpacks() {
    let Some(tools) = venv_tools() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("requirements.txt");
    std::fs::write(&spec, "# the one we need\nsix==1.16.0\n").unwrap();

    let mut log = Vec::new();
    let locked = lock(&spec, None, &tools, &mut log).unwrap();
    assert_eq!(locked.kind, EnvKind::Venv);
    assert!(
        locked.lock.starts_with("six==1.16.0 --hash=sha256:"),
        "{}",
        locked.lock
    );
    assert!(locked.lock.ends_with('\n'));
    assert!(locked.platform.contains("-py3."), "{}", locked.platform);
    assert_eq!(locked.id.len(), 24);
    assert_eq!(locked.spec, "# the one we need\nsix==1.16.0\n");

    let again = lock(&spec, Some(EnvKind::Venv), &tools, &mut Vec::new()).unwrap();
    assert_eq!(
        again.id, locked.id,
        "the same spec must lock to the same id"
    );
    let other = tmp.path().join("requirements-old.txt");
    std::fs::write(&other, "six==1.15.0\n").unwrap();
    let older = lock(&other, None, &tools, &mut Vec::new()).unwrap();
    assert_ne!(
        older.id, locked.id,
        "a different spec must lock to a different id"
    );

    let dest = tmp.path().join("envs").join(&locked.id);
    std::fs::create_dir_all(&dest).unwrap();
    let mut log = Vec::new();
    build(&locked, &dest, &tools, &mut log).unwrap();
    assert!(pack::is_complete(&dest));
    assert!(
        String::from_utf8_lossy(&log).contains("six"),
        "the build log has pip's output"
    );
    let python = dest.join("bin/python");
    assert_eq!(
        python_says(&python, "import six; print(six.__version__)"),
        "1.16.0"
    );

    // Activation: a script that finds python3 on PATH gets the venv's.
    let job = tmp.path().join("job.py");
    let text = "#!/usr/bin/env python3\nimport os, six, sys\nprint(six.__version__, sys.prefix == os.environ['VIRTUAL_ENV'], sys.argv[1:])\n";
    script(&job, text);
    let cmd = wrap(&WrapRequest {
        kind: EnvKind::Venv,
        dir: &dest,
        tools: &tools,
        script: &job,
        text,
        args: &["a b".to_string()],
        workdir: tmp.path(),
        env: job_env(tmp.path()),
    })
    .unwrap();
    assert_eq!(cmd.env["LABPOOL_ENV_KIND"], "venv");
    let out = run(&cmd, tmp.path());
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1.16.0 True ['a b']"
    );

    let archive = tmp.path().join("env.tar.zst");
    let size = pack::pack(&dest, &archive).unwrap();
    assert_eq!(size, std::fs::metadata(&archive).unwrap().len());
    std::fs::remove_dir_all(&dest).unwrap();
    assert!(
        pack::unpack(&archive, &dest).unwrap(),
        "the first unpack unpacks"
    );
    assert!(
        std::fs::symlink_metadata(&python)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        python_says(&python, "import six; print(six.__version__)"),
        "1.16.0"
    );
    assert!(
        !pack::unpack(&archive, &dest).unwrap(),
        "a complete build is left alone"
    );
    assert!(
        !dest
            .with_file_name(format!("{}.partial", locked.id))
            .exists()
    );
}

#[test]
fn a_package_that_does_not_exist_fails_the_lock_with_its_name() {
    let Some(tools) = venv_tools() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("requirements.txt");
    std::fs::write(&spec, "labpool-no-such-package-xyz==1.0\n").unwrap();
    let mut log = Vec::new();
    let err = lock(&spec, None, &tools, &mut log).unwrap_err().to_string();
    assert!(err.contains("labpool-no-such-package-xyz"), "{err}");
    assert!(err.contains("see the build log"), "{err}");
    let log = String::from_utf8_lossy(&log);
    assert!(
        log.contains("No matching distribution") || log.contains("labpool-no-such-package-xyz"),
        "{log}"
    );
}

#[test]
fn a_pyproject_locks_its_project_dependencies() {
    let Some(tools) = venv_tools() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("pyproject.toml");
    std::fs::write(
        &spec,
        "[project]\nname = \"exp\"\nversion = \"0\"\ndependencies = [\"six==1.16.0\"]\n",
    )
    .unwrap();
    let locked = lock(&spec, None, &tools, &mut Vec::new()).unwrap();
    assert!(
        locked.lock.starts_with("six==1.16.0 --hash=sha256:"),
        "{}",
        locked.lock
    );
}
