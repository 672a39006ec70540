//! Who is calling: the uid from the socket (SO_PEERCRED), its account, and whether it is an
//! admin. A name the client claims is never trusted.

use nix::unistd::{Gid, Group, Uid, User, getgrouplist};
use std::ffi::CString;
use std::path::PathBuf;

/// A caller of the API, resolved from its uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Login name.
    pub user: String,
    /// Home directory.
    pub home: PathBuf,
    /// Login shell.
    pub shell: PathBuf,
    /// Root, or a member of the admin group.
    pub admin: bool,
}

/// Why a uid could not be resolved.
#[derive(Debug, thiserror::Error)]
#[error("uid {uid} has no account on this machine ({why}); add the user (useradd) or fix NSS")]
pub struct UnknownUser {
    /// The uid.
    pub uid: u32,
    /// What the lookup said.
    pub why: String,
}

/// What is wrong with `[controller] admin_group` on this host, when something is: a group that
/// does not exist makes only root an admin, and nothing else would say so.
pub fn admin_group_problem(group: &str) -> Option<String> {
    match nix::unistd::Group::from_name(group) {
        Ok(Some(_)) => None,
        Ok(None) => Some(format!(
            "[controller] admin_group {group:?} does not exist on this host, so only root is an admin: create it (groupadd {group}; usermod -aG {group} USER) or name an existing group"
        )),
        Err(e) => Some(format!(
            "[controller] admin_group {group:?} cannot be looked up ({e}), so only root is an admin: check nsswitch and the group database"
        )),
    }
}

/// Resolves `uid` and decides whether it is an admin (root or a member of `admin_group`).
pub fn resolve(uid: u32, admin_group: &str) -> Result<Caller, UnknownUser> {
    let user = User::from_uid(Uid::from_raw(uid))
        .map_err(|e| UnknownUser {
            uid,
            why: e.to_string(),
        })?
        .ok_or_else(|| UnknownUser {
            uid,
            why: "no passwd entry".to_string(),
        })?;
    let admin = uid == 0 || is_member(&user, admin_group);
    Ok(Caller {
        uid,
        gid: user.gid.as_raw(),
        user: user.name,
        home: user.dir,
        shell: user.shell,
        admin,
    })
}

/// Every group of `user` (primary first), as the job will run with.
pub fn groups_of(user: &str, gid: u32) -> Vec<u32> {
    let Ok(name) = CString::new(user) else {
        return vec![gid];
    };
    match getgrouplist(&name, Gid::from_raw(gid)) {
        Ok(gs) => gs.into_iter().map(|g| g.as_raw()).collect(),
        Err(_) => vec![gid],
    }
}

fn is_member(user: &User, group: &str) -> bool {
    let Ok(Some(g)) = Group::from_name(group) else {
        return false;
    };
    groups_of(&user.name, user.gid.as_raw()).contains(&g.gid.as_raw())
}

/// This process's effective uid.
pub fn effective_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The name of a uid, or the number when it has none.
pub fn user_name(uid: u32) -> String {
    match User::from_uid(Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => uid.to_string(),
    }
}
