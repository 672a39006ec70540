//! Reading `#SBATCH` and `#LABPOOL` directives from the top of a job script, as `sbatch` does.
//!
//! Directives are read from the lines after the shebang up to the first line that is neither
//! blank nor a comment. Each line is parsed with the same option definitions as the command
//! line, so a typo gets the same "did you mean" hint in both places.

use crate::options::JobOptions;
use clap::Parser;
use clap::error::{ContextKind, ContextValue, ErrorKind};

/// The directive prefixes labpool reads.
pub const DIRECTIVE_PREFIXES: [&str; 2] = ["#SBATCH", "#LABPOOL"];

/// What the script's directives asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptDirectives {
    /// Options from the directives; a later line wins over an earlier one.
    pub options: JobOptions,
    /// Lines that look like directives but are not read, with the reason.
    pub warnings: Vec<String>,
    /// What the directives asked of `sbatch` itself, which reads them with the same table as
    /// its command line.
    pub client: ClientFlags,
}

/// sbatch's options about its own behaviour rather than the job's, which a script may carry
/// too (`#SBATCH --parsable`).
#[derive(clap::Args, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientFlags {
    /// Print only the job id.
    #[arg(long, hide = true)]
    pub parsable: bool,
    /// Wait for the job to end.
    #[arg(short = 'W', long, hide = true)]
    pub wait: bool,
    /// Check the job and queue nothing.
    #[arg(long, hide = true)]
    pub test_only: bool,
}

/// Why a script was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// The script has no `#!` line.
    #[error(
        "the script does not start with '#!' (first line: {first_line:?}); add an interpreter line such as #!/bin/bash, or submit a command with --wrap \"CMD\""
    )]
    NoShebang {
        /// The first line as found.
        first_line: String,
    },
    /// Directive lines that could not be read: every one of them, one a line.
    #[error("{}", .problems.join("\n"))]
    Directives {
        /// `line N: DIRECTIVE: what was wrong`, in line order.
        problems: Vec<String>,
        /// What the other lines asked for, so that a caller can report the problems of the
        /// whole request in the same go.
        read: Box<ScriptDirectives>,
    },
}

#[derive(Parser)]
#[command(
    no_binary_name = true,
    disable_help_flag = true,
    disable_version_flag = true,
    // As getopt_long, which sbatch uses: an unambiguous prefix names its option (`--err`).
    infer_long_args = true
)]
struct DirectiveLine {
    #[command(flatten)]
    options: JobOptions,
    #[command(flatten)]
    client: ClientFlags,
}

/// Reads the directives of a job script.
///
/// ```
/// let s = "#!/bin/bash\n#SBATCH --gres=gpu:2 -J train\n#SBATCH --time=1:00:00\npython train.py\n";
/// let d = labpool_scheduler::script::parse_script(s).unwrap();
/// assert_eq!(d.options.job_name.as_deref(), Some("train"));
/// assert_eq!(d.options.gres.as_deref(), Some("gpu:2"));
/// ```
pub fn parse_script(text: &str) -> Result<ScriptDirectives, ScriptError> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, first)) if first.starts_with("#!") => {}
        other => {
            return Err(ScriptError::NoShebang {
                first_line: other.map(|(_, l)| l.to_string()).unwrap_or_default(),
            });
        }
    }
    let mut out = ScriptDirectives::default();
    let mut problems: Vec<String> = Vec::new();
    // The first line that asked for GPUs, and how: another spelling later is a conflict.
    let mut gpus_from: Option<(usize, String, &'static str)> = None;
    let mut in_header = true;
    for (index, raw) in lines {
        let line_no = index + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if !line.starts_with('#') {
            in_header = false;
            continue;
        }
        let Some(rest) = directive_body(line) else {
            if let Some(hint) = near_miss(line) {
                out.warnings.push(format!(
                    "line {line_no}: '{line}' is not read as a directive: {hint}"
                ));
            }
            continue;
        };
        if !in_header {
            out.warnings.push(format!(
                "line {line_no}: '{line}' comes after the first command and is ignored (sbatch ignores it too); move it to the top"
            ));
            continue;
        }
        let (options, client) = match parse_directive(rest) {
            Ok(o) => o,
            Err(message) => {
                problems.push(format!("line {line_no}: {line}: {message}"));
                continue;
            }
        };
        if let Some(spelling) = gpu_spelling(&options) {
            match &gpus_from {
                Some((first, text, how)) if *how != spelling => problems.push(format!(
                    "line {line_no}: {line}: asks for GPUs again as {spelling}, after line {first} ({text}) asked with {how}; keep one of them"
                )),
                Some(_) => {}
                None => gpus_from = Some((line_no, line.to_string(), spelling)),
            }
        }
        out.options = std::mem::take(&mut out.options).overlay(options);
        out.client.parsable |= client.parsable;
        out.client.wait |= client.wait;
        out.client.test_only |= client.test_only;
    }
    if !problems.is_empty() {
        return Err(ScriptError::Directives {
            problems,
            read: Box::new(out),
        });
    }
    Ok(out)
}

/// How a directive line asks for GPUs, if it does.
fn gpu_spelling(o: &JobOptions) -> Option<&'static str> {
    if o.gres.is_some() {
        Some("--gres")
    } else if o.gpus.is_some() {
        Some("--gpus")
    } else if o.gpus_per_node.is_some() {
        Some("--gpus-per-node")
    } else if o.slurm.gpus_per_task.is_some() {
        Some("--gpus-per-task")
    } else {
        None
    }
}

/// The text after a directive prefix, or `None` for an ordinary comment. As sbatch does, an
/// option may follow the prefix with no space between (`#SBATCH--time=2:00:00`).
fn directive_body(line: &str) -> Option<&str> {
    DIRECTIVE_PREFIXES.iter().find_map(|p| {
        let rest = line.strip_prefix(p)?;
        (rest.is_empty() || rest.starts_with(char::is_whitespace) || rest.starts_with('-'))
            .then_some(rest)
    })
}

/// Explains a comment that was probably meant as a directive.
fn near_miss(line: &str) -> Option<String> {
    let squashed: String = line
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_uppercase();
    DIRECTIVE_PREFIXES.iter().find_map(|p| {
        squashed
            .starts_with(p)
            .then(|| format!("write '{p}' exactly, in capitals, with no space after '#'"))
    })
}

/// Parses the options on one directive line and checks their values, so that a bad value is
/// blamed on its line; the error is a one-line message.
fn parse_directive(rest: &str) -> Result<(JobOptions, ClientFlags), String> {
    let mut words = shlex::split(rest).ok_or_else(|| "unbalanced quotes".to_string())?;
    // A '#' starts a trailing comment, as in the shell.
    if let Some(pos) = words.iter().position(|w| w.starts_with('#')) {
        words.truncate(pos);
    }
    let (options, client) = DirectiveLine::try_parse_from(words)
        .map(|d| (d.options, d.client))
        .map_err(|e| clap_message(&e))?;
    let Err(errors) = options.resolve_all() else {
        return Ok((options, client));
    };
    let problems: Vec<String> = errors
        .iter()
        .filter(|e| !e.needs_other_lines())
        .map(ToString::to_string)
        .collect();
    if problems.is_empty() {
        Ok((options, client))
    } else {
        Err(problems.join("; "))
    }
}

/// Condenses a clap error into one line with its suggestion.
pub fn clap_message(e: &clap::Error) -> String {
    let context = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => v.first().cloned(),
        _ => None,
    };
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let arg = context(ContextKind::InvalidArg).unwrap_or_default();
            match context(ContextKind::SuggestedArg) {
                Some(s) => format!("unknown option '{arg}' (did you mean '{s}'?)"),
                None => {
                    format!("unknown option '{arg}'; `labpool submit --help` lists the options")
                }
            }
        }
        _ => {
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            first.strip_prefix("error: ").unwrap_or(first).to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_lines_win_and_body_stops_reading() {
        let s = "#!/bin/sh\n\n# a comment\n#SBATCH -J one\n#LABPOOL --job-name two --gpus=1 # trailing\necho hi\n#SBATCH --gpus 4\n";
        let d = parse_script(s).unwrap();
        assert_eq!(d.options.job_name.as_deref(), Some("two"));
        assert_eq!(d.options.gpus.as_deref(), Some("1"));
        assert_eq!(d.warnings.len(), 1);
        assert!(d.warnings[0].contains("line 7"), "{:?}", d.warnings);
    }

    #[test]
    fn unknown_option_names_line_and_suggestion() {
        let err = parse_script("#!/bin/sh\n#SBATCH --gpu=2\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("line 2: #SBATCH --gpu=2"), "{msg}");
        assert!(msg.contains("'--gpu'") && msg.contains("--gpus"), "{msg}");
    }

    #[test]
    fn bad_value_and_positional() {
        let msg = parse_script("#!/bin/sh\n#SBATCH -c x\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("cpus-per-task"), "{msg}");
        assert!(parse_script("#!/bin/sh\n#SBATCH stray\n").is_err());
        let msg = parse_script("#!/bin/sh\n\n#SBATCH --time=1:2:3:4\n")
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with("line 3: #SBATCH --time=1:2:3:4: --time: invalid time"),
            "{msg}"
        );
        let msg = parse_script("#!/bin/sh\n\n#SBATCH --time=1:2:3:4\n")
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with("line 3: #SBATCH --time=1:2:3:4: --time: invalid time"),
            "{msg}"
        );
        assert!(
            parse_script("#!/bin/sh\n#SBATCH -J \"open\n")
                .unwrap_err()
                .to_string()
                .contains("unbalanced")
        );
    }

    #[test]
    fn common_slurm_lines_are_accepted() {
        let s = "#!/bin/sh\n#SBATCH -A lab --exclusive --gpus-per-node=2 --ntasks-per-node=4\n";
        let d = parse_script(s).unwrap();
        assert_eq!(d.options.gpus_per_node.as_deref(), Some("2"));
        assert_eq!(d.options.resolve().unwrap().cpus, 4);
    }

    #[test]
    fn gpu_share_directives() {
        let s = "#!/bin/sh\n#SBATCH --gpus 1\n#LABPOOL --gpu-share\n";
        let d = parse_script(s).unwrap();
        assert!(d.options.gpu_share);
        assert!(d.options.resolve().unwrap().gpu_share);
        // On its own, without GPUs anywhere, it is refused when the whole is resolved.
        let d = parse_script("#!/bin/sh\n#SBATCH --gpu-share\n").unwrap();
        assert!(d.options.resolve().is_err());
    }

    #[test]
    fn needs_shebang() {
        assert!(matches!(
            parse_script("python train.py\n"),
            Err(ScriptError::NoShebang { .. })
        ));
        assert!(matches!(
            parse_script(""),
            Err(ScriptError::NoShebang { .. })
        ));
    }

    #[test]
    fn near_misses_warn() {
        let d = parse_script("#!/bin/sh\n# SBATCH --gpus 2\n#sbatch -J x\n#SBATCHED\n").unwrap();
        assert_eq!(d.options, JobOptions::default());
        assert_eq!(d.warnings.len(), 3, "{:?}", d.warnings);
    }

    #[test]
    fn sbatch_own_options_may_be_directives() {
        let d = parse_script("#!/bin/sh\n#SBATCH --parsable\n#SBATCH -W --time=5\n").unwrap();
        assert!(d.client.parsable && d.client.wait && !d.client.test_only);
        // --wait is itself, not a prefix of --wait-all-nodes.
        assert_eq!(d.options.slurm.ignored.wait_all_nodes, None);
        assert_eq!(d.options.time.as_deref(), Some("5"));
    }

    #[test]
    fn an_option_may_follow_the_prefix_without_a_space() {
        let d = parse_script("#!/bin/sh\n#SBATCH--time=2:00:00\n#SBATCH -J x\n").unwrap();
        assert_eq!(d.options.time.as_deref(), Some("2:00:00"));
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    }

    #[test]
    fn every_bad_line_is_reported_at_once() {
        let msg =
            parse_script("#!/bin/sh\n#SBATCH --gpu=2\n#SBATCH -c x\n#SBATCH --time=1:2:3:4\n")
                .unwrap_err()
                .to_string();
        let lines: Vec<&str> = msg.lines().collect();
        assert_eq!(lines.len(), 3, "{msg}");
        assert!(
            lines[0].starts_with("line 2:") && lines[2].starts_with("line 4:"),
            "{msg}"
        );
    }

    #[test]
    fn two_spellings_of_a_gpu_request_conflict_and_both_are_named() {
        let msg = parse_script("#!/bin/sh\n#SBATCH --gres=gpu:2\n#SBATCH --gpus-per-node=4\n")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("line 3") && msg.contains("after line 2 (#SBATCH --gres=gpu:2)"),
            "{msg}"
        );
        // The same spelling again is Slurm's "last one wins".
        let d = parse_script("#!/bin/sh\n#SBATCH --gres=gpu:2\n#SBATCH --gres=gpu:4\n").unwrap();
        assert_eq!(d.options.gres.as_deref(), Some("gpu:4"));
    }
}
