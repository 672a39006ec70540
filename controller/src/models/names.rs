//! Where a model is kept and the dataset it is, from its namespace and repository.

use labpool_cache::hub::RepoId;
use std::path::{Path, PathBuf};

/// The start of every model's dataset name; `dataset add` refuses it.
pub const DATASET_PREFIX: &str = "model-";

/// The dataset that holds `repo` in `owner`'s namespace (`""`: the shared one).
pub fn dataset_name(owner: &str, repo: &RepoId) -> String {
    let mut h = blake3::Hasher::new();
    h.update(owner.as_bytes());
    h.update(b"\0");
    h.update(repo.as_string().as_bytes());
    format!("{DATASET_PREFIX}{}", &h.finalize().to_hex()[..20])
}

/// The dataset's source: `STORE/shared/ORG--NAME` or `STORE/users/OWNER/ORG--NAME`. It holds
/// the hub folder `models--ORG--NAME`.
pub fn root(store: &Path, owner: &str, repo: &RepoId) -> PathBuf {
    let dir = repo.as_string().replace('/', "--");
    if owner.is_empty() {
        store.join("shared").join(dir)
    } else {
        store.join("users").join(owner).join(dir)
    }
}

/// The namespace and repository of a model's source path (the reverse of [`root`]).
pub fn from_root(store: &Path, path: &Path) -> Option<(String, RepoId)> {
    let rel = path.strip_prefix(store).ok()?;
    let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
    let (owner, dir) = match parts.as_slice() {
        ["shared", dir] => (String::new(), *dir),
        ["users", owner, dir] => (owner.to_string(), *dir),
        _ => return None,
    };
    let (org, name) = dir.split_once("--")?;
    Some((owner, RepoId::parse(&format!("{org}/{name}")).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_path_gives_back_its_namespace_and_repository() {
        let store = Path::new("/shared/datasets/.models");
        let repo = RepoId::parse("meta-llama/Llama-3.1-8B").unwrap();
        for owner in ["", "alice"] {
            let p = root(store, owner, &repo);
            assert_eq!(
                from_root(store, &p),
                Some((owner.to_string(), repo.clone()))
            );
        }
        assert_ne!(dataset_name("", &repo), dataset_name("alice", &repo));
        assert!(dataset_name("", &repo).starts_with(DATASET_PREFIX));
        assert_eq!(dataset_name("", &repo).len(), DATASET_PREFIX.len() + 20);
        assert_eq!(from_root(store, Path::new("/elsewhere/shared/a--b")), None);
    }
}
