//! Software environments in the controller: builds, names, and the submit-time checks (the
//! `CUDA_VISIBLE_DEVICES` lint and resolving `--env`).
//!
//! Decisions recorded here:
//! - The CLI locks the spec as the user (it reads their files); the controller recomputes the
//!   id from the lock, so a client cannot name a build it did not describe.
//! - The build runs as the user who asked (`labpool env build-locked`, with their uid, groups
//!   and home), because pip and conda run code from the packages they install. It builds at
//!   the fixed path STORE/ID, which the controller creates for it. Once it succeeds the build
//!   is sealed (owned by root, no write bits for anyone else) and packed, so it cannot change
//!   under a job, and other nodes unpack the same bytes at the same path.
//! - One build at a time: builds are rare, and two builds of one id must never race.
//! - Names: a member's names are theirs (`env create NAME`); an admin publishes shared ones
//!   (`--shared`). `--env NAME` looks for the user's own name first, then a shared one.
//! - Removing a name deletes the build only when no other name and no unfinished job uses it.
//! - A failed build's log is kept and named in the error; the half-built directory goes.

use crate::agent::isolation::{JobCgroups, Support, join_in_child, remove_groups};
use crate::api::SubmitRequest;
use crate::clock::{now_ms, rfc3339};
use crate::controller::db::Db;
use crate::controller::env_db::EnvRow;
use crate::controller::error::ApiError;
use crate::env_api::{CreateEnv, EnvCreated, EnvRemoved, EnvView, RemoveEnv};
use crate::identity::{Caller, groups_of};
use crate::settings::{Config, OverridePolicy};
use labpool_envs::{EnvKind, Lock};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Who runs a build.
struct Builder {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    name: String,
    /// Their home; `None` gives the build a fresh, empty one.
    home: Option<PathBuf>,
}

/// True when `dir` holds a complete build that was sealed (owned by root when labpool runs as
/// root): an unsealed one may still be changed by whoever built it.
fn is_sealed(dir: &Path) -> bool {
    labpool_envs::pack::is_complete(dir)
        && (!nix::unistd::geteuid().is_root()
            || std::fs::symlink_metadata(dir).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0))
}

/// Builds, names and checks.
pub struct EnvService {
    config: Arc<Config>,
    db: Db,
    /// The node's cgroups, for the builds' own group.
    support: Support,
    /// The tools, for the platform of this pool.
    tools: labpool_envs::tools::Tools,
    /// Held for the whole of a build.
    building: tokio::sync::Mutex<()>,
}

/// Where the packed build of `id` is kept.
pub fn archive_path(config: &Config, id: &str) -> PathBuf {
    config.env_archive_dir().join(format!("{id}.tar.zst"))
}

/// Checks an environment name: 1 to 64 of letters, digits, `.`, `_`, `-`, `+`, not starting
/// with `.` or `-`.
pub fn check_env_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            format!("invalid environment name {name:?}"),
            Some(
                "use 1 to 64 letters, digits, '.', '_', '-' or '+', not starting with '.' or '-' (e.g. tf215)"
                    .to_string(),
            ),
        ))
    }
}

impl EnvService {
    /// The service over `db`.
    pub fn new(
        config: Arc<Config>,
        db: Db,
        support: Support,
        tools: labpool_envs::tools::Tools,
    ) -> Arc<EnvService> {
        Arc::new(EnvService {
            config,
            db,
            support,
            tools,
            building: tokio::sync::Mutex::new(()),
        })
    }

    /// Resolves `--env` and lints the script. Returns warnings for the submitter; an error
    /// refuses the submit and changes nothing.
    pub async fn check_submit(
        &self,
        req: &mut SubmitRequest,
        caller: &Caller,
    ) -> Result<Vec<String>, ApiError> {
        let mut warnings = Vec::new();
        let findings = labpool_envs::lint::cuda_visible_devices_overrides(&req.script);
        if !findings.is_empty() {
            match self.config.jobs.cuda_visible_devices {
                OverridePolicy::Refuse => {
                    return Err(ApiError::bad_request(
                        labpool_envs::lint::explain(&findings, true),
                        Some(
                            "remove the line and ask for GPUs with --gpus N; labpool sets CUDA_VISIBLE_DEVICES for you"
                                .to_string(),
                        ),
                    ));
                }
                OverridePolicy::Warn => {
                    warnings.push(labpool_envs::lint::explain(&findings, false));
                }
            }
        }
        // Only the controller fills these in.
        req.env_id = None;
        req.env_kind = None;
        if let Some(name) = req.env.clone() {
            let (_, row) = self.resolve(caller, &name).await?;
            req.env_kind = Some(kind_of(&row)?);
            req.env_id = Some(row.id);
        }
        Ok(warnings)
    }

    /// The build a caller's name points at: their own, else a shared one. An admin may also
    /// write `owner/name`; anyone may give an id.
    async fn resolve(&self, caller: &Caller, name: &str) -> Result<(String, EnvRow), ApiError> {
        let (owner, short) = match name.split_once('/') {
            Some((o, n)) if caller.admin || o == caller.user => (Some(o.to_string()), n),
            Some(_) => {
                return Err(ApiError::forbidden(
                    format!("{name:?} is another user's environment"),
                    Some("use your own or a shared one (`labpool env list`)".to_string()),
                ));
            }
            None => (None, name),
        };
        let owners: Vec<String> = match owner {
            Some(o) => vec![o],
            None => vec![caller.user.clone(), String::new()],
        };
        for o in &owners {
            if let Some(id) = self.db.env_name(o, short).await? {
                let row = self.db.env(&id).await?.ok_or_else(|| {
                    ApiError::internal(format!(
                        "environment name {name} points at unknown build {id}"
                    ))
                })?;
                return Ok((o.clone(), row));
            }
        }
        // By id: a build one of the caller's names (or a shared one) points at; any for admins.
        if short.len() >= 8 && short.bytes().all(|b| b.is_ascii_hexdigit()) {
            let visible = (!caller.admin).then_some(caller.user.as_str());
            let names = self.db.env_names(visible).await?;
            if let Some((o, _, _)) = names.iter().find(|(_, _, id)| id == short)
                && let Some(row) = self.db.env(short).await?
            {
                return Ok((o.clone(), row));
            }
        }
        let names: Vec<String> = self
            .db
            .env_names(Some(&caller.user))
            .await?
            .into_iter()
            .map(|(_, n, _)| n)
            .collect();
        let hint = if names.is_empty() {
            "there are none yet; make one with `labpool env create NAME --file requirements.txt`"
                .to_string()
        } else {
            format!(
                "yours and the shared ones: {}; `labpool env list` shows them",
                names.join(", ")
            )
        };
        Err(ApiError::not_found(
            format!("no environment {name:?}"),
            Some(hint),
        ))
    }

    /// `env create`: reuses a build with the same id, or builds one; then points the name at it.
    /// The work runs in a task of its own, so a client that hangs up (Ctrl-C) never leaves a
    /// build half-done, unsealed or unrecorded.
    pub async fn create(
        self: &Arc<Self>,
        caller: &Caller,
        req: CreateEnv,
    ) -> Result<EnvCreated, ApiError> {
        check_env_name(&req.name)?;
        if req.shared {
            crate::controller::http::admin_only(
                &self.config,
                caller,
                "publish shared environments",
            )?;
        }
        labpool_envs::verify::check_lock(&req.lock).map_err(|e| {
            ApiError::bad_request(
                e.to_string(),
                Some("lock the spec again with `labpool env create` of this version".to_string()),
            )
        })?;
        // The platform is part of the id: it must be this pool's, not the client's idea of it.
        let (kind, tools) = (req.lock.kind, self.tools.clone());
        let platform =
            tokio::task::spawn_blocking(move || labpool_envs::id::platform(kind, &tools))
                .await
                .map_err(ApiError::internal)?
                .map_err(|e| ApiError::bad_request(e.to_string(), None))?;
        if platform != req.lock.platform {
            return Err(ApiError::bad_request(
                format!(
                    "the lock is for platform {}, but this pool builds for {platform}",
                    req.lock.platform
                ),
                Some(
                    "run `labpool env create` with the pool's config, so that it locks with [envs] python"
                        .to_string(),
                ),
            ));
        }
        let this = self.clone();
        let caller = caller.clone();
        tokio::spawn(async move { this.create_now(&caller, req).await })
            .await
            .map_err(ApiError::internal)?
    }

    async fn create_now(&self, caller: &Caller, req: CreateEnv) -> Result<EnvCreated, ApiError> {
        let lock = req.lock;
        let id = lock.id.clone();
        let owner = if req.shared {
            String::new()
        } else {
            caller.user.clone()
        };
        let _guard = self.building.lock().await;
        let dir = self.config.env_store().join(&id);
        let existing = self.db.env(&id).await?;
        let reused = match &existing {
            Some(_) if is_sealed(&dir) => true,
            // Recorded, but gone from this node's store: the packed build comes back.
            Some(row) => {
                let (archive, to) = (PathBuf::from(&row.archive), dir.clone());
                let unpacked =
                    tokio::task::spawn_blocking(move || labpool_envs::pack::unpack(&archive, &to))
                        .await
                        .map_err(ApiError::internal)?;
                if unpacked.is_ok() && is_sealed(&dir) {
                    true
                } else {
                    let row = self.build(caller, &lock, &dir).await?;
                    self.db.insert_env(&row).await?;
                    false
                }
            }
            None => {
                let row = self.build(caller, &lock, &dir).await?;
                self.db.insert_env(&row).await?;
                false
            }
        };
        let moved = self
            .db
            .set_env_name(&owner, &req.name, &id, now_ms())
            .await?;
        self.collect_garbage().await?;
        tracing::info!(name = req.name, owner, id, reused, "environment ready");
        let row = self.db.env(&id).await?.expect("just recorded");
        Ok(EnvCreated {
            env: self.view(caller, &owner, &req.name, &row).await?,
            reused,
            moved_from: moved,
        })
    }

    /// Who a build runs as, and where its home is: the member for a container (it copies
    /// their image, whose hash is checked again once sealed); otherwise the build user
    /// (`[envs] build_user`), with a fresh home, so nothing of a member's account (their
    /// `~/.local`, `usercustomize`, pip config) goes into a build that others may reuse.
    fn builder(&self, caller: &Caller, kind: EnvKind) -> Result<Builder, ApiError> {
        if !nix::unistd::geteuid().is_root() {
            let me = crate::identity::effective_uid();
            let home = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(me))
                .ok()
                .flatten()
                .map(|u| u.dir);
            return Ok(Builder {
                uid: me,
                gid: nix::unistd::getegid().as_raw(),
                groups: Vec::new(),
                name: crate::identity::user_name(me),
                home,
            });
        }
        if kind == EnvKind::Container {
            return Ok(Builder {
                uid: caller.uid,
                gid: caller.gid,
                groups: groups_of(&caller.user, caller.gid),
                name: caller.user.clone(),
                home: Some(caller.home.clone()),
            });
        }
        let name = &self.config.envs.build_user;
        let user = nix::unistd::User::from_name(name)
            .ok()
            .flatten()
            .ok_or_else(|| {
                ApiError::internal(format!(
                    "the build user {name:?} does not exist on this machine; create it (useradd -r -s /usr/sbin/nologin {name}) or set [envs] build_user"
                ))
            })?;
        if user.uid.is_root() {
            return Err(ApiError::internal(format!(
                "[envs] build_user {name:?} is root; builds run package code, so give an unprivileged user"
            )));
        }
        Ok(Builder {
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            groups: vec![user.gid.as_raw()],
            name: name.clone(),
            home: None,
        })
    }

    /// Builds `lock` at `dir` as the builder, then seals, checks and packs it.
    async fn build(&self, caller: &Caller, lock: &Lock, dir: &Path) -> Result<EnvRow, ApiError> {
        let builder = self.builder(caller, lock.kind)?;
        let store = self.config.env_store();
        let logs = store.join(".logs");
        let archives = self.config.env_archive_dir();
        for d in [&store, &logs, &archives] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(d)
                .map_err(|e| ApiError::internal(format!("cannot create {}: {e}", d.display())))?;
        }
        // A half-built directory left by a crash or a failed build goes first.
        if dir.exists() {
            remove_tree(dir)?;
        }
        let started = Instant::now();
        let stamp = now_ms();
        let log_path = logs.join(format!("{}.{stamp}.log", lock.id));
        let lock_path = logs.join(format!("{}.{stamp}.lock.json", lock.id));
        let fresh_home = builder.home.is_none();
        let home = builder
            .home
            .clone()
            .unwrap_or_else(|| logs.join(format!("{}.{stamp}.home", lock.id)));
        let io = |what: &str, p: &Path, e: std::io::Error| {
            ApiError::internal(format!("cannot {what} {}: {e}", p.display()))
        };
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(dir)
            .map_err(|e| io("create", dir, e))?;
        if fresh_home {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&home)
                .map_err(|e| io("create", &home, e))?;
        }
        let log = std::fs::File::create(&log_path).map_err(|e| io("create", &log_path, e))?;
        std::fs::write(
            &lock_path,
            serde_json::to_vec_pretty(lock).expect("a lock serialises"),
        )
        .map_err(|e| io("write", &lock_path, e))?;
        let as_root = nix::unistd::geteuid().is_root();
        if as_root {
            let mut owned = vec![dir, log_path.as_path(), lock_path.as_path()];
            if fresh_home {
                owned.push(home.as_path());
            }
            for p in owned {
                nix::unistd::chown(
                    p,
                    Some(nix::unistd::Uid::from_raw(builder.uid)),
                    Some(nix::unistd::Gid::from_raw(builder.gid)),
                )
                .map_err(|e| io("chown", p, e.into()))?;
            }
        }
        // The build's processes go in a group of their own, so that none outlives it to
        // change the build after it is sealed.
        let support = &self.support;
        // Unique on the machine: another pool (a demo beside production) may build the same id.
        let group_name = format!("build-{}-{}-{stamp}", lock.id, std::process::id());
        let groups = if support.devices.is_some() || support.memory.is_some() {
            let iso = support.for_job(&group_name, Vec::new(), None);
            Some(JobCgroups::create(&iso).map_err(ApiError::internal)?)
        } else {
            None
        };
        let fds = groups
            .as_ref()
            .map(JobCgroups::procs_fds)
            .unwrap_or_default();
        let exe = std::env::current_exe().map_err(ApiError::internal)?;
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("env")
            .arg("build-locked")
            .arg(&lock_path)
            .arg(dir)
            .env_clear()
            .env("HOME", &home)
            .env("USER", &builder.name)
            .env("LOGNAME", &builder.name)
            .env(
                "PATH",
                std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            )
            .env("LANG", "C.UTF-8")
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().map_err(ApiError::internal)?)
            .stderr(log)
            .process_group(0);
        if let Some(python) = &self.config.envs.python {
            cmd.env("LABPOOL_ENV_PYTHON", python);
        }
        let switch = as_root.then(|| {
            let groups: Vec<nix::unistd::Gid> = builder
                .groups
                .iter()
                .map(|g| nix::unistd::Gid::from_raw(*g))
                .collect();
            (
                groups,
                nix::unistd::Gid::from_raw(builder.gid),
                nix::unistd::Uid::from_raw(builder.uid),
            )
        });
        // SAFETY: between fork and exec only async-signal-safe calls on data made before.
        unsafe {
            cmd.pre_exec(move || {
                join_in_child(&fds)?;
                if let Some((groups, gid, uid)) = &switch {
                    nix::unistd::setgroups(groups)?;
                    nix::unistd::setgid(*gid)?;
                    nix::unistd::setuid(*uid)?;
                }
                Ok(())
            });
        }
        let timeout = self.config.envs.build_timeout;
        let status = tokio::task::spawn_blocking(move || run_with_timeout(cmd, timeout))
            .await
            .map_err(ApiError::internal)?;
        drop(groups);
        remove_groups(support, &group_name);
        let _ = std::fs::remove_file(&lock_path);
        if fresh_home {
            let _ = std::fs::remove_dir_all(&home);
        }
        let failed = match status {
            Ok(s) if s.success() && labpool_envs::pack::is_complete(dir) => None,
            Ok(s) => Some(format!("the build exited with {s}")),
            Err(e) => Some(e),
        };
        let fail = |why: String| {
            let _ = remove_tree(dir);
            let tail = log_tail(&log_path, 8);
            ApiError::bad_request(
                format!(
                    "building environment {} ({}) failed: {why}; its log is {}; last lines:\n{tail}",
                    lock.id,
                    lock.kind.as_str(),
                    log_path.display()
                ),
                Some(
                    "fix the spec (a package name or version?) and run `labpool env create` again"
                        .to_string(),
                ),
            )
        };
        if let Some(why) = failed {
            return Err(fail(why));
        }
        let sealed = {
            let dir = dir.to_path_buf();
            tokio::task::spawn_blocking(move || seal(&dir, as_root))
                .await
                .map_err(ApiError::internal)?
        };
        let bytes = sealed.map_err(|e| io("seal", dir, e))?;
        // Sealed now: nothing can change it, so this check holds for every later user.
        let checked = {
            let (lock, dir) = (lock.clone(), dir.to_path_buf());
            tokio::task::spawn_blocking(move || labpool_envs::verify::check_build(&lock, &dir))
                .await
                .map_err(ApiError::internal)?
        };
        if let Err(e) = checked {
            return Err(fail(e.to_string()));
        }
        let archive = archive_path(&self.config, &lock.id);
        let packed = {
            let (dir, archive) = (dir.to_path_buf(), archive.clone());
            tokio::task::spawn_blocking(move || labpool_envs::pack::pack(&dir, &archive))
                .await
                .map_err(ApiError::internal)?
        };
        let archive_bytes =
            packed.map_err(|e| ApiError::internal(format!("packing failed: {e}")))?;
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&log_path) {
            let _ = writeln!(
                f,
                "labpool: built {} as {} in {:.1} s: {bytes} bytes, packed to {archive_bytes} bytes at {}",
                lock.id,
                builder.name,
                started.elapsed().as_secs_f64(),
                archive.display()
            );
        }
        Ok(EnvRow {
            id: lock.id.clone(),
            kind: lock.kind.as_str().to_string(),
            lock: lock.lock.clone(),
            platform: lock.platform.clone(),
            spec: lock.spec.clone(),
            dir: dir.display().to_string(),
            archive: archive.display().to_string(),
            bytes: bytes as i64,
            archive_bytes: archive_bytes as i64,
            built: now_ms(),
            built_by: caller.user.clone(),
            build_ms: started.elapsed().as_millis() as i64,
            build_log: log_path.display().to_string(),
        })
    }

    /// Deletes every build that no name and no unfinished job uses (a name that moved, a
    /// removed name whose queued jobs have since ended). Called with the build lock held.
    async fn collect_garbage(&self) -> Result<(), ApiError> {
        for id in self.db.env_ids().await? {
            if self.db.env_in_use(&id).await? {
                continue;
            }
            if let Some(row) = self.db.env(&id).await? {
                let _ = remove_tree(Path::new(&row.dir));
                let _ = std::fs::remove_file(&row.archive);
            }
            self.db.remove_env(&id).await?;
            tracing::info!(id, "environment build deleted: nothing uses it any more");
        }
        Ok(())
    }

    async fn view(
        &self,
        caller: &Caller,
        owner: &str,
        name: &str,
        row: &EnvRow,
    ) -> Result<EnvView, ApiError> {
        // Other members' names are theirs to know.
        let visible = (!caller.admin).then_some(caller.user.as_str());
        let names = self
            .db
            .env_names(visible)
            .await?
            .into_iter()
            .filter(|(_, _, id)| *id == row.id)
            .map(|(o, n, _)| if o.is_empty() { n } else { format!("{o}/{n}") })
            .collect();
        Ok(EnvView {
            name: name.to_string(),
            owner: owner.to_string(),
            id: row.id.clone(),
            kind: kind_of(row)?,
            platform: row.platform.clone(),
            dir: row.dir.clone().into(),
            archive: row.archive.clone().into(),
            bytes: row.bytes as u64,
            archive_bytes: row.archive_bytes as u64,
            built: rfc3339(row.built),
            built_by: row.built_by.clone(),
            build_s: row.build_ms as f64 / 1000.0,
            build_log: row.build_log.clone().into(),
            lock: row.lock.clone(),
            spec: row.spec.clone(),
            names,
        })
    }

    /// `env list`: the caller's names and the shared ones (every user's with `all`, admins).
    pub async fn list(&self, caller: &Caller, all: bool) -> Result<Vec<EnvView>, ApiError> {
        if all {
            crate::controller::http::admin_only(
                &self.config,
                caller,
                "list every user's environments",
            )?;
        }
        let owner = (!all).then_some(caller.user.as_str());
        let mut out = Vec::new();
        for (o, n, id) in self.db.env_names(owner).await? {
            if let Some(row) = self.db.env(&id).await? {
                out.push(self.view(caller, &o, &n, &row).await?);
            }
        }
        Ok(out)
    }

    /// `env show NAME`.
    pub async fn show(&self, caller: &Caller, name: &str) -> Result<EnvView, ApiError> {
        let (owner, row) = self.resolve(caller, name).await?;
        let short = name.rsplit('/').next().unwrap_or(name);
        self.view(caller, &owner, short, &row).await
    }

    /// `env rm NAME`: the name goes; the build too when nothing else uses it.
    pub async fn remove(&self, caller: &Caller, req: RemoveEnv) -> Result<EnvRemoved, ApiError> {
        let owner = if req.shared {
            crate::controller::http::admin_only(
                &self.config,
                caller,
                "remove shared environments",
            )?;
            String::new()
        } else {
            caller.user.clone()
        };
        let Some(id) = self.db.env_name(&owner, &req.name).await? else {
            let whose = if req.shared { "shared" } else { "your" };
            return Err(ApiError::not_found(
                format!("there is no {whose} environment {:?}", req.name),
                Some(if req.shared {
                    "`labpool env list` shows the names".to_string()
                } else {
                    "`labpool env list` shows the names; a shared one is removed with --shared by an admin".to_string()
                }),
            ));
        };
        let _guard = self.building.lock().await;
        self.db.remove_env_name(&owner, &req.name).await?;
        self.collect_garbage().await?;
        let build_deleted = self.db.env(&id).await?.is_none();
        tracing::info!(
            name = req.name,
            owner,
            id,
            build_deleted,
            "environment name removed"
        );
        Ok(EnvRemoved {
            name: req.name,
            id,
            build_deleted,
        })
    }
}

fn kind_of(row: &EnvRow) -> Result<EnvKind, ApiError> {
    row.kind
        .parse()
        .map_err(|e| ApiError::internal(format!("environment {}: {e}", row.id)))
}

/// Runs `cmd`, killing its process group at `timeout`.
fn run_with_timeout(
    mut cmd: std::process::Command,
    timeout: Duration,
) -> Result<std::process::ExitStatus, String> {
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the build: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = child.wait();
                return Err(format!(
                    "it ran longer than {} and was stopped (raise [envs] build_timeout)",
                    humantime::format_duration(timeout)
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("cannot wait for the build: {e}")),
        }
    }
}

/// Makes a finished build root's and read-only for everyone else; returns its size in bytes
/// (allocated). Symbolic links are changed, never followed.
fn seal(dir: &Path, as_root: bool) -> std::io::Result<u64> {
    let mut bytes = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p)?;
        bytes += meta.blocks() * 512;
        if as_root {
            nix::unistd::fchownat(
                nix::fcntl::AT_FDCWD,
                &p,
                Some(nix::unistd::Uid::from_raw(0)),
                Some(nix::unistd::Gid::from_raw(0)),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )?;
        }
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.mode() & 0o7777 & !0o022 & !0o6000;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&p)? {
                stack.push(entry?.path());
            }
        }
    }
    Ok(bytes)
}

/// Removes a build directory, write bits first (a sealed build has none for others).
fn remove_tree(dir: &Path) -> Result<(), ApiError> {
    std::fs::remove_dir_all(dir)
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(|e| ApiError::internal(format!("cannot remove {}: {e}", dir.display())))
}

/// The last `n` lines of a build log, reading at most its last 64 KiB (the log is written by
/// the build, which may make it as large as it likes).
fn log_tail(path: &Path, n: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
        let mut bytes = Vec::new();
        let _ = f.take(64 * 1024).read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
