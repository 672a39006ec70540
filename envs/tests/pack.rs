//! Packing and unpacking keeps symlinks, modes and mtimes, and refuses unsafe archives.

use labpool_envs::pack::{is_complete, pack, unpack};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn a_tree_round_trips_with_links_modes_and_times() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("env");
    std::fs::create_dir_all(src.join("bin")).unwrap();
    std::fs::create_dir_all(src.join("lib/deep/er")).unwrap();
    std::fs::write(src.join("bin/tool"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(src.join("bin/tool"), std::fs::Permissions::from_mode(0o750)).unwrap();
    std::fs::write(src.join("lib/deep/er/data"), vec![7u8; 100_000]).unwrap();
    std::os::unix::fs::symlink("/usr/bin/python3", src.join("bin/python")).unwrap();
    std::fs::write(src.join(".labpool-env.json"), "{}").unwrap();
    let old = filetime::FileTime::from_unix_time(1_600_000_000, 0);
    filetime::set_file_mtime(src.join("lib/deep/er/data"), old).unwrap();
    filetime::set_file_mtime(src.join("lib/deep"), old).unwrap();

    let archive = tmp.path().join("env.tar.zst");
    let size = pack(&src, &archive).unwrap();
    assert!(size > 0 && size < 100_000, "zstd compresses: {size}");

    let dest = tmp.path().join("node/env");
    // Stale partial unpacks (an older version's, and one of a process that is gone) and an
    // incomplete build are all replaced.
    std::fs::create_dir_all(tmp.path().join("node/env.partial/junk")).unwrap();
    let host = nix_hostname();
    let dead = tmp
        .path()
        .join(format!("node/env.partial-{host}-4000000000"));
    std::fs::create_dir_all(dead.join("junk")).unwrap();
    std::fs::create_dir_all(dest.join("half")).unwrap();
    assert!(unpack(&archive, &dest).unwrap());
    assert!(is_complete(&dest));
    assert!(!dest.join("half").exists() && !tmp.path().join("node/env.partial").exists());
    assert!(!dead.exists(), "a dead process's partial unpack was left");
    let left: Vec<_> = std::fs::read_dir(tmp.path().join("node"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["env"], "only the build is left");
    assert_eq!(
        std::fs::read_link(dest.join("bin/python")).unwrap(),
        Path::new("/usr/bin/python3")
    );
    assert_eq!(mode(&dest.join("bin/tool")), 0o750);
    assert_eq!(
        std::fs::read(dest.join("lib/deep/er/data")).unwrap(),
        vec![7u8; 100_000]
    );
    for p in ["lib/deep/er/data", "lib/deep"] {
        let meta = std::fs::metadata(dest.join(p)).unwrap();
        assert_eq!(
            filetime::FileTime::from_last_modification_time(&meta),
            old,
            "{p}"
        );
    }
    assert!(!unpack(&archive, &dest).unwrap());
}

#[test]
fn entries_escaping_the_destination_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join("bad.tar.zst");
    let file = std::fs::File::create(&archive).unwrap();
    let mut tar = tar::Builder::new(zstd::Encoder::new(file, 3).unwrap().auto_finish());
    let mut header = tar::Header::new_gnu();
    let data = b"owned";
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.as_gnu_mut().unwrap().name[..12].copy_from_slice(b"../escaped\0\0");
    header.set_cksum();
    tar.append(&header, &data[..]).unwrap();
    drop(tar.into_inner().unwrap());

    let dest = tmp.path().join("out/env");
    let err = unpack(&archive, &dest).unwrap_err().to_string();
    assert!(
        err.contains("../escaped") && err.contains("refusing"),
        "{err}"
    );
    assert!(!tmp.path().join("out/escaped").exists() && !dest.exists());
    assert!(!tmp.path().join("out/env.partial").exists());
}

#[test]
fn a_link_in_the_archive_never_leads_a_later_entry_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o700)).unwrap();
    let archive = tmp.path().join("bad.tar.zst");
    let file = std::fs::File::create(&archive).unwrap();
    let mut tar = tar::Builder::new(zstd::Encoder::new(file, 3).unwrap().auto_finish());
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    link.set_mode(0o777);
    tar.append_link(&mut link, "a", &victim).unwrap();
    for (name, kind) in [
        ("a/", tar::EntryType::Directory),
        ("a/inside/", tar::EntryType::Directory),
    ] {
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(kind);
        dir.set_size(0);
        dir.set_mode(0o777);
        tar.append_data(&mut dir, name, std::io::empty()).unwrap();
    }
    drop(tar.into_inner().unwrap());

    let dest = tmp.path().join("out/env");
    std::fs::create_dir_all(tmp.path().join("out")).unwrap();
    let err = unpack(&archive, &dest).unwrap_err().to_string();
    assert!(err.contains("refusing"), "{err}");
    assert!(!victim.join("inside").exists());
    assert_eq!(mode(&victim), 0o700, "the link's target was changed");
    assert!(!dest.exists() && !tmp.path().join("out/env.partial").exists());
}

/// The host's name, as the partial unpacks name it.
fn nix_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// Nodes sharing one store unpack the same build at once: every one succeeds, the build ends
/// complete with nothing partial left, and once complete it never goes away. Before, they
/// shared one partial directory and all but the first failed with "cannot rename into place";
/// then, over an incomplete build left in place, each removed what it found, and one failed
/// with "Directory not empty" (seen in CI).
#[test]
fn nodes_unpacking_one_build_at_once_all_succeed() {
    if let Ok(job) = std::env::var(CHILD) {
        return unpack_as_child(&job);
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("env");
    for i in 0..200 {
        let d = src.join(format!("lib/d{}", i % 20));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("f{i}")), vec![i as u8; 4096]).unwrap();
    }
    std::fs::write(src.join(".labpool-env.json"), "{}").unwrap();
    let archive = tmp.path().join("env.tar.zst");
    pack(&src, &archive).unwrap();
    for round in 0..6 {
        let dest = tmp.path().join(format!("store{round}/env"));
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        // Every other round, an interrupted unpack left an incomplete build in place.
        if round % 2 == 1 {
            for i in 0..500 {
                let d = dest.join(format!("old/d{}", i % 20));
                std::fs::create_dir_all(&d).unwrap();
                std::fs::write(d.join(format!("f{i}")), b"x").unwrap();
            }
        }
        // Once a complete build is in place, it stays: a node may be starting a job from it.
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let (dest, done) = (dest.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seen = false;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let now = is_complete(&dest);
                    if seen && !now {
                        return false;
                    }
                    seen |= now;
                }
                true
            })
        };
        // Separate processes, as nodes are: threads of one process share its PID.
        let children: Vec<_> = (0..4)
            .map(|_| {
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args([
                        "--exact",
                        "nodes_unpacking_one_build_at_once_all_succeed",
                        "--nocapture",
                    ])
                    .env(CHILD, format!("{}|{}", archive.display(), dest.display()))
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut unpacked = 0;
        for child in children {
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && text.contains("unpacked="), "{text}");
            unpacked += usize::from(text.contains("unpacked=true"));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(
            watcher.join().unwrap(),
            "round {round}: a complete build went away"
        );
        assert!(unpacked >= 1, "none of them unpacked it");
        assert!(is_complete(&dest));
        assert_eq!(
            std::fs::read(dest.join("lib/d3/f3")).unwrap(),
            vec![3u8; 4096]
        );
        let left: Vec<_> = std::fs::read_dir(dest.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["env"], "round {round}: only the build is left");
    }
}

/// Where `nodes_unpacking_one_build_at_once_all_succeed` tells a child of itself what to
/// unpack.
const CHILD: &str = "LABPOOL_TEST_UNPACK";

/// In a child process of the test: one node's unpack, and what it returned.
fn unpack_as_child(job: &str) {
    let (archive, dest) = job.split_once('|').unwrap();
    let unpacked = unpack(Path::new(archive), Path::new(dest)).unwrap();
    println!("unpacked={unpacked}");
}
