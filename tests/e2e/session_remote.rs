//! An interactive session on another machine than the client's: the agent runs in a network
//! namespace with its own session directory, so the client cannot reach the job's Unix socket
//! and joins over TCP, showing the session's token; a connection without it gets nothing. A
//! client that is killed detaches, and `labpool attach` joins again over the same port.

use crate::interactive::Terminal;
use crate::netns::cluster_with_agent_inside;
use crate::pool::{have_root, have_tool, s};
use std::io::{Read, Write};
use std::time::Duration;

#[test]
fn a_session_on_another_node_is_joined_over_its_session_port() {
    let test = "a_session_on_another_node_is_joined";
    if !have_root(test) || !have_tool(test, "ip") || !have_tool(test, "unshare") {
        return;
    }
    let (ns, mut c, a) = cluster_with_agent_inside("30s", "farnode", "2:a100");
    // The node's own /tmp/labpool-sessions-0: the job's socket is not seen from here.
    c.agents[a].wrapper = [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mkdir -p /tmp/labpool-sessions-0 && mount -t tmpfs tmpfs /tmp/labpool-sessions-0 && exec \"$0\" \"$@\"",
    ]
    .map(String::from)
    .to_vec();
    c.start_agent(a);
    let mut term = Terminal::open_with(&c.ctrl, &c.ctrl.bin, &["run", "--pty", "-G", "1", "bash"]);
    term.expect("labpool: job ");
    term.type_line("echo \"on=$LABPOOL_NODE gpus=[$CUDA_VISIBLE_DEVICES]\"");
    term.expect("on=farnode gpus=[0]");
    let jobs: Vec<serde_json::Value> =
        serde_json::from_str(&c.ctrl.ok(&["queue", "--json"])).unwrap();
    let job = &jobs[0];
    assert_eq!(s(job, "state"), "RUNNING");
    // Someone without the token reaches the port and gets nothing: the session is taken.
    let port = job["ports"]["first"].as_u64().unwrap() as u16 + 1;
    if let Ok(mut probe) = std::net::TcpStream::connect((ns.ns_ip.as_str(), port)) {
        let _ = probe.write_all(b"not-the-token\n24 80\necho leaked\n");
        probe
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let mut buf = [0u8; 64];
        let n = probe.read(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "a client without the token got: {:?}", &buf[..n]);
    }
    // The laptop closes; the session is joined again over the port, its screen redrawn.
    term.kill_client();
    let id = job["id"].as_u64().unwrap().to_string();
    let mut again = Terminal::open_with(&c.ctrl, &c.ctrl.bin, &["attach", &id]);
    again.expect("on=farnode gpus=[0]");
    again.type_line("exit 3");
    assert_eq!(again.exit_code(), Some(3), "{}", c.logs());
}
