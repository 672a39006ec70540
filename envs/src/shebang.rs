//! Running a script's text (not its file) with the interpreter its `#!` line names, for
//! containers: the script file is not visible inside the image, so its text is passed with
//! `-c`.

use crate::EnvError;
use std::path::Path;

/// Shells that run `SHELL -c TEXT NAME ARGS...` with `$0` = NAME and `$1...` = ARGS.
const SHELLS: [&str; 7] = ["sh", "bash", "dash", "zsh", "ksh", "ash", "mksh"];

/// Python's `-c` sets `sys.argv[0]` to `-c`; this puts the script's name there (and in
/// `__file__`) and runs the text as `__main__`, so `sys.argv[1:]` are the job's arguments.
const PYTHON_BOOT: &str = "import sys;__file__=sys.argv[0]=sys.argv.pop(1);exec(compile(sys.argv.pop(1),__file__,'exec'))";

/// The command line that runs `text` (the content of `script`) with `args`, as the `#!` line
/// says: `[INTERPRETER..., -c, TEXT, NAME, ARGS...]` for shells, a small bootstrap for Python,
/// and `/bin/sh` when there is no `#!` line. Other interpreters are an error: passing their
/// text to sh would run it as something it is not.
///
/// The text travels as one argument, so it is limited to 128 KiB (Linux's `MAX_ARG_STRLEN`).
pub fn command(script: &Path, text: &str, args: &[String]) -> Result<Vec<String>, EnvError> {
    let name = script.to_string_lossy().into_owned();
    let first = text.lines().next().unwrap_or("");
    let words: Vec<String> = match first.strip_prefix("#!") {
        Some(rest) => rest.split_whitespace().map(str::to_string).collect(),
        None => Vec::new(),
    };
    let mut argv = if words.is_empty() {
        vec!["/bin/sh".to_string()]
    } else {
        words
    };
    match basename(program(&argv)) {
        shell if SHELLS.contains(&shell) => {
            argv.extend(["-c".to_string(), text.to_string(), name]);
        }
        python if python.starts_with("python") => {
            argv.extend([
                "-c".to_string(),
                PYTHON_BOOT.to_string(),
                name,
                text.to_string(),
            ]);
        }
        _ => {
            return Err(EnvError::Interpreter {
                script: script.to_path_buf(),
                interpreter: first.trim_start_matches("#!").trim().to_string(),
            });
        }
    }
    argv.extend(args.iter().cloned());
    Ok(argv)
}

/// The program that will read the text: the interpreter, or for `/usr/bin/env [-S] [VAR=x] prog`,
/// `prog`.
fn program(argv: &[String]) -> &str {
    if basename(&argv[0]) != "env" {
        return &argv[0];
    }
    argv[1..]
        .iter()
        .find(|w| !w.starts_with('-') && !w.contains('='))
        .map_or("", |w| w.as_str())
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> Vec<String> {
        command(Path::new("/home/a/job.sh"), text, &["x".to_string()]).unwrap()
    }

    #[test]
    fn shells_get_dash_c_with_the_name_as_dollar_zero() {
        let text = "#!/bin/bash -l\necho hi\n";
        assert_eq!(
            run(text),
            ["/bin/bash", "-l", "-c", text, "/home/a/job.sh", "x"]
        );
        assert_eq!(run("echo hi\n")[..2], ["/bin/sh", "-c"]);
    }

    #[test]
    fn python_through_env_gets_the_bootstrap() {
        let text = "#!/usr/bin/env python3\nimport sys\n";
        let argv = run(text);
        assert_eq!(argv[..3], ["/usr/bin/env", "python3", "-c"]);
        assert_eq!(argv[4..], ["/home/a/job.sh", text, "x"]);
    }

    #[test]
    fn other_interpreters_are_refused() {
        let err = command(Path::new("j.pl"), "#!/usr/bin/perl\n", &[]).unwrap_err();
        assert!(err.to_string().contains("#!/usr/bin/perl"), "{err}");
    }
}
