//! What the benchmarks share: reading their knobs, where their trees go, and medians. Each
//! benchmark uses some of it.
#![allow(dead_code)]

/// Makes sure the peer tools a benchmark runs are here: each `(program, Debian package)`
/// missing is installed with apt-get when running as root (as `scripts/test` does); otherwise
/// the benchmark stops at once, naming the packages to install.
pub fn require_tools(bench: &str, tools: &[(&str, &str)]) {
    let missing = |tools: &[(&str, &str)]| -> Vec<(String, String)> {
        tools
            .iter()
            .filter(|(program, _)| {
                !std::process::Command::new("sh")
                    .args(["-c", &format!("command -v {program}")])
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .map(|(p, pkg)| (p.to_string(), pkg.to_string()))
            .collect()
    };
    let absent = missing(tools);
    if absent.is_empty() {
        return;
    }
    let packages: Vec<&str> = absent.iter().map(|(_, p)| p.as_str()).collect();
    if nix::unistd::geteuid().is_root() {
        eprintln!("{bench}: installing {}", packages.join(" "));
        let ok = std::process::Command::new("sh")
            .args([
                "-c",
                &format!(
                    "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq {} >/dev/null",
                    packages.join(" ")
                ),
            ])
            .status()
            .is_ok_and(|s| s.success());
        if ok && missing(tools).is_empty() {
            return;
        }
    }
    let programs: Vec<&str> = absent.iter().map(|(p, _)| p.as_str()).collect();
    eprintln!(
        "{bench}: needs {} to run beside labpool; install them (apt-get install {}) and run it again",
        programs.join(", "),
        packages.join(" ")
    );
    std::process::exit(2);
}

/// The number in environment variable `name`, or `default`.
pub fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median of `v` (the mean of the middle two for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `$BENCH_DIR` (default `/var/tmp`), created: where a benchmark's trees go, on the disk measured.
pub fn bench_base() -> std::path::PathBuf {
    let base =
        std::path::PathBuf::from(std::env::var("BENCH_DIR").unwrap_or_else(|_| "/var/tmp".into()));
    std::fs::create_dir_all(&base).unwrap();
    base
}

/// A fresh directory under `base`, removed when dropped.
pub fn scratch_dir(base: &std::path::Path, name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("labpool-bench-{name}-"))
        .tempdir_in(base)
        .unwrap()
}

/// Runs a peer tool (or a child of the benchmark) to its end; panics with what it printed when
/// it fails. Returns its standard output.
pub fn run(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().expect("the tool runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Removes a directory tree if it is there.
pub fn rm(p: &std::path::Path) {
    if p.exists() {
        std::fs::remove_dir_all(p).unwrap();
    }
}

/// A fast seeded generator (xorshift64) for generated trees: the same seed, the same tree.
pub fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// rsync's "Total transferred file size" from `--stats`.
pub fn rsync_transferred(stats: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix("Total transferred file size: "))
        .and_then(|v| v.split_whitespace().next())
        .map(|v| v.replace(',', "").parse().unwrap_or(0))
        .unwrap_or(0)
}

/// A labpool pool for a benchmark: `labpool init` with 2 virtual GPUs in a fresh directory
/// under /tmp (`prefix`), a 1 s kill grace, the config's text passed through `edit`, and
/// `labpool serve` started with its output in `serve.out`. Returns the directory, the config
/// and the server; the caller waits for it to answer.
pub fn start_labpool(
    bin: &std::path::Path,
    prefix: &str,
    edit: impl FnOnce(String) -> String,
) -> (tempfile::TempDir, std::path::PathBuf, std::process::Child) {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .unwrap();
    run(std::process::Command::new(bin)
        .args(["init", "--virtual-gpus", "2:rtx4090", "--dir"])
        .arg(dir.path()));
    let config = dir.path().join("labpool.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("kill_grace = \"30s\"", "kill_grace = \"1s\"");
    std::fs::write(&config, edit(text)).unwrap();
    let log = std::fs::File::create(dir.path().join("serve.out")).unwrap();
    let server = std::process::Command::new(bin)
        .arg("serve")
        .env("LABPOOL_CONFIG", &config)
        .env("LABPOOL_LOG", "warn")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    (dir, config, server)
}

/// The `p` quantile (0 to 1) of `v`, nearest rank.
pub fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

/// One GET on a fresh connection, with `headers` (each ending in CRLF): the status, the head
/// and the body.
pub fn http_get(addr: &str, path: &str, headers: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{headers}\r\n");
    conn.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}
