//! Full disks: a job whose spool fills up while it runs is still recorded with its true end,
//! and is never taken for one that did not start.

use crate::monitoring::get_page;
use crate::pool::{Pool, ensure_user, have_root, read_line, s, stdout_of, wait_until};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// A tmpfs of `size` mounted at `dir`, unmounted on drop.
pub struct SmallFs(pub std::path::PathBuf);

impl SmallFs {
    pub fn mount(dir: &Path, size: &str) -> SmallFs {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .unwrap();
        assert!(ok.success(), "mount tmpfs at {}", dir.display());
        SmallFs(dir.to_path_buf())
    }

    /// Fills every block left; the filler file is returned so it can be removed.
    pub fn fill(&self) -> std::path::PathBuf {
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        while f.write_all(&[0u8; 4096]).is_ok() {}
        let _ = f.sync_all();
        path
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn a_job_whose_spool_fills_up_while_it_runs_ends_with_its_true_state() {
    if !have_root("a_job_whose_spool_fills_up_while_it_runs_ends_with_its_true_state") {
        return;
    }
    let mut pool = Pool::new("1:t4");
    let spool = SmallFs::mount(&pool.dir.join("spool"), "1m");
    let at = spool.0.display().to_string();
    pool.edit_config(|t| t.replace("[node]\n", &format!("[node]\nspool_dir = \"{at}\"\n")));
    pool.start();
    let flag = pool.work.join("go");
    let started = pool.work.join("started");
    let job = pool.submit(&[
        "--wrap",
        &format!(
            "touch {}; while [ ! -e {} ]; do sleep 0.1; done; exit 0",
            started.display(),
            flag.display()
        ),
    ]);
    pool.wait_for(job, Duration::from_secs(20), |j| j["state"] == "RUNNING");
    // The script itself runs (RUNNING is said as the node is told to start it): only now is
    // the spool filled.
    wait_until(
        Duration::from_secs(20),
        || started.exists(),
        || "the script never ran",
    );
    let filler = spool.fill();
    std::fs::write(&flag, "").unwrap();
    let done = pool.wait_done(job, Duration::from_secs(30));
    assert_eq!(
        s(&done, "state"),
        "COMPLETED",
        "{done:#}\n{}",
        pool.serve_log()
    );
    assert_eq!(done["exit_code"], 0);

    // On the full spool a job cannot set room aside: it does not start, and says why. (The
    // first job's directory is gone by now, and with it its few blocks: fill those too.)
    std::thread::sleep(Duration::from_millis(500));
    let more = spool.0.join("filler2");
    let mut f = std::fs::File::create(&more).unwrap();
    while f.write_all(&[0u8; 512]).is_ok() {}
    drop(f);
    let refused = pool.submit(&["--wrap", "echo ran > ran.txt"]);
    let failed = pool.wait_done(refused, Duration::from_secs(30));
    assert_ne!(s(&failed, "state"), "COMPLETED", "{failed:#}");
    assert!(
        !pool.work.join("ran.txt").exists(),
        "it ran on a full spool"
    );
    std::fs::remove_file(filler).unwrap();
    std::fs::remove_file(more).unwrap();
    pool.stop();
}

/// The state file system fills up: the controller stays up, refuses new work naming what is
/// full, keeps reading, and takes work again by itself once there is room. The job that ran
/// through it runs once.
#[test]
fn a_full_state_disk_refuses_new_work_and_the_controller_recovers_by_itself() {
    if !have_root("a_full_state_disk_refuses_new_work_and_the_controller_recovers_by_itself") {
        return;
    }
    let mut pool = Pool::new("1:t4");
    let state = SmallFs::mount(&pool.dir.join("state"), "3m");
    pool.start();
    let go = pool.work.join("go");
    let long = pool.submit(&[
        "--wrap",
        &format!(
            "touch long-runs; while [ ! -e {} ]; do sleep 0.1; done; echo ran >> runs.txt",
            go.display()
        ),
    ]);
    // A second job ends while the disk is full: the controller cannot record its end then, and
    // must still learn it once it recovers.
    let end_now = pool.work.join("end-now");
    let quick = pool.submit(&[
        "--wrap",
        &format!(
            "touch quick-runs; while [ ! -e {} ]; do sleep 0.1; done",
            end_now.display()
        ),
    ]);
    pool.wait_for(long, Duration::from_secs(20), |j| j["state"] == "RUNNING");
    // Filled once the script runs: RUNNING is said as the node is told to start it, and a
    // fill before its shim has set room aside is the other test's case.
    let t0 = std::time::Instant::now();
    while !(pool.work.join("long-runs").exists() && pool.work.join("quick-runs").exists()) {
        assert!(t0.elapsed() < Duration::from_secs(20), "the job never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    let filler = state.fill();
    // SQLite may fit a few more submits in its log before it needs a new page.
    let mut refused = None;
    for _ in 0..300 {
        let out = pool.cli(&["submit", "--wrap", "true"]);
        if !out.status.success() {
            refused = Some(String::from_utf8_lossy(&out.stderr).into_owned());
            break;
        }
    }
    let refused = refused.expect("a submit is refused on a full state disk");
    for part in ["is full", "free space there", "df -h"] {
        assert!(refused.contains(part), "{part:?} not in: {refused}");
    }
    let pid = pool.pid().unwrap();
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the controller exited:\n{}",
        pool.serve_log()
    );
    assert!(pool.cli(&["queue"]).status.success(), "reading still works");
    // Supervisors and monitors see it too: alive, not ready, and why.
    let addr = pool.dir.join("state/metrics.addr");
    assert_eq!(get_page(&addr, "/livez"), (200, "ok\n".to_string()));
    let (status, why) = get_page(&addr, "/readyz");
    assert_eq!(status, 503, "{why}");
    assert!(
        why.contains("new work is refused") && why.contains("is full"),
        "{why}"
    );

    std::fs::write(&end_now, "").unwrap();
    std::thread::sleep(Duration::from_secs(1));
    std::fs::remove_file(filler).unwrap();
    let t0 = std::time::Instant::now();
    loop {
        let out = pool.cli(&["submit", "--wrap", "true"]);
        if out.status.success() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no recovery: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            pool.serve_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(get_page(&addr, "/readyz"), (200, "ok\n".to_string()));
    assert!(
        pool.serve_log().contains("has room again"),
        "{}",
        pool.serve_log()
    );
    let j = pool.wait_done(quick, Duration::from_secs(30));
    assert_eq!(s(&j, "state"), "COMPLETED", "{j:#}\n{}", pool.serve_log());
    std::fs::write(&go, "").unwrap();
    let done = pool.wait_done(long, Duration::from_secs(30));
    assert_eq!(s(&done, "state"), "COMPLETED", "{done:#}");
    assert_eq!(done["attempt"], 1, "{done:#}");
    let runs = std::fs::read_to_string(pool.work.join("runs.txt")).unwrap();
    assert_eq!(runs.lines().count(), 1, "ran once");
    pool.stop();
}

/// A member's job fills everything it may write in the pool's own directories (the corner its
/// `srun` steps are recorded in): another member still submits and runs, the job's end is
/// recorded, and what it wrote is gone with it. Nothing a member writes lands on the state
/// file system.
#[test]
fn a_job_that_fills_its_own_corner_stops_no_one_else() {
    if !have_root("a_job_that_fills_its_own_corner_stops_no_one_else") {
        return;
    }
    let alice = ensure_user("lp-alice");
    let bob = ensure_user("lp-bob");
    let mut pool = Pool::new("2:t4").for_users();
    let state = SmallFs::mount(&pool.dir.join("state"), "8m");
    pool.start();
    let go = pool.work.join("go");
    let out = pool.cli_as(
        alice.0,
        alice.1,
        &[
            "submit",
            "--parsable",
            "--wrap",
            &format!(
                "d=$(dirname \"$LABPOOL_STEPS\"); dd if=/dev/zero of=\"$d/fill\" bs=1M count=64 2>/dev/null; \
                 du -k \"$d/fill\" | cut -f1 > filled; while [ ! -e {} ]; do sleep 0.1; done",
                go.display()
            ),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let filler: u64 = stdout_of(&out).trim().parse().unwrap();
    let filled = read_line(&pool.work.join("filled"));
    let kib: u64 = filled.trim().parse().unwrap();
    assert!(
        kib <= 18 << 10,
        "the job wrote {kib} KiB where labpool keeps its steps"
    );
    let corner = state.0.join(format!("spool/jobs/{filler}.1/user"));
    let free = nix::sys::statvfs::statvfs(&state.0).unwrap();
    assert!(
        free.blocks_available() * free.fragment_size() > 2 << 20,
        "the state file system filled up"
    );

    // Bob is not stopped.
    let out = pool.cli_as(
        bob.0,
        bob.1,
        &["submit", "--parsable", "--wrap", "echo ran > bob-ran"],
    );
    assert!(
        out.status.success(),
        "bob's submit was refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bobs: u64 = stdout_of(&out).trim().parse().unwrap();
    let done = pool.wait_done(bobs, Duration::from_secs(30));
    assert_eq!(s(&done, "state"), "COMPLETED", "{done:#}");

    // Alice's job ends, is recorded, and its corner goes with it.
    std::fs::write(&go, "").unwrap();
    let done = pool.wait_done(filler, Duration::from_secs(30));
    assert_eq!(s(&done, "state"), "COMPLETED", "{done:#}");
    let t0 = std::time::Instant::now();
    let mounted = || {
        std::fs::read_to_string("/proc/self/mounts")
            .unwrap()
            .contains(&corner.display().to_string())
    };
    while mounted() || corner.join("fill").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the job's corner outlived it"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    pool.stop();
}
