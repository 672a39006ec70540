//! One `#SBATCH` script with a slice (`--gres=shard:1`, a quarter of a card) runs unchanged on
//! labpool's own nodes, in the Slurm test cluster itself (`sbatch`), and through labpool over
//! that Slurm, where labpool asks Slurm for the shard and holds the job to its quarter as its
//! own agents do, with nothing of the slice left on the node after the job.

use crate::pool::{Pool, ensure_user, read_output};
use crate::slices::{build_fake_cuda, slice_dirs};
use crate::slurm_pool::SlurmPool;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// The script: the job's first process holds 1500 MiB in the background while an `srun` step
/// asks for 5000, then for 500. It takes descriptors 7 and 8 for itself first, as scripts do
/// (`exec 7>log`): the slice must not depend on them.
fn shard_script(cuda: &Path) -> String {
    format!(
        "#!/bin/sh\n\
         #SBATCH --gres=shard:1\n\
         #SBATCH --output=shard-%j.out\n\
         exec 7>/dev/null 8>/dev/null\n\
         echo shards=$SLURM_SHARDS_ON_NODE\n\
         export LD_LIBRARY_PATH={cuda}\n\
         {probe} linked info alloc 1500 hold 4 &\n\
         sleep 1\n\
         srun {probe} dlsym alloc 5000 alloc 500\n\
         wait\n",
        cuda = cuda.display(),
        probe = cuda.join("probe").display(),
    )
}

/// What the script prints when it is held to a quarter of a 24 GiB card.
const HELD_TO_A_QUARTER: [&str; 5] = [
    "shards=1",
    "info free=6144 total=6144",
    "alloc 1500 ok",
    "alloc 5000 err 2",
    "alloc 500 ok",
];

#[test]
fn a_shard_script_runs_unchanged_on_labpool_in_slurm_and_through_labpool_over_slurm() {
    let slices = |t: String| t.replace("[node]\n", "[node]\nslices = { a100 = [2, 4] }\n");
    let Some(p) = SlurmPool::with_agents("slurm_slices", |t| t, "8:a100:24G", slices) else {
        return;
    };
    let cuda = p.c.ctrl.dir.join("cuda");
    if build_fake_cuda("slurm_slices", &cuda).is_none() {
        return;
    }
    for dir in [&p.c.ctrl.dir, &cuda] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let text = shard_script(&cuda);

    // 1. Through labpool over Slurm, as a member: Slurm runs it with one shard, and labpool
    // holds it to its quarter.
    let (alice, alice_gid) = ensure_user("lp-alice");
    let script = p.c.ctrl.script("shard.sh", &text);
    let before = slice_dirs();
    let id = p.submit_as(alice, alice_gid, &script);
    let j = p.c.ctrl.wait_done(id, Duration::from_secs(90));
    assert_eq!(j["state"], "COMPLETED", "{j:#}\n{}", p.c.ctrl.serve_log());
    let sj = p.slurm_jobs_of(id);
    assert_eq!(sj.len(), 1, "{sj:#?}");
    let asked = sj[0]["tres_per_node"].as_str().unwrap_or_default();
    assert!(asked.contains("shard:1"), "Slurm was asked for {asked:?}");
    let out = read_output(&p.c.ctrl.work.join(format!("shard-{id}.out")));
    assert_eq!(out.lines().collect::<Vec<_>>(), HELD_TO_A_QUARTER, "{out}");
    let left: Vec<String> = slice_dirs().difference(&before).cloned().collect();
    assert!(left.is_empty(), "the slice left {left:?} in /tmp");

    // 2. In Slurm itself, the same file: Slurm takes the shard and runs it, with no cap.
    let out = p
        .slurm_cmd("sbatch")
        .args(["--parsable", script.to_str().unwrap()])
        .current_dir(&p.c.ctrl.work)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sid: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let (state, code, _) = p.sacct(sid);
    assert_eq!((state.as_str(), code.as_str()), ("COMPLETED", "0:0"));
    let out = read_output(&p.c.ctrl.work.join(format!("shard-{sid}.out")));
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "shards=1",
            "info free=24576 total=24576",
            "alloc 1500 ok",
            "alloc 5000 ok",
            "alloc 500 ok"
        ],
        "{out}"
    );

    // 3. On labpool's own node, the same file, held to its quarter by the agent.
    let mut own = Pool::new("2:a100:24G");
    own.edit_config(slices);
    own.start();
    let script = own.script("shard.sh", &text);
    let id = own.submit(&[script.to_str().unwrap()]);
    let j = own.wait_done(id, Duration::from_secs(60));
    assert_eq!(j["state"], "COMPLETED", "{j}");
    let out = read_output(&own.work.join(format!("shard-{id}.out")));
    assert_eq!(out.lines().collect::<Vec<_>>(), HELD_TO_A_QUARTER, "{out}");
}
