//! simple_slurm, unchanged from PyPI (the version `scripts/test` pins), against labpool's Slurm
//! commands: the flow of `tests/python/simple_slurm_flow.py` (a here-document on sbatch's
//! standard input, squeue's CSV format, scancel of one job and of all of mine).

use crate::pool::Pool;
use crate::submitit::{pylibs_python, run_python};
use std::path::Path;

#[test]
fn simple_slurm_submits_lists_and_cancels() {
    let Some(python) = pylibs_python("simple_slurm_submits_lists_and_cancels") else {
        return;
    };
    let mut pool = Pool::new("2:a100");
    pool.start();
    let flow = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/simple_slurm_flow.py");
    let out = run_python(&pool, &python, &[flow.to_str().unwrap()]);
    assert!(out.trim_end().ends_with("ok"), "{out}");
}
