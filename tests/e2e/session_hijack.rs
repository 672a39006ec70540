//! A member cannot take or block another member's interactive session through `/tmp`, as the
//! attack was made: bob makes alice's session directory before her first session, first to
//! keep her out (his own, 0700), then to swap her session's socket for his (0777), show her a
//! fake prompt and record what she types.

use crate::interactive::Terminal;
use crate::pool::{Pool, ensure_user, have_root};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command};

/// Bob's socket swapper: every `*.sock` that appears in `dir` is replaced by his own, which
/// shows a prompt and appends whatever it is sent to `log`.
const SWAPPER: &str = r#"
import os, socket, sys, threading, time
d, log = sys.argv[1], sys.argv[2]
taken = set()
def serve(s):
    c, _ = s.accept()
    c.sendall(b"$ ")
    with open(log, "ab") as f:
        while True:
            b = c.recv(4096)
            if not b:
                break
            f.write(b)
            f.flush()
end = time.time() + 120
while time.time() < end:
    for n in os.listdir(d):
        p = os.path.join(d, n)
        if n.endswith(".sock") and p not in taken:
            try:
                os.unlink(p)
            except OSError:
                continue
            s = socket.socket(socket.AF_UNIX)
            s.bind(p)
            os.chmod(p, 0o777)
            s.listen(1)
            taken.add(p)
            threading.Thread(target=serve, args=(s,), daemon=True).start()
    time.sleep(0.001)
"#;

fn as_user(uid: u32, gid: u32) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        format!("--reuid={uid}"),
        format!("--regid={gid}"),
        "--clear-groups".to_string(),
    ]);
    c
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Alice opens a session, proves it is hers and types a secret; returns what her terminal
/// showed.
fn alice_session(pool: &Pool, alice: (u32, u32)) -> String {
    let reuid = format!("--reuid={}", alice.0);
    let regid = format!("--regid={}", alice.1);
    let bin = pool.bin.display().to_string();
    let mut term = Terminal::open_with(
        pool,
        std::path::Path::new("setpriv"),
        &[
            &reuid,
            &regid,
            "--init-groups",
            &bin,
            "run",
            "--pty",
            "bash",
            "--norc",
        ],
    );
    term.expect("labpool: job ");
    term.expect("$ ");
    term.type_line("export HF_TOKEN=hf_alices_secret; echo \"who=$(id -un)\"");
    term.expect("who=lp-alice");
    term.type_line("exit 0");
    assert_eq!(term.exit_code(), Some(0));
    term.text().to_string()
}

#[test]
fn another_member_cannot_block_or_take_a_session_through_tmp() {
    if !have_root("another_member_cannot_block_or_take_a_session_through_tmp") {
        return;
    }
    let alice = ensure_user("lp-alice");
    let bob = ensure_user("lp-bob");
    let mut pool = Pool::new("1:t4").for_users();
    pool.start();
    let dir = std::path::PathBuf::from(format!("/tmp/labpool-sessions-{}", alice.0));
    let _ = std::fs::remove_dir_all(&dir);

    // Bob's own directory at alice's path, closed to her: her session still opens.
    let made = as_user(bob.0, bob.1)
        .args(["mkdir", "-m", "700"])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(made.success());
    let shown = alice_session(&pool, alice);
    assert!(shown.contains("belongs to uid"), "no warning:\n{shown}");

    // Opened to everyone, with bob swapping every socket that appears there for his own.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let log = pool.work.join("bob-recorded");
    let mut swapper = Killed(
        as_user(bob.0, bob.1)
            .args(["/usr/bin/python3", "-c", SWAPPER])
            .arg(&dir)
            .arg(&log)
            .spawn()
            .unwrap(),
    );
    alice_session(&pool, alice);
    assert!(
        swapper.0.try_wait().unwrap().is_none(),
        "bob's swapper did not run"
    );
    let recorded = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !recorded.contains("hf_alices_secret"),
        "bob recorded alice's session: {recorded:?}"
    );
    // No socket of alice's ever stood in bob's directory.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.is_empty(), "{names:?}");
    let _ = std::fs::remove_dir_all(&dir);
    pool.stop();
}
