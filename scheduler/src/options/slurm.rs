//! The rest of sbatch's options that real GPU scripts use: per-task and per-GPU resource
//! arithmetic, `--signal`, `--open-mode`, and the options that mean nothing on a labpool pool
//! (accepted with a one-line warning) or that it cannot honour yet (refused with the reason).

// Options as sbatch spells them, beyond the core ones of `JobOptions`. (A plain comment, as
// on `JobOptions`: clap would show a doc comment as deferred commands' `--help` text.)
#[allow(missing_docs)]
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmOptions {
    /// GPUs per task: [TYPE:]N; the job gets N x --ntasks
    #[arg(long = "gpus-per-task", value_name = "[TYPE:]N")]
    pub gpus_per_task: Option<String>,
    /// CPU cores per GPU; the job gets N x its GPUs (instead of --cpus-per-task)
    #[arg(long = "cpus-per-gpu", value_name = "N")]
    pub cpus_per_gpu: Option<u32>,
    /// Memory per CPU core (instead of --mem)
    #[arg(long = "mem-per-cpu", value_name = "SIZE")]
    pub mem_per_cpu: Option<String>,
    /// Memory per GPU (instead of --mem)
    #[arg(long = "mem-per-gpu", value_name = "SIZE")]
    pub mem_per_gpu: Option<String>,
    /// Tasks per GPU: --ntasks is N x the job's GPUs
    #[arg(long = "ntasks-per-gpu", value_name = "N")]
    pub ntasks_per_gpu: Option<u32>,
    /// Send SIG this many seconds before the time limit: [{R|B}:]SIG[@TIME] (TIME 60 by default;
    /// B: the batch shell only, else every process of the job but the batch shell)
    #[arg(long, value_name = "[B:]SIG[@TIME]")]
    pub signal: Option<String>,
    /// Output files: truncate (the default) or append
    #[arg(long = "open-mode", value_name = "append|truncate")]
    pub open_mode: Option<String>,
    /// Also load your login environment (what a login shell sets) under the submitted one;
    /// TIMEOUT seconds for the login shell (default 8), optionally followed by S or L
    #[arg(long = "get-user-env", value_name = "TIMEOUT", num_args = 0..=1, default_missing_value = "")]
    pub get_user_env: Option<String>,
    /// A note kept with the job, shown by `labpool show`
    #[arg(long, value_name = "TEXT")]
    pub comment: Option<String>,
    /// Node features the job needs: a100&ib (all), a100|h100 (any), [r1|r2] (the same on every node)
    #[arg(short = 'C', long, value_name = "FEATURES")]
    pub constraint: Option<String>,
    /// Run inside this reservation (`labpool reservation list`), on its GPUs, in its window
    #[arg(long, value_name = "NAME")]
    pub reservation: Option<String>,
    /// Nodes the job must run on, as a host list: gn1,gn[3-4]
    #[arg(short = 'w', long, value_name = "NODES")]
    pub nodelist: Option<String>,
    /// Nodes the job must not run on, as a host list
    #[arg(short = 'x', long, value_name = "NODES")]
    pub exclude: Option<String>,
    /// Licenses; accepted and ignored (labpool counts none)
    #[arg(short = 'L', long, value_name = "LIST", hide = true)]
    pub licenses: Option<String>,
    /// Clusters; accepted and ignored (one pool is one cluster)
    #[arg(
        short = 'M',
        long,
        visible_alias = "cluster",
        value_name = "NAMES",
        hide = true
    )]
    pub clusters: Option<String>,
    /// Start no earlier than TIME (now+1hour, 16:00, tomorrow, 2026-12-24T08:00)
    #[arg(short = 'b', long, value_name = "TIME")]
    pub begin: Option<String>,
    /// End by TIME: once the time limit no longer fits before it, the job leaves the queue (DEADLINE)
    #[arg(long, value_name = "TIME")]
    pub deadline: Option<String>,
    /// Submit the job held: it waits until `labpool release`
    #[arg(short = 'H', long)]
    pub hold: bool,
    /// Refused: jobs run as the user who submits them
    #[arg(long, value_name = "USER", hide = true)]
    pub uid: Option<String>,
    /// Refused: jobs run with their submitter's groups
    #[arg(long, value_name = "GROUP", hide = true)]
    pub gid: Option<String>,
    /// Refused: the environment comes from the submit (--export)
    #[arg(long = "export-file", value_name = "FILE", hide = true)]
    pub export_file: Option<String>,
    /// Refused: a batch job reads no standard input
    #[arg(short = 'i', long, value_name = "FILE", hide = true)]
    pub input: Option<String>,
    /// Refused: name the nodes with --nodelist
    #[arg(short = 'F', long, value_name = "FILE", hide = true)]
    pub nodefile: Option<String>,
    /// The options that mean nothing here.
    #[command(flatten)]
    pub ignored: super::ignored::IgnoredOptions,
}

impl SlurmOptions {
    /// Layers `over` on top of `self`: every option `over` sets wins.
    pub fn overlay(self, over: SlurmOptions) -> SlurmOptions {
        SlurmOptions {
            gpus_per_task: over.gpus_per_task.or(self.gpus_per_task),
            cpus_per_gpu: over.cpus_per_gpu.or(self.cpus_per_gpu),
            mem_per_cpu: over.mem_per_cpu.or(self.mem_per_cpu),
            mem_per_gpu: over.mem_per_gpu.or(self.mem_per_gpu),
            ntasks_per_gpu: over.ntasks_per_gpu.or(self.ntasks_per_gpu),
            signal: over.signal.or(self.signal),
            open_mode: over.open_mode.or(self.open_mode),
            get_user_env: over.get_user_env.or(self.get_user_env),
            comment: over.comment.or(self.comment),
            constraint: over.constraint.or(self.constraint),
            reservation: over.reservation.or(self.reservation),
            nodelist: over.nodelist.or(self.nodelist),
            exclude: over.exclude.or(self.exclude),
            licenses: over.licenses.or(self.licenses),
            clusters: over.clusters.or(self.clusters),
            begin: over.begin.or(self.begin),
            deadline: over.deadline.or(self.deadline),
            hold: over.hold || self.hold,
            uid: over.uid.or(self.uid),
            gid: over.gid.or(self.gid),
            export_file: over.export_file.or(self.export_file),
            input: over.input.or(self.input),
            nodefile: over.nodefile.or(self.nodefile),
            ignored: self.ignored.overlay(over.ignored),
        }
    }

    /// One line for each option that is accepted but means nothing here.
    pub fn warnings(&self) -> Vec<String> {
        let noted = |set: bool, text: &str| set.then(|| text.to_string());
        [
            noted(
                self.licenses.is_some(),
                "--licenses ignored: labpool counts no licenses",
            ),
            noted(
                self.clusters.is_some(),
                "--clusters ignored: this pool is one cluster",
            ),
        ]
        .into_iter()
        .flatten()
        .chain(self.ignored.warnings())
        .collect()
    }

    /// Why each option given that labpool refuses is refused.
    pub fn refusals(&self) -> Vec<String> {
        let refused = |set: bool, text: &str| set.then(|| text.to_string());
        [
            refused(
                self.uid.is_some() || self.gid.is_some(),
                "--uid/--gid: a job runs as the user who submits it; submit as that user",
            ),
            refused(
                self.export_file.is_some(),
                "--export-file: the job gets the submit's environment; name variables with --export=NAME=VALUE",
            ),
            refused(
                self.input.is_some(),
                "--input: a batch job reads no standard input; have the script read the file",
            ),
            refused(
                self.nodefile.is_some(),
                "--nodefile: a file of node names is not read; list the nodes, e.g. --nodelist=gn[1-2]",
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// A signal to send before the time limit (`--signal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SignalSpec {
    /// The signal's number (Linux numbering).
    pub signal: i32,
    /// Seconds before the time limit.
    pub before_s: u32,
    /// `B:`: to the batch shell only; otherwise to every process of the job but the batch
    /// shell, as Slurm signals the steps and not the shell.
    pub batch_only: bool,
}

/// Linux's numbers for the signals a job may ask for by name.
const SIGNALS: [(&str, i32); 17] = [
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ABRT", 6),
    ("KILL", 9),
    ("USR1", 10),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("PROF", 27),
];

/// Parses `--signal=[{R|B}:]SIG[@TIME]`: SIG a name (`USR1`, `SIGUSR1`) or a number, TIME in
/// seconds (0 to 65535, 60 when left out). `R:` (reservation overlap) changes nothing here.
///
/// ```
/// use labpool_scheduler::options::parse_signal;
/// let s = parse_signal("B:USR1@90").unwrap();
/// assert_eq!((s.signal, s.before_s, s.batch_only), (10, 90, true));
/// assert_eq!(parse_signal("TERM").unwrap().before_s, 60);
/// ```
pub fn parse_signal(text: &str) -> Result<SignalSpec, String> {
    let bad = |why: &str| {
        format!("--signal {text:?}: {why}; write [B:]SIG[@SECONDS], e.g. --signal=B:USR1@120")
    };
    let mut rest = text.trim();
    let mut batch_only = false;
    for (prefix, batch) in [("B:", true), ("R:", false), ("RB:", true), ("BR:", true)] {
        if let Some(r) = rest.strip_prefix(prefix) {
            rest = r;
            batch_only = batch;
            break;
        }
    }
    let (sig, time) = match rest.split_once('@') {
        Some((s, t)) => (s, Some(t)),
        None => (rest, None),
    };
    let name = sig.trim().to_ascii_uppercase();
    let name = name.strip_prefix("SIG").unwrap_or(&name);
    let signal = match name.parse::<i32>() {
        Ok(n) if (1..=64).contains(&n) => n,
        Ok(_) => return Err(bad("the signal number is out of range")),
        Err(_) => SIGNALS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| bad("not a signal name or number"))?,
    };
    let before_s = match time {
        None => 60,
        Some(t) => t
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|t| *t <= 65_535)
            .ok_or_else(|| bad("the time is not 0 to 65535 seconds"))?,
    };
    Ok(SignalSpec {
        signal,
        before_s,
        batch_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals() {
        assert_eq!(parse_signal("SIGUSR2@5").unwrap().signal, 12);
        assert_eq!(
            parse_signal("R:10@30").unwrap(),
            SignalSpec {
                signal: 10,
                before_s: 30,
                batch_only: false
            }
        );
        for bad in ["", "FOO", "USR1@", "USR1@-1", "99", "B:USR1@70000"] {
            assert!(parse_signal(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn what_means_nothing_here_is_said_in_one_line_each() {
        let o = SlurmOptions {
            licenses: Some("matlab".into()),
            begin: Some("now+1hour".into()),
            nodelist: Some("gn1".into()),
            ..SlurmOptions::default()
        };
        assert_eq!(o.warnings().len(), 1);
        assert!(SlurmOptions::default().warnings().is_empty());
    }
}
