//! sbatch 22.05's options that mean nothing on a labpool pool: CPU and socket layout, binding
//! and frequencies, burst buffers, power, accounting keys, client verbosity. Each is read as
//! sbatch reads it (so a script that has one is accepted) and warned about in one line that
//! says why it changes nothing. The list is sbatch 22.05's options (its man page and
//! `sbatch --help`) less those labpool implements or refuses with a reason.

/// Declares the ignored options: (field, short, long, takes a value, why it means nothing).
macro_rules! ignored_options {
    ($( $field:ident, $short:expr, $long:literal, $value:literal, $why:literal; )*) => {
        // Options accepted for Slurm scripts and ignored, each with a one-line warning. (A plain
        // comment, as on `JobOptions`: clap would show a doc comment as deferred commands'
        // `--help` text.)
        #[allow(missing_docs)]
        #[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
        pub struct IgnoredOptions {
            $(
                #[doc = $why]
                #[arg(
                    long = $long,
                    short = $short,
                    value_name = "VALUE",
                    num_args = if $value { 1 } else { 0 },
                    default_missing_value = "",
                    hide = true
                )]
                pub $field: Option<String>,
            )*
        }

        impl IgnoredOptions {
            /// Layers `over` on top of `self`.
            pub fn overlay(self, over: IgnoredOptions) -> IgnoredOptions {
                IgnoredOptions { $( $field: over.$field.or(self.$field), )* }
            }

            /// One line for each option given.
            pub fn warnings(&self) -> Vec<String> {
                let mut out = Vec::new();
                $(
                    if self.$field.is_some() {
                        out.push(format!("--{} ignored: {}", $long, $why));
                    }
                )*
                out
            }
        }
    };
}

ignored_options! {
    cores_per_socket, None, "cores-per-socket", true, "labpool gives a job cores and GPUs, not a socket or thread layout";
    sockets_per_node, None, "sockets-per-node", true, "labpool gives a job cores and GPUs, not a socket or thread layout";
    threads_per_core, None, "threads-per-core", true, "labpool gives a job cores and GPUs, not a socket or thread layout";
    ntasks_per_core, None, "ntasks-per-core", true, "labpool gives a job cores and GPUs, not a socket or thread layout";
    ntasks_per_socket, None, "ntasks-per-socket", true, "labpool gives a job cores and GPUs, not a socket or thread layout";
    gpus_per_socket, None, "gpus-per-socket", true, "labpool gives a job cores and GPUs, not a socket or thread layout";
    extra_node_info, Some('B'), "extra-node-info", true, "labpool gives a job cores and GPUs, not a socket or thread layout";
    distribution, Some('m'), "distribution", true, "labpool does not lay tasks out over sockets";
    core_spec, Some('S'), "core-spec", true, "no cores are set aside for the system here";
    thread_spec, None, "thread-spec", true, "no threads are set aside for the system here";
    gpu_bind, None, "gpu-bind", true, "each job sees only its own GPUs already";
    cpu_freq, None, "cpu-freq", true, "labpool does not set CPU frequencies";
    gpu_freq, None, "gpu-freq", true, "labpool does not set GPU clocks";
    mincpus, None, "mincpus", true, "a job gets the cores it asks for (--cpus-per-task)";
    contiguous, None, "contiguous", false, "nodes are not placed on a network topology";
    switches, None, "switches", true, "nodes are not placed on a network topology";
    spread_job, None, "spread-job", false, "a job runs on the nodes it asks for (--nodes)";
    use_min_nodes, None, "use-min-nodes", false, "a job runs on the nodes it asks for (--nodes)";
    overcommit, Some('O'), "overcommit", false, "a job holds the cores it asks for";
    oversubscribe, Some('s'), "oversubscribe", false, "jobs share nodes here already; GPUs are shared only with --gpu-share";
    gres_flags, None, "gres-flags", true, "labpool picks GPUs and cores together";
    power, None, "power", true, "labpool does not manage power";
    reboot, None, "reboot", false, "labpool never reboots nodes for a job";
    delay_boot, None, "delay-boot", true, "labpool never reboots nodes for a job";
    profile, None, "profile", true, "labpool keeps no HDF5 profiles";
    propagate, None, "propagate", true, "the job runs with the pool's resource limits";
    mcs_label, None, "mcs-label", true, "labpool has no MCS labels";
    wckey, None, "wckey", true, "labpool accounts by account (-A), not by workload key";
    bb, None, "bb", true, "there are no burst buffers here; declare data with --dataset";
    bbf, None, "bbf", true, "there are no burst buffers here; declare data with --dataset";
    container, None, "container", true, "run containers with --env (see `labpool env`)";
    cluster_constraint, None, "cluster-constraint", true, "this pool is one cluster";
    no_kill, Some('k'), "no-kill", true, "a job ends with its node, or is requeued";
    priority, None, "priority", true, "priority comes from the pool's policy (see `labpool why`)";
    nice, None, "nice", true, "priority comes from the pool's policy (see `labpool why`)";
    time_min, None, "time-min", true, "backfill uses the time limit (--time)";
    tmp, None, "tmp", true, "declare data with --dataset; node-local disk is the cache's";
    ignore_pbs, None, "ignore-pbs", false, "labpool reads #SBATCH and #LABPOOL lines only";
    hint, None, "hint", true, "labpool gives a job cores and GPUs, not a socket or thread layout";
    mem_bind, None, "mem-bind", true, "labpool does not bind memory to NUMA nodes";
    network, None, "network", true, "labpool sets up no interconnect windows";
    acctg_freq, None, "acctg-freq", true, "labpool samples jobs at its own interval";
    batch, None, "batch", true, "the batch script runs on the job's first node";
    prefer, None, "prefer", true, "labpool reads --constraint only; data locality is chosen from --dataset";
    wait_all_nodes, None, "wait-all-nodes", true, "a job starts when all of its nodes are ready";
    kill_on_invalid_dep, None, "kill-on-invalid-dep", true, "a job whose dependency can never be met waits with reason DependencyNeverSatisfied until cancelled";
    quiet, Some('Q'), "quiet", false, "submit prints only what it must";
    verbose, Some('v'), "verbose", false, "submit has no verbose mode";
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    #[command(no_binary_name = true)]
    struct Line {
        #[command(flatten)]
        ignored: IgnoredOptions,
    }

    #[test]
    fn each_is_read_and_warned_about_in_one_line() {
        let l = Line::try_parse_from(["--cores-per-socket=8", "-O", "--nice", "10", "-B", "2:8"])
            .unwrap();
        let w = l.ignored.warnings();
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].starts_with("--cores-per-socket ignored: "), "{w:?}");
        assert!(
            w.iter()
                .any(|x| x.contains("not a socket or thread layout"))
        );
    }
}
