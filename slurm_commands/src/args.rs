//! `srun`'s command line as srun 22.05 reads it: options up to the first word that is not one,
//! then the command and its arguments. The options that shape a step are kept; the rest of
//! srun's options are accepted (they tune binding, MPI plugins or output) and named in one
//! warning.

/// srun's long options that take a value in the next word when not written `--opt=value`.
pub const LONG_WITH_VALUE: &[&str] = &[
    "account",
    "acctg-freq",
    "bb",
    "bbf",
    "bcast-exclude",
    "begin",
    "chdir",
    "cluster-constraint",
    "clusters",
    "comment",
    "constraint",
    "container",
    "core-spec",
    "cores-per-socket",
    "cpu-bind",
    "cpu-freq",
    "cpus-per-gpu",
    "cpus-per-task",
    "deadline",
    "delay-boot",
    "dependency",
    "distribution",
    "epilog",
    "error",
    "exclude",
    "export",
    "extra-node-info",
    "gpu-bind",
    "gpu-freq",
    "gpus",
    "gpus-per-node",
    "gpus-per-socket",
    "gpus-per-task",
    "gres",
    "gres-flags",
    "het-group",
    "input",
    "job-name",
    "jobid",
    "licenses",
    "mail-type",
    "mail-user",
    "mcs-label",
    "mem",
    "mem-bind",
    "mem-per-cpu",
    "mem-per-gpu",
    "mincpus",
    "mpi",
    "nodelist",
    "nodes",
    "ntasks",
    "ntasks-per-core",
    "ntasks-per-gpu",
    "ntasks-per-node",
    "ntasks-per-socket",
    "open-mode",
    "output",
    "partition",
    "power",
    "priority",
    "profile",
    "prolog",
    "qos",
    "relative",
    "reservation",
    "signal",
    "slurmd-debug",
    "sockets-per-node",
    "switches",
    "task-epilog",
    "task-prolog",
    "thread-spec",
    "threads",
    "threads-per-core",
    "time",
    "time-min",
    "tmp",
    "wait",
    "wckey",
    "accel-bind",
    "network",
    "hint",
];

/// srun 22.05's other options: flags, or values only written `--opt=value`.
pub const OTHER_OPTIONS: &[&str] = &[
    "bcast",
    "compress",
    "contiguous",
    "disable-status",
    "exact",
    "exclusive",
    "hold",
    "immediate",
    "kill-on-bad-exit",
    "label",
    "multi-prog",
    "nice",
    "no-allocate",
    "no-kill",
    "overcommit",
    "overlap",
    "oversubscribe",
    "preserve-env",
    "propagate",
    "pty",
    "quiet",
    "quit-on-interrupt",
    "reboot",
    "resv-ports",
    "send-libs",
    "spread-job",
    "unbuffered",
    "use-min-nodes",
    "verbose",
];

/// What srun does itself with an option (the others are named in one warning).
pub const HONOURED: &[(&str, &str)] = &[
    ("ntasks", "the step's tasks"),
    ("nodes", "the step's nodes, of the job's"),
    ("ntasks-per-node", "the step's tasks on each node"),
    ("gpus-per-task", "each task sees only its own GPUs"),
    (
        "cpus-per-task",
        "cores each task needs; the step must fit the job's cores",
    ),
    ("overcommit", "run more tasks than the job has cores for"),
    ("label", "each output line starts with its task's rank"),
    ("pty", "outside a job: an interactive session"),
    ("nodelist", "the step's nodes, of the job's"),
    (
        "output",
        "each task's standard output file (patterns %j %t %s %n …)",
    ),
    ("error", "each task's standard error file"),
    ("open-mode", "append to or truncate the output files"),
    (
        "unbuffered",
        "always so: tasks write straight to their files or pipes",
    ),
    ("quiet", "always so: srun prints only errors"),
];

/// srun's short options that take a value.
const SHORT_WITH_VALUE: &str = "ACDGJLMNSTWbcdeimnopqrtwx";

/// What a step asks for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SrunArgs {
    /// `-n`.
    pub ntasks: Option<u32>,
    /// `-N`.
    pub nodes: Option<u32>,
    /// `--ntasks-per-node`.
    pub ntasks_per_node: Option<u32>,
    /// `--gpus-per-task`: each task sees only its own GPUs.
    pub gpus_per_task: Option<u32>,
    /// `-c`: cores each task needs (the step must fit the job's cores on each node).
    pub cpus_per_task: Option<u32>,
    /// `-O`, `--overcommit`: run more tasks than the job has cores for.
    pub overcommit: bool,
    /// `-l`: each output line starts with the task's rank.
    pub label: bool,
    /// `--pty`.
    pub pty: bool,
    /// `-w`: the nodes, as a host list.
    pub nodelist: Option<String>,
    /// `-o`: the tasks' standard output file pattern (`%t` is the task's rank).
    pub output: Option<String>,
    /// `-e`: the tasks' standard error file pattern.
    pub error: Option<String>,
    /// `--open-mode`: `append` or `truncate` the output files.
    pub open_mode: Option<String>,
    /// Options read and not acted on.
    pub ignored: Vec<String>,
    /// The command and its arguments.
    pub command: Vec<String>,
}

/// The long option `name` begins, when exactly one does (or `name` is one); else `name`.
fn resolve_long(name: &str) -> String {
    let all = LONG_WITH_VALUE.iter().chain(OTHER_OPTIONS);
    if all.clone().any(|o| *o == name) {
        return name.to_string();
    }
    let mut found: Vec<&str> = all.filter(|o| o.starts_with(name)).copied().collect();
    found.sort_unstable();
    found.dedup();
    match found.as_slice() {
        [one] => (*one).to_string(),
        _ => name.to_string(),
    }
}

/// Reads `args` (without the program name).
pub fn parse_srun(args: &[String]) -> Result<SrunArgs, String> {
    let mut out = SrunArgs::default();
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        if word == "--" {
            i += 1;
            break;
        }
        let (name, inline): (String, Option<String>) = if let Some(long) = word.strip_prefix("--") {
            match long.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (long.to_string(), None),
            }
        } else if let Some(short) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            let c = short.chars().next().expect("not empty");
            let rest = &short[c.len_utf8()..];
            let inline = (!rest.is_empty()).then(|| rest.trim_start_matches('=').to_string());
            (c.to_string(), inline)
        } else {
            break;
        };
        // As getopt_long: an unambiguous beginning names its option (`--out` is `--output`).
        let name = if name.len() > 1 {
            resolve_long(&name)
        } else {
            name
        };
        let takes_value = if name.len() == 1 {
            SHORT_WITH_VALUE.contains(name.as_str())
        } else {
            LONG_WITH_VALUE.contains(&name.as_str())
        };
        let value = match (takes_value, inline) {
            (true, Some(v)) => Some(v),
            (true, None) => {
                i += 1;
                Some(
                    args.get(i)
                        .cloned()
                        .ok_or_else(|| format!("{word} needs a value"))?,
                )
            }
            (false, v) => v,
        };
        let number = |v: &Option<String>| -> Result<u32, String> {
            let v = v.as_deref().unwrap_or_default();
            // -N 2-4 asks for 2 at least.
            v.split('-')
                .next()
                .and_then(|n| n.trim().parse().ok())
                .ok_or_else(|| format!("{word}: '{v}' is not a count"))
        };
        match name.as_str() {
            "n" | "ntasks" => out.ntasks = Some(number(&value)?),
            "N" | "nodes" => out.nodes = Some(number(&value)?),
            "ntasks-per-node" => out.ntasks_per_node = Some(number(&value)?),
            "gpus-per-task" => {
                // [TYPE:]N
                let v = value.clone().unwrap_or_default();
                let n = v.rsplit(':').next().unwrap_or_default().to_string();
                out.gpus_per_task = Some(number(&Some(n))?);
            }
            "c" | "cpus-per-task" => out.cpus_per_task = Some(number(&value)?),
            "O" | "overcommit" => out.overcommit = true,
            "l" | "label" => out.label = true,
            "pty" => out.pty = true,
            "w" | "nodelist" => out.nodelist = value,
            "o" | "output" => out.output = value,
            "e" | "error" => out.error = value,
            "open-mode" => out.open_mode = value,
            // Already so here: tasks write straight to their files or pipes, unbuffered, and
            // srun prints nothing of its own but errors.
            "u" | "unbuffered" | "Q" | "quiet" => {}
            _ => out.ignored.push(format!(
                "{}{name}",
                if name.len() == 1 { "-" } else { "--" }
            )),
        }
        i += 1;
    }
    out.command = args[i..].to_vec();
    if out.command.is_empty() {
        return Err("no command given: write `srun [OPTIONS] COMMAND [ARGS]`".to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn options_then_the_command() {
        let a = parse_srun(&args(
            "-n 4 --gpus-per-task=a100:1 -l --mpi=pmix --cpu-bind cores python train.py -n 3",
        ))
        .unwrap();
        assert_eq!(a.ntasks, Some(4));
        assert_eq!(a.gpus_per_task, Some(1));
        assert!(a.label);
        assert_eq!(a.ignored, ["--mpi", "--cpu-bind"]);
        assert_eq!(a.command, ["python", "train.py", "-n", "3"]);
        let a = parse_srun(&args("--out x.log --lab --ntasks 2 true")).unwrap();
        assert_eq!(
            (a.output.as_deref(), a.label, a.ntasks),
            (Some("x.log"), true, Some(2))
        );
        let a = parse_srun(&args("-n2 -N1 --ntasks-per-node 2 -K1 hostname")).unwrap();
        assert_eq!(
            (a.ntasks, a.nodes, a.ntasks_per_node),
            (Some(2), Some(1), Some(2))
        );
        assert_eq!(a.command, ["hostname"]);
        assert!(parse_srun(&args("-n 2")).is_err());
        assert!(parse_srun(&args("-n x true")).is_err());
    }
}
