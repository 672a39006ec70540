//! Lints a job script for lines that break GPU isolation.
//!
//! The check is line by line and deliberately shallow: it reads shell words (quotes respected,
//! `;`, `&&`, `|` splitting commands) and a few Python idioms, and errs towards not flagging.
//! A script determined to escape can; the lint catches the copy-pasted `export` that would
//! silently put a job on someone else's GPU.

const VAR: &str = "CUDA_VISIBLE_DEVICES";

/// A line that sets `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Finding {
    /// Line number, from 1.
    pub line: usize,
    /// The line, trimmed.
    pub text: String,
}

/// Every line of `script` that sets `CUDA_VISIBLE_DEVICES`: `export`, a plain or
/// command-prefix assignment, `env`, `declare -x`/`typeset -x`, csh `setenv`, and in inline
/// Python (`python -c`, heredocs) `os.environ[...] =`, `os.environ.update`/`setdefault`,
/// `os.putenv`. Unsetting it (`unset`, `del os.environ[...]`, `os.environ.pop`) counts too,
/// since that shows the job every GPU. Comments (and `#SBATCH`/`#LABPOOL` lines) are ignored.
pub fn cuda_visible_devices_overrides(script: &str) -> Vec<Finding> {
    script
        .lines()
        .enumerate()
        .filter_map(|(i, raw)| {
            let line = raw.trim();
            if line.starts_with('#') || !line.contains(VAR) {
                return None;
            }
            let code = crate::lint_shell::strip_comment(line);
            let sets = crate::lint_shell::sets(code, VAR) || sets_in_python(code);
            sets.then(|| Finding {
                line: i + 1,
                text: line.to_string(),
            })
        })
        .collect()
}

/// True when the line removes the variable rather than setting it.
fn unsets(text: &str) -> bool {
    ["unset ", "unsetenv", "del ", ".pop("]
        .iter()
        .any(|w| text.contains(w))
}

/// The message for a refused (or, with the switch, warned) script, with its one hint. For a
/// `--wrap` command (`wrapped`), the lines are the command itself, not lines of a file.
pub fn explain(findings: &[Finding], refused: bool, wrapped: bool) -> String {
    let removed = findings.iter().filter(|f| unsets(&f.text)).count();
    let verb = match removed {
        0 => "sets",
        n if n == findings.len() => "unsets",
        _ => "sets and unsets",
    };
    let what = if wrapped {
        "the --wrap command"
    } else {
        "the job script"
    };
    let mut out = format!(
        "{}: {what} {verb} CUDA_VISIBLE_DEVICES:\n",
        if refused { "refused" } else { "warning" }
    );
    for f in findings {
        if wrapped {
            out.push_str(&format!("  {}\n", f.text));
        } else {
            out.push_str(&format!("  line {}: {}\n", f.line, f.text));
        }
    }
    out.push_str(
        "labpool sets CUDA_VISIBLE_DEVICES to the GPUs the job was given. Overriding it makes \
         the job use GPUs that belong to other people's jobs (and with device isolation on, CUDA \
         finds no device at all).\n",
    );
    if refused {
        out.push_str(
            "hint: remove the line and ask for GPUs with `--gpus N` instead; the job sees exactly \
             those, numbered from 0\n\
             hint: an admin can set `[jobs] cuda_visible_devices = \"warn\"` in the config to \
             only warn\n",
        );
    } else {
        out.push_str(
            "the job runs anyway, because the config has `[jobs] cuda_visible_devices = \"warn\"`\n\
             hint: remove the line and ask for GPUs with `--gpus N` instead; the job sees exactly \
             those, numbered from 0\n",
        );
    }
    out
}

/// Python that sets or removes the variable: `environ["V"] =` (not `==`), `del environ["V"]`,
/// or `"V"` as an argument of `environ.setdefault`/`update`/`pop`, `putenv`, `unsetenv`, and
/// `environ.update(V=...)`. Backslash-escaped quotes (inside `python -c "..."`) are read as
/// quotes.
fn sets_in_python(code: &str) -> bool {
    let code = code.replace("\\\"", "\"").replace("\\'", "'");
    const CALLS: [&str; 5] = [
        "environ.setdefault",
        "environ.update",
        "environ.pop",
        "putenv",
        "unsetenv",
    ];
    let mut from = 0;
    while let Some(at) = code[from..].find(VAR).map(|i| i + from) {
        from = at + VAR.len();
        let before = &code[..at];
        let after = &code[from..];
        let Some(quote) = before.chars().last().filter(|c| *c == '"' || *c == '\'') else {
            // `environ.update(CUDA_VISIBLE_DEVICES="0")`
            let keyword =
                after.trim_start().starts_with('=') && !after.trim_start().starts_with("==");
            if keyword && callee(before).is_some_and(|c| c.ends_with("environ.update")) {
                return true;
            }
            continue;
        };
        let Some(after) = after.strip_prefix(quote) else {
            continue;
        };
        let before = before[..before.len() - 1].trim_end();
        if let Some(subject) = before.strip_suffix('[') {
            let subject = subject.trim_end();
            if !subject.ends_with("environ") {
                continue;
            }
            let rest = after
                .trim_start()
                .strip_prefix(']')
                .unwrap_or("")
                .trim_start();
            let assigned = rest.starts_with('=') && !rest.starts_with("==");
            let head =
                subject.trim_end_matches(|c: char| c.is_alphanumeric() || c == '_' || c == '.');
            let deleted = head.trim_end() == "del" || head.trim_end().ends_with(" del");
            if assigned || deleted {
                return true;
            }
        } else if callee(before).is_some_and(|c| CALLS.iter().any(|call| c.ends_with(call))) {
            return true;
        }
    }
    false
}

/// The name called by the innermost open call that `before` ends inside, e.g. `os.putenv` for
/// `os.putenv(`; `{`, `[` and `,` between are allowed (dict and list arguments).
fn callee(before: &str) -> Option<&str> {
    let mut depth = 0i32;
    for (i, c) in before.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' if depth == 0 => {
                let name = before[..i].trim_end();
                let start = name
                    .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                    .map_or(0, |j| j + 1);
                return Some(&name[start..]);
            }
            '(' => depth -= 1,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_idioms() {
        for yes in [
            r#"os.environ["CUDA_VISIBLE_DEVICES"] = "0""#,
            r#"os.environ['CUDA_VISIBLE_DEVICES']="0""#,
            r#"os.environ.setdefault("CUDA_VISIBLE_DEVICES", "1")"#,
            r#"os.environ.update({"CUDA_VISIBLE_DEVICES": "1"})"#,
            r#"os.environ.update(CUDA_VISIBLE_DEVICES="1")"#,
            r#"os.putenv("CUDA_VISIBLE_DEVICES", "2")"#,
            r#"del os.environ["CUDA_VISIBLE_DEVICES"]"#,
            r#"python -c "import os; os.environ[\"CUDA_VISIBLE_DEVICES\"]='0'""#,
        ] {
            assert!(sets_in_python(yes), "{yes}");
        }
        for no in [
            r#"print(os.environ["CUDA_VISIBLE_DEVICES"])"#,
            r#"if os.environ["CUDA_VISIBLE_DEVICES"] == "0": pass"#,
            r#"gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")"#,
            r#"log("CUDA_VISIBLE_DEVICES", x)"#,
        ] {
            assert!(!sets_in_python(no), "{no}");
        }
    }
}
