//! One build: run as the builder in a cgroup of its own, then sealed, checked and packed.

use crate::clock::now_ms;
use crate::envs::EnvService;
use crate::envs::db::EnvRow;
use crate::envs::store::{archive_path, remove_tree};
use crate::error::ApiError;
use crate::identity::{Caller, groups_of};
use labpool_envs::{EnvKind, Lock};
use labpool_isolation::{Identity, JobCgroups, Sandbox, remove_groups};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
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

impl EnvService {
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
    pub(super) async fn build(
        &self,
        caller: &Caller,
        lock: &Lock,
        dir: &Path,
    ) -> Result<EnvRow, ApiError> {
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
            .stderr(log);
        if let Some(python) = &self.config.envs.python {
            cmd.env("LABPOOL_ENV_PYTHON", python);
        }
        let identity = as_root.then(|| Identity {
            uid: builder.uid,
            gid: builder.gid,
            groups: builder.groups.clone(),
        });
        Sandbox::new(identity, groups.as_ref(), None)
            .map_err(ApiError::internal)?
            .apply(&mut cmd);
        let timeout = self.config.envs.build_timeout;
        let store = dir.to_path_buf();
        let status = tokio::task::spawn_blocking(move || run_with_timeout(cmd, timeout, &store))
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
                "labpool: built {} as {} in {:.1} s: {}, packed to {} at {}",
                lock.id,
                builder.name,
                started.elapsed().as_secs_f64(),
                labpool_units::format_size(bytes),
                labpool_units::format_size(archive_bytes),
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
}

/// Free space a build leaves on the file system it writes to: 5% of it, at least 64 MiB and
/// at most 2 GiB. A member asks for a build, so a build may never fill that file system (by
/// default the state disk, where the pool's database lives).
fn build_floor(size: u64) -> u64 {
    (size / 20).clamp(64 << 20, 2 << 30)
}

/// Why a build writing to `store` must stop now: less than [`build_floor`] free there.
fn short_of_room(store: &std::path::Path) -> Option<String> {
    let s = nix::sys::statvfs::statvfs(store).ok()?;
    let (free, size) = (
        s.blocks_available() * s.fragment_size(),
        s.blocks() * s.fragment_size(),
    );
    let floor = build_floor(size);
    (free < floor).then(|| {
        format!(
            "it was stopped with {} left on the file system of {} (a build leaves {floor_text} free there); free space, or give [envs] store a disk of its own",
            labpool_units::format_size(free),
            store.display(),
            floor_text = labpool_units::format_size(floor)
        )
    })
}

/// Runs `cmd`, killing its process group at `timeout` or when the file system of `store` runs
/// short of room.
fn run_with_timeout(
    mut cmd: std::process::Command,
    timeout: Duration,
    store: &std::path::Path,
) -> Result<std::process::ExitStatus, String> {
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the build: {e}"))?;
    let deadline = Instant::now() + timeout;
    let stop = |child: &mut std::process::Child| {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = child.wait();
    };
    let mut looked = Instant::now();
    loop {
        if looked.elapsed() >= Duration::from_millis(200) {
            looked = Instant::now();
            if let Some(why) = short_of_room(store) {
                stop(&mut child);
                return Err(why);
            }
        }
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() >= deadline => {
                stop(&mut child);
                return Err(format!(
                    "it ran longer than {} and was stopped (raise [envs] build_timeout)",
                    labpool_units::format_duration(timeout)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A build that would fill the disk it writes to is stopped with room left there.
    #[test]
    fn a_build_never_fills_the_file_system_it_writes_to() {
        let Some(fs) = labpool_testkit::small_fs::SmallFs::mount("96m") else {
            return;
        };
        let mut cmd = std::process::Command::new("sh");
        use std::os::unix::process::CommandExt;
        cmd.arg("-c")
            .arg("i=0; while [ $i -lt 200 ]; do head -c 1048576 /dev/zero >> big; i=$((i+1)); sleep 0.02; done; sleep 30")
            .current_dir(fs.path())
            .process_group(0);
        let why = run_with_timeout(cmd, Duration::from_secs(60), fs.path()).unwrap_err();
        assert!(why.contains("give [envs] store a disk of its own"), "{why}");
        let s = nix::sys::statvfs::statvfs(fs.path()).unwrap();
        assert!(s.blocks_available() * s.fragment_size() > 48 << 20);
    }
}
