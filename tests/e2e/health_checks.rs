//! `/livez` and `/readyz` on an agent's metrics listener, as a supervisor or a monitor asks
//! them: alive from the start, ready only while it is registered with its controller and its
//! heartbeats get through. (The controller's not-ready case, a full state disk, is in
//! `full_disk.rs`.)

use crate::monitoring::get_page;
use crate::nodes::Cluster;
use crate::pool::{have_root, wait_until};
use std::time::Duration;

#[test]
fn an_agent_is_ready_only_while_registered_with_a_controller_that_answers() {
    if !have_root("an_agent_is_ready_only_while_registered_with_a_controller_that_answers") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    let i = c.add_agent("n1", "1:t4", "127.0.0.1");
    // The agent starts before its controller: it serves its pages while it waits to register.
    c.agents[i].spawn();
    let addr = c.agents[i].dir.join("state/metrics.addr");
    wait_until(Duration::from_secs(20), || addr.exists(), || c.logs());
    assert_eq!(get_page(&addr, "/livez"), (200, "ok\n".to_string()));
    let (status, why) = get_page(&addr, "/readyz");
    assert_eq!(status, 503, "{why}");
    assert!(
        why.contains("not registered with the controller at") && why.contains(&c.join),
        "{why}"
    );

    c.ctrl.start();
    wait_until(
        Duration::from_secs(20),
        || get_page(&addr, "/readyz").0 == 200,
        || format!("{:?}\n{}", get_page(&addr, "/readyz"), c.logs()),
    );
    let controller = c.ctrl.dir.join("state/metrics.addr");
    assert_eq!(get_page(&controller, "/livez"), (200, "ok\n".to_string()));
    assert_eq!(get_page(&controller, "/readyz"), (200, "ok\n".to_string()));

    // The controller goes away: the agent is alive, and not ready, and says why.
    c.ctrl.kill9();
    wait_until(
        Duration::from_secs(20),
        || get_page(&addr, "/readyz").0 == 503,
        || format!("{:?}\n{}", get_page(&addr, "/readyz"), c.logs()),
    );
    let (_, why) = get_page(&addr, "/readyz");
    assert!(why.contains("heartbeats to the controller at"), "{why}");
    assert_eq!(get_page(&addr, "/livez").0, 200);
}
