//! The compatibility table against the real commands: every option Slurm 22.05's `sbatch`,
//! `srun`, `salloc`, `squeue`, `sacct`, `scancel`, `scontrol`, `sinfo` and `sattach` list in `--help` has
//! its row under its command in `docs/slurm-compatibility.md`, and labpool's command reads it
//! (never "unexpected argument" nor "unknown option").

use crate::pool::Pool;
use crate::slurm_peer::slurm;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

/// The long options a real command lists in its `--help`.
fn real_options(conf: &Path, name: &str) -> BTreeSet<String> {
    let out = Command::new(format!("/usr/bin/{name}"))
        .arg("--help")
        .env("SLURM_CONF", conf)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let mut found = BTreeSet::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        if let Some(o) = word.strip_prefix("--")
            && o.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        {
            found.insert(o.trim_end_matches('-').to_string());
        }
    }
    // sattach lists the fewest: 10, --help and --usage among them.
    assert!(found.len() >= 8, "{name} --help listed too little:\n{text}");
    found
}

/// The table's section for `name`.
fn section<'a>(doc: &'a str, name: &str) -> &'a str {
    let start = doc
        .find(&format!("\n## {name}\n"))
        .unwrap_or_else(|| panic!("no section for {name}"));
    let rest = &doc[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

#[test]
fn every_option_of_slurms_commands_has_its_row_and_is_read() {
    let Some(conf) = slurm("every_option_of_slurms_commands_has_its_row_and_is_read") else {
        return;
    };
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/slurm-compatibility.md"),
    )
    .unwrap();
    // Not started: the commands read their options before they call the controller.
    let pool = Pool::new("1:a100");
    let bin = pool.dir.join("slurm-bin");
    pool.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    let mut missing = Vec::new();
    let mut unread = Vec::new();
    for name in [
        "sbatch", "srun", "salloc", "squeue", "sacct", "scancel", "scontrol", "sinfo", "sattach",
    ] {
        let rows = section(&doc, name);
        for option in real_options(&conf, name) {
            if option != "help" && !rows.contains(&format!("`--{option}`")) {
                missing.push(format!("{name} --{option}"));
            }
            let out = Command::new(bin.join(name))
                .arg(format!("--{option}"))
                .env("LABPOOL_CONFIG", &pool.config)
                .current_dir(&pool.work)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stderr);
            if said.contains("unexpected argument") || said.contains("unknown option") {
                unread.push(format!(
                    "{name} --{option}: {}",
                    said.lines().next().unwrap_or("")
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "options without a row in docs/slurm-compatibility.md:\n{}",
        missing.join("\n")
    );
    assert!(
        unread.is_empty(),
        "options not read:\n{}",
        unread.join("\n")
    );
}
