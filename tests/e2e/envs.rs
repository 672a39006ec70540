//! Software environments through the real binary and controller: a real venv built from PyPI
//! that a member's job imports from, with the id in its record; a rebuild of the same spec
//! that builds nothing; an environment unpacked from its archive onto a node that lacks it;
//! a Charliecloud SquashFS image and an Lmod module that jobs run inside; and a job held in
//! EnvStaging, cancelled there or surviving a restart. What is refused (the
//! `CUDA_VISIBLE_DEVICES` lint, bad input) is in `envs_refused`, with the helpers here.

use crate::pool::{
    Pool, ensure_user, ensure_user_in, has, have_root, read_output, stdout_of, strict,
};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// `text` as JSON; panics with it when it is not.
pub(crate) fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// What a command printed on its standard error.
pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// True when `path` exists; otherwise skips loudly, or fails under LABPOOL_TEST_STRICT.
pub(crate) fn have_path(test: &str, path: &str, package: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    assert!(
        !strict(),
        "{test} needs {path} (Debian package {package}), and LABPOOL_TEST_STRICT=1 says this run must not skip it"
    );
    eprintln!("SKIPPED {test}: {path} is missing (apt install {package})");
    false
}

/// `labpool env create NAME --file FILE --json` as `uid:gid`, which must succeed; its answer.
pub(crate) fn create_env(
    pool: &Pool,
    (uid, gid): (u32, u32),
    name: &str,
    file: &Path,
    extra: &[&str],
) -> Value {
    let mut args = vec![
        "env",
        "create",
        name,
        "--file",
        file.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    json(&stdout_of(&pool.cli_as(uid, gid, &args)))
}

/// Submits `script` with `args` as `uid:gid`, waits for it to complete, and returns its record
/// and what it printed.
fn run_job_as(
    pool: &Pool,
    (uid, gid): (u32, u32),
    args: &[&str],
    script: &Path,
) -> (Value, String) {
    let out_name = format!("{}-%j.out", script.file_stem().unwrap().to_string_lossy());
    let mut all = vec!["submit", "--parsable", "-o", &out_name];
    all.extend_from_slice(args);
    all.push(script.to_str().unwrap());
    let job: u64 = stdout_of(&pool.cli_as(uid, gid, &all))
        .trim()
        .parse()
        .unwrap();
    let done = pool.wait_done(job, Duration::from_secs(120));
    assert_eq!(done["state"], "COMPLETED", "{done}");
    let printed = read_output(&pool.work.join(out_name.replace("%j", &job.to_string())));
    (done, printed)
}

/// A file in the pool that every user can read.
fn public_file(pool: &Pool, name: &str, text: &str) -> PathBuf {
    let p = pool.work.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    p
}

#[test]
fn a_venv_job_imports_its_package_records_the_id_and_a_rebuild_builds_nothing() {
    let test = "a_venv_job_imports_its_package_records_the_id_and_a_rebuild_builds_nothing";
    if !have_root(test) || !have_path(test, "/usr/bin/python3", "python3-venv") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let mut pool = Pool::new("2:t4").for_users();
    pool.start();
    let spec = public_file(&pool, "requirements.txt", "six==1.16.0\n");
    let as_alice = |pool: &Pool, args: &[&str]| pool.cli_as(alice, alice_gid, args);

    let created = create_env(&pool, (alice, alice_gid), "sixenv", &spec, &[]);
    assert_eq!(created["reused"], false, "{created}");
    let env = &created["env"];
    let id = env["id"].as_str().unwrap().to_string();
    assert_eq!(env["kind"], "venv");
    has(
        env["lock"].as_str().unwrap(),
        &["six==1.16.0", "--hash=sha256:"],
    );
    let dir = PathBuf::from(env["dir"].as_str().unwrap());
    assert_eq!(dir, pool.dir.join("envs").join(&id));
    assert!(Path::new(env["archive"].as_str().unwrap()).is_file());
    // Sealed: root's, and not writable by the member who built it.
    let meta = std::fs::metadata(dir.join("bin")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((meta.uid(), meta.mode() & 0o022), (0, 0));
    let log = PathBuf::from(env["build_log"].as_str().unwrap());
    has(
        &std::fs::read_to_string(&log).unwrap(),
        &["labpool: build complete"],
    );

    // A job imports the package inside the environment and prints its version.
    let script = pool.script(
        "job.sh",
        "#!/bin/sh\npython -c 'import six, sys; print(six.__version__, sys.prefix)'\necho \"growth=$TF_FORCE_GPU_ALLOW_GROWTH alloc=$PYTORCH_CUDA_ALLOC_CONF xla=$XLA_PYTHON_CLIENT_PREALLOCATE\"\n",
    );
    let (done, printed) = run_job_as(
        &pool,
        (alice, alice_gid),
        &["--gpus", "1", "--env", "sixenv"],
        &script,
    );
    assert_eq!(done["env"], "sixenv");
    assert_eq!(done["env_id"].as_str(), Some(id.as_str()));
    has(
        &printed,
        &[
            &format!("1.16.0 {}", dir.display()),
            "growth=true alloc=expandable_segments:True xla=false",
        ],
    );

    // The same spec again, under another name: nothing is built, the id is the same.
    let log_before = std::fs::metadata(&log).unwrap().modified().unwrap();
    let again = create_env(&pool, (alice, alice_gid), "six-again", &spec, &[]);
    assert_eq!(again["reused"], true, "{again}");
    assert_eq!(again["env"]["id"].as_str(), Some(id.as_str()));
    assert_eq!(
        std::fs::metadata(&log).unwrap().modified().unwrap(),
        log_before
    );
    // Another member with the same spec gets the same build: it was built as the build user
    // with an empty home, so nothing of lp-alice's account is in it. Bob does not see her
    // names.
    let (bob, bob_gid) = ensure_user("lp-bob");
    has(
        &std::fs::read_to_string(&log).unwrap(),
        &[&format!("built {id} as nobody")],
    );
    let bobs = create_env(&pool, (bob, bob_gid), "six", &spec, &[]);
    assert_eq!(bobs["reused"], true, "{bobs}");
    assert_eq!(
        bobs["env"]["names"],
        serde_json::json!(["lp-bob/six"]),
        "{bobs}"
    );
    let out = pool.cli_as(bob, bob_gid, &["env", "show", "sixenv"]);
    assert!(!out.status.success(), "bob resolved alice's name");
    let out = pool.cli_as(bob, bob_gid, &["env", "rm", "six", "--json"]);
    assert_eq!(json(&stdout_of(&out))["build_deleted"], false);
    let listed = json(&stdout_of(&as_alice(&pool, &["env", "list", "--json"])));
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");

    // A node that lacks the build (a fresh node, here after a restart) unpacks it from its
    // archive before the job starts; the job's own setting of a hygiene variable wins.
    pool.stop();
    std::fs::remove_dir_all(&dir).unwrap();
    pool.start();
    // Two tasks at once, through the script's directive: the node unpacks it once for both.
    let arrayed = pool.script(
        "array.sh",
        &format!(
            "#!/bin/sh
#LABPOOL --env six-again
#SBATCH --array 0-1
{}",
            std::fs::read_to_string(&script)
                .unwrap()
                .trim_start_matches(
                    "#!/bin/sh
"
                )
        ),
    );
    let out = as_alice(
        &pool,
        &[
            "submit",
            "--parsable",
            "-o",
            "unpacked-%a.out",
            "--export",
            "ALL,TF_FORCE_GPU_ALLOW_GROWTH=false",
            arrayed.to_str().unwrap(),
        ],
    );
    let first: u64 = stdout_of(&out).trim().parse().unwrap();
    let mut unpacked = 0;
    for (task, job) in [(0, first), (1, first + 1)] {
        let done = pool.wait_done(job, Duration::from_secs(120));
        assert_eq!(done["state"], "COMPLETED", "{done}");
        assert_eq!(done["env_id"].as_str(), Some(id.as_str()));
        has(
            &read_output(&pool.work.join(format!("unpacked-{task}.out"))),
            &["1.16.0", "growth=false"],
        );
        if pool
            .ok(&["show", &job.to_string()])
            .contains(&format!("environment {id} unpacked"))
        {
            unpacked += 1;
        }
    }
    assert_eq!(unpacked, 1, "the environment was unpacked {unpacked} times");
    assert!(dir.join("bin/python").exists());

    // Removing one name keeps the build (the other name uses it); removing both deletes it.
    let out = json(&stdout_of(&as_alice(
        &pool,
        &["env", "rm", "sixenv", "--json"],
    )));
    assert_eq!(out["build_deleted"], false);
    let out = json(&stdout_of(&as_alice(
        &pool,
        &["env", "rm", "six-again", "--json"],
    )));
    assert_eq!(out["build_deleted"], true);
    assert!(!dir.exists());
}

/// A tiny Charliecloud image: busybox (static) and a marker file, as SquashFS.
fn busybox_image(dir: &Path) -> PathBuf {
    let root = dir.join("image-root");
    for d in [
        "bin", "dev", "proc", "sys", "tmp", "etc", "home", "mnt", "root", "usr/bin",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    for tool in ["sh", "cat", "echo", "env", "id"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(tool)).unwrap();
    }
    std::fs::write(root.join("etc/marker"), "inside-the-image\n").unwrap();
    squashfs_image(&root, dir.join("tiny.sqfs"))
}

/// Packs the image tree at `root` (with the `/etc/passwd` and `/etc/group` ch-run binds over)
/// into a SquashFS file at `image`, readable by every member.
pub(crate) fn squashfs_image(root: &Path, image: PathBuf) -> PathBuf {
    std::fs::write(root.join("etc/passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    let out = Command::new("mksquashfs")
        .arg(root)
        .arg(&image)
        .args(["-quiet", "-noappend", "-all-root"])
        .output()
        .unwrap();
    assert!(out.status.success(), "mksquashfs: {}", stderr(&out));
    std::fs::set_permissions(&image, std::fs::Permissions::from_mode(0o644)).unwrap();
    image
}

#[test]
fn container_and_modules_jobs_run_inside_their_environments() {
    let test = "container_and_modules_jobs_run_inside_their_environments";
    if !have_root(test)
        || !have_path(test, "/usr/bin/ch-run", "charliecloud-runtime")
        || !have_path(test, "/usr/bin/mksquashfs", "squashfs-tools")
        || !have_path(test, "/bin/busybox", "busybox-static")
        || !have_path(test, "/usr/share/lmod/lmod/init/bash", "lmod")
    {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let mut pool = Pool::new("1:t4").for_users();
    pool.start();
    let as_alice = |args: &[&str]| pool.cli_as(alice, alice_gid, args);

    // Container: the job's command runs inside the image (its /etc/marker is not the host's).
    let image = busybox_image(&pool.work);
    let created = create_env(&pool, (alice, alice_gid), "tiny", &image, &[]);
    assert_eq!(created["env"]["kind"], "container", "{created}");
    let script = pool.script("in-image.sh", "#!/bin/sh\ncat /etc/marker\nid -u\n");
    let (_, printed) = run_job_as(&pool, (alice, alice_gid), &["--env", "tiny"], &script);
    has(&printed, &["inside-the-image", &alice.to_string()]);
    assert!(!Path::new("/etc/marker").exists());

    // Modules, published by an admin for everyone: a member's job sees the variables the
    // module sets. Members cannot publish.
    let modules = pool.dir.join("modulefiles/labtool");
    std::fs::create_dir_all(&modules).unwrap();
    std::fs::write(
        modules.join("1.0.lua"),
        "setenv(\"LABTOOL_HOME\", \"/opt/labtool\")\nprepend_path(\"PATH\", \"/opt/labtool/bin\")\n",
    )
    .unwrap();
    for d in [pool.dir.join("modulefiles"), modules.clone()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let spec = public_file(
        &pool,
        "tools.modules",
        &format!(
            "module use {}\nmodule load labtool/1.0\n",
            pool.dir.join("modulefiles").display()
        ),
    );
    let out = as_alice(&[
        "env",
        "create",
        "labtool",
        "--shared",
        "--file",
        spec.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    has(
        &stderr(&out),
        &["only admins may publish shared environments"],
    );
    let (admin, admin_gid) = ensure_user_in("lp-admin", Some("labpool-admins"));
    let created = create_env(&pool, (admin, admin_gid), "labtool", &spec, &["--shared"]);
    assert_eq!(created["env"]["kind"], "modules", "{created}");
    assert_eq!(created["env"]["owner"], "", "{created}");
    let listed = json(&stdout_of(&as_alice(&["env", "list", "--json"])));
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "labtool" && e["owner"] == ""),
        "{listed}"
    );
    let script = pool.script(
        "module.sh",
        "#!/bin/sh\necho \"home=$LABTOOL_HOME\"\necho \"path=$PATH\"\n",
    );
    let (_, printed) = run_job_as(&pool, (alice, alice_gid), &["--env", "labtool"], &script);
    has(&printed, &["home=/opt/labtool", "path=/opt/labtool/bin:"]);

    // A node that lacks the build and cannot reach its archive (shared storage down): the job
    // ends FAILED, uncharged, with the reason and what to do; its GPU is free again. With the
    // archive back, the next job gets the environment.
    let env = &created["env"];
    let (dir, archive) = (
        PathBuf::from(env["dir"].as_str().unwrap()),
        PathBuf::from(env["archive"].as_str().unwrap()),
    );
    let aside = archive.with_extension("aside");
    pool.stop();
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::rename(&archive, &aside).unwrap();
    pool.start();
    let out = pool.cli_as(
        alice,
        alice_gid,
        &[
            "submit",
            "--parsable",
            "--gpus",
            "1",
            "--env",
            "labtool",
            script.to_str().unwrap(),
        ],
    );
    let job: u64 = stdout_of(&out).trim().parse().unwrap();
    let done = pool.wait_done(job, Duration::from_secs(30));
    assert_eq!(done["state"], "FAILED", "{done}");
    has(
        done["reason_detail"].as_str().unwrap_or_default(),
        &[
            "putting its environment",
            "failed",
            &archive.display().to_string(),
        ],
    );
    assert!(pool.queue().is_empty());
    std::fs::rename(&aside, &archive).unwrap();
    let (_, printed) = run_job_as(
        &pool,
        (alice, alice_gid),
        &["--gpus", "1", "--env", "labtool"],
        &script,
    );
    has(&printed, &["home=/opt/labtool"]);
}

/// A modules environment for `pool`, built by `who`; its record.
pub(crate) fn modules_env(pool: &Pool, who: (u32, u32), name: &str) -> Value {
    let dir = pool.dir.join("modulefiles/tool");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("2.0.lua"),
        "setenv(\"TOOL_HOME\", \"/opt/tool\")\n",
    )
    .unwrap();
    for d in [pool.dir.join("modulefiles"), dir] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let spec = public_file(
        pool,
        "tool.modules",
        &format!(
            "module use {}\nmodule load tool/2.0\n",
            pool.dir.join("modulefiles").display()
        ),
    );
    create_env(pool, who, name, &spec, &[])["env"].clone()
}

#[test]
fn a_job_waits_in_env_staging_can_be_cancelled_there_and_survives_a_restart() {
    let test = "a_job_waits_in_env_staging_can_be_cancelled_there_and_survives_a_restart";
    if !have_root(test) || !have_path(test, "/usr/share/lmod/lmod/init/bash", "lmod") {
        return;
    }
    let mut pool = Pool::new("1:t4");
    pool.start();
    let env = modules_env(&pool, (0, 0), "tool");
    let (dir, archive) = (
        PathBuf::from(env["dir"].as_str().unwrap()),
        PathBuf::from(env["archive"].as_str().unwrap()),
    );
    // The node lacks the build, and its archive is a FIFO: the unpack waits until the test
    // writes the real archive into it, so the job is held in EnvStaging for as long as needed.
    let real = std::fs::read(&archive).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_file(&archive).unwrap();
    nix::unistd::mkfifo(&archive, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let feed = |archive: PathBuf, bytes: Vec<u8>| {
        std::thread::spawn(move || std::fs::write(archive, bytes).unwrap())
    };
    let script = pool.script("tool.sh", "#!/bin/sh\necho \"tool=$TOOL_HOME\"\n");
    let staging = |pool: &Pool, job: u64| {
        pool.wait_for(job, Duration::from_secs(20), |j| {
            j["state"] == "STAGING" && j["reason"] == "EnvStaging"
        })
    };

    // Cancelled while it waits: CANCELLED, uncharged (never started), its GPU free again.
    let job = pool.submit(&["--gpus", "1", "--env", "tool", script.to_str().unwrap()]);
    let waiting = staging(&pool, job);
    has(
        waiting["reason_detail"].as_str().unwrap(),
        &["putting environment tool", env["id"].as_str().unwrap()],
    );
    pool.ok(&["cancel", &job.to_string()]);
    let done = pool.wait_done(job, Duration::from_secs(20));
    assert_eq!(done["state"], "CANCELLED", "{done}");
    assert!(
        done["start_time"].is_null(),
        "a cancelled stage started its clock: {done}"
    );
    let nodes = json(&pool.ok(&["nodes", "--json"]));
    assert!(nodes[0]["gpus"][0]["job"].is_null(), "{nodes}");

    // Killed while a job waits, the controller starts again and the job goes on to run.
    let job = pool.submit(&[
        "--gpus",
        "1",
        "--env",
        "tool",
        "-o",
        "tool-%j.out",
        script.to_str().unwrap(),
    ]);
    staging(&pool, job);
    pool.kill9();
    pool.start();
    staging(&pool, job);
    let writer = feed(archive.clone(), real);
    let done = pool.wait_done(job, Duration::from_secs(30));
    writer.join().unwrap();
    assert_eq!(done["state"], "COMPLETED", "{done}");
    has(
        &read_output(&pool.work.join(format!("tool-{job}.out"))),
        &["tool=/opt/tool"],
    );
    assert!(labpool_envs::pack::is_complete(&dir));
}
