//! Lmod environments: a real module tree, loaded before a real script runs.

mod common;

use common::{job_env, run, script, show, skip};
use labpool_envs::activate::{WrapRequest, wrap};
use labpool_envs::tools::Tools;
use labpool_envs::{EnvError, EnvKind, Lock, build::build, lock::lock};
use std::path::Path;

/// Tools with Lmod, or None after a loud skip.
fn lmod_tools() -> Option<Tools> {
    let tools = Tools::detect(None);
    if tools.lmod_init.is_none() {
        skip("Lmod is not installed (apt install lmod)");
        return None;
    }
    Some(tools)
}

/// A MODULEPATH with `labtool/1.0`.
fn module_tree(tmp: &Path) -> std::path::PathBuf {
    let tree = tmp.join("modulefiles");
    std::fs::create_dir_all(tree.join("labtool")).unwrap();
    std::fs::write(
        tree.join("labtool/1.0.lua"),
        "setenv(\"LABTOOL_HOME\",\"/opt/labtool\")\nprepend_path(\"PATH\",\"/opt/labtool/bin\")\n",
    )
    .unwrap();
    tree
}

fn wrap_job(tools: &Tools, dest: &Path, tmp: &Path, text: &str) -> std::process::Output {
    let job = tmp.join("job.sh");
    script(&job, text);
    let cmd = wrap(&WrapRequest {
        kind: EnvKind::Modules,
        dir: dest,
        tools,
        script: &job,
        text,
        args: &["arg one".to_string()],
        workdir: tmp,
        env: job_env(tmp),
    })
    .unwrap();
    assert_eq!(cmd.program, Path::new("/bin/bash"));
    run(&cmd, tmp)
}

#[test]
fn module_lines_lock_build_and_load_before_the_job() {
    let Some(tools) = lmod_tools() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let tree = module_tree(tmp.path());
    let spec = tmp.path().join("env.modules");
    std::fs::write(
        &spec,
        format!(
            "# ours\nmodule use {}\nmodule  load labtool/1.0\n",
            tree.display()
        ),
    )
    .unwrap();

    let locked = lock(&spec, None, &tools, &mut Vec::new()).unwrap();
    assert_eq!(locked.kind, EnvKind::Modules);
    assert_eq!(
        locked.lock,
        format!("module use {}\nmodule load labtool/1.0\n", tree.display())
    );

    let dest = tmp.path().join("envs").join(&locked.id);
    std::fs::create_dir_all(&dest).unwrap();
    build(&locked, &dest, &tools, &mut Vec::new()).unwrap();
    let out = wrap_job(
        &tools,
        &dest,
        tmp.path(),
        "#!/bin/sh\necho \"$LABTOOL_HOME|$PATH|$1\"\n",
    );
    assert!(out.status.success(), "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("/opt/labtool|/opt/labtool/bin:"),
        "{}",
        show(&out)
    );
    assert!(stdout.trim_end().ends_with("|arg one"), "{}", show(&out));
}

#[test]
fn a_missing_module_fails_the_lock_with_its_name() {
    let Some(tools) = lmod_tools() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let tree = module_tree(tmp.path());
    let spec = tmp.path().join("modules.txt");
    std::fs::write(
        &spec,
        format!(
            "module use {}\nmodule load nosuchtool/9.9\n",
            tree.display()
        ),
    )
    .unwrap();
    let err = lock(&spec, None, &tools, &mut Vec::new()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, EnvError::ModuleFailed { .. }), "{msg}");
    assert!(
        msg.contains("`module load nosuchtool/9.9` failed") && msg.contains("unknown"),
        "{msg}"
    );
}

#[test]
fn a_module_that_fails_at_launch_stops_the_job_before_it_runs() {
    let Some(tools) = lmod_tools() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // A lock whose module has gone since it was locked.
    let text = "module load vanished/1.0\n".to_string();
    let locked = Lock {
        kind: EnvKind::Modules,
        id: labpool_envs::id::env_id(EnvKind::Modules, &text, "test"),
        lock: text,
        platform: "test".into(),
        spec: String::new(),
        image: None,
    };
    let dest = tmp.path().join("dest");
    std::fs::create_dir(&dest).unwrap();
    build(&locked, &dest, &tools, &mut Vec::new()).unwrap();
    let out = wrap_job(&tools, &dest, tmp.path(), "#!/bin/sh\necho JOB-RAN\n");
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("JOB-RAN"),
        "{}",
        show(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("vanished/1.0"),
        "{}",
        show(&out)
    );
}

#[test]
fn lines_other_than_module_commands_are_refused() {
    let tools = Tools::detect(None);
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("env.modules");
    std::fs::write(&spec, "module load a/1\nexport X=1\n").unwrap();
    let err = lock(&spec, None, &tools, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("line 2") && err.contains("export X=1") && err.contains("module load"),
        "{err}"
    );
}

#[test]
fn without_lmod_the_error_says_how_to_install_it() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("env.modules");
    std::fs::write(&spec, "module load a/1\n").unwrap();
    let tools = Tools::default();
    let err = lock(&spec, None, &tools, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("apt install lmod"), "{err}");
}
