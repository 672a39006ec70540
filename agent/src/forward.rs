//! A port of a running job, for `labpool forward` and the dashboard's notebooks: only a socket
//! that one of the job's own processes listens on (a process that carries the attempt's key and
//! runs as the job's owner), never another job's port or the node's own services. The agent
//! connects to it on the node and joins it to the tunnel its signed link was turned into
//! (`labpool_link::tunnel`); nothing new listens on the node's network.
//!
//! The sockets are read from a job process's own view of the network (`/proc/PID/net/tcp`),
//! and reached from the agent's: jobs share the node's network namespace.

use crate::jobdir::JobDir;
use procfs::net::TcpState;
use procfs::process::{FDTarget, Process};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// Why a job's port cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// No process of the job listens there.
    #[error("job {job} has no process listening on port {port}{}", listening_hint(.listening))]
    NotListening {
        /// The job.
        job: u64,
        /// The port asked for.
        port: u16,
        /// The ports its processes do listen on.
        listening: Vec<u16>,
    },
    /// It listens, but the connection failed.
    #[error("cannot connect to job {job}'s port {port} at {addr}: {source}")]
    Connect {
        /// The job.
        job: u64,
        /// The port.
        port: u16,
        /// Where it listens.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

fn listening_hint(ports: &[u16]) -> String {
    if ports.is_empty() {
        "; none of its processes listens on any TCP port yet (start the server in the job, then forward)".to_string()
    } else {
        let list: Vec<String> = ports.iter().map(u16::to_string).collect();
        format!("; its processes listen on {}", list.join(", "))
    }
}

/// Where to connect to a socket listening on `local`: loopback for one bound to every address.
fn reachable(local: SocketAddr) -> SocketAddr {
    let ip = match local.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, local.port())
}

/// The TCP ports the processes carrying `key` and running as `uid` listen on, each with the
/// address to reach it at.
pub fn listening(key: &str, uid: u32) -> BTreeMap<u16, SocketAddr> {
    let mut found = BTreeMap::new();
    for pid in crate::procs::job_processes(key) {
        let Ok(p) = Process::new(pid.as_raw()) else {
            continue;
        };
        if p.uid().ok() != Some(uid) {
            continue;
        }
        let inodes: BTreeSet<u64> = p
            .fd()
            .map(|fds| {
                fds.flatten()
                    .filter_map(|fd| match fd.target {
                        FDTarget::Socket(inode) => Some(inode),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        if inodes.is_empty() {
            continue;
        }
        let entries = p
            .tcp()
            .unwrap_or_default()
            .into_iter()
            .chain(p.tcp6().unwrap_or_default());
        for e in entries {
            if e.state == TcpState::Listen && inodes.contains(&e.inode) {
                found
                    .entry(e.local_address.port())
                    .or_insert_with(|| reachable(e.local_address));
            }
        }
    }
    found
}

/// Connects to `port` of attempt `attempt` of `job` (owned by `uid`) on this node.
pub async fn connect(
    spool: &Path,
    job: u64,
    attempt: u32,
    uid: u32,
    port: u16,
) -> Result<tokio::net::TcpStream, ForwardError> {
    let key = JobDir::new(spool, job, attempt).key();
    let ports = tokio::task::spawn_blocking(move || listening(&key, uid))
        .await
        .unwrap_or_default();
    let Some(addr) = ports.get(&port).copied() else {
        return Err(ForwardError::NotListening {
            job,
            port,
            listening: ports.keys().copied().collect(),
        });
    };
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|source| ForwardError::Connect {
            job,
            port,
            addr,
            source,
        })?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// What the agent's forward route needs: where its jobs' directories are.
pub struct JobPorts {
    /// The job spool.
    pub spool: std::path::PathBuf,
}

/// The port of a job the controller asks for (`labpool forward`, a notebook).
#[derive(Debug, serde::Deserialize)]
pub struct PortOf {
    /// The job.
    pub job: u64,
    /// Its attempt.
    pub attempt: u32,
    /// Its owner.
    pub uid: u32,
    /// The port.
    pub port: u16,
}

/// `GET /v1/agent/forward?job=&attempt=&uid=&port=` (signed, upgraded): joins the tunnel to
/// the job's port on this node.
pub async fn serve(
    axum::extract::State(ports): axum::extract::State<std::sync::Arc<JobPorts>>,
    axum::extract::Query(q): axum::extract::Query<PortOf>,
    req: axum::extract::Request,
) -> axum::response::Response {
    if !crate::tunnel::wants_upgrade(&req) {
        return crate::transport::error_response(
            axum::http::StatusCode::BAD_REQUEST,
            format!("a forward asks to upgrade to {}", crate::tunnel::PROTOCOL),
            None,
        );
    }
    match connect(&ports.spool, q.job, q.attempt, q.uid, q.port).await {
        Ok(stream) => crate::tunnel::switch_to(req, stream),
        Err(e) => crate::transport::error_response(
            match e {
                ForwardError::NotListening { .. } => axum::http::StatusCode::NOT_FOUND,
                ForwardError::Connect { .. } => axum::http::StatusCode::BAD_GATEWAY,
            },
            e.to_string(),
            None,
        ),
    }
}

impl crate::embedded::JobPorts for JobPorts {
    fn open(&self, job: u64, attempt: u32, uid: u32, port: u16) -> crate::embedded::Opening {
        let spool = self.spool.clone();
        Box::pin(async move {
            connect(&spool, job, attempt, uid, port)
                .await
                .map_err(|e| crate::embedded::PortError {
                    not_listening: matches!(e, ForwardError::NotListening { .. }),
                    message: e.to_string(),
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_of_this_process_is_found_and_one_of_another_owner_is_not() {
        let key = format!("/tmp/forward-test-{}", std::process::id());
        // A child carrying the key listens; this test process does not carry it.
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import socket,sys,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\ntime.sleep(30)",
            ])
            .env(crate::procs::JOB_KEY_VAR, &key)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let port: u16 = line.trim().parse().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let found = listening(&key, me);
        assert_eq!(
            found.get(&port),
            Some(&SocketAddr::from(([127, 0, 0, 1], port)))
        );
        assert!(listening(&key, me + 1).is_empty(), "another owner's");
        assert!(listening("/tmp/no-such-job", me).is_empty());
        let _ = child.kill();
        let _ = child.wait();
        let e = ForwardError::NotListening {
            job: 3,
            port: 6006,
            listening: vec![8888],
        };
        assert_eq!(
            e.to_string(),
            "job 3 has no process listening on port 6006; its processes listen on 8888"
        );
        assert_eq!(
            reachable("[::]:80".parse().unwrap()),
            "[::1]:80".parse::<SocketAddr>().unwrap()
        );
    }
}
