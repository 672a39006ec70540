//! Bad input of every kind gets a message that names the problem and the fix, a non-zero exit,
//! and no change to state.

use crate::pool::{Pool, fails, has, post_raw};
use std::io::{Read, Write};

#[test]
fn bad_submissions_are_refused_with_the_fix_and_change_nothing() {
    let mut pool = Pool::new("4:rtx4090");
    pool.start();
    let node = pool.ok(&["nodes", "--json"]);
    let node: Vec<serde_json::Value> = serde_json::from_str(&node).unwrap();
    let node = node[0]["name"].as_str().unwrap().to_string();

    let (code, err) = fails(&pool, &["submit", "--gpu", "2", "--wrap", "true"]);
    assert_eq!(code, 2);
    has(&err, &["--gpu", "--gpus"]);

    pool.script(
        "typo.sh",
        "#!/bin/sh\n#SBATCH --job-name=x\n#SBATCH --gpu=2\necho hi\n",
    );
    let (code, err) = fails(&pool, &["submit", "typo.sh"]);
    assert_eq!(code, 1);
    has(
        &err,
        &[
            "typo.sh",
            "line 3",
            "#SBATCH --gpu=2",
            "unknown option '--gpu'",
            "did you mean '--gpus'",
        ],
    );

    pool.script(
        "own.sh",
        "#!/bin/sh\n#LABPOOL --gpus rtx4090:two\necho hi\n",
    );
    let (_, err) = fails(&pool, &["submit", "own.sh"]);
    has(
        &err,
        &["line 2", "invalid --gpus 'rtx4090:two'", "--gpus 2"],
    );
    // A word alone is a GPU type, as in Slurm: one GPU of a type no node has.
    let (_, err) = fails(&pool, &["submit", "--gpus", "two", "--wrap", "true"]);
    has(&err, &["GPUs of type 'two'", "types here: rtx4090"]);

    let (_, err) = fails(&pool, &["submit", "--gpus", "0", "--wrap", "true"]);
    has(&err, &["--gpus '0' asks for no GPU", "leave the flag out"]);

    let (_, err) = fails(&pool, &["submit", "--gpus", "8", "--wrap", "true"]);
    has(
        &err,
        &[
            &format!("job asks for 8 GPUs but the node with the most, {node}, has 4"),
            "hint: ask for at most 4 (--gpus 4)",
        ],
    );

    let (_, err) = fails(&pool, &["submit", "--gpus", "a100:1", "--wrap", "true"]);
    has(&err, &["GPUs of type 'a100'", "rtx4090 (4 on"]);

    let (_, err) = fails(&pool, &["submit", "-p", "gpu", "--wrap", "true"]);
    has(
        &err,
        &[
            "unknown partition 'gpu'",
            "normal (default), debug",
            "hint: leave out --partition",
        ],
    );

    let (_, err) = fails(&pool, &["submit", "nope.sh"]);
    has(
        &err,
        &["cannot read script nope.sh", "No such file", "--wrap"],
    );

    let (_, err) = fails(&pool, &["submit", "--time", "1:2:3:4", "--wrap", "true"]);
    has(&err, &["invalid time '1:2:3:4'", "D-HH:MM:SS"]);

    let (_, err) = fails(
        &pool,
        &[
            "submit", "-p", "debug", "--time", "2:00:00", "--wrap", "true",
        ],
    );
    has(
        &err,
        &[
            "time limit 2:00:00 is over partition debug's maximum of 1:00:00",
            "hint: ask for --time=1:00:00 or less",
        ],
    );

    let (_, err) = fails(&pool, &["submit", "--mem", "64T", "--wrap", "true"]);
    has(&err, &["job asks for 64T of memory but the largest node"]);

    pool.script("noshebang.sh", "python train.py\n");
    let (_, err) = fails(&pool, &["submit", "noshebang.sh"]);
    has(&err, &["does not start with '#!'", "#!/bin/bash", "--wrap"]);

    let (code, _) = fails(&pool, &["submit", "--wrap", "true", "script.sh"]);
    assert_eq!(code, 2);

    let (_, err) = fails(&pool, &["submit", "--nodes", "2", "--wrap", "true"]);
    has(
        &err,
        &["job asks for 2 nodes but only 1 in partition", "-N 1"],
    );

    let (_, err) = fails(&pool, &["show", "999"]);
    has(&err, &["no job 999", "hint:"]);

    // A raw API call with a body that is not a submit request.
    let mut sock = std::os::unix::net::UnixStream::connect(pool.dir.join("labpool.sock")).unwrap();
    let body = r##"{"name":"x","script":"#!/bin/sh\n","workdir":"/tmp","gpuz":3}"##;
    write!(sock, "POST /v1/jobs HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut resp = String::new();
    sock.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");
    assert!(resp.contains("unknown field `gpuz`"), "{resp}");

    // Nothing above changed anything.
    assert!(pool.queue().is_empty());
    assert!(pool.history().is_empty());
}

#[test]
fn config_mistakes_name_the_line_and_key() {
    let pool = Pool::new("1:t4");
    let bad = pool.dir.join("bad.toml");
    let text = std::fs::read_to_string(&pool.config)
        .unwrap()
        .replace("state_dir =", "stat_dir =");
    std::fs::write(&bad, text).unwrap();
    let out = pool
        .command(&["--config", bad.to_str().unwrap(), "queue"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    has(&err, &["is not valid", "line 6", "stat_dir"]);

    let out = pool
        .command(&["queue"])
        .env("LABPOOL_CONFIG", "/nonexistent/labpool.toml")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    has(
        &err,
        &[
            "no config file at /nonexistent/labpool.toml",
            "labpool init --dir",
        ],
    );

    // No controller running yet.
    let (_, err) = fails(&pool, &["queue"]);
    has(
        &err,
        &[
            "cannot reach the labpool controller",
            "hint: start it with `labpool serve`",
        ],
    );

    let out = pool
        .command(&["init", "--dir", pool.dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    has(
        &String::from_utf8(out.stderr).unwrap(),
        &["already exists", "--force"],
    );
    let out = pool
        .command(&["init", "--dir", "/tmp/lp-never", "--virtual-gpus", "four"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    has(
        &String::from_utf8(out.stderr).unwrap(),
        &["invalid virtual GPUs 'four'"],
    );
    assert!(!std::path::Path::new("/tmp/lp-never").exists());
}

#[test]
fn gpu_jobs_on_a_node_without_gpus_say_how_to_get_some() {
    let mut pool = Pool::build(
        None,
        &[("LABPOOL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")],
    );
    pool.start();
    let (_, err) = fails(&pool, &["submit", "--gpus", "1", "--wrap", "true"]);
    has(
        &err,
        &[
            "job asks for 1 GPUs but no node in partition normal has GPUs",
            "switch on virtual_gpus under [node]",
        ],
    );
    // CPU-only jobs run.
    let id = pool.submit(&["--wrap", "echo cvd=[$CUDA_VISIBLE_DEVICES]"]);
    assert_eq!(
        crate::pool::s(
            &pool.wait_done(id, std::time::Duration::from_secs(20)),
            "state"
        ),
        "COMPLETED"
    );
    let out = crate::pool::read_output(&pool.work.join(format!("labpool-{id}.out")));
    assert_eq!(out.trim(), "cvd=[]", "a CPU-only job sees no GPU");
}

#[test]
fn serve_refuses_to_replace_a_file_that_is_not_a_socket() {
    let pool = Pool::new("1:t4");
    pool.edit_config(|t| t.replace("labpool.sock\"", "notes.txt\""));
    std::fs::write(pool.dir.join("notes.txt"), "keep me").unwrap();
    let out = pool.cli(&["serve"]);
    assert!(!out.status.success());
    has(
        &String::from_utf8(out.stderr).unwrap(),
        &["notes.txt exists and is not a socket"],
    );
    assert_eq!(
        std::fs::read_to_string(pool.dir.join("notes.txt")).unwrap(),
        "keep me"
    );
}

#[test]
fn init_quotes_odd_directory_names() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lab \"pool\" \\ x");
    let out = std::process::Command::new(crate::pool::bin())
        .args(["init", "--virtual-gpus", "1", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = std::process::Command::new(crate::pool::bin())
        .args(["init", "--name", "no spaces please", "--dir"])
        .arg(tmp.path().join("other"))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    has(
        &String::from_utf8(bad.stderr).unwrap(),
        &["[node] name", "letters, digits"],
    );
    assert!(
        !tmp.path().join("other").exists(),
        "a refused init leaves nothing behind"
    );
}

#[test]
fn init_writes_a_private_cluster_key_once() {
    use std::os::unix::fs::PermissionsExt;
    let pool = Pool::new("1:t4");
    let key = pool.dir.join("cluster.key");
    let text = std::fs::read_to_string(&key).unwrap();
    assert_eq!(text.trim().len(), 64, "{text}");
    assert!(text.trim().bytes().all(|b| b.is_ascii_hexdigit()), "{text}");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // --force rewrites the config, never the key the nodes already share.
    let out = pool
        .command(&[
            "init",
            "--force",
            "--virtual-gpus",
            "1",
            "--dir",
            pool.dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&key).unwrap(), text);
    // Another pool gets another key.
    let other = Pool::new("1:t4");
    assert_ne!(
        std::fs::read_to_string(other.dir.join("cluster.key")).unwrap(),
        text
    );
}

/// Jobs that could never start are refused at submit, with every problem named: NUL bytes
/// where the kernel takes C strings, and a value longer than the kernel passes.
#[test]
fn jobs_that_could_never_start_are_refused_at_submit() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let sock = pool.dir.join("labpool.sock");
    let base = serde_json::json!({
        "name": "x",
        "script": "#!/bin/sh\ntrue\n",
        "workdir": pool.work,
        "gpus": 0,
        "cpus": 1,
        "mem_mib": 0,
        "umask": 18,
    });
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut b = base.clone();
        f(&mut b);
        b
    };
    let cases = [
        (
            with(&|b| b["workdir"] = "/tmp/a\u{0}b".into()),
            vec!["the working directory holds a NUL byte"],
        ),
        (
            with(&|b| {
                b["args"] = serde_json::json!(["ok", "bad\u{0}arg"]);
                b["environment"] = serde_json::json!({"GOOD": "1", "BAD": "x\u{0}y"});
            }),
            vec![
                "argument 2 holds a NUL byte",
                "the value of BAD holds a NUL byte",
            ],
        ),
        (
            with(&|b| b["environment"] = serde_json::json!({"HUGE": "v".repeat(15 << 20)})),
            vec![
                "HUGE=vvvvvvvvvv... is 15M long",
                "at most 128K per variable",
                "at most 1M",
            ],
        ),
    ];
    for (body, expected) in cases {
        let (status, answer) = post_raw(&sock, "/v1/jobs", &body);
        assert_eq!(status, 400, "{answer}");
        let error = answer["error"].as_str().unwrap();
        has(error, &["could never start"]);
        has(error, &expected);
    }
    assert!(pool.queue().is_empty());
    assert!(pool.history().is_empty());
}

/// A listing whose reader has gone (`labpool nodes | head -1`) ends quietly, not with a panic.
#[test]
fn a_listing_into_a_closed_pipe_ends_quietly() {
    let mut pool = Pool::new("2:t4");
    pool.start();
    for args in [
        &["nodes"][..],
        &["queue"],
        &["history"],
        &["nodes", "--json"],
    ] {
        let (read, write) = nix::unistd::pipe().unwrap();
        drop(read);
        let out = pool
            .command(args)
            .stdout(std::process::Stdio::from(write))
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "labpool {args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "labpool {args:?}: {err}");
    }
}
