//! Versions between nodes: an agent newer than its controller, or one it cannot read, is
//! refused at registration with the version to install; this build's own agents join.

use crate::nodes::{Cluster, free_port, signed_post};
use crate::pool::have_root;
use labpool::api::agent::Registration;
use labpool_scheduler::node::NodeSpec;

fn registration(version: &str) -> Vec<u8> {
    let reg = Registration {
        node: NodeSpec {
            name: "newer".into(),
            gpus: Vec::new(),
            cpus: 1,
            mem_mib: 1024,
            features: vec![],
        },
        gpu_source: "none".into(),
        isolation: Default::default(),
        port: free_port("127.0.0.1"),
        advertise: None,
        cache_dir: None,
        heartbeat_ms: None,
        instance: format!("agent-{version}"),
        version: version.into(),
    };
    serde_json::to_vec(&reg).unwrap()
}

#[test]
fn an_agent_ahead_of_its_controller_is_refused_with_the_version_to_install() {
    if !have_root("an_agent_ahead_of_its_controller_is_refused_with_the_version_to_install") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    let key = labpool_cluster::ClusterKey::load(&c.ctrl.dir.join("cluster.key")).unwrap();
    let this = labpool::api::versions::THIS;
    for (version, says) in [
        ("99.0.0", "newer than this controller's"),
        ("soon", "not MAJOR.MINOR.PATCH"),
    ] {
        let (status, body) =
            signed_post(&key, &c.join, "/v1/agent/register", &registration(version));
        assert_eq!(status, 409, "{version}: {body}");
        for part in [says, this] {
            assert!(body.contains(part), "{part:?} not in {body}");
        }
    }
    assert!(
        c.nodes().iter().all(|n| n["name"] != "newer"),
        "a refused agent's node was taken"
    );
    // This build's agent joins.
    let i = c.add_agent("n1", "1:t4", "127.0.0.1");
    c.start_agent(i);
}
