//! Container images: a real SquashFS image run with Charliecloud's ch-run.

mod common;

use common::{job_env, run, script, show, skip};
use labpool_envs::activate::{WrapRequest, wrap};
use labpool_envs::tools::{Tools, which};
use labpool_envs::{EnvError, EnvKind, build::build, lock::lock, pack};
use std::path::{Path, PathBuf};

/// A tiny image: static busybox as sh/cat/echo, the directories ch-run needs, and a marker.
/// Returns None (after a loud skip) when mksquashfs or a static busybox is missing.
fn make_image(tmp: &Path, name: &str) -> Option<PathBuf> {
    let Some(mksquashfs) = which("mksquashfs") else {
        skip("mksquashfs is not installed (apt install squashfs-tools)");
        return None;
    };
    let busybox = Path::new("/bin/busybox");
    if !busybox.is_file() {
        skip("/bin/busybox is not installed (apt install busybox-static)");
        return None;
    }
    let img = tmp.join("img");
    for dir in ["bin", "dev", "proc", "sys", "tmp", "etc", "home", "mnt"] {
        std::fs::create_dir_all(img.join(dir)).unwrap();
    }
    std::fs::copy(busybox, img.join("bin/busybox")).unwrap();
    for tool in ["sh", "cat", "echo"] {
        std::os::unix::fs::symlink("busybox", img.join("bin").join(tool)).unwrap();
    }
    std::fs::write(img.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(img.join("etc/group"), "root:x:0:\n").unwrap();
    std::fs::write(img.join("etc/marker"), "labpool-marker-7f3a\n").unwrap();
    let image = tmp.join(name);
    let out = std::process::Command::new(mksquashfs)
        .arg(&img)
        .arg(&image)
        .args(["-quiet", "-noappend", "-no-progress"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    Some(image)
}

#[test]
fn a_squashfs_image_locks_builds_and_runs_a_script_with_ch_run() {
    let tools = Tools::detect(None);
    if tools.ch_run.is_none() {
        skip("ch-run is not installed (apt install charliecloud-runtime)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Named .img on purpose: the kind comes from the SquashFS magic, not the name.
    let Some(image) = make_image(tmp.path(), "x.img") else {
        return;
    };

    let locked = lock(&image, None, &tools, &mut Vec::new()).unwrap();
    assert_eq!(locked.kind, EnvKind::Container);
    assert!(
        locked.lock.starts_with("blake3:") && locked.lock.ends_with(" x.img\n"),
        "{}",
        locked.lock
    );
    assert_eq!(
        locked.image.as_deref(),
        Some(image.canonicalize().unwrap().as_path())
    );
    assert_eq!(locked.spec, "");
    assert!(!locked.platform.contains("-py"), "{}", locked.platform);

    let dest = tmp.path().join("envs").join(&locked.id);
    std::fs::create_dir_all(&dest).unwrap();
    build(&locked, &dest, &tools, &mut Vec::new()).unwrap();
    assert!(dest.join("image.sqfs").is_file());
    assert!(pack::is_complete(&dest));

    let job = tmp.path().join("job.sh");
    let text = "#!/bin/sh\ncat /etc/marker\necho \"args:$0:$1:$2\"\necho \"pwd:$(pwd)\"\n";
    script(&job, text);
    let wrapped = |workdir: &Path| {
        let cmd = wrap(&WrapRequest {
            kind: EnvKind::Container,
            dir: &dest,
            tools: &tools,
            script: &job,
            text,
            args: &["one".to_string(), "two words".to_string()],
            workdir,
            env: job_env(tmp.path()),
        })
        .unwrap();
        assert_eq!(Some(&cmd.program), tools.ch_run.as_ref());
        assert_eq!(cmd.env["LABPOOL_ENV_KIND"], "container");
        let out = run(&cmd, tmp.path());
        assert!(out.status.success(), "{}", show(&out));
        out
    };
    let out = wrapped(Path::new("/tmp"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("labpool-marker-7f3a"), "{}", show(&out));
    let args = format!("args:{}:one:two words", job.display());
    assert!(stdout.contains(&args), "{}", show(&out));
    assert!(stdout.contains("pwd:/tmp"), "{}", show(&out));

    // ch-run binds the host's /tmp, so the test's directory is visible inside.
    let out = wrapped(tmp.path());
    let pwd = format!("pwd:{}\n", tmp.path().display());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&pwd),
        "{}",
        show(&out)
    );
    // A working directory the image lacks (a host directory elsewhere): the job runs, in /.
    let out = wrapped(Path::new("/labpool-no-such-dir"));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("pwd:/\n"),
        "{}",
        show(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not inside the image"),
        "{}",
        show(&out)
    );
}

#[test]
fn an_image_changed_after_locking_is_not_built() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(image) = make_image(tmp.path(), "x.sqfs") else {
        return;
    };
    let tools = Tools::detect(None);
    let locked = lock(&image, None, &tools, &mut Vec::new()).unwrap();
    let mut bytes = std::fs::read(&image).unwrap();
    bytes.extend_from_slice(b"tampered");
    std::fs::write(&image, bytes).unwrap();
    let dest = tmp.path().join("dest");
    std::fs::create_dir(&dest).unwrap();
    let err = build(&locked, &dest, &tools, &mut Vec::new()).unwrap_err();
    assert!(matches!(err, EnvError::HashMismatch { .. }), "{err}");
    assert!(
        err.to_string().contains("lock the environment again"),
        "{err}"
    );
    assert!(!dest.join("image.sqfs").exists(), "the bad copy is removed");
    assert!(!pack::is_complete(&dest));
}

#[test]
fn a_missing_image_is_a_clear_error() {
    let tools = Tools::detect(None);
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope.sqfs");
    let err = lock(&missing, None, &tools, &mut Vec::new()).unwrap_err();
    assert!(matches!(err, EnvError::ImageMissing { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("nope.sqfs") && msg.contains("cannot be opened"),
        "{msg}"
    );
    let err = lock(
        &tmp.path().join("nope"),
        Some(EnvKind::Container),
        &tools,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(err, EnvError::ImageMissing { .. }), "{err}");
}

#[test]
fn a_file_that_is_not_an_image_is_refused_as_a_container() {
    let tools = Tools::detect(None);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("notes.txt");
    std::fs::write(&file, "just some text, not an image\n").unwrap();
    let err = lock(&file, Some(EnvKind::Container), &tools, &mut Vec::new()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, EnvError::NotAnImage { .. }), "{msg}");
    assert!(
        msg.contains("notes.txt") && msg.contains("mksquashfs"),
        "{msg}"
    );
}

#[test]
fn wrapping_a_sif_without_apptainer_names_the_tool() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("image.sif"),
        b"#!/usr/bin/env run-singularity\n\x00SIF_MAGIC",
    )
    .unwrap();
    let tools = Tools::default();
    let err = wrap(&WrapRequest {
        kind: EnvKind::Container,
        dir: tmp.path(),
        tools: &tools,
        script: Path::new("/job.sh"),
        text: "#!/bin/sh\ntrue\n",
        args: &[],
        workdir: Path::new("/"),
        env: Default::default(),
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("apptainer") && err.contains("apptainer.org"),
        "{err}"
    );
}

#[test]
fn a_python_script_run_from_its_text_sees_its_name_and_args() {
    // What runs inside the image, run here: the Python bootstrap must leave sys.argv as if the
    // file had been run.
    let Some(python) = Tools::detect(None).python else {
        skip("no python3 here");
        return;
    };
    let text = "#!/usr/bin/python3\nimport sys\nprint(sys.argv, __file__, __name__)\n";
    let argv = labpool_envs::shebang::command(
        Path::new("/jobs/7/job.py"),
        text,
        &["-v".into(), "x y".into()],
    )
    .unwrap();
    assert_eq!(argv[0], "/usr/bin/python3");
    let out = std::process::Command::new(python)
        .args(&argv[1..])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "['/jobs/7/job.py', '-v', 'x y'] /jobs/7/job.py __main__"
    );
}
