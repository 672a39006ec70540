//! Every committed fuzz input, run through its target on stable Rust: the seed corpus
//! (`fuzz/corpus/TARGET/`) and every crash the fuzzers found (`fuzz/regressions/TARGET/`,
//! each a regression test from the day it was fixed). `scripts/fuzz` runs the same targets
//! under libFuzzer for a fixed time.
//!
//! `LABPOOL_WRITE_FUZZ_SEEDS=1 cargo test --test fuzz_corpus` writes the seed corpus anew from
//! labpool's own encoders (a real pack and index, real trees, manifests and locks).

#[allow(dead_code)]
#[path = "../../fuzz/targets.rs"]
mod targets;

mod seeds;

use std::path::Path;

/// A fuzz target's body.
type Target = fn(&[u8]);

/// Each target by name, as `fuzz/fuzz_targets/NAME.rs` runs it.
const TARGETS: [(&str, Target); 11] = [
    ("script", targets::script),
    ("config", targets::config),
    ("api", targets::api),
    ("agent", targets::agent),
    ("manifest", targets::manifest),
    ("tree", targets::tree),
    ("pack", targets::pack),
    ("index", targets::index),
    ("lock", targets::lock),
    ("units", targets::units),
    ("slurm", targets::slurm),
];

fn inputs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

#[test]
fn every_committed_fuzz_input_runs_through_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    if std::env::var("LABPOOL_WRITE_FUZZ_SEEDS").as_deref() == Ok("1") {
        seeds::write(&root.join("corpus"));
    }
    for (name, run) in TARGETS {
        let seeds = inputs(&root.join("corpus").join(name));
        assert!(
            seeds.len() >= 3,
            "fuzz/corpus/{name} holds {} seeds; write them with LABPOOL_WRITE_FUZZ_SEEDS=1",
            seeds.len()
        );
        for path in seeds
            .iter()
            .chain(inputs(&root.join("regressions").join(name)).iter())
        {
            let bytes = std::fs::read(path).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&bytes));
            assert!(
                outcome.is_ok(),
                "{} panics in target {name}",
                path.display()
            );
        }
    }
}
