//! What the options of Slurm's commands filter and print, beyond the basics: sacct's `-s`,
//! `-b`, `--delimiter`, `-r`, `-e`; squeue's `-l` and `-w`; sinfo's `-r`, `-d`, `-n`, `-t`;
//! scontrol's `show partition` and `show job`/`show node` without a name; an option that
//! changes nothing here warned about, one that would change what is done refused (and nothing
//! done); `--version`.

use crate::pool::{Pool, has, s};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

#[test]
fn slurm_commands_filter_and_print_as_their_options_say() {
    let mut pool = Pool::new("2:a100");
    pool.start();
    let sbatch = |args: &[&str]| -> String {
        let mut all = vec!["--parsable"];
        all.extend_from_slice(args);
        pool.slurm("sbatch", &all).trim().to_string()
    };
    let ok = sbatch(&["--wrap", "true"]);
    let failed = sbatch(&["--wrap", "exit 3"]);
    let held = sbatch(&["--hold", "--wrap", "true"]);
    for id in [&ok, &failed] {
        pool.wait_done(id.parse().unwrap(), T);
    }
    let node = s(&pool.job(ok.parse().unwrap()), "node").to_string();

    // sacct: states (short or long names), --brief, --delimiter, partitions, --helpformat.
    let ids = |out: String| out.lines().map(str::to_string).collect::<Vec<_>>();
    let sacct = |args: &[&str]| pool.slurm("sacct", args);
    assert_eq!(
        ids(sacct(&["-X", "-n", "-P", "-s", "F", "-o", "JobID"])),
        std::slice::from_ref(&failed)
    );
    assert_eq!(
        ids(sacct(&[
            "-X",
            "-n",
            "-P",
            "--state=CD,FAILED",
            "-o",
            "JobID"
        ])),
        [ok.clone(), failed.clone()]
    );
    assert_eq!(
        sacct(&["-X", "-n", "-P", "-b", "-j", &ok]).trim(),
        format!("{ok}|COMPLETED|0:0")
    );
    assert_eq!(
        sacct(&[
            "-X",
            "-n",
            "-p",
            "--delimiter=:",
            "-o",
            "JobID,State",
            "-j",
            &failed
        ])
        .trim(),
        format!("{failed}:FAILED:")
    );
    assert!(
        sacct(&["-X", "-n", "-P", "-r", "no-such-partition", "-a"])
            .trim()
            .is_empty()
    );
    has(&sacct(&["-e"]), &["JobIDRaw", "NodeList", "Reason"]);

    // squeue: the long columns, and jobs by node.
    let long = pool.slurm("squeue", &["-l", "-h", "-j", &held]);
    has(&long, &[&held, "PENDING", "(JobHeldUser)"]);
    assert!(
        pool.slurm("squeue", &["-h", "-w", "no-such-node", "-o", "%i"])
            .trim()
            .is_empty()
    );

    // sinfo: the node filters (-N lists a node once per partition; once is enough here).
    let sinfo = |args: &[&str]| {
        let out = pool.slurm("sinfo", args);
        let names: std::collections::BTreeSet<&str> = out.lines().map(str::trim).collect();
        names.into_iter().collect::<Vec<_>>().join(",")
    };
    assert_eq!(sinfo(&["-h", "-N", "-r", "-o", "%N"]), node);
    assert_eq!(sinfo(&["-h", "-N", "-d", "-o", "%N"]), "");
    assert_eq!(sinfo(&["-h", "-N", "-t", "down,drain", "-o", "%N"]), "");
    assert_eq!(
        sinfo(&["-h", "-N", "-t", "idle,mix", "-n", &node, "-o", "%N"]),
        node
    );

    // scontrol: every partition, job and node when none is named.
    let parts = pool.slurm("scontrol", &["show", "partition"]);
    has(
        &parts,
        &["PartitionName=", "State=UP", &format!("Nodes={node}")],
    );
    has(
        &pool.slurm("scontrol", &["show", "job"]),
        &[&format!("JobId={held}")],
    );
    has(
        &pool.slurm("scontrol", &["-o", "show", "nodes"]),
        &[&format!("NodeName={node}")],
    );

    // An option that changes nothing here is warned about; one that would cancel more than
    // asked is refused, and nothing is cancelled.
    let (_, said) = pool.slurm_out("squeue", &["--sort=-t", "-h"], true);
    has(&said, &["squeue: warning: --sort ignored"]);
    let (_, said) = pool.slurm_out("scancel", &["--qos", "normal", &held], false);
    has(&said, &["scancel: error: --qos:"]);
    assert_eq!(s(&pool.job(held.parse().unwrap()), "state"), "PENDING");
    // With a filter and ids, only the named jobs that pass it (simple_slurm's `scancel --me`).
    pool.slurm("scancel", &["-u", "nobody", &held]);
    assert_eq!(s(&pool.job(held.parse().unwrap()), "state"), "PENDING");
    pool.slurm("scancel", &["--me"]);
    assert_eq!(
        s(&pool.wait_done(held.parse().unwrap(), T), "state"),
        "CANCELLED"
    );
    // A script's own -V is the script's: sbatch submits, it does not print its version.
    pool.script("args.sh", "#!/bin/sh\necho args=$@\n");
    let id = sbatch(&["-o", "args.out", "args.sh", "-V"]);
    assert!(id.parse::<u64>().is_ok(), "{id}");
    pool.wait_done(id.parse().unwrap(), T);
    has(
        &std::fs::read_to_string(pool.work.join("args.out")).unwrap(),
        &["args=-V"],
    );
    for name in ["sinfo", "squeue", "sacct", "sbatch", "srun", "scontrol"] {
        assert_eq!(
            pool.slurm(name, &["--version"]).trim(),
            "slurm 22.05.8",
            "{name}"
        );
    }
}
