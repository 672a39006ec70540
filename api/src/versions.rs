//! Which labpool versions may work together, the promise upgrades rely on: agents may lag their
//! controller by one minor release (`0.4.x` agents under a `0.5.x` controller) and never run
//! ahead of it, within one major release. So an upgrade goes controller first, then the agents,
//! with jobs running; a controller may skip no agent version beyond that.

use semver::Version;

/// Why an agent's version cannot join this controller: each says which version to install.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incompatible {
    /// A version that is not `MAJOR.MINOR.PATCH`.
    #[error(
        "the agent on {node} sent version {agent:?}, which is not MAJOR.MINOR.PATCH; install labpool {controller} there"
    )]
    Unreadable {
        /// The node.
        node: String,
        /// What it sent.
        agent: String,
        /// The controller's.
        controller: String,
    },
    /// The agent is newer than its controller.
    #[error(
        "the agent on {node} runs labpool {agent}, newer than this controller's {controller}: upgrade the controller first, then the agents (or install {controller} on {node})"
    )]
    Ahead {
        /// The node.
        node: String,
        /// Its version.
        agent: String,
        /// The controller's.
        controller: String,
    },
    /// The agent is more than one minor release behind, or of another major release.
    #[error(
        "the agent on {node} runs labpool {agent}; this controller ({controller}) takes agents of {oldest} or newer, up to its own version: install labpool {controller} on {node}"
    )]
    TooOld {
        /// The node.
        node: String,
        /// Its version.
        agent: String,
        /// The controller's.
        controller: String,
        /// The oldest version it takes.
        oldest: String,
    },
}

/// Whether an agent of version `agent` on `node` may join a controller of version
/// `controller`: the same major release, no newer, and at most one minor release behind.
pub fn agent_may_join(node: &str, agent: &str, controller: &str) -> Result<(), Incompatible> {
    let (Ok(a), Ok(c)) = (
        Version::parse(agent.trim()),
        Version::parse(controller.trim()),
    ) else {
        return Err(Incompatible::Unreadable {
            node: node.to_string(),
            agent: agent.to_string(),
            controller: controller.to_string(),
        });
    };
    if (a.major, a.minor, a.patch) > (c.major, c.minor, c.patch) {
        return Err(Incompatible::Ahead {
            node: node.to_string(),
            agent: agent.to_string(),
            controller: controller.to_string(),
        });
    }
    if a.major != c.major || c.minor - a.minor > 1 {
        return Err(Incompatible::TooOld {
            node: node.to_string(),
            agent: agent.to_string(),
            controller: controller.to_string(),
            oldest: format!("{}.{}.0", c.major, c.minor.saturating_sub(1)),
        });
    }
    Ok(())
}

/// Whether an agent of version `agent` is of the controller's own minor release, and so knows
/// what that release added to the protocol between nodes; one a minor release behind is sent
/// only what its own release knows.
pub fn of_this_minor(agent: &str, controller: &str) -> bool {
    match (
        Version::parse(agent.trim()),
        Version::parse(controller.trim()),
    ) {
        (Ok(a), Ok(c)) => (a.major, a.minor) == (c.major, c.minor),
        _ => false,
    }
}

/// This build's version, as agents and the controller send it.
pub const THIS: &str = env!("CARGO_PKG_VERSION");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_agents_of_the_controllers_minor_release_are_sent_its_additions() {
        assert!(of_this_minor("0.5.0", "0.5.3"));
        assert!(of_this_minor("0.5.4", "0.5.3"));
        assert!(!of_this_minor("0.4.9", "0.5.3"));
        assert!(!of_this_minor("1.5.3", "0.5.3"));
        assert!(!of_this_minor("", "0.5.3"));
    }

    #[test]
    fn agents_may_lag_one_minor_release_and_never_run_ahead() {
        let ok = |a: &str, c: &str| agent_may_join("n1", a, c);
        for (agent, controller) in [
            ("0.5.0", "0.5.0"),
            ("0.5.3", "0.5.7"),
            ("0.4.9", "0.5.0"),
            ("2.0.1", "2.1.0"),
        ] {
            assert_eq!(ok(agent, controller), Ok(()), "{agent} under {controller}");
        }
        assert!(matches!(
            ok("0.5.1", "0.5.0"),
            Err(Incompatible::Ahead { .. })
        ));
        assert!(matches!(
            ok("0.6.0", "0.5.0"),
            Err(Incompatible::Ahead { .. })
        ));
        assert!(matches!(
            ok("1.0.0", "0.5.0"),
            Err(Incompatible::Ahead { .. })
        ));
        let old = ok("0.3.2", "0.5.0").unwrap_err();
        assert!(
            old.to_string().contains("takes agents of 0.4.0 or newer"),
            "{old}"
        );
        assert!(matches!(
            ok("1.9.0", "2.0.0"),
            Err(Incompatible::TooOld { .. })
        ));
        assert!(matches!(
            ok("five", "0.5.0"),
            Err(Incompatible::Unreadable { .. })
        ));
    }
}
