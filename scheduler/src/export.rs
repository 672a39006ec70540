//! `--export`: which of the submitter's environment variables a job sees, as in Slurm.

use std::collections::BTreeMap;

/// The job's environment policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportPolicy {
    /// Take the whole submit environment (`ALL`, the default).
    pub all: bool,
    /// Variables to take from the submit environment when `all` is false.
    pub names: Vec<String>,
    /// Variables set explicitly (`NAME=value`); they win over the submit environment.
    pub set: Vec<(String, String)>,
}

impl Default for ExportPolicy {
    fn default() -> Self {
        ExportPolicy {
            all: true,
            names: Vec::new(),
            set: Vec::new(),
        }
    }
}

/// Why an `--export` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid --export '{text}': '{item}' is not ALL, NONE, NAME or NAME=value (e.g. --export=ALL,OMP_NUM_THREADS=8)"
)]
pub struct ExportParseError {
    /// The whole value.
    pub text: String,
    /// The item that failed.
    pub item: String,
}

/// Parses `--export=ALL|NONE|[ALL,]NAME[=value],…`.
///
/// ```
/// use labpool_scheduler::export::parse_export;
/// let p = parse_export("NONE,OMP_NUM_THREADS=8,HOME").unwrap();
/// assert!(!p.all);
/// assert_eq!(p.names, ["HOME"]);
/// ```
pub fn parse_export(text: &str) -> Result<ExportPolicy, ExportParseError> {
    let mut policy = ExportPolicy {
        all: false,
        names: Vec::new(),
        set: Vec::new(),
    };
    for item in text.split(',').map(str::trim) {
        let bad = || ExportParseError {
            text: text.to_string(),
            item: item.to_string(),
        };
        if item.eq_ignore_ascii_case("all") {
            policy.all = true;
        } else if item.eq_ignore_ascii_case("none") {
            policy.all = false;
        } else if let Some((name, value)) = item.split_once('=') {
            if !is_var_name(name) {
                return Err(bad());
            }
            policy.set.push((name.to_string(), value.to_string()));
        } else if is_var_name(item) {
            policy.names.push(item.to_string());
        } else {
            return Err(bad());
        }
    }
    Ok(policy)
}

fn is_var_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl ExportPolicy {
    /// The variables the job receives from `submit_env` under this policy.
    pub fn apply(&self, submit_env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = if self.all {
            submit_env.clone()
        } else {
            self.names
                .iter()
                .filter_map(|n| submit_env.get(n).map(|v| (n.clone(), v.clone())))
                .collect()
        };
        for (k, v) in &self.set {
            env.insert(k.clone(), v.clone());
        }
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        [("HOME", "/home/a"), ("PATH", "/bin"), ("SECRET", "x")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn all_is_default_and_keeps_everything() {
        assert_eq!(ExportPolicy::default().apply(&env()), env());
        let p = parse_export("ALL,EXTRA=1").unwrap();
        let out = p.apply(&env());
        assert_eq!(out.len(), 4);
        assert_eq!(out["EXTRA"], "1");
    }

    #[test]
    fn none_and_lists_keep_only_named() {
        assert!(parse_export("NONE").unwrap().apply(&env()).is_empty());
        let out = parse_export("PATH,HOME,MISSING,X=2").unwrap().apply(&env());
        assert_eq!(out.keys().collect::<Vec<_>>(), ["HOME", "PATH", "X"]);
    }

    #[test]
    fn bad_items() {
        assert!(parse_export("1ABC").is_err());
        assert!(parse_export("ALL,,X").is_err());
        assert!(parse_export("A-B=1").is_err());
    }
}
