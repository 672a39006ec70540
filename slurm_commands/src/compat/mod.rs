//! What each of Slurm's commands does here with each of Slurm 22.05's options: honoured (what
//! Slurm does, or nothing where nothing is needed, as `--local` on one cluster), warned (read,
//! not acted on, one warning line with the reason) or refused (with the reason, because acting
//! without it would do something else: a `scancel` that ignored `--qos` would cancel more).
//!
//! The options a command's own parser reads are honoured; the others of Slurm's are in
//! [`tables`], and [`strip`] takes them out of the command line before the parser sees it.
//! `docs/slurm-compatibility.md` is generated from both ([`doc::markdown`]).

pub mod doc;
pub mod man;
pub mod tables;

/// What labpool does with an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// Honoured without the command's parser: it changes nothing here (the note says why).
    Same(&'static str),
    /// Read and not acted on; a warning says why.
    Warned(&'static str),
    /// Refused with the reason.
    Refused(&'static str),
}

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// A flag.
    Nothing,
    /// A value, in the same word (`--opt=V`, `-oV`) or the next.
    Value,
    /// A value only in the same word (`--whole-hetjob[=yes]`).
    Optional,
}

/// One of Slurm's options that the command's parser does not read.
#[derive(Debug, Clone, Copy)]
pub struct Extra {
    /// Its long name (without `--`).
    pub long: &'static str,
    /// Its short letter.
    pub short: Option<char>,
    /// Whether it takes a value.
    pub takes: Takes,
    /// What labpool does with it.
    pub how: How,
}

/// Slurm's version, as the commands' `--version` prints it.
pub const SLURM_VERSION: &str = "22.05.8";

/// What [`strip`] found: the command line left for the parser, warnings to print, refusals.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stripped {
    /// The words the command's parser reads.
    pub args: Vec<String>,
    /// One line per warned option given.
    pub warnings: Vec<String>,
    /// One line per refused option given.
    pub refusals: Vec<String>,
}

/// Whether option `word` (`--opt`, `-o`) of `parser` takes its value from the next word.
fn takes_next(parser: &clap::Command, word: &str) -> bool {
    let found = if let Some(long) = word.strip_prefix("--") {
        (!long.contains('=')).then(|| {
            parser.get_arguments().find(|a| {
                a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|v| v.contains(&long))
            })
        })
    } else {
        let mut chars = word.chars().skip(1);
        match (chars.next(), chars.next()) {
            (Some(c), None) => Some(parser.get_arguments().find(|a| a.get_short() == Some(c))),
            _ => None,
        }
    };
    found.flatten().is_some_and(|a| {
        a.get_action().takes_values() && a.get_num_args().is_none_or(|n| n.min_values() > 0)
    })
}

/// Takes `extras` out of `args`, up to `--` (a command's words after it are not options) or,
/// with the command's `parser` (sbatch's and salloc's take a script or a command), up to the
/// first word that is neither an option nor an option's value. A long option matches by its
/// whole name (`--sort` or `--sort=…`); a short one as `-S`, `-SV` or `-S V`. Each option
/// given is warned about or refused once.
pub fn strip(args: &[String], extras: &[Extra], parser: Option<&clap::Command>) -> Stripped {
    let mut out = Stripped::default();
    let mut seen = std::collections::BTreeSet::new();
    let mut i = 0;
    let mut value_next = false;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        if word == "--" {
            out.args.extend(args[i - 1..].iter().cloned());
            break;
        }
        if let Some(p) = parser {
            if !word.starts_with('-') && !std::mem::take(&mut value_next) {
                // The script or command: its words are its own.
                out.args.extend(args[i - 1..].iter().cloned());
                break;
            }
            value_next = word.starts_with('-') && takes_next(p, word);
        }
        let found = if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            extras
                .iter()
                .find(|e| e.long == name)
                .map(|e| (e, inline || e.takes != Takes::Value))
        } else if let Some(short) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            let c = short.chars().next().expect("not empty");
            extras
                .iter()
                .find(|e| e.short == Some(c))
                .filter(|e| short.len() == c.len_utf8() || e.takes == Takes::Value)
                .map(|e| (e, short.len() > c.len_utf8() || e.takes != Takes::Value))
        } else {
            None
        };
        let Some((extra, value_inside)) = found else {
            out.args.push(word.clone());
            continue;
        };
        if !value_inside && i < args.len() {
            i += 1; // its value, in the next word
        }
        if !seen.insert(extra.long) {
            continue;
        }
        match extra.how {
            How::Same(_) => {}
            How::Warned(why) => out
                .warnings
                .push(format!("--{} ignored: {why}", extra.long)),
            How::Refused(why) => out.refusals.push(format!("--{}: {why}", extra.long)),
        }
    }
    out
}

/// `--version`/`-V` and `--usage` among the options (before `--`, and for a command that
/// takes a script or a command, before its first word that is not an option): what to print
/// instead of running.
pub fn version_or_usage(name: &str, args: &[String]) -> Option<String> {
    let positional = matches!(name, "sbatch" | "salloc" | "srun" | "sattach");
    let options = args
        .iter()
        .take_while(|w| *w != "--")
        .take_while(|w| !positional || w.starts_with('-'));
    for word in options {
        match word.as_str() {
            "--version" | "-V" => return Some(format!("slurm {SLURM_VERSION}")),
            "--usage" => {
                return Some(format!(
                    "Usage: {name} [OPTIONS]\n(labpool's {name}: `{name} --help` lists the options; docs/slurm-compatibility.md says what each of Slurm's does here)"
                ));
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    const EXTRAS: &[Extra] = &[
        Extra {
            long: "sort",
            short: Some('S'),
            takes: Takes::Value,
            how: How::Warned("no sorting"),
        },
        Extra {
            long: "local",
            short: None,
            takes: Takes::Nothing,
            how: How::Same("one cluster"),
        },
        Extra {
            long: "qos",
            short: Some('q'),
            takes: Takes::Value,
            how: How::Refused("no QOS"),
        },
    ];

    #[test]
    fn takes_out_the_extras_and_their_values() {
        let s = strip(
            &words("-u me --sort=-t --local -S x -Sy -h --qos normal -- --sort z"),
            EXTRAS,
            None,
        );
        assert_eq!(s.args, words("-u me -h -- --sort z"));
        assert_eq!(s.warnings, ["--sort ignored: no sorting"]);
        assert_eq!(s.refusals, ["--qos: no QOS"]);
        // With a parser, the command's own words are left alone.
        let cmd = clap::Command::new("x")
            .no_binary_name(true)
            .arg(clap::Arg::new("n").short('N').num_args(1))
            .arg(clap::Arg::new("cmd").num_args(0..).trailing_var_arg(true));
        let s = strip(&words("-N 2 -S x prog -S y"), EXTRAS, Some(&cmd));
        assert_eq!(s.args, words("-N 2 prog -S y"));
        assert_eq!(strip(&words("-q"), EXTRAS, None).args, Vec::<String>::new());
    }

    #[test]
    fn version_and_usage() {
        assert_eq!(
            version_or_usage("sinfo", &words("-h --version")).unwrap(),
            "slurm 22.05.8"
        );
        assert!(version_or_usage("sinfo", &words("-- --usage")).is_none());
    }
}
