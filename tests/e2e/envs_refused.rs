//! What environments and the submit lint refuse, through the real binary and controller: the
//! `CUDA_VISIBLE_DEVICES` lint with its warn switch, and bad input (an unknown environment, an
//! image that does not exist, a lock for another platform or with a forged id, a build that
//! fails with its log kept).

use crate::envs::{have_path, json, stderr};
use crate::pool::{Pool, has, post_raw, stdout_of};
use std::time::Duration;

#[test]
fn the_lint_refuses_cuda_visible_devices_overrides_unless_told_to_warn() {
    let mut pool = Pool::new("2:t4");
    pool.start();
    let script = pool.script(
        "escape.sh",
        "#!/bin/bash\n#SBATCH --gpus 1\n# export CUDA_VISIBLE_DEVICES=9 (a comment is fine)\necho $CUDA_VISIBLE_DEVICES\nexport CUDA_VISIBLE_DEVICES=0,1,2,3\npython -c 'import os; os.environ[\"CUDA_VISIBLE_DEVICES\"] = \"1\"'\n",
    );
    let out = pool.cli(&["submit", script.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    has(
        &err,
        &[
            "line 5: export CUDA_VISIBLE_DEVICES=0,1,2,3",
            "line 6:",
            "cuda_visible_devices = \"warn\"",
        ],
    );
    assert!(!err.contains("line 3"), "a comment was flagged: {err}");
    assert!(!err.contains("line 4"), "a read was flagged: {err}");
    assert!(pool.queue().is_empty(), "a refused submit queued a job");

    pool.stop();
    pool.edit_config(|t| {
        t.replace(
            "cuda_visible_devices = \"refuse\"",
            "cuda_visible_devices = \"warn\"",
        )
    });
    pool.start();
    let out = pool.cli(&["submit", "--parsable", script.to_str().unwrap()]);
    let id: u64 = stdout_of(&out).trim().parse().unwrap();
    has(
        &stderr(&out),
        &["warning", "line 5: export CUDA_VISIBLE_DEVICES=0,1,2,3"],
    );
    let done = pool.wait_done(id, Duration::from_secs(30));
    assert_eq!(done["state"], "COMPLETED", "{done}");
}

#[test]
fn bad_environments_are_refused_and_a_failed_build_keeps_its_log() {
    let test = "bad_environments_are_refused_and_a_failed_build_keeps_its_log";
    if !have_path(test, "/usr/bin/python3", "python3-venv") {
        return;
    }
    let mut pool = Pool::new("1:t4");
    pool.start();
    let script = pool.script("job.sh", "#!/bin/sh\necho hi\n");

    // An unknown environment: refused at submit, nothing queued.
    let out = pool.cli(&["submit", "--env", "nope", script.to_str().unwrap()]);
    assert!(!out.status.success());
    has(
        &stderr(&out),
        &["no environment \"nope\"", "labpool env create"],
    );
    assert!(pool.queue().is_empty());

    // An image that does not exist, and a kind the file is not.
    let missing = pool.work.join("missing.sif");
    let out = pool.cli(&["env", "create", "img", "--file", missing.to_str().unwrap()]);
    assert!(!out.status.success());
    has(
        &stderr(&out),
        &[
            "container image",
            "missing.sif",
            "cannot be opened",
            "No such file",
        ],
    );
    let text = pool.script("notes.txt", "just text\n");
    let out = pool.cli(&[
        "env",
        "create",
        "img",
        "--kind",
        "container",
        "--file",
        text.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    has(
        &stderr(&out),
        &["notes.txt", "is not a SIF or SquashFS image", "mksquashfs"],
    );
    let out = pool.cli(&[
        "env",
        "create",
        "bad name!",
        "--file",
        text.to_str().unwrap(),
    ]);
    assert!(!out.status.success());

    // A lock whose hash PyPI's file does not match: pip refuses during the build; the error
    // points at the log, which is kept, and nothing is left half-built.
    let tools = labpool_envs::tools::Tools::detect(None);
    let platform = labpool_envs::id::platform(labpool_envs::EnvKind::Venv, &tools).unwrap();
    let lock = format!("six==1.16.0 --hash=sha256:{}\n", "0".repeat(64));
    let id = labpool_envs::id::env_id(labpool_envs::EnvKind::Venv, &lock, &platform);
    let request = serde_json::json!({
        "name": "broken",
        "lock": {
            "kind": "venv", "lock": lock, "platform": platform, "id": id,
            "spec": "six==1.16.0\n", "image": null
        }
    });
    let socket = pool.dir.join("labpool.sock");
    // A lock for another platform, or one whose id does not match it, is refused unbuilt.
    let mut foreign = request.clone();
    let other = "linux-x86_64-glibc2.17-py2.7";
    foreign["lock"]["platform"] = other.into();
    foreign["lock"]["id"] =
        labpool_envs::id::env_id(labpool_envs::EnvKind::Venv, &lock, other).into();
    let (status, answer) = post_raw(&socket, "/v1/envs", &foreign);
    assert_eq!(status, 400, "{answer}");
    has(
        answer["error"].as_str().unwrap(),
        &["this pool builds for", &platform],
    );
    let mut forged = request.clone();
    forged["lock"]["id"] = "0".repeat(24).into();
    let (status, answer) = post_raw(&socket, "/v1/envs", &forged);
    assert_eq!(status, 400, "{answer}");
    has(
        answer["error"].as_str().unwrap(),
        &["does not match its content"],
    );
    let (status, answer) = post_raw(&socket, "/v1/envs", &request);
    assert_eq!(status, 400, "{answer}");
    let error = answer["error"].as_str().unwrap();
    has(error, &["building environment", "failed", "its log is"]);
    let log = error
        .split("its log is ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    let log_text = std::fs::read_to_string(log).unwrap();
    has(&log_text, &["six"]);
    assert!(log_text.to_lowercase().contains("hash"), "{log_text}");
    assert!(!pool.dir.join("envs").join(&id).exists());
    let listed = json(&pool.ok(&["env", "list", "--json"]));
    assert!(listed.as_array().unwrap().is_empty(), "{listed}");
}
