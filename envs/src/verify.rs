//! What the controller checks itself: a lock that a client sent (the client locked it, and may
//! be anyone), and a finished build before it is sealed and shared.

use crate::kind::EnvKind;
use crate::{EnvError, Lock};
use std::path::Path;

/// Checks that `lock` is one this crate could have made: its id matches its content, module
/// lines are plain `module` commands, a venv lock carries no index password and no options that
/// read other files, and a container lock names one image by its hash.
pub fn check_lock(lock: &Lock) -> Result<(), EnvError> {
    let bad = |why: String| EnvError::BadLock {
        id: lock.id.clone(),
        why,
    };
    let id = crate::id::env_id(lock.kind, &lock.lock, &lock.platform);
    if id != lock.id {
        return Err(bad(format!("its id does not match its content ({id})")));
    }
    match lock.kind {
        EnvKind::Modules => {
            let lines = crate::modules::parse(Path::new("the lock"), &lock.lock)?;
            if format!("{}\n", lines.join("\n")) != lock.lock {
                return Err(bad("its module lines are not in normal form".to_string()));
            }
        }
        EnvKind::Venv => {
            for line in lock.lock.lines() {
                if has_password(line) {
                    return Err(bad(format!(
                        "`{}` holds a password; every member could read it in `labpool env show`: use an index without one, or a local proxy",
                        line.split_whitespace().next().unwrap_or(line)
                    )));
                }
                let first = line.split_whitespace().next().unwrap_or("");
                let allowed = [
                    "--index-url",
                    "--extra-index-url",
                    "--find-links",
                    "-i",
                    "-f",
                ];
                if first.starts_with('-') && !allowed.iter().any(|a| first.starts_with(a)) {
                    return Err(bad(format!("`{first}` is not allowed in a venv lock")));
                }
            }
        }
        EnvKind::Container => {
            if crate::container::locked_hash(lock).is_none() {
                return Err(bad("its text is not `blake3:<hash> <name>`".to_string()));
            }
            if !lock.image.as_deref().is_some_and(Path::is_absolute) {
                return Err(bad("it names no absolute image path".to_string()));
            }
        }
        EnvKind::Conda => {}
    }
    Ok(())
}

/// Checks a finished build at `dir` against `lock`: complete, and for a container the image
/// in it still has the locked hash (whatever happened to the directory while it was built).
pub fn check_build(lock: &Lock, dir: &Path) -> Result<(), EnvError> {
    if !crate::pack::is_complete(dir) {
        return Err(EnvError::BadLock {
            id: lock.id.clone(),
            why: format!("the build at {} is not complete", dir.display()),
        });
    }
    if lock.kind == EnvKind::Container {
        let (image, _) = crate::container::built_image(dir)?;
        let expected = crate::container::locked_hash(lock).unwrap_or("");
        let actual = crate::container::hash_file(&image)?;
        if actual != expected {
            return Err(EnvError::HashMismatch {
                path: image,
                expected: expected.to_string(),
                actual,
            });
        }
    }
    Ok(())
}

/// True when a URL in `line` carries `user:password@`.
fn has_password(line: &str) -> bool {
    line.split_whitespace().any(|word| {
        word.split_once("://").is_some_and(|(_, rest)| {
            let authority = rest.split('/').next().unwrap_or("");
            authority.contains('@')
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(kind: EnvKind, text: &str) -> Lock {
        Lock {
            kind,
            lock: text.to_string(),
            platform: "p".into(),
            id: crate::id::env_id(kind, text, "p"),
            spec: String::new(),
            image: Some("/x.sqfs".into()),
        }
    }

    #[test]
    fn forged_locks_are_refused() {
        assert!(check_lock(&lock(EnvKind::Modules, "module load a/1\n")).is_ok());
        assert!(check_lock(&lock(EnvKind::Modules, "module load a/1; rm -rf ~\n")).is_err());
        assert!(check_lock(&lock(EnvKind::Venv, "six==1.16.0 --hash=sha256:ab\n")).is_ok());
        assert!(
            check_lock(&lock(
                EnvKind::Venv,
                "--index-url https://me:secret@pypi.example/simple\nsix==1\n"
            ))
            .is_err()
        );
        assert!(check_lock(&lock(EnvKind::Venv, "-r /etc/shadow\n")).is_err());
        assert!(check_lock(&lock(EnvKind::Container, "blake3:zz x\n")).is_err());
        let mut wrong = lock(EnvKind::Modules, "module load a/1\n");
        wrong.id = "0".repeat(24);
        assert!(check_lock(&wrong).is_err());
    }
}
