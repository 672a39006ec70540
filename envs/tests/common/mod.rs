//! Helpers shared by the integration tests: loud skips, running a wrapped command, files.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

/// Says why a test cannot run here. Under `LABPOOL_TEST_STRICT` (CI, where every tool is
/// installed) that is a failure; for a person without the tool it is a loud skip.
pub use labpool_testkit::skip;

/// True when a TCP connection to pypi.org:443 opens within 10 seconds.
pub fn pypi_reachable() -> bool {
    use std::net::ToSocketAddrs;
    let Ok(addrs) = ("pypi.org", 443).to_socket_addrs() else {
        return false;
    };
    addrs.into_iter().any(|a| {
        std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(10)).is_ok()
    })
}

/// A small job environment: PATH, HOME, USER (ch-run needs it), LANG.
pub fn job_env(home: &Path) -> BTreeMap<String, String> {
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    BTreeMap::from([
        (
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        ),
        ("HOME".to_string(), home.display().to_string()),
        ("USER".to_string(), user),
        ("LANG".to_string(), "C.UTF-8".to_string()),
    ])
}

/// Runs a wrapped command with exactly its environment, in `cwd`.
pub fn run(cmd: &labpool_envs::activate::Command, cwd: &Path) -> std::process::Output {
    std::process::Command::new(&cmd.program)
        .args(&cmd.args)
        .env_clear()
        .envs(&cmd.env)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", cmd.program.display()))
}

/// Writes an executable script.
pub fn script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The output of a run, for assertion messages.
pub fn show(out: &std::process::Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
