//! Models in the hub's cache layout: a revision read from a plain download or from a hub cache
//! is written as blobs, a snapshot of relative links and refs; the same files give the same
//! commit and no new blob; bad names and streams are refused.

use labpool_cache::hub::export::{find, write};
use labpool_cache::hub::import::import;
use labpool_cache::hub::{HubError, RepoId, parse_spec};
use std::path::Path;

fn repo() -> RepoId {
    RepoId::parse("lab-org/tiny.model").unwrap()
}

/// Exports `dir`'s `revision` and imports it under `root`.
fn add(dir: &Path, root: &Path, revision: &str) -> labpool_cache::hub::import::Imported {
    let found = find(dir, &repo(), revision).unwrap();
    let mut stream = Vec::new();
    write(&found, &mut stream, &|_| {}).unwrap();
    let tmp = root.with_extension("tmp");
    import(root, &repo(), revision, stream.as_slice(), 1 << 30, &tmp).unwrap()
}

fn plain_download(dir: &Path) {
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::create_dir_all(dir.join(".cache/huggingface")).unwrap();
    std::fs::write(dir.join("config.json"), r#"{"hidden": 4}"#).unwrap();
    std::fs::write(dir.join("sub/weights.bin"), vec![7u8; 5000]).unwrap();
    std::fs::write(dir.join(".cache/huggingface/lock"), "x").unwrap();
}

#[test]
fn a_plain_download_becomes_blobs_a_snapshot_and_refs() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("download");
    plain_download(&src);
    let store = t.path().join("store");
    let first = add(&src, &store, "main");
    assert_eq!(first.commit.len(), 40);
    assert_eq!((first.files, first.bytes, first.new_bytes), (2, 5013, 5013));
    let folder = store.join("models--lab-org--tiny.model");
    let snap = folder.join("snapshots").join(&first.commit);
    assert_eq!(
        std::fs::read_to_string(snap.join("config.json")).unwrap(),
        r#"{"hidden": 4}"#
    );
    assert_eq!(
        std::fs::read(snap.join("sub/weights.bin")).unwrap(),
        vec![7u8; 5000]
    );
    let link = std::fs::read_link(snap.join("sub/weights.bin")).unwrap();
    assert!(link.starts_with("../../../blobs/"), "{link:?}");
    assert!(
        !snap.join(".cache").exists(),
        "the downloader's .cache was copied"
    );
    assert_eq!(
        std::fs::read_to_string(folder.join("refs/main")).unwrap(),
        first.commit
    );
    // The same files again: the same commit, and nothing new stored.
    let again = add(&src, &store, "main");
    assert_eq!(
        (again.commit.clone(), again.new_bytes),
        (first.commit.clone(), 0)
    );
    // One file changed, under a tag: a new commit that shares the unchanged blob; main moves.
    std::fs::write(src.join("config.json"), r#"{"hidden": 8}"#).unwrap();
    let v2 = add(&src, &store, "v2");
    assert_ne!(v2.commit, first.commit);
    assert_eq!(v2.new_bytes, 13);
    assert_eq!(
        std::fs::read_to_string(folder.join("refs/v2")).unwrap(),
        v2.commit
    );
    assert_eq!(
        std::fs::read_to_string(folder.join("refs/main")).unwrap(),
        v2.commit
    );
    assert_eq!(std::fs::read_dir(folder.join("blobs")).unwrap().count(), 3);
}

#[test]
fn a_hub_cache_revision_keeps_its_commit_and_an_unknown_one_names_what_there_is() {
    let t = tempfile::tempdir().unwrap();
    // A hub cache as huggingface_hub writes it: a ref, a snapshot of links into blobs.
    let hub = t.path().join("hub");
    let folder = hub.join("models--lab-org--tiny.model");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    std::fs::create_dir_all(folder.join("blobs")).unwrap();
    std::fs::create_dir_all(folder.join("refs")).unwrap();
    std::fs::create_dir_all(folder.join("snapshots").join(commit)).unwrap();
    std::fs::write(folder.join("blobs/abc"), "weights").unwrap();
    std::fs::write(folder.join("refs/main"), commit).unwrap();
    std::os::unix::fs::symlink(
        "../../blobs/abc",
        folder
            .join("snapshots")
            .join(commit)
            .join("model.safetensors"),
    )
    .unwrap();
    let store = t.path().join("store");
    // The cache root and the model's own folder both work.
    for dir in [&hub, &folder] {
        let got = add(dir, &store, "main");
        assert_eq!(got.commit, commit);
        let snap = store
            .join("models--lab-org--tiny.model/snapshots")
            .join(commit);
        assert_eq!(
            std::fs::read_to_string(snap.join("model.safetensors")).unwrap(),
            "weights"
        );
    }
    let by_commit = add(&folder, &store, commit);
    assert_eq!(by_commit.commit, commit);
    // A hub cache without the model asked for (a typo) is never taken for a plain download.
    let other = RepoId::parse("lab-org/tiny-modle").unwrap();
    let err = find(&hub, &other, "main").unwrap_err().to_string();
    assert!(
        err.contains("without lab-org/tiny-modle") && err.contains("[lab-org/tiny.model]"),
        "{err}"
    );
    assert!(matches!(
        find(&folder, &other, "main"),
        Err(HubError::NotInCache { .. })
    ));
    let err = find(&hub, &repo(), "v9").unwrap_err().to_string();
    assert!(
        err.contains("no revision \"v9\"") && err.contains("refs [main]") && err.contains(commit),
        "{err}"
    );
}

#[test]
fn bad_names_and_streams_are_refused() {
    for bad in [
        "tiny", "org/", "/x", "a/b/c", "org/../x", "-o/x", "o--x/y", "o/x y",
    ] {
        assert!(
            matches!(RepoId::parse(bad), Err(HubError::InvalidRepo(_))),
            "{bad} was taken"
        );
    }
    assert!(matches!(
        parse_spec("o/x@../main"),
        Err(HubError::InvalidRevision(_))
    ));
    assert_eq!(parse_spec("o/x").unwrap().1, "main");
    assert_eq!(parse_spec("o/x@v1.0").unwrap().1, "v1.0");
    let t = tempfile::tempdir().unwrap();
    // An entry that climbs out of the revision.
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(1);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, "files/ok", &b"x"[..]).unwrap();
    let mut raw = b.into_inner().unwrap();
    // Rewrite the name in place: the tar crate refuses to write `..` itself.
    raw[..8].copy_from_slice(b"files/..");
    let tmp = t.path().join("tmp");
    let err = import(t.path(), &repo(), "main", raw.as_slice(), 1 << 20, &tmp).unwrap_err();
    assert!(matches!(err, HubError::Malformed(_)), "{err}");
    // A file over the limit.
    let src = t.path().join("download");
    plain_download(&src);
    let found = find(&src, &repo(), "main").unwrap();
    let mut stream = Vec::new();
    write(&found, &mut stream, &|_| {}).unwrap();
    let err = import(
        &t.path().join("s"),
        &repo(),
        "main",
        stream.as_slice(),
        100,
        &tmp,
    )
    .unwrap_err();
    assert!(
        matches!(
            &err,
            HubError::TooLarge {
                size: 5000,
                max: 100,
                ..
            }
        ),
        "{err}"
    );
    // An empty directory.
    std::fs::create_dir_all(t.path().join("empty")).unwrap();
    assert!(matches!(
        find(&t.path().join("empty"), &repo(), "main"),
        Err(HubError::Empty(_))
    ));
}

/// An admin adding a member's download as root must not carry a link the member planted to a
/// file outside it (`/etc/shadow`) into a model every member can read.
#[test]
fn a_link_leading_out_of_the_source_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("download");
    plain_download(&src);
    let secret = t.path().join("secret");
    std::fs::write(&secret, "root's only").unwrap();
    std::os::unix::fs::symlink(&secret, src.join("tokenizer.json")).unwrap();
    let err = find(&src, &repo(), "main").unwrap_err();
    assert!(matches!(&err, HubError::LinkOutside { .. }), "{err}");
    assert!(err.to_string().contains("tokenizer.json"), "{err}");
    // A link within the download is followed.
    std::fs::remove_file(src.join("tokenizer.json")).unwrap();
    std::os::unix::fs::symlink("config.json", src.join("tokenizer.json")).unwrap();
    let found = find(&src, &repo(), "main").unwrap();
    assert_eq!(found.files.len(), 3);
}
