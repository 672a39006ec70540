//! `labpool forward JOB PORT [LOCAL]`: a port of a running job (TensorBoard, a VS Code server, a
//! Gradio demo) on this machine's loopback, carried by the pool's own links
//! (`labpool_link::tunnel`): each connection made to `127.0.0.1:LOCAL` becomes a tunnel through
//! the controller (and the job's agent) to the port on the job's node. Only the job's owner (or
//! an admin) gets a tunnel, and on this machine only connections made by the user who ran the
//! command (or root) are carried: another user of a shared login node is refused.

use crate::api::sessions::ForwardView;
use crate::client::Client;
use crate::settings::Config;
use anyhow::Context;
use procfs::net::TcpState;
use std::net::SocketAddr;

/// Runs `labpool forward`; returns when interrupted.
pub async fn forward(
    job: &str,
    port: u16,
    local: Option<u16>,
    config: &Config,
) -> anyhow::Result<()> {
    let id: u64 = job.parse().map_err(|_| {
        anyhow::anyhow!("'{job}' is not a job id\nhint: `labpool queue` lists your running jobs")
    })?;
    if port == 0 {
        anyhow::bail!("port 0: give the port the server in job {id} listens on (1 to 65535)");
    }
    let client = Client::new(&config.controller.socket);
    let path = format!("/v1/jobs/{id}/forward/{port}");
    // Checked at once: a job that is not yours, not running, or not listening there.
    let view: ForwardView = client.get(&path).await?;
    let local = local.unwrap_or(port);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", local))
        .await
        .with_context(|| {
            format!("cannot listen on 127.0.0.1:{local}\nhint: give another local port: labpool forward {id} {port} {}", local.wrapping_add(10000).max(1024))
        })?;
    let bound = listener.local_addr()?;
    eprintln!(
        "labpool: http://{bound} is port {port} of job {id} on {}; only you can use it. Ctrl-C stops.",
        view.node
    );
    let me = nix::unistd::geteuid().as_raw();
    loop {
        let (conn, peer) = tokio::select! {
            r = listener.accept() => r?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        match owner_of(peer, bound) {
            Some(uid) if uid == me || uid == 0 => {}
            other => {
                eprintln!(
                    "labpool: refused a connection from {peer}: it was made by {}, not by you (uid {me})",
                    other.map_or("an unknown user".to_string(), |u| format!("uid {u}"))
                );
                continue;
            }
        }
        let (client, path) = (client.clone(), path.clone());
        tokio::spawn(async move {
            let _ = conn.set_nodelay(true);
            match client.tunnel(&path).await {
                Ok(upgraded) => crate::tunnel::splice(conn, crate::tunnel::io(upgraded)).await,
                Err(e) => eprintln!("labpool: a connection to job {id}'s port {port} failed: {e}"),
            }
        });
    }
}

/// The uid of the process that made the loopback connection `peer` to `to`: the owner of the
/// socket at the connection's other end, from the kernel's table (a socket in TIME_WAIT is no
/// one's any more).
fn owner_of(peer: SocketAddr, to: SocketAddr) -> Option<u32> {
    procfs::net::tcp()
        .ok()?
        .into_iter()
        .find(|e| {
            e.local_address == peer
                && e.remote_address == to
                && !matches!(e.state, TcpState::TimeWait | TcpState::Listen)
        })
        .map(|e| e.uid)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_loopback_connection_is_owned_by_whoever_made_it() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let c = std::net::TcpStream::connect(to).unwrap();
        let (_server, peer) = l.accept().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        assert_eq!(
            super::owner_of(peer, to),
            Some(nix::unistd::geteuid().as_raw())
        );
        assert_eq!(super::owner_of("127.0.0.1:1".parse().unwrap(), to), None);
    }
}
