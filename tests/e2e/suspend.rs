//! Suspend instead of stop: an idle one-GPU session on a node with `cuda-checkpoint` has its GPU
//! state checkpointed (lock, checkpoint), its GPU goes to another job while its shell lives on
//! and cannot open the card, and when its member types again it gets the same GPU back as soon
//! as that job ends (restore, unlock). A test double of `cuda-checkpoint` logs each call with
//! the time; the fake NVML plays an idle GPU with a driver of 570.

use crate::idle_sessions::nvml_pool_with;
use crate::interactive::{Terminal, free_gpus};
use crate::pool::{has, have_root, s};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// The double: a process is a CUDA process when its command line says `cuda-work`; its state
/// is kept in `DIR/state/PID`, and each action is logged to `DIR/calls.log` as
/// `MILLISECONDS ACTION PID`.
fn checkpoint_double(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let tool = dir.join("cuda-checkpoint");
    let d = dir.display();
    std::fs::write(
        &tool,
        format!(
            "#!/bin/bash\n\
             case \"$1\" in\n\
             --get-state)\n\
               grep -qa cuda-work /proc/$3/cmdline 2>/dev/null || {{ echo 'no CUDA context' >&2; exit 1; }}\n\
               cat {d}/state/$3 2>/dev/null || echo running ;;\n\
             --action)\n\
               echo \"$(date +%s%3N) $2 $4\" >> {d}/calls.log\n\
               case \"$2\" in lock|restore) s=locked ;; checkpoint) s=checkpointed ;; *) s=running ;; esac\n\
               echo $s > {d}/state/$4 ;;\n\
             *) echo \"unknown call: $*\" >&2; exit 2 ;;\n\
             esac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    tool
}

/// A started pool of `gpus` idle GPUs on the fake NVML, whose node suspends with `tool`.
fn checkpoint_pool(test: &str, build: &Path, gpus: u32, tool: &Path) -> Option<crate::pool::Pool> {
    let script: String = std::iter::once(format!("count {gpus}\n"))
        .chain((0..gpus).map(|g| format!("util {g} 1 0\n")))
        .collect();
    nvml_pool_with(test, build, &script, |t| {
        t.replace(
            "[node]\n",
            &format!("[node]\ncuda_checkpoint = \"{}\"\n", tool.display()),
        )
    })
}

/// The double's calls: (ms, action, pid).
fn calls(dir: &Path) -> Vec<(i64, String, String)> {
    std::fs::read_to_string(dir.join("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[0].parse().unwrap(), w[1].to_string(), w[2].to_string())
        })
        .collect()
}

/// A `c 195 0` node in `dir`: opening it is refused (EPERM) by a device cgroup, else it fails
/// with ENXIO at the absent driver.
fn fake_gpu0(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("nvidia0");
    nix::sys::stat::mknod(
        &path,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(195, 0),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    path
}

/// A session's "kernel": a process the double takes for a CUDA process.
fn start_kernel(term: &mut Terminal) {
    term.type_line("(exec -a cuda-work sleep 100000) & echo started-$((1+1))");
    term.expect("started-2");
}

/// A pool of one idle GPU whose node suspends with the double, and a one-GPU session in it
/// running its kernel.
struct Session {
    pool: crate::pool::Pool,
    term: Terminal,
    /// Typed into the session, it prints `withheld=0` when the cgroup refuses the card and
    /// `withheld=1` when it lets it through (the typed line itself shows neither).
    probe: String,
    /// The double's directory: its log, its state, the fake `/dev/nvidia0`.
    double: tempfile::TempDir,
    _build: tempfile::TempDir,
}

/// [`Session`], started for `test`; None without gcc.
fn one_gpu_session(test: &str) -> Option<Session> {
    let build = tempfile::tempdir().unwrap();
    let double = tempfile::tempdir().unwrap();
    let tool = checkpoint_double(double.path());
    let pool = checkpoint_pool(test, build.path(), 1, &tool)?;
    let gpu0 = fake_gpu0(double.path());
    let probe = format!(
        "(exec 3<{}) 2>&1 | grep -q 'not permitted'; echo withheld=$?",
        gpu0.display()
    );
    let mut term = Terminal::open(&pool, &["run", "--pty", "-G", "1", "bash", "--norc"]);
    term.expect("$ ");
    start_kernel(&mut term);
    Some(Session {
        pool,
        term,
        probe,
        double,
        _build: build,
    })
}

#[test]
fn an_idle_session_is_checkpointed_lends_its_gpu_and_gets_it_back_when_its_member_returns() {
    if !have_root("an_idle_session_is_checkpointed") {
        return;
    }
    let Some(Session {
        pool,
        mut term,
        probe,
        double,
        _build,
    }) = one_gpu_session("an_idle_session_is_checkpointed")
    else {
        return;
    };
    has(
        &pool.ok(&["nodes"]),
        &[
            "idle sessions: suspended with",
            "(driver 570.86.15, lock, checkpoint, restore, unlock)",
        ],
    );
    term.type_line(&probe);
    term.expect("withheld=1");

    // Idle: told, then suspended rather than stopped.
    term.expect("this session has been idle");
    term.expect("this session is suspended: its GPU state is saved in host memory and GPU 0 went back to the pool");
    let job = pool.job(1);
    assert_eq!(s(&job, "state"), "RUNNING", "{job:#}");
    let shown = pool.ok(&["show", "1"]);
    for event in ["IDLE_SUSPENDING", "suspend"] {
        assert!(shown.contains(event), "{event} missing:\n{shown}");
    }
    assert!(shown.contains("Suspended"), "{shown}");
    let done = calls(double.path());
    let kernel = done[0].2.clone();
    let actions: Vec<(&str, &str)> = done
        .iter()
        .map(|(_, a, p)| (a.as_str(), p.as_str()))
        .collect();
    assert_eq!(
        actions,
        [("lock", kernel.as_str()), ("checkpoint", kernel.as_str())],
        "only the CUDA process is checkpointed, locked first"
    );
    // Its shell lives on, but may not open the card it lent.
    term.type_line(&format!("echo still-$((1+2)); {probe}"));
    term.expect("still-3");
    term.expect("withheld=0");

    // The GPU serves another job meanwhile.
    assert_eq!(free_gpus(&pool), 1);
    let other = pool.submit(&["-G", "1", "--wrap", "sleep 3"]);
    let ran = pool.wait_for(other, Duration::from_secs(30), |j| j["state"] == "RUNNING");
    assert_eq!(ran["gpus"][0], 0, "{ran:#}");

    // Its member types: it waits for GPU 0, then gets it back once the other job ends.
    term.type_line("echo back");
    term.expect("welcome back: your session is restored as soon as GPU 0 is free");
    term.expect("this session holds its GPU again and its GPU state is restored");
    let other = pool.wait_done(other, Duration::from_secs(30));
    let all = calls(double.path());
    let at = |action: &str| {
        all.iter()
            .find(|(_, a, p)| a == action && *p == kernel)
            .unwrap_or_else(|| panic!("no {action} in {all:?}"))
            .0
    };
    let (lock, checkpoint, restore, unlock) =
        (at("lock"), at("checkpoint"), at("restore"), at("unlock"));
    let ended = crate::policy::ms(&other, "end_time");
    assert!(
        lock <= checkpoint && checkpoint < ended && ended <= restore && restore <= unlock,
        "lock {lock}, checkpoint {checkpoint}, the other job's end {ended}, restore {restore}, unlock {unlock}"
    );
    let job = pool.job(1);
    assert_eq!(job["gpus"][0], 0, "{job:#}");
    assert!(pool.ok(&["show", "1"]).contains("resume"));
    term.type_line(&probe);
    term.expect_times("withheld=1", 2);
    term.type_line("kill %1; exit");
    term.exit_code();
    pool.wait_done(1, Duration::from_secs(30));
    assert_eq!(free_gpus(&pool), 1);
}

#[test]
fn a_session_of_two_gpus_or_without_a_cuda_process_is_stopped_as_before() {
    if !have_root("a_session_of_two_gpus_or_without_a_cuda_process") {
        return;
    }
    let build = tempfile::tempdir().unwrap();
    let double = tempfile::tempdir().unwrap();
    let tool = checkpoint_double(double.path());
    let Some(pool) = checkpoint_pool("a_session_of_two_gpus", build.path(), 3, &tool) else {
        return;
    };
    let mut two = Terminal::open(&pool, &["run", "--pty", "-G", "2", "bash", "--norc"]);
    two.expect("$ ");
    start_kernel(&mut two);
    // One GPU, but nothing of it holds a CUDA context: its node cannot suspend it.
    let mut plain = Terminal::open(&pool, &["run", "--pty", "-G", "1", "bash", "--norc"]);
    plain.expect("$ ");
    for job in [1, 2] {
        let done = pool.wait_done(job, Duration::from_secs(40));
        assert_eq!(s(&done, "state"), "CANCELLED", "{done:#}");
    }
    let shown = pool.ok(&["show", "1"]);
    assert!(shown.contains("IDLE_STOPPED"), "{shown}");
    assert!(!shown.contains("IDLE_SUSPENDING"), "{shown}");
    let shown = pool.ok(&["show", "2"]);
    has(
        &shown,
        &[
            "IDLE_SUSPENDING",
            "SUSPEND_FAILED",
            "none of its",
            "holds a CUDA context",
        ],
    );
    assert!(
        calls(double.path()).is_empty(),
        "nothing was locked: {:?}",
        calls(double.path())
    );
    assert_eq!(free_gpus(&pool), 3);
}

#[test]
fn a_suspended_session_outlives_a_controller_restart_and_still_comes_back() {
    if !have_root("a_suspended_session_outlives_a_controller_restart") {
        return;
    }
    let Some(Session {
        mut pool,
        mut term,
        probe,
        double,
        _build,
    }) = one_gpu_session("a_suspended_session_outlives_a_controller_restart")
    else {
        return;
    };
    term.expect("this session is suspended");
    // The controller (and its in-process agent, which forgets what it withheld) restarts.
    pool.stop();
    pool.start();
    let job = pool.job(1);
    assert_eq!(s(&job, "state"), "RUNNING", "{job:#}");
    assert!(job["gpus"].as_array().unwrap().is_empty(), "{job:#}");
    assert_eq!(
        free_gpus(&pool),
        1,
        "its GPU is still lent after the restart"
    );
    term.type_line(&format!("echo still-$((1+2)); {probe}"));
    term.expect("still-3");
    term.expect("withheld=0");
    // Told again by the new controller; its member types: restored on the same GPU, the
    // card open to it again.
    term.expect_times("this session is suspended", 2);
    term.type_line("echo back");
    term.expect("this session holds its GPU again and its GPU state is restored");
    assert_eq!(pool.job(1)["gpus"][0], 0);
    assert_eq!(free_gpus(&pool), 0);
    let actions: Vec<String> = calls(double.path()).into_iter().map(|c| c.1).collect();
    assert_eq!(actions, ["lock", "checkpoint", "restore", "unlock"]);
    term.type_line(&probe);
    term.expect("withheld=1");
    term.type_line("kill %1; exit");
    term.exit_code();
    pool.wait_done(1, Duration::from_secs(30));
    assert_eq!(free_gpus(&pool), 1);
}
