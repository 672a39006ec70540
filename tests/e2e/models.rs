//! The lab model cache through the real binary: an admin adds a model to the lab's namespace
//! and a member one to her own, from plain downloads; a job that declares both finds them
//! staged on its node in the hub's layout, and the real `huggingface_hub` (PyPI) reads them
//! offline, with a writable cache beside them; another member cannot add what only she can
//! read, nor write to the shared namespace; a second revision stores only what changed.

use crate::envs::json;
use crate::pool::{Pool, ensure_user, has, have_root, read_output, stdout_of};
use crate::submitit::pylibs_python;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// What the job runs: huggingface_hub resolves both models from the job's cache, offline.
const READ_PY: &str = r#"
import os
from huggingface_hub import hf_hub_download, snapshot_download
p = hf_hub_download("alice-org/tiny", "config.json", local_files_only=True)
print("config=" + open(p).read())
print("real=" + os.path.realpath(p))
d = snapshot_download("lab-org/tiny-bert", local_files_only=True)
print("files=" + ",".join(sorted(os.listdir(d))))
print("weights=%d" % len(open(os.path.join(d, "model.safetensors"), "rb").read()))
v1 = hf_hub_download("alice-org/tiny", "config.json", revision="v1", local_files_only=True)
print("v1=" + open(v1).read())
mine = os.path.join(os.environ["HF_HUB_CACHE"], "scratch.txt")
open(mine, "w").write("mine")
print("writable=" + open(mine).read())
# What huggingface_hub writes when it fetches a revision online: a blob, a snapshot, a ref, in
# the declared model's own folder. The job's are writable; the staged copy is not touched.
folder = os.path.join(os.environ["HF_HUB_CACHE"], "models--alice-org--tiny")
open(os.path.join(folder, "blobs", "fetched"), "w").write("fetched")
os.makedirs(os.path.join(folder, "snapshots", "f" * 40))
open(os.path.join(folder, "refs", "main"), "w").write("f" * 40)
print("fetched=ok")
"#;

/// A plain download of a model in `dir`, owned by `who` and readable by them alone.
fn download(dir: &Path, who: (u32, u32), config: &str) {
    std::fs::create_dir_all(dir.join(".cache/huggingface")).unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
    std::fs::write(dir.join("model.safetensors"), vec![3u8; 70_000]).unwrap();
    std::fs::write(dir.join(".cache/huggingface/download.lock"), "").unwrap();
    for entry in walkdir::WalkDir::new(dir) {
        let p = entry.unwrap().into_path();
        nix::unistd::chown(
            &p,
            Some(nix::unistd::Uid::from_raw(who.0)),
            Some(nix::unistd::Gid::from_raw(who.1)),
        )
        .unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn a_job_reads_lab_and_member_models_staged_on_its_node_with_huggingface_hub_offline() {
    let test = "a_job_reads_lab_and_member_models_staged_on_its_node";
    if !have_root(test) {
        return;
    }
    let Some(python) = pylibs_python(test) else {
        return;
    };
    let alice = ensure_user("lp-alice");
    let bob = ensure_user("lp-bob");
    let mut pool = Pool::new("1:t4").for_users();
    pool.start();
    let add_as = |who: (u32, u32), args: &[&str]| pool.cli_as(who.0, who.1, args);

    // The admin adds the lab's model; alice adds one of her own from a directory only she reads.
    let lab = pool.dir.join("lab-download");
    download(&lab, (0, 0), r#"{"model": "bert"}"#);
    let added = json(&pool.ok(&[
        "model",
        "add",
        "lab-org/tiny-bert",
        "--from",
        lab.to_str().unwrap(),
        "--shared",
        "--json",
    ]));
    assert_eq!(
        (added["model"]["owner"].as_str(), added["files"].as_u64()),
        (Some(""), Some(2))
    );
    let hers = pool.work.join("alice-download");
    download(&hers, alice, r#"{"model": "v1"}"#);
    let path = hers.to_str().unwrap();
    let first = json(&stdout_of(&add_as(
        alice,
        &[
            "model",
            "add",
            "alice-org/tiny@v1",
            "--from",
            path,
            "--json",
        ],
    )));
    assert_eq!(first["model"]["owner"], "lp-alice", "{first}");
    assert_eq!(first["new_bytes"], 70_000 + 15, "{first}");

    // Bob cannot add what only alice can read, nor add to the shared namespace.
    let stolen = add_as(bob, &["model", "add", "bob-org/stolen", "--from", path]);
    assert!(
        !stolen.status.success(),
        "bob copied alice's files: {stolen:?}"
    );
    has(
        &String::from_utf8_lossy(&stolen.stderr),
        &["Permission denied"],
    );
    let shared = add_as(
        bob,
        &["model", "add", "bob-org/x", "--from", "/etc", "--shared"],
    );
    assert!(!shared.status.success());
    has(
        &String::from_utf8_lossy(&shared.stderr),
        &["only an admin", "leave out --shared"],
    );
    let store = pool.dir.join("shared/datasets/.models");
    assert!(
        !store.join("users/lp-bob").exists(),
        "a refused add left files"
    );

    // A second revision: only the changed file is new, and main moves to it.
    std::fs::write(hers.join("config.json"), r#"{"model": "v2"}"#).unwrap();
    let second = json(&stdout_of(&add_as(
        alice,
        &[
            "model",
            "add",
            "alice-org/tiny@v2",
            "--from",
            path,
            "--json",
        ],
    )));
    assert_eq!(second["new_bytes"], 15, "{second}");
    let listed = json(&stdout_of(&add_as(alice, &["model", "list", "--json"])));
    let tiny = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["repo"] == "alice-org/tiny")
        .unwrap_or_else(|| panic!("{listed}"));
    let refs: Vec<&str> = tiny["refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_str().unwrap())
        .collect();
    assert_eq!(refs, ["main", "v1", "v2"], "{tiny}");
    assert_eq!(tiny["refs"][0][1], second["commit"]);

    // Alice's job reads both, staged on its node, offline.
    let reader = pool.work.join("read.py");
    std::fs::write(&reader, READ_PY).unwrap();
    std::fs::set_permissions(&reader, std::fs::Permissions::from_mode(0o644)).unwrap();
    let script = pool.script(
        "models.sh",
        &format!(
            "#!/bin/sh\n#LABPOOL --model alice-org/tiny --model lab-org/tiny-bert\nexec {} {}\n",
            python.display(),
            reader.display()
        ),
    );
    let out = add_as(
        alice,
        &[
            "submit",
            "--parsable",
            "-o",
            "models.out",
            script.to_str().unwrap(),
        ],
    );
    let job: u64 = stdout_of(&out).trim().parse().unwrap();
    let done = pool.wait_done(job, Duration::from_secs(60));
    let printed = read_output(&pool.work.join("models.out"));
    assert_eq!(
        done["state"],
        "COMPLETED",
        "{done:#}\n{printed}\n{}",
        pool.serve_log()
    );
    has(
        &printed,
        &[
            r#"config={"model": "v2"}"#,
            "files=config.json,model.safetensors",
            "weights=70000",
            r#"v1={"model": "v1"}"#,
            "writable=mine",
            "fetched=ok",
        ],
    );
    // The shared tree is as it was: main still names the second revision.
    let tree = std::path::PathBuf::from(tiny["path"].as_str().unwrap());
    let main = std::fs::read_to_string(tree.join("models--alice-org--tiny/refs/main")).unwrap();
    assert_eq!(main, second["commit"].as_str().unwrap());
    // Adding the same files again records no new version (nodes stage nothing again).
    add_as(
        alice,
        &["model", "add", "alice-org/tiny@v2", "--from", path],
    );
    let again = json(&stdout_of(&add_as(alice, &["model", "list", "--json"])));
    let version = |l: &serde_json::Value| {
        l.as_array()
            .unwrap()
            .iter()
            .find(|m| m["repo"] == "alice-org/tiny")
            .unwrap()["version"]
            .clone()
    };
    assert_eq!(version(&again), version(&listed));
    // Bob's list has the lab's model and none of alice's.
    let bobs = json(&stdout_of(&add_as(bob, &["model", "list", "--json"])));
    let repos: Vec<&str> = bobs
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["repo"].as_str().unwrap())
        .collect();
    assert_eq!(repos, ["lab-org/tiny-bert"], "{bobs}");
    // The weights were read from the node's cache, not from the store on shared storage.
    let real = printed
        .lines()
        .find_map(|l| l.strip_prefix("real="))
        .unwrap();
    assert!(
        real.starts_with(pool.dir.join("cache").to_str().unwrap()),
        "{real}"
    );
    // Bob's job cannot name alice's model.
    let refused = add_as(
        bob,
        &["submit", "--model", "alice-org/tiny", "--wrap", "true"],
    );
    assert!(!refused.status.success());
    has(
        &String::from_utf8_lossy(&refused.stderr),
        &["no model alice-org/tiny", "labpool model list"],
    );
}
