//! A session outlives its terminal: a killed client (a closed laptop) detaches, the job runs on
//! with its GPU, and `labpool attach` joins the same shell again (a variable set before is still
//! there, the screen is redrawn); Ctrl-] d detaches by hand; `sattach JOB.0` joins it as Slurm's
//! command does; a newer terminal takes the session from an older one. Another member is told
//! where nothing is.

use crate::interactive::{Terminal, free_gpus};
use crate::pool::{Pool, ensure_user, fails_stderr, have_root, s};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

#[test]
fn a_killed_terminal_detaches_and_the_same_shell_is_attached_again() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let bin = pool.dir.join("slurm-bin");
    pool.ok(&["install-slurm-commands", bin.to_str().unwrap()]);
    let mut term = Terminal::open(&pool, &["run", "--pty", "--gpus", "1", "bash", "--norc"]);
    term.expect("(detach: Ctrl-] then d)");
    term.expect("$ ");
    term.type_line("export KEPT=yes-$SLURM_JOB_ID; echo marked-before");
    term.expect("marked-before");
    term.kill_client();
    // The job runs on, holding its GPU.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(s(&pool.job(1), "state"), "RUNNING");
    assert_eq!(free_gpus(&pool), 0);

    // Attached again: the screen as it was, and the shell's own state.
    let mut again = Terminal::open(&pool, &["attach", "1"]);
    again.expect("marked-before");
    again.type_line("echo kept=$KEPT");
    again.expect("kept=yes-1");
    // Ctrl-] then d: detached by hand; the job still runs.
    again.send(b"\x1dd");
    assert_eq!(again.exit_code(), Some(0));
    again.expect("detached from session 1, which runs on; `labpool attach 1` joins it again");
    assert_eq!(s(&pool.job(1), "state"), "RUNNING");

    // Slurm's sattach joins it too; a newer terminal then takes it from sattach's.
    let mut slurm = Terminal::open_with(&pool, &bin.join("sattach"), &["1.0"]);
    slurm.expect("kept=yes-1");
    slurm.type_line("echo via-sattach");
    slurm.expect("via-sattach");
    let mut newest = Terminal::open(&pool, &["attach", "1"]);
    newest.expect("via-sattach");
    slurm.expect("this session was attached from another terminal; detached here");
    assert_eq!(slurm.exit_code(), Some(0));
    newest.type_line("exit 4");
    assert_eq!(newest.exit_code(), Some(4));
    let job = pool.wait_done(1, T);
    assert_eq!(job["exit_code"], 4, "{job:#}");
    assert_eq!(free_gpus(&pool), 1);

    // An ended session, a batch job and a job that does not exist say what to do instead.
    let ended = fails_stderr(&pool, &["attach", "1"]);
    assert!(
        ended.contains("session 1 is FAILED") && ended.contains("labpool show 1"),
        "{ended}"
    );
    pool.ok(&["submit", "--wrap", "sleep 30"]);
    let batch = fails_stderr(&pool, &["attach", "2"]);
    assert!(
        batch.contains("job 2 is not an interactive session") && batch.contains("labpool logs 2"),
        "{batch}"
    );
    assert!(fails_stderr(&pool, &["attach", "99"]).contains("no job 99"));
    assert!(fails_stderr(&pool, &["attach", "x1"]).contains("'x1' is not a job id"));
}

#[test]
fn another_member_cannot_attach_to_a_session() {
    if !have_root("another_member_cannot_attach_to_a_session") {
        return;
    }
    let alice = ensure_user("lp-alice");
    let bob = ensure_user("lp-bob");
    let mut pool = Pool::new("1:t4").for_users();
    pool.start();
    let as_user = |who: (u32, u32)| {
        vec![
            format!("--reuid={}", who.0),
            format!("--regid={}", who.1),
            "--init-groups".to_string(),
            pool.bin.display().to_string(),
        ]
    };
    let mut args = as_user(alice);
    args.extend(["run", "--pty", "bash", "--norc"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut term = Terminal::open_with(&pool, std::path::Path::new("setpriv"), &args);
    term.expect("$ ");
    term.type_line("export SECRET=alices; echo ready");
    term.expect("ready");
    term.kill_client();
    std::thread::sleep(Duration::from_millis(500));
    // Bob asks for her session: he is told it is hers, and gets no token.
    let mut args = as_user(bob);
    args.extend(["attach", "1"].map(String::from));
    let out = std::process::Command::new("setpriv")
        .args(&args)
        .env("LABPOOL_CONFIG", &pool.config)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "bob attached to alice's session");
    assert!(
        said.contains("job 1 is lp-alice's; you (lp-bob) may attach only to your own sessions"),
        "{said}"
    );
    // She can, and her shell is untouched.
    let mut args = as_user(alice);
    args.extend(["attach", "1"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut again = Terminal::open_with(&pool, std::path::Path::new("setpriv"), &args);
    again.expect("ready");
    again.type_line("echo secret=$SECRET; exit");
    again.expect("secret=alices");
    assert_eq!(again.exit_code(), Some(0));
    pool.stop();
}
