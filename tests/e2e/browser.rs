//! A real headless Chromium, driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: JSON messages, each ended by a NUL, on fds 3 and 4), so the
//! dashboard tests load pages, click buttons and submit forms as a member would, with cookies,
//! redirects and the page's own script, and save screenshots.

use base64::Engine;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One browser with one tab.
pub struct Browser {
    child: Child,
    to: std::fs::File,
    from: BufReader<std::fs::File>,
    next: u64,
    session: String,
    _profile: tempfile::TempDir,
}

/// Where screenshots go: kept after the run as the tests' artifacts.
pub fn artifacts() -> PathBuf {
    let dir = std::env::var_os("LABPOOL_TEST_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts"))
        .join("web");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Browser {
    /// Starts Chromium headless with the flags DEPENDENCIES.md lists, and opens a tab whose
    /// requests say `accept_language`.
    pub fn start(accept_language: &str) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
        let (ours_read, theirs_write) = nix::unistd::pipe2(cloexec).unwrap();
        let (theirs_read, ours_write) = nix::unistd::pipe2(cloexec).unwrap();
        let (r, w) = (theirs_read.as_raw_fd(), theirs_write.as_raw_fd());
        let mut cmd = Command::new("chromium");
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,900",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: only fcntl and dup2 between fork and exec. The ends are first copied above
        // fd 10, so that placing one on 3 cannot close the other.
        unsafe {
            cmd.pre_exec(move || {
                let (r, w) = (
                    libc::fcntl(r, libc::F_DUPFD, 10),
                    libc::fcntl(w, libc::F_DUPFD, 10),
                );
                if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("chromium starts");
        drop::<(OwnedFd, OwnedFd)>((theirs_read, theirs_write));
        let mut b = Browser {
            child,
            to: std::fs::File::from(ours_write),
            from: BufReader::new(std::fs::File::from(ours_read)),
            next: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = b.send(None, "Target.createTarget", json!({ "url": "about:blank" }));
        let target_id = target["targetId"].as_str().unwrap().to_string();
        let attached = b.send(
            None,
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
        );
        b.session = attached["sessionId"].as_str().unwrap().to_string();
        let version = b.send(None, "Browser.getVersion", json!({}));
        let ua = version["userAgent"].as_str().unwrap().to_string();
        b.call(
            "Emulation.setUserAgentOverride",
            json!({ "userAgent": ua, "acceptLanguage": accept_language }),
        );
        b
    }

    /// Sends a command (to the tab when `session` is set) and waits for its answer.
    fn send(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        loop {
            let mut buf = Vec::new();
            let n = self.from.read_until(0, &mut buf).unwrap();
            assert!(n > 0, "chromium closed its DevTools pipe during {method}");
            buf.pop();
            let v: Value = serde_json::from_slice(&buf).unwrap();
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// A command to the tab.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send(Some(&session), method, params)
    }

    /// The value of a JavaScript expression in the page.
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits until the page (a new one, after a navigation) has loaded.
    fn settle(&mut self) {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let v = self
                .eval("window.__labpool_old === undefined && document.readyState === 'complete'");
            if v == json!(true) {
                return;
            }
            assert!(Instant::now() < end, "the page did not load");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Opens `url` and waits for it to load (following redirects).
    pub fn open(&mut self, url: &str) {
        self.eval("window.__labpool_old = 1");
        self.call("Page.navigate", json!({ "url": url }));
        self.settle();
    }

    /// Runs `script`, which navigates (clicks a button, submits a form), and waits for the
    /// next page.
    pub fn then_load(&mut self, script: &str) {
        self.eval(&format!("window.__labpool_old = 1; {script}"));
        self.settle();
    }

    /// The page's visible text.
    pub fn text(&mut self) -> String {
        self.eval("document.body.innerText")
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// The page's address.
    pub fn url(&mut self) -> String {
        self.eval("location.href")
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// Saves a PNG of the page under [`artifacts`]; returns its path.
    pub fn screenshot(&mut self, name: &str) -> PathBuf {
        let shot = self.call(
            "Page.captureScreenshot",
            json!({ "format": "png", "captureBeyondViewport": true }),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 5_000,
            "{name}: not a real screenshot"
        );
        let path = artifacts().join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
