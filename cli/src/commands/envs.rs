//! `labpool env ...`: the CLI side of software environments. `create` locks the spec here, as
//! the user (it reads their files and asks PyPI), then the controller builds it.

use crate::api::envs::{CreateEnv, EnvCreated, EnvRemoved, EnvView, RemoveEnv};
use crate::args::EnvCommand;
use crate::client::Client;
use crate::render::{print, spinner, table};
use crate::settings::Config;
use anyhow::Context;
use labpool_envs::EnvKind;
use labpool_envs::tools::Tools;
use std::path::Path;

/// Runs `labpool env …`.
pub async fn run(command: &EnvCommand, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    match command {
        EnvCommand::Create {
            name,
            file,
            kind,
            shared,
            json,
        } => {
            let kind: Option<EnvKind> = kind
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--kind: {e}"))?;
            let file = std::path::absolute(file)
                .with_context(|| format!("cannot resolve {}", file.display()))?;
            let tools = Tools::detect(config.envs.python.clone());
            let bar = spinner(format!("locking {}", file.display()));
            let log_path = lock_log_path(name)?;
            let mut log_file = std::fs::File::create(&log_path)
                .with_context(|| format!("cannot create the lock log {}", log_path.display()))?;
            let locked = {
                let file = file.clone();
                tokio::task::spawn_blocking(move || {
                    labpool_envs::lock::lock(&file, kind, &tools, &mut log_file)
                })
                .await?
            };
            bar.finish_and_clear();
            let lock = match locked {
                Ok(l) => l,
                Err(e) => {
                    // A failed step already quotes the tool's error lines; other errors get
                    // the log's last lines, if the tool wrote any.
                    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(12).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    let said = if tail.is_empty()
                        || matches!(e, labpool_envs::EnvError::StepFailed { .. })
                    {
                        String::new()
                    } else {
                        format!("\nthe tool said:\n{}", tail.join("\n"))
                    };
                    let log = if text.trim().is_empty() {
                        let _ = std::fs::remove_file(&log_path);
                        String::new()
                    } else {
                        format!("\nthe whole log: {}", log_path.display())
                    };
                    anyhow::bail!("cannot lock {}: {e}{said}{log}", file.display());
                }
            };
            let _ = std::fs::remove_file(&log_path);
            let bar = spinner(format!(
                "building {name} ({}, {})",
                lock.kind.as_str(),
                &lock.id
            ));
            let req = CreateEnv {
                name: name.clone(),
                shared: *shared,
                lock,
            };
            let result: Result<EnvCreated, _> = client.post("/v1/envs", &req).await;
            bar.finish_and_clear();
            let created = result?;
            print(*json, &created, |c| {
                let mut out = if c.reused {
                    format!(
                        "{} -> {} (reused the existing build: same lock, nothing built)",
                        c.env.name, c.env.id
                    )
                } else {
                    format!(
                        "{} -> {} built in {:.1} s ({}, packed {})",
                        c.env.name,
                        c.env.id,
                        c.env.build_s,
                        labpool_units::format_size(c.env.bytes),
                        labpool_units::format_size(c.env.archive_bytes)
                    )
                };
                if let Some(old) = &c.moved_from {
                    out.push_str(&format!(
                        "\nthe name moved from {old}; queued jobs keep the build they were given"
                    ));
                }
                out.push_str(&format!(
                    "\nuse it with: labpool submit --env {} ...",
                    c.env.name
                ));
                out
            });
        }
        EnvCommand::List { all, json } => {
            let path = if *all {
                "/v1/envs?all=true"
            } else {
                "/v1/envs"
            };
            let envs: Vec<EnvView> = client.get(path).await?;
            print(*json, &envs, |envs| {
                if envs.is_empty() {
                    return "no environments yet; make one with `labpool env create NAME --file requirements.txt`".to_string();
                }
                let rows = envs
                    .iter()
                    .map(|e| {
                        vec![
                            e.name.clone(),
                            if e.owner.is_empty() {
                                "(shared)".to_string()
                            } else {
                                e.owner.clone()
                            },
                            e.kind.as_str().to_string(),
                            e.id.clone(),
                            labpool_units::format_size(e.bytes),
                            crate::commands::jobs::moment(Some(&e.built)),
                        ]
                    })
                    .collect();
                table(&["NAME", "OWNER", "KIND", "ID", "SIZE", "BUILT"], rows)
            });
        }
        EnvCommand::Show { name, json } => {
            let e: EnvView = client.get(&format!("/v1/envs/{}", encode(name))).await?;
            print(*json, &e, |e| {
                format!(
                    "Name:      {}\nOwner:     {}\nKind:      {}\nId:        {}\nPlatform:  {}\nPath:      {}\nArchive:   {} ({})\nSize:      {}\nBuilt:     {} by {} in {:.1} s\nBuild log: {}\nNames:     {}\nLock:\n{}",
                    e.name,
                    if e.owner.is_empty() {
                        "(shared)"
                    } else {
                        &e.owner
                    },
                    e.kind.as_str(),
                    e.id,
                    e.platform,
                    e.dir.display(),
                    e.archive.display(),
                    labpool_units::format_size(e.archive_bytes),
                    labpool_units::format_size(e.bytes),
                    crate::commands::jobs::moment(Some(&e.built)),
                    e.built_by,
                    e.build_s,
                    e.build_log.display(),
                    e.names.join(", "),
                    indent(&e.lock)
                )
            });
        }
        EnvCommand::Rm { name, shared, json } => {
            let removed: EnvRemoved = client
                .post(
                    "/v1/envs/rm",
                    &RemoveEnv {
                        name: name.clone(),
                        shared: *shared,
                    },
                )
                .await?;
            print(*json, &removed, |r| {
                if r.build_deleted {
                    format!("removed {} and its build {}", r.name, r.id)
                } else {
                    format!(
                        "removed {}; its build {} stays (another name or an unfinished job uses it)",
                        r.name, r.id
                    )
                }
            });
        }
        EnvCommand::BuildLocked { .. } => unreachable!("handled before the config is read"),
    }
    Ok(())
}

/// `labpool env build-locked LOCK DEST`: the build itself, as the user, output to the log.
pub fn build_locked(lock: &Path, dest: &Path) -> anyhow::Result<()> {
    let text = std::fs::read(lock).with_context(|| format!("cannot read {}", lock.display()))?;
    let lock: labpool_envs::Lock = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not a lock", lock.display()))?;
    let python = std::env::var_os(crate::env_vars::LABPOOL_ENV_PYTHON).map(Into::into);
    let tools = Tools::detect(python);
    crate::out!(
        "labpool: building {} ({}) for {} at {}",
        lock.id,
        lock.kind.as_str(),
        lock.platform,
        dest.display()
    );
    let mut out = std::io::stdout();
    labpool_envs::build::build(&lock, dest, &tools, &mut out)
        .with_context(|| format!("building {} failed", lock.id))?;
    crate::out!("labpool: build complete");
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Percent-encodes a path segment (names may hold `+` and `/`).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Where the log of locking environment `name` goes: `~/.labpool/logs/env-lock-NAME.log`, or
/// under `/tmp/labpool-UID/` when the home cannot take it; kept when the lock fails so its
/// message can point at it.
fn lock_log_path(name: &str) -> anyhow::Result<std::path::PathBuf> {
    let uid = nix::unistd::getuid();
    let home = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.dir.join(".labpool").join("logs"));
    let fallback = std::env::temp_dir()
        .join(format!("labpool-{uid}"))
        .join("logs");
    // Only a real directory of the caller's own: under /tmp another user could have put one
    // (or a link) there first.
    let ours = |d: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::create_dir_all(d).is_ok()
            && std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir() && m.uid() == uid.as_raw())
    };
    let dir = home
        .into_iter()
        .chain([fallback.clone()])
        .find(|d| ours(d))
        .with_context(|| {
            format!(
                "cannot create a directory for the lock log ({})",
                fallback.display()
            )
        })?;
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok(dir.join(format!("env-lock-{safe}.log")))
}
