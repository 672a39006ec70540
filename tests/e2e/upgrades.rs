//! Versions between nodes: an agent newer than its controller, or one it cannot read, is
//! refused at registration with the version to install; this build's own agents join, and one
//! a minor release behind joins and is named by the doctor.

use crate::doctor::problems;
use crate::nodes::{Cluster, registration, signed_post};
use crate::pool::have_root;
use serde_json::Value;

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
        let reg = serde_json::to_vec(&registration("newer", version)).unwrap();
        let (status, body) = signed_post(&key, &c.join, "/v1/agent/register", &reg);
        assert_eq!(status, 409, "{version}: {body}");
        for part in [says, this] {
            assert!(body.contains(part), "{part:?} not in {body}");
        }
    }
    assert!(
        c.nodes().iter().all(|n| n["name"] != "newer"),
        "a refused agent's node was taken"
    );
    // This build's agent joins; one a minor release behind joins too, and the doctor asks
    // for its upgrade.
    let i = c.add_agent("n1", "1:t4", "127.0.0.1");
    c.start_agent(i);
    let parts: Vec<u64> = this.split('.').map(|p| p.parse().unwrap()).collect();
    let behind = format!("{}.{}.9", parts[0], parts[1].saturating_sub(1));
    let reg = serde_json::to_vec(&registration("behind", &behind)).unwrap();
    let (status, body) = signed_post(&key, &c.join, "/v1/agent/register", &reg);
    assert_eq!(status, 200, "{behind}: {body}");
    let versions: Vec<(String, Value)> = c
        .nodes()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["agent_version"].clone(),
            )
        })
        .collect();
    assert!(
        versions.contains(&("n1".into(), this.into())),
        "{versions:?}"
    );
    assert!(
        versions.contains(&("behind".into(), behind.clone().into())),
        "{versions:?}"
    );
    let found = problems(&c.ctrl.cli(&["doctor", "--json"]));
    let about: Vec<_> = found.iter().filter(|p| p.0 == "versions").collect();
    assert_eq!(about.len(), 1, "{found:?}");
    assert_eq!(about[0].2, "behind");
    assert_eq!(
        about[0].3,
        format!("its agent runs labpool {behind}, the controller {this}")
    );
}
