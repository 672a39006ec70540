//! `cargo bench --bench envs`: putting a Python environment on a node, labpool's way (build
//! once, pack, unpack at the same path on each node; the same spec again is a lock and an id
//! lookup) against what members do by hand (a venv and `pip install` on every node, or
//! copying a built venv with `cp -a` / `rsync -a`), on the same spec in one run.
//!
//! The spec is `numpy` and `requests` (with their dependencies), pinned. pip's cache is warmed
//! once before timing, so both sides install from the same local wheels and the network is
//! out of the comparison. Knobs: `BENCH_RUNS` (default 3), `BENCH_DIR` (default /var/tmp),
//! `BENCH_PYTHON` (default /usr/bin/python3).

#[path = "common.rs"]
mod common;

use common::{bench_base, env_num, median, rm, run, scratch_dir};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const SPEC: &str = "numpy==1.26.4\nrequests==2.31.0\n";

fn secs(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn du_bytes(p: &Path) -> u64 {
    run(Command::new("du").args(["-sb"]).arg(p))
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// What a member does on each node: a venv and `pip install -r requirements.txt`.
fn pip_by_hand(python: &Path, dest: &Path, requirements: &Path, cache: &Path) {
    run(Command::new(python).args(["-m", "venv"]).arg(dest));
    run(Command::new(dest.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(requirements)
        .env("PIP_CACHE_DIR", cache));
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    common::require_tools("cargo bench --bench envs", &[("rsync", "rsync")]);
    let runs: usize = env_num("BENCH_RUNS", 3);
    let python = std::path::PathBuf::from(
        std::env::var("BENCH_PYTHON").unwrap_or("/usr/bin/python3".into()),
    );
    let base = bench_base();
    let work = scratch_dir(&base, "envs");
    let w = work.path();
    let cache = w.join("pip-cache");
    let spec = w.join("requirements.txt");
    std::fs::write(&spec, SPEC).unwrap();
    let tools = labpool_envs::tools::Tools::detect(Some(python.clone()));
    // SAFETY: set before any thread is started; pip reads it in the children.
    unsafe { std::env::set_var("PIP_CACHE_DIR", &cache) };

    // Warm pip's cache with every wheel, so that no timed row downloads.
    println!("warming pip's cache (downloads once)...");
    pip_by_hand(&python, &w.join("warm"), &spec, &cache);
    rm(&w.join("warm"));

    let mut rows: Vec<(&str, Vec<f64>, Vec<f64>)> = vec![
        ("lock + first build", Vec::new(), Vec::new()),
        ("the same spec again", Vec::new(), Vec::new()),
        (
            "onto another node: vs pip on the node",
            Vec::new(),
            Vec::new(),
        ),
        ("onto another node: vs cp -a", Vec::new(), Vec::new()),
        ("onto another node: vs rsync -a", Vec::new(), Vec::new()),
    ];
    let mut sizes = (0, 0);
    for r in 0..runs {
        println!("run {}/{runs}", r + 1);
        let store = w.join("store");
        let node = w.join("node");
        rm(&store);
        rm(&node);
        std::fs::create_dir_all(&store).unwrap();
        std::fs::create_dir_all(&node).unwrap();
        let mut log = Vec::new();

        // labpool: lock, build at the fixed path, pack.
        let mut lock = None;
        let mut dir = std::path::PathBuf::new();
        let ours = secs(|| {
            let l = labpool_envs::lock::lock(&w.join("requirements.txt"), None, &tools, &mut log)
                .unwrap();
            dir = store.join(&l.id);
            std::fs::create_dir(&dir).unwrap();
            labpool_envs::build::build(&l, &dir, &tools, &mut log).unwrap();
            lock = Some(l);
        });
        let lock = lock.unwrap();
        let lock_file = w.join("requirements.lock");
        std::fs::write(&lock_file, &lock.lock).unwrap();
        let theirs = secs(|| pip_by_hand(&python, &w.join("byhand"), &spec, &cache));
        rows[0].1.push(ours);
        rows[0].2.push(theirs);
        let archive = w.join("env.tar.zst");
        let packed = labpool_envs::pack::pack(&dir, &archive).unwrap();
        sizes = (du_bytes(&dir), packed);

        // The same spec again (another member): labpool locks and finds the id built.
        let ours = secs(|| {
            let again =
                labpool_envs::lock::lock(&w.join("requirements.txt"), None, &tools, &mut log)
                    .unwrap();
            assert_eq!(again.id, lock.id);
            assert!(labpool_envs::pack::is_complete(&store.join(&again.id)));
        });
        rm(&w.join("byhand"));
        let theirs = secs(|| pip_by_hand(&python, &w.join("byhand"), &spec, &cache));
        rows[1].1.push(ours);
        rows[1].2.push(theirs);

        // Onto another node: unpack at the same path (here: a second path on the same disk,
        // the node's local copy), against pip there, and against copying the built venv.
        // Every row here starts with nothing dirty and ends with the copy on disk: labpool's
        // unpack ends with a syncfs before its rename; the peers are followed by `sync`.
        let target = node.join(&lock.id);
        run(&mut Command::new("sync"));
        let ours = secs(|| {
            assert!(labpool_envs::pack::unpack(&archive, &target).unwrap());
        });
        for (i, peer) in ["pip", "cp", "rsync"].into_iter().enumerate() {
            let to = node.join(format!("by-{peer}"));
            run(&mut Command::new("sync"));
            let theirs = secs(|| {
                match peer {
                    "pip" => pip_by_hand(&python, &to, &spec, &cache),
                    "cp" => {
                        run(Command::new("cp").arg("-a").arg(&dir).arg(&to));
                    }
                    _ => {
                        run(Command::new("rsync")
                            .arg("-a")
                            .arg(format!("{}/", dir.display()))
                            .arg(&to));
                    }
                }
                run(&mut Command::new("sync"));
            });
            rows[2 + i].1.push(ours);
            rows[2 + i].2.push(theirs);
        }
        rm(&w.join("byhand"));
    }

    println!(
        "\nvenv of {} ({} packages locked): {:.1} MB on disk, {:.1} MB packed; medians of {runs} runs",
        SPEC.trim().replace('\n', " + "),
        std::fs::read_to_string(w.join("requirements.lock"))
            .unwrap()
            .lines()
            .count(),
        sizes.0 as f64 / 1e6,
        sizes.1 as f64 / 1e6
    );
    println!(
        "bytes a node fetches: labpool's archive {:.1} MB, a copy of the venv {:.1} MB ({:.1}x)",
        sizes.1 as f64 / 1e6,
        sizes.0 as f64 / 1e6,
        sizes.0 as f64 / sizes.1 as f64
    );
    println!("| row | labpool | peer | ratio (peer / labpool) |\n|---|---|---|---|");
    for (name, ours, theirs) in rows {
        let (o, t) = (median(ours), median(theirs));
        println!("| {name} | {o:.2} s | {t:.2} s | {:.1}x |", t / o);
    }
}
