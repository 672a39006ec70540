//! A sliced job whose environment is a container image (Charliecloud, SquashFS) is held to its
//! slice inside the container too: the image has its own glibc, the fake CUDA driver and the
//! probe, and none of the job's directory, yet the probe sees and gets only its quarter; the
//! slice's directory in `/tmp` goes with the job.

use crate::envs::{create_env, have_path, squashfs_image};
use crate::pool::{Pool, ensure_user, have_root, read_output, stdout_of, wait_until};
use crate::slices::{build_fake_cuda, slice_dirs};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// An image with busybox as its shell, the host's glibc and loader (what the probe and the
/// slice library need), and the fake driver and the probe in `/opt`.
fn cuda_image(dir: &Path, cuda: &Path) -> PathBuf {
    let root = dir.join("cuda-image-root");
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "tmp",
        "etc",
        "home",
        "mnt",
        "opt",
        "lib64",
        "lib/x86_64-linux-gnu",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", root.join("bin/sh")).unwrap();
    for lib in [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
    ] {
        std::fs::copy(lib, root.join(lib.trim_start_matches('/'))).unwrap();
    }
    for f in ["probe", "libcuda.so.1"] {
        std::fs::copy(cuda.join(f), root.join("opt").join(f)).unwrap();
    }
    squashfs_image(&root, dir.join("cuda.sqfs"))
}

#[test]
fn a_sliced_job_in_a_container_is_held_to_its_slice() {
    let test = "a_sliced_job_in_a_container_is_held_to_its_slice";
    if !have_root(test)
        || !have_path(test, "/usr/bin/ch-run", "charliecloud-runtime")
        || !have_path(test, "/usr/bin/mksquashfs", "squashfs-tools")
        || !have_path(test, "/bin/busybox", "busybox-static")
    {
        return;
    }
    // The state (and the job spool in it) where a node keeps it, outside /tmp: Charliecloud
    // binds the host's /tmp into the container, which would show the job's directory.
    let state = tempfile::Builder::new()
        .prefix("labpool-slice-container-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let mut pool = Pool::new("1:rtx4090:24G").for_users();
    let cuda = pool.dir.join("cuda");
    if build_fake_cuda(test, &cuda).is_none() {
        return;
    }
    let state_dir = state.path().display().to_string();
    pool.edit_config(|t| {
        let t = t.replace("[node]\n", "[node]\nslices = { rtx4090 = [2, 4] }\n");
        let at = t
            .find("\nstate_dir = ")
            .expect("the config names its state_dir")
            + 1;
        let end = at + t[at..].find('\n').unwrap();
        format!("{}state_dir = \"{state_dir}\"{}", &t[..at], &t[end..])
    });
    pool.start();
    let alice = ensure_user("lp-alice");
    let image = cuda_image(&pool.work, &cuda);
    let created = create_env(&pool, alice, "cuda", &image, &[]);
    assert_eq!(created["env"]["kind"], "container", "{created}");
    let script = pool.script(
        "in-image.sh",
        "#!/bin/sh\nexport LD_LIBRARY_PATH=/opt\n/opt/probe linked info alloc 5000 alloc 2000\n",
    );
    let before = slice_dirs();
    let out = pool.cli_as(
        alice.0,
        alice.1,
        &[
            "submit",
            "--parsable",
            "--env",
            "cuda",
            "--gres=gpu:rtx4090.4:1",
            "-o",
            "in-image-%j.out",
            script.to_str().unwrap(),
        ],
    );
    let id: u64 = stdout_of(&out).trim().parse().unwrap();
    let done = pool.wait_done(id, Duration::from_secs(120));
    let printed = read_output(&pool.work.join(format!("in-image-{id}.out")));
    assert_eq!(done["state"], "COMPLETED", "{done}\n{printed}");
    assert_eq!(
        printed.lines().collect::<Vec<_>>(),
        [
            "info free=6144 total=6144",
            "alloc 5000 ok",
            "alloc 2000 err 2"
        ],
        "{printed}"
    );
    wait_until(
        Duration::from_secs(20),
        || slice_dirs().difference(&before).next().is_none(),
        || format!("left in /tmp: {:?}", slice_dirs().difference(&before)),
    );
}
