//! GPU discovery through NVML, against the scripted fake `libnvidia-ml.so` built here with gcc,
//! and the clear fallback when there is no NVML at all.

use crate::pool::{Pool, have_tool, read_output, s, stdout_of};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Rewrites the fake NVML's script beside it (in `dir`) atomically: every NVML call re-reads it.
pub fn script(dir: &Path, text: &str) {
    let tmp = dir.join("nvml-script.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, dir.join("nvml-script.txt")).unwrap();
}

/// Builds the scripted fake NVML (`fake_nvml.c`, see its header for the script format) into
/// `dir`; None, as `have_tool` decides, without gcc.
pub fn build_fake_nvml(test: &str, dir: &Path) -> Option<PathBuf> {
    if !have_tool(test, "gcc") {
        return None;
    }
    let src = dir.join("fake_nvml.c");
    let lib = dir.join("libnvidia-ml.so.1");
    std::fs::write(&src, include_str!("fake_nvml.c")).unwrap();
    let out = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(lib)
}

/// A started pool on the fake NVML built in `build`, running `script`, sampled every 200 ms,
/// its config changed by `edit` before it starts; None without gcc.
pub fn fake_nvml_pool(
    test: &str,
    build: &Path,
    script_text: &str,
    edit: impl FnOnce(String) -> String,
) -> Option<Pool> {
    let lib = build_fake_nvml(test, build)?;
    script(build, script_text);
    Some(on_fake_nvml(&lib, edit))
}

/// A started pool on the fake NVML `lib`, sampled every 200 ms, its config changed by `edit`
/// before it starts.
pub fn on_fake_nvml(lib: &Path, edit: impl FnOnce(String) -> String) -> Pool {
    let lib_str = lib.to_str().unwrap();
    let mut pool = Pool::build(None, &[("LABPOOL_NVML_LIBRARY", lib_str)]);
    pool.edit_config(|t| {
        let t = t
            .replace(
                "# nvml_library = \"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\"",
                &format!("nvml_library = \"{lib_str}\""),
            )
            .replace("# sample_interval = \"5s\"", "sample_interval = \"200ms\"");
        edit(t)
    });
    pool.start();
    pool
}

#[test]
fn nvml_gpus_are_discovered_and_scheduled() {
    let build = tempfile::tempdir().unwrap();
    let Some(lib) = build_fake_nvml("nvml_gpus_are_discovered_and_scheduled", build.path()) else {
        return;
    };

    let lib_str = lib.to_str().unwrap();
    let mut pool = Pool::build(None, &[("LABPOOL_NVML_LIBRARY", lib_str)]);
    let text = std::fs::read_to_string(&pool.config).unwrap();
    assert!(
        text.contains("# GPUs: NVML found 2x rtx4090 (NVIDIA GeForce RTX 4090)"),
        "{text}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("virtual_gpus")),
        "{text}"
    );
    pool.edit_config(|t| {
        t.replace(
            "# nvml_library = \"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\"",
            &format!("nvml_library = \"{lib_str}\""),
        )
    });
    pool.start();
    let nodes: Vec<serde_json::Value> =
        serde_json::from_str(&pool.ok(&["nodes", "--json"])).unwrap();
    assert_eq!(s(&nodes[0], "gpu_source"), "nvml");
    let gpus = nodes[0]["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[1]["gpu_type"], "rtx4090");
    assert_eq!(gpus[1]["product"], "NVIDIA GeForce RTX 4090");
    assert_eq!(gpus[1]["memory_mib"], 24564);
    assert_eq!(gpus[1]["uuid"], "GPU-stub-2");
    let id = pool.submit(&[
        "--gres=gpu:rtx4090:2",
        "--wrap",
        "echo $CUDA_VISIBLE_DEVICES",
    ]);
    assert_eq!(
        s(&pool.wait_done(id, Duration::from_secs(20)), "state"),
        "COMPLETED"
    );
    assert_eq!(
        read_output(&pool.work.join(format!("labpool-{id}.out"))).trim(),
        "0,1"
    );
}

#[test]
fn without_nvml_init_says_so_and_offers_virtual_gpus() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(crate::pool::bin())
        .args(["init", "--dir"])
        .arg(tmp.path())
        .env("LABPOOL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
        .output()
        .unwrap();
    let stdout = stdout_of(&out);
    assert!(
        stdout.contains("GPUs   none found on this machine (NVML did not load"),
        "{stdout}"
    );
    assert!(stdout.contains("--virtual-gpus 4:rtx4090"), "{stdout}");
    let text = std::fs::read_to_string(tmp.path().join("labpool.toml")).unwrap();
    assert!(text.contains("# virtual_gpus = \"4:rtx4090\""), "{text}");
    assert!(
        text.contains(&format!(
            "socket = \"{}/labpool.sock\"",
            tmp.path().display()
        )),
        "{text}"
    );
}

#[test]
fn nvlink_pairs_are_discovered_from_nvml() {
    let build = tempfile::tempdir().unwrap();
    let Some(lib) = build_fake_nvml("nvlink_pairs_are_discovered_from_nvml", build.path()) else {
        return;
    };
    // Four cards, bridged 0-1 and 2-3.
    std::fs::write(
        build.path().join("nvml-script.txt"),
        "count 4\nnvlink 0 1\nnvlink 2 3\n",
    )
    .unwrap();
    let lib_str = lib.to_str().unwrap();
    let mut pool = Pool::build(None, &[("LABPOOL_NVML_LIBRARY", lib_str)]);
    pool.edit_config(|t| {
        t.replace(
            "# nvml_library = \"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\"",
            &format!("nvml_library = \"{lib_str}\""),
        )
    });
    pool.start();
    let nodes: Vec<serde_json::Value> =
        serde_json::from_str(&pool.ok(&["nodes", "--json"])).unwrap();
    let peers: Vec<serde_json::Value> = nodes[0]["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["nvlink_peer"].clone())
        .collect();
    assert_eq!(peers, [1, 0, 3, 2].map(serde_json::Value::from));
}
