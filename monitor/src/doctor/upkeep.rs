//! The checks an upgrade and a reboot depend on: every agent runs the controller's version, and
//! the controller runs as a service that comes back by itself.

use super::checks::finding;
use super::{Facts, Finding, Service, Status};

/// Each node whose agent runs another version than the controller. Agents may lag by one minor
/// release (the controller refuses any other at registration), so a lagging agent is a
/// warning: it must be upgraded before the controller's next minor release.
pub(super) fn versions(f: &Facts) -> (Vec<Finding>, String) {
    let mut lagging = Vec::new();
    let mut unknown: u64 = 0;
    for n in &f.nodes {
        match &n.agent_version {
            Some(v) if *v != f.controller_version => lagging.push(finding(
                "versions",
                Status::Warn,
                &n.name,
                format!(
                    "its agent runs labpool {v}, the controller {}",
                    f.controller_version
                ),
                &format!(
                    "install labpool {} on {} and restart its agent (running jobs stay); it must be done before the controller's next minor release",
                    f.controller_version, n.name
                ),
            )),
            Some(_) => {}
            None => unknown += 1,
        }
    }
    let ok = if unknown == 0 {
        format!("every agent runs labpool {}", f.controller_version)
    } else {
        format!(
            "every agent that registered runs labpool {} ({} not heard from since the controller started)",
            f.controller_version,
            labpool_units::count(unknown, "node")
        )
    };
    (lagging, ok)
}

/// Whether the controller runs under systemd where systemd runs the machine.
pub(super) fn service(f: &Facts) -> (Vec<Finding>, String) {
    match &f.service {
        Service::Unit {
            unit,
            enabled: true,
        } => (
            Vec::new(),
            format!(
                "started by systemd as {unit}, enabled: it comes back after a failure and a reboot"
            ),
        ),
        Service::Unit {
            unit,
            enabled: false,
        } => (
            vec![finding(
                "service",
                Status::Warn,
                unit,
                format!(
                    "started by systemd as {unit}, but not enabled: a reboot leaves the pool down"
                ),
                &format!("systemctl enable {unit}"),
            )],
            String::new(),
        ),
        Service::NoSystemd => (
            Vec::new(),
            "no systemd on this machine: keep `labpool serve` running by your own means".into(),
        ),
        Service::OutsideSystemd => (
            vec![finding(
                "service",
                Status::Warn,
                "labpool serve",
                "systemd runs this machine, but not the controller: a crash or a reboot leaves the pool down".into(),
                "`sudo labpool init --systemd` (or enable the package's labpool.service), then stop this one and `systemctl start labpool`",
            )],
            String::new(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::NodeFact;

    #[test]
    fn an_agent_of_another_version_is_named_with_the_version_to_install() {
        let node = |name: &str, v: Option<&str>| NodeFact {
            name: name.into(),
            agent_version: v.map(String::from),
            ..NodeFact::default()
        };
        let f = Facts {
            controller_version: "0.5.0".into(),
            nodes: vec![
                node("a", Some("0.5.0")),
                node("b", Some("0.4.2")),
                node("c", None),
            ],
            ..Facts::default()
        };
        let (found, ok) = versions(&f);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].subject, "b");
        assert_eq!(
            found[0].what,
            "its agent runs labpool 0.4.2, the controller 0.5.0"
        );
        assert!(found[0].fix.starts_with("install labpool 0.5.0 on b"));
        assert!(ok.contains("1 node not heard from"), "{ok}");
    }

    #[test]
    fn a_controller_outside_a_running_systemd_or_not_enabled_is_a_warning() {
        let with = |service| Facts {
            service,
            ..Facts::default()
        };
        let unit = |enabled| Service::Unit {
            unit: "labpool.service".into(),
            enabled,
        };
        assert!(service(&with(unit(true))).0.is_empty());
        assert_eq!(
            service(&with(unit(false))).0[0].fix,
            "systemctl enable labpool.service"
        );
        assert!(service(&with(Service::NoSystemd)).0.is_empty());
        let (found, _) = service(&with(Service::OutsideSystemd));
        assert_eq!(found[0].status, Status::Warn);
    }
}
