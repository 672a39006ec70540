//! Where members' home directories really are, for `labpool init`: the home snapshot source
//! and the home quota must cover the homes people use, not an empty directory of labpool's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The directory holding most ordinary users' homes, and whose homes those are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeRoot {
    /// The directory (`/home`).
    pub root: PathBuf,
    /// The users whose home is directly in it, in name order.
    pub users: Vec<String>,
}

/// Reads `passwd` text (the `/etc/passwd` format) for ordinary users: uid 1000 to 59999, a
/// login shell, and a home that `exists`. Returns the parent directory most of their homes
/// share; `None` when there is no such user.
pub fn guess(passwd: &str, exists: impl Fn(&Path) -> bool) -> Option<HomeRoot> {
    let mut by_root: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for line in passwd.lines() {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() < 7 || line.starts_with('#') {
            continue;
        }
        let (name, uid, home, shell) = (f[0], f[2].parse::<u32>().ok(), f[5], f[6]);
        let ordinary = uid.is_some_and(|u| (1000..60_000).contains(&u));
        let logs_in = !(shell.ends_with("nologin") || shell.ends_with("/false"));
        let home = Path::new(home);
        if !ordinary || !logs_in || !home.is_absolute() || !exists(home) {
            continue;
        }
        if let Some(root) = home.parent().filter(|r| *r != Path::new("/")) {
            by_root
                .entry(root.to_path_buf())
                .or_default()
                .push(name.to_string());
        }
    }
    let (root, mut users) = by_root.into_iter().max_by_key(|(_, u)| u.len())?;
    users.sort();
    Some(HomeRoot { root, users })
}

/// [`guess`] on this machine's `/etc/passwd`.
pub fn on_this_machine() -> Option<HomeRoot> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    guess(&text, |p| p.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_homes_of_ordinary_users_who_log_in_decide() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
                      svc:x:1500:1500::/srv/svc:/usr/sbin/nologin\n\
                      alice:x:1001:1001::/home/alice:/bin/bash\n\
                      bob:x:1002:1002::/home/bob:/bin/zsh\n\
                      carol:x:1003:1003::/data/users/carol:/bin/bash\n\
                      gone:x:1004:1004::/home/gone:/bin/bash\n";
        let exists = |p: &Path| p != Path::new("/home/gone");
        assert_eq!(
            guess(passwd, exists),
            Some(HomeRoot {
                root: "/home".into(),
                users: vec!["alice".into(), "bob".into()],
            })
        );
        assert_eq!(guess("root:x:0:0:root:/root:/bin/bash\n", |_| true), None);
    }
}
