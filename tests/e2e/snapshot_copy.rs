//! The off-box copy of the snapshots: to an S3 server (moto's, on loopback) and to another
//! node's agent. A copy killed half-way is finished by the next; damage in a copy is named by
//! check; with the primary gone, a copy restores; the controller keeps the copy current and
//! says when it falls behind.

use crate::nodes::{Cluster, free_port};
use crate::pool::{Pool, bytes, has, have_root, strict, wait_until};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// moto's S3 server on a free loopback port, stopped on drop.
pub struct Moto {
    child: Child,
    endpoint: String,
}

impl Moto {
    /// Starts it with a bucket `lab`; `None` (the test skips) where moto is not installed.
    pub fn start(test: &str) -> Option<Moto> {
        let bin = std::env::var("LABPOOL_MOTO").unwrap_or_else(|_| "moto_server".into());
        let port = free_port("127.0.0.1");
        let child = match Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(_) => {
                assert!(
                    !strict(),
                    "{test} needs moto_server (scripts/test installs it)"
                );
                eprintln!("SKIPPED {test}: moto_server is not installed");
                return None;
            }
        };
        let endpoint = format!("127.0.0.1:{port}");
        wait_until(
            Duration::from_secs(30),
            || std::net::TcpStream::connect(&endpoint).is_ok(),
            || "moto did not start",
        );
        let moto = Moto { child, endpoint };
        // moto takes an unsigned bucket creation.
        moto.raw("PUT", "/lab");
        Some(moto)
    }

    fn raw(&self, method: &str, path: &str) -> String {
        let mut s = std::net::TcpStream::connect(&self.endpoint).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            self.endpoint
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A pool whose home holds `mb` MB of random files, backed up once.
fn pool_with_a_snapshot(mb: usize) -> (Pool, PathBuf) {
    let mut pool = Pool::new("1:t4");
    pool.start();
    let home = pool.dir.join("shared/home/alice");
    std::fs::create_dir_all(&home).unwrap();
    for i in 0..mb {
        std::fs::write(home.join(format!("part{i}.bin")), bytes(i as u64, 1 << 20)).unwrap();
    }
    std::fs::write(home.join("thesis.tex"), "chapter one").unwrap();
    pool.ok(&["snapshot", "create", "--source", "home"]);
    (pool, home)
}

/// Points `pool`'s `[snapshots.s3]` at `moto`.
pub fn s3_config(pool: &Pool, moto: &Moto) {
    let secret = pool.dir.join("s3.secret");
    std::fs::write(&secret, "test-secret\n").unwrap();
    set_mode(&secret, 0o600);
    let endpoint = moto.endpoint.clone();
    let secret = secret.display().to_string();
    pool.edit_config(|t| {
        format!(
            "{t}\n[snapshots.s3]\nendpoint = \"http://{endpoint}\"\naccess_key_id = \"test\"\nsecret_access_key_file = \"{secret}\"\n"
        )
    });
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn files_in(dir: &Path) -> usize {
    walk(dir).len()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_copy_in_s3_survives_a_kill_names_damage_and_restores_without_the_primary() {
    let test = "a_copy_in_s3_survives_a_kill_names_damage_and_restores_without_the_primary";
    if !have_root(test) {
        return;
    }
    let Some(moto) = Moto::start(test) else {
        return;
    };
    let (mut pool, home) = pool_with_a_snapshot(80);
    s3_config(&pool, &moto);
    pool.stop();
    pool.start();

    // A secret anyone on the machine can read is not used.
    let secret = pool.dir.join("s3.secret");
    set_mode(&secret, 0o644);
    let err = crate::pool::fails_stderr(&pool, &["snapshot", "copy", "--to", "s3://lab/labpool"]);
    assert!(err.contains("is readable by others (mode 644)"), "{err}");
    assert!(err.contains("chmod 600"), "{err}");
    set_mode(&secret, 0o600);

    // Killed while sending: the next copy sends only the rest.
    let mut first = pool
        .command(&["snapshot", "copy", "--to", "s3://lab/labpool"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the first pack is there, before the record.
    let t0 = Instant::now();
    while !moto
        .raw("GET", "/lab?list-type=2&prefix=labpool/packs/")
        .contains("<Key>labpool/packs/")
    {
        assert!(t0.elapsed() < Duration::from_secs(30), "no pack arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = first.kill();
    let _ = first.wait();
    assert!(
        !moto
            .raw("GET", "/lab?list-type=2&prefix=labpool/snapshots/")
            .contains("<Key>"),
        "the copy ended before it was killed; the test needs more data"
    );
    let out = pool.ok(&["snapshot", "copy", "--to", "s3://lab/labpool", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(report["files_present"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(report["records"], 1, "{report}");
    let again: serde_json::Value =
        serde_json::from_str(&pool.ok(&["snapshot", "copy", "--to", "s3://lab/labpool", "--json"]))
            .unwrap();
    assert_eq!(again["files_sent"], 0, "{again}");

    // Fetched back, a damaged pack is named by check.
    let back = pool.dir.join("fetched");
    pool.ok(&[
        "snapshot",
        "fetch",
        "--from",
        "s3://lab/labpool",
        "--to",
        back.to_str().unwrap(),
    ]);
    let pack = walk(&back.join("packs"))
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut data = std::fs::read(&pack).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0xff;
    std::fs::write(&pack, data).unwrap();
    let out = pool.cli(&[
        "snapshot",
        "check",
        "--repo",
        back.to_str().unwrap(),
        "--read-data",
    ]);
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    has(&text, &[pack.file_name().unwrap().to_str().unwrap()]);

    // The primary is lost: a fresh fetch restores the thesis.
    std::fs::remove_dir_all(pool.dir.join("backup/snapshots")).unwrap();
    std::fs::remove_file(home.join("thesis.tex")).unwrap();
    let fresh = pool.dir.join("fresh");
    pool.ok(&[
        "snapshot",
        "fetch",
        "--from",
        "s3://lab/labpool",
        "--to",
        fresh.to_str().unwrap(),
    ]);
    pool.ok(&[
        "snapshot",
        "check",
        "--repo",
        fresh.to_str().unwrap(),
        "--read-data",
    ]);
    let thesis = home.join("thesis.tex");
    pool.ok(&[
        "snapshot",
        "restore",
        thesis.to_str().unwrap(),
        "--repo",
        fresh.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&thesis).unwrap(), "chapter one");
}

#[test]
fn the_controller_keeps_the_copy_current_and_alerts_when_it_falls_behind() {
    let test = "the_controller_keeps_the_copy_current_and_alerts_when_it_falls_behind";
    if !have_root(test) {
        return;
    }
    let Some(moto) = Moto::start(test) else {
        return;
    };
    let (mut pool, _) = pool_with_a_snapshot(2);
    s3_config(&pool, &moto);
    // A webhook that records what it is sent.
    let hook = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hook_addr = hook.local_addr().unwrap();
    pool.edit_config(|t| {
        t.replace(
            "[snapshots]\n",
            "[snapshots]\ncopy_to = \"s3://lab/timer\"\ncopy_schedule = \"*/2 * * * * *\"\ncopy_max_lag = \"1s\"\n",
        )
            + &format!("\n[alerts]\nwebhook = \"http://{hook_addr}/alert\"\n")
    });
    pool.stop();
    pool.start();
    let t0 = Instant::now();
    loop {
        let listing = moto.raw("GET", "/lab?list-type=2&prefix=timer/snapshots/");
        if listing.contains("<Key>timer/snapshots/") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no copy: {}",
            pool.serve_log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // The store goes away and a new snapshot cannot reach it: the alert comes.
    drop(moto);
    pool.ok(&["snapshot", "create", "--source", "home"]);
    hook.set_nonblocking(false).unwrap();
    let (mut conn, _) = hook.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut got = vec![0u8; 65536];
    let n = conn.read(&mut got).unwrap();
    let text = String::from_utf8_lossy(&got[..n]);
    has(
        &text,
        &["snapshot_copy_behind", "s3://lab/timer", "is behind"],
    );
    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
}

#[test]
fn a_copy_on_another_node_is_a_repository_there() {
    let test = "a_copy_on_another_node_is_a_repository_there";
    if !have_root(test) {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    let i = c.add_agent("vault", "1:t4", "127.0.0.1");
    let copy_dir = c.agents[i].dir.join("copy");
    let config = c.agents[i].config.clone();
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "[agent]\n",
            &format!("[agent]\nsnapshot_copy = \"{}\"\n", copy_dir.display()),
        ),
    )
    .unwrap();
    c.start_agent(i);
    c.nodes();
    let home = c.ctrl.dir.join("shared/home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("notes.txt"), "keep me").unwrap();
    // A pack well over axum's default 2 MiB body limit travels too.
    std::fs::write(home.join("weights.bin"), bytes(9, 12 << 20)).unwrap();
    c.ctrl.ok(&["snapshot", "create", "--source", "home"]);
    c.ctrl.ok(&["snapshot", "copy", "--to", "node:vault"]);
    assert!(files_in(&copy_dir.join("packs")) >= 1);
    assert_eq!(files_in(&copy_dir.join("snapshots")), 1);
    c.ctrl.ok(&[
        "snapshot",
        "check",
        "--repo",
        copy_dir.to_str().unwrap(),
        "--read-data",
    ]);
    // A node that keeps no copy says so.
    let err = crate::pool::fails_stderr(&c.ctrl, &["snapshot", "copy", "--to", "node:nowhere"]);
    has(&err, &["no node nowhere"]);
}
