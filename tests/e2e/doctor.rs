//! `labpool doctor` against real faults: a dead agent, an agent whose clock is off (through the
//! test hook), a full loop-mounted scratch disk, and a config that schedules fewer GPUs than
//! NVML reports (the seed lab's gres pitfall). A healthy pool passes with exit 0.

use crate::monitoring::get_metrics;
use crate::nodes::Cluster;
use crate::nvml::build_fake_nvml;
use crate::pool::{Pool, have_root, have_tool};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The findings that need a person: (check, status, subject, what).
pub fn problems(out: &Output) -> Vec<(String, String, String, String)> {
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}: {out:?}"));
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] != "ok")
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_string();
            (s("check"), s("status"), s("subject"), s("what"))
        })
        .collect()
}

#[test]
fn doctor_names_a_dead_agent_and_a_skewed_clock() {
    if !have_root("doctor_names_a_dead_agent_and_a_skewed_clock") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "2s");
    c.ctrl
        .edit_config(|t| format!("{t}\n[alerts]\nnode_lost_after = \"2s\"\n"));
    c.ctrl.start();
    let dead = c.add_agent("dead", "1:t4", "127.0.0.1");
    c.agents[dead].spawn();
    let skewed = c.add_agent("skewed", "1:t4", "127.0.0.1");
    // 20 s ahead: inside the 5 min signing window, so it works, but the doctor names it.
    c.agents[skewed]
        .env
        .push(("LABPOOL_TEST_CLOCK_OFFSET_MS".into(), "20000".into()));
    c.agents[skewed].spawn();
    for name in ["dead", "skewed"] {
        c.wait_node(name, Duration::from_secs(20), |n| n["state"] == "IDLE");
    }
    c.agents[dead].kill9();
    c.wait_node("dead", Duration::from_secs(20), |n| n["state"] == "DOWN");
    let out = c.ctrl.cli(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let found = problems(&out);
    assert!(
        found
            .iter()
            .any(|(c, s, n, _)| c == "nodes" && s == "fail" && n == "dead"),
        "{found:?}"
    );
    let clock = found
        .iter()
        .find(|(c, _, n, _)| c == "clocks" && n == "skewed")
        .unwrap_or_else(|| panic!("{found:?}"));
    assert!(
        clock.3.contains("+20.") || clock.3.contains("+19."),
        "{clock:?}"
    );
    assert!(
        !found
            .iter()
            .any(|(c, _, n, _)| c == "clocks" && n == "dead"),
        "{found:?}"
    );
    // Each agent serves its own node's /metrics, and its readings (here its jobs' memory; it
    // has no NVML) reach the controller's page with its heartbeats.
    let agent_page = get_metrics(&c.agents[skewed].dir.join("state/metrics.addr"));
    assert!(
        agent_page.contains("labpool_gpu_sample_duration_seconds{node=\"skewed\"}"),
        "{agent_page}"
    );
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let page = get_metrics(&c.ctrl.dir.join("state/metrics.addr"));
        if page.contains("labpool_gpu_sample_age_seconds{node=\"skewed\"}") {
            break;
        }
        assert!(std::time::Instant::now() < end, "{page}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The seed's "node lost for 5 minutes" alert, with the time scaled down.
    firing(&c.ctrl, "node_lost", "dead");
    let text = c.ctrl.cli(&["doctor"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("fix: check that its agent runs"), "{text}");
    assert!(text.contains("need a person"), "{text}");
}

/// Waits until `labpool alerts` has `rule` firing for `subject`.
fn firing(pool: &Pool, rule: &str, subject: &str) {
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let v: Value = serde_json::from_str(&pool.ok(&["alerts", "--json"])).unwrap();
        if v["firing"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["rule"] == rule && a["subject"] == subject)
        {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "no {rule} for {subject}: {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A loop-mounted ext4 image at `dir`, unmounted on drop.
struct LoopDisk(PathBuf);

impl LoopDisk {
    fn mount(dir: &Path, image: &Path) -> LoopDisk {
        let sh = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
        sh(Command::new("truncate").arg("-s").arg("16M").arg(image));
        sh(Command::new("mkfs.ext4").arg("-q").arg("-F").arg(image));
        std::fs::create_dir_all(dir).unwrap();
        sh(Command::new("mount")
            .arg("-o")
            .arg("loop")
            .arg(image)
            .arg(dir));
        LoopDisk(dir.to_path_buf())
    }

    /// Writes until the disk refuses.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.0.join("filler")).unwrap();
        let block = vec![7u8; 1 << 20];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn doctor_passes_a_healthy_pool_and_finds_a_full_disk_and_hidden_gpus() {
    if !have_root("doctor_finds_a_full_disk_and_hidden_gpus")
        || !have_tool("doctor_finds_a_full_disk_and_hidden_gpus", "mkfs.ext4")
    {
        return;
    }
    let build = tempfile::tempdir().unwrap();
    let Some(lib) = build_fake_nvml("doctor_finds_hidden_gpus", build.path()) else {
        return;
    };
    let lib_str = lib.to_str().unwrap();
    let mut pool = Pool::build(None, &[("LABPOOL_NVML_LIBRARY", lib_str)]);
    pool.edit_config(|t| {
        t.replace(
            "# nvml_library = \"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\"",
            &format!("nvml_library = \"{lib_str}\""),
        )
    });
    pool.start();
    let out = pool.cli(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", problems(&out));
    pool.stop();

    // Two GPUs in the box, one in the config; scratch fills up; the admin group is misspelt.
    pool.edit_config(|t| {
        t.replace("[node]\n", "[node]\nvirtual_gpus = \"1:rtx4090\"\n")
            .replace(
                "admin_group = \"labpool-admins\"",
                "admin_group = \"labpool-admns\"",
            )
    });
    let scratch = pool.dir.join("shared/scratch");
    let disk = LoopDisk::mount(&scratch, &build.path().join("scratch.img"));
    disk.fill();
    pool.start();
    let out = pool.cli(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let found = problems(&out);
    assert!(
        found.iter().any(|(c, s, subject, what)| c == "disks"
            && s == "fail"
            && Path::new(subject) == scratch
            && what.ends_with("% full")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|(c, s, _, what)| c == "config"
            && s == "fail"
            && what == "NVML reports 2 GPUs but the pool schedules 1"),
        "{found:?}"
    );
    assert!(
        found.iter().any(|(c, s, subject, what)| c == "admins"
            && s == "warn"
            && subject == "labpool-admns"
            && what.contains("does not exist on this host, so only root is an admin")),
        "{found:?}"
    );
    assert!(
        pool.serve_log()
            .contains("admin_group \"labpool-admns\" does not exist"),
        "serve says so too"
    );
    // The seed's "disk above 90%" alert fires for it too.
    firing(&pool, "disk_full", scratch.to_str().unwrap());
    pool.stop();
}
