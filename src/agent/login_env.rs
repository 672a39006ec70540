//! `--get-user-env`: the job owner's login environment (what `su - USER` sets up: their
//! profile, modules, conda init), read on the node just before the job starts. The submitted
//! environment is laid over it, as sbatch does: a variable set in both keeps its submitted value.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The login environment of `user`, from `su - USER -c 'env -0'` (a login shell's
/// `env -0` when not root), given `timeout`.
pub fn load(user: &str, timeout: Duration) -> Result<BTreeMap<String, String>, String> {
    // As root, `su -` (the user's own login shell and profile); otherwise the job runs as
    // this very user, whose login shell is started directly.
    let mut cmd = if nix::unistd::geteuid().is_root() {
        let mut c = Command::new("su");
        c.args(["-", user, "-c", "env -0"]);
        c
    } else {
        let shell = std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into());
        let mut c = Command::new(shell);
        c.args(["-l", "-c", "env -0"]);
        c
    };
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run su: {e}"))?;
    let mut out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = out.read_to_end(&mut bytes);
        bytes
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "the login shell of {user} did not finish in {}s",
                timeout.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let bytes = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("su - {user} failed ({status})"));
    }
    Ok(parse(&bytes))
}

/// `env -0` output: NUL-separated `KEY=VALUE` entries.
fn parse(bytes: &[u8]) -> BTreeMap<String, String> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|e| {
            let text = String::from_utf8_lossy(e);
            let (k, v) = text.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// The job's environment: the login one with the submitted one over it.
pub fn merged(
    login: BTreeMap<String, String>,
    job: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env = login;
    env.extend(job.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_submitted_environment_wins_over_the_login_one() {
        let login = parse(b"PATH=/login/bin\0MODULEPATH=/opt/mods\0A=b=c\0");
        assert_eq!(login["A"], "b=c");
        let job = BTreeMap::from([("PATH".to_string(), "/job/bin".to_string())]);
        let env = merged(login, &job);
        assert_eq!(env["PATH"], "/job/bin");
        assert_eq!(env["MODULEPATH"], "/opt/mods");
    }
}
