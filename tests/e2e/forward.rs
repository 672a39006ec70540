//! `labpool forward`: a server inside a job (plain HTTP and a WebSocket echo, Python's standard
//! library) is reached from 127.0.0.1 on the member's machine through the pool's own links: on
//! the controller's node, and on an agent's node in another network namespace, from the
//! controller's CLI and from the agent's. Another member gets no tunnel to the job and no byte
//! through the member's local port; a port no process of the job listens on is refused, with the
//! ports it does listen on.

use crate::netns::cluster_with_agent_inside;
use crate::pool::{Pool, ensure_user, fails_stderr, have_root, have_tool, s};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Answers GET with "hello from job N", and echoes WebSocket text frames as "echo: TEXT".
const SERVER: &str = r#"
import base64, hashlib, os, socket, struct, threading
def serve(c):
    req = b""
    while b"\r\n\r\n" not in req:
        b = c.recv(4096)
        if not b:
            return
        req += b
    head = req.decode(errors="replace")
    key = [l.split(":", 1)[1].strip() for l in head.split("\r\n") if l.lower().startswith("sec-websocket-key:")]
    if not key:
        body = ("hello from job %s\n" % os.environ.get("SLURM_JOB_ID")).encode()
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        c.close()
        return
    accept = base64.b64encode(hashlib.sha1((key[0] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    def exact(n):
        d = b""
        while len(d) < n:
            b = c.recv(n - len(d))
            if not b:
                raise EOFError
            d += b
        return d
    try:
        while True:
            h = exact(2)
            n = h[1] & 127
            if n == 126:
                n = struct.unpack(">H", exact(2))[0]
            mask = exact(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(exact(n)))
            if h[0] & 15 == 8:
                return
            out = b"echo: " + data
            c.sendall(bytes([0x81, len(out)]) + out)
    except EOFError:
        pass
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print("listening", s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

const T: Duration = Duration::from_secs(30);

/// Submits the server as a job through `pool`'s CLI; returns the port it listens on, read from
/// its output.
fn start_server(pool: &Pool, extra: &[&str]) -> u16 {
    std::fs::write(pool.work.join("server.py"), SERVER).unwrap();
    let mut args = vec!["submit", "-o", "server.out"];
    args.extend(extra);
    args.extend(["--wrap", "exec python3 -u server.py"]);
    pool.ok(&args);
    let t0 = Instant::now();
    loop {
        let out = std::fs::read_to_string(pool.work.join("server.out")).unwrap_or_default();
        if let Some(port) = out.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            return port;
        }
        assert!(t0.elapsed() < T, "the server did not start: {out:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `labpool forward JOB PORT 0` under `config`, as `cmd` runs it; returns the child and the
/// local port it says it listens on.
fn forward(mut cmd: Command, config: &Path, job: &str, port: u16) -> (Child, u16) {
    let mut child = cmd
        .args(["forward", job, &port.to_string(), "0"])
        .env("LABPOOL_CONFIG", config)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let local = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no local port in {line:?}"));
    (child, local)
}

fn http_get(local: u16) -> String {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", local)).unwrap();
    c.set_read_timeout(Some(T)).unwrap();
    c.write_all(b"GET /hello HTTP/1.0\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

fn websocket_echo(local: u16) -> String {
    let stream = std::net::TcpStream::connect(("127.0.0.1", local)).unwrap();
    stream.set_read_timeout(Some(T)).unwrap();
    let (mut ws, _) =
        tungstenite::client::client(format!("ws://127.0.0.1:{local}/ws"), stream).unwrap();
    ws.send(tungstenite::Message::text("ping")).unwrap();
    let answer = ws.read().unwrap().into_text().unwrap().to_string();
    let _ = ws.close(None);
    answer
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_port_of_a_job_is_forwarded_to_its_owner_and_no_one_else() {
    let mut pool = Pool::new("1:a100");
    pool.start();
    let port = start_server(&pool, &[]);
    let (child, local) = forward(Command::new(&pool.bin), &pool.config, "1", port);
    let _forward = Killed(child);
    let answer = http_get(local);
    assert!(answer.contains("hello from job 1"), "{answer:?}");
    assert_eq!(websocket_echo(local), "echo: ping");

    let refused = fails_stderr(&pool, &["forward", "1", "1"]);
    assert!(
        refused.contains(&format!(
            "job 1 has no process listening on port 1; its processes listen on {port}"
        )),
        "{refused}"
    );
    assert!(fails_stderr(&pool, &["forward", "99", "80"]).contains("no job 99"));

    if !have_root("a_port_of_a_job_is_forwarded_to_its_owner_and_no_one_else") {
        return;
    }
    let bob = ensure_user("lp-bob");
    let as_bob = || {
        let mut c = Command::new("setpriv");
        c.args([
            format!("--reuid={}", bob.0),
            format!("--regid={}", bob.1),
            "--clear-groups".to_string(),
        ]);
        c
    };
    // Bob asks for a tunnel to the job: told whose it is.
    let out = as_bob()
        .arg(&pool.bin)
        .args(["forward", "1", &port.to_string()])
        .env("LABPOOL_CONFIG", &pool.config)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        said.contains("job 1 is root's; you (lp-bob) may reach only your own jobs' ports"),
        "{said}"
    );
    // Bob connects to the owner's local port on this machine: not a byte comes back.
    let probe = format!(
        "import socket\nc=socket.create_connection(('127.0.0.1',{local}))\nc.settimeout(10)\ntry:\n    c.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n    d=c.recv(100)\nexcept OSError:\n    d=b''\nprint('closed' if not d else repr(d))"
    );
    let out = as_bob()
        .args(["/usr/bin/python3", "-c", &probe])
        .output()
        .unwrap();
    let got = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        got.trim(),
        "closed",
        "bob got bytes through the owner's forward: {got} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    pool.ok(&["cancel", "1"]);
}

#[test]
fn a_port_of_a_job_on_an_agents_node_is_forwarded_from_either_cli() {
    let test = "a_port_of_a_job_on_an_agents_node_is_forwarded";
    if !have_root(test) || !have_tool(test, "ip") {
        return;
    }
    let (_ns, mut c, a) = cluster_with_agent_inside("30s", "farnode", "2:a100");
    c.start_agent(a);
    let port = start_server(&c.ctrl, &["-G", "1"]);
    let jobs: Vec<serde_json::Value> =
        serde_json::from_str(&c.ctrl.ok(&["queue", "--json"])).unwrap();
    assert_eq!(s(&jobs[0], "node"), "farnode");
    let id = jobs[0]["id"].as_u64().unwrap().to_string();
    // From the controller's CLI: controller, then the agent over the signed link.
    let (child, local) = forward(Command::new(&c.ctrl.bin), &c.ctrl.config, &id, port);
    let first = Killed(child);
    assert!(
        http_get(local).contains(&format!("hello from job {id}")),
        "{}",
        c.logs()
    );
    assert_eq!(websocket_echo(local), "echo: ping");
    drop(first);
    // From the agent's node's CLI: its agent relays the tunnel to the controller.
    let (child, local) = forward(Command::new(&c.ctrl.bin), &c.agents[a].config, &id, port);
    let _second = Killed(child);
    assert_eq!(websocket_echo(local), "echo: ping");
}
