//! `labpool upgrade-check`: run by the new binary before it replaces the old one (for a package,
//! from `dpkg-deb -x labpool_NEW.deb DIR`), it says what the upgrade will do: the migrations it
//! will apply to the state database, whether the database is from a newer labpool, which
//! agents it would refuse when they register again, and how many jobs keep running through the
//! restart. It reads the database read-only and asks the running controller, if any, for its
//! version and its agents'; it changes nothing. Exit 1 when something blocks the upgrade.

use crate::api::versions::{THIS, agent_may_join};
use crate::api::{NodeView, Ping};
use crate::client::Client;
use crate::controller::schema::Schema;
use crate::render::print;
use crate::settings::Config;
use anyhow::Context;
use serde::Serialize;

/// What the upgrade to this binary would do.
#[derive(Debug, Serialize)]
pub struct UpgradeCheck {
    /// This binary's version: the one being installed.
    pub to: String,
    /// The running controller's version; `None` when it does not answer.
    pub from: Option<String>,
    /// The state database read.
    pub database: String,
    /// Its schema against this binary's migrations; `None` when there is no database yet.
    pub schema: Option<Schema>,
    /// Each agent the controller knows: (node, version, what happens to it).
    pub agents: Vec<AgentAfter>,
    /// What blocks the upgrade, each with what to do.
    pub blocking: Vec<String>,
}

/// One agent after the upgrade.
#[derive(Debug, Serialize)]
pub struct AgentAfter {
    /// Node.
    pub node: String,
    /// The version it runs now.
    pub version: String,
    /// `same`, `patch-behind` (joins; upgrade it when convenient), `behind` (a minor release
    /// behind: joins; upgrade it after the controller, before the next minor release) or
    /// `refused`.
    pub after: &'static str,
}

/// What happens to agents of `nodes` under a controller of version `to`; the refusals.
pub fn agents_after(nodes: &[NodeView], to: &str) -> (Vec<AgentAfter>, Vec<String>) {
    let mut agents = Vec::new();
    let mut refused = Vec::new();
    for n in nodes.iter().filter(|n| n.agent.is_some()) {
        let Some(version) = &n.agent_version else {
            continue;
        };
        let minor = |v: &str| semver::Version::parse(v).ok().map(|v| (v.major, v.minor));
        let after = match agent_may_join(&n.name, version, to) {
            Ok(()) if version == to => "same",
            Ok(()) if minor(version) == minor(to) => "patch-behind",
            Ok(()) => "behind",
            Err(e @ crate::api::versions::Incompatible::TooOld { .. }) => {
                refused.push(format!(
                    "{e}; or first bring the agent on {} to a version the running controller and {to} both take",
                    n.name
                ));
                "refused"
            }
            Err(e) => {
                refused.push(e.to_string());
                "refused"
            }
        };
        agents.push(AgentAfter {
            node: n.name.clone(),
            version: version.clone(),
            after,
        });
    }
    (agents, refused)
}

/// Runs the check and prints it; Ok(false) when something blocks the upgrade.
pub async fn run(as_json: bool, config: &Config) -> anyhow::Result<bool> {
    let path = config.database_path();
    let schema = if path.exists() {
        Some(
            crate::controller::schema::read(&path)
                .await
                .with_context(|| {
                    format!(
                        "cannot read the state database {} (as root, or the user that runs labpool serve)",
                        path.display()
                    )
                })?,
        )
    } else {
        None
    };
    let mut blocking = Vec::new();
    if let Some(m) = schema.as_ref().and_then(Schema::mismatch) {
        blocking.push(format!("the state database: {m}"));
    }
    let client = Client::new(&config.controller.socket);
    let from = client.get::<Ping>("/v1/ping").await.ok().map(|p| p.version);
    if let Some(from) = &from
        && let (Ok(f), Ok(t)) = (semver::Version::parse(from), semver::Version::parse(THIS))
        && f > t
    {
        blocking.push(format!(
            "the controller runs labpool {from}, newer than this binary's {THIS}: labpool does not go back a version; keep {from}"
        ));
    }
    let nodes: Vec<NodeView> = if from.is_some() {
        client.get("/v1/nodes").await.unwrap_or_default()
    } else {
        Vec::new()
    };
    let (agents, refused) = agents_after(&nodes, THIS);
    blocking.extend(refused);
    let report = UpgradeCheck {
        to: THIS.to_string(),
        from,
        database: path.display().to_string(),
        schema,
        agents,
        blocking,
    };
    print(as_json, &report, text);
    Ok(report.blocking.is_empty())
}

fn text(r: &UpgradeCheck) -> String {
    let mut out = Vec::new();
    out.push(match &r.from {
        Some(from) => format!("upgrade: labpool {from} (running) to {} (this binary)", r.to),
        None => format!(
            "upgrade to labpool {} (this binary); the controller does not answer, so its agents are not checked",
            r.to
        ),
    });
    match &r.schema {
        None => out.push(format!(
            "database: none yet at {}: the first start creates it",
            r.database
        )),
        Some(s) if s.pending.is_empty() => out.push(format!(
            "database: {}, schema {}: nothing to migrate",
            r.database, s.version
        )),
        Some(s) => {
            let names: Vec<String> = s
                .pending
                .iter()
                .map(|(v, name)| format!("{v} {name}"))
                .collect();
            out.push(format!(
                "database: {}, schema {}: the first start applies {} ({}); take a backup first: labpool state backup",
                r.database,
                s.version,
                labpool_units::count(s.pending.len() as u64, "migration"),
                names.join(", ")
            ));
        }
    }
    if let Some(s) = &r.schema {
        out.push(format!(
            "jobs: {} running; they keep running through the restart and are re-adopted",
            s.running_jobs
        ));
    }
    for a in &r.agents {
        out.push(match a.after {
            "same" => format!("agent {}: {}, as the new controller", a.node, a.version),
            "patch-behind" => format!(
                "agent {}: {}, an older patch release: it joins; upgrade it when convenient",
                a.node, a.version
            ),
            "behind" => format!(
                "agent {}: {}, one minor release behind: it joins; upgrade it after the controller",
                a.node, a.version
            ),
            _ => format!("agent {}: {}: REFUSED after the upgrade", a.node, a.version),
        });
    }
    if r.blocking.is_empty() {
        out.push(
            "nothing blocks this upgrade: upgrade the controller first, then the agents".into(),
        );
    } else {
        out.push(format!(
            "{} this upgrade:",
            match r.blocking.len() {
                1 => "1 problem blocks".to_string(),
                n => format!("{n} problems block"),
            }
        ));
        out.extend(r.blocking.iter().map(|b| format!("  {b}")));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, version: &str) -> NodeView {
        let mut n: NodeView = serde_json::from_value(serde_json::json!({
            "name": name, "state": "IDLE", "reason": null, "gpu_source": "none", "gpus": [],
            "gpus_free": 0, "cpus": 1, "cpus_used": 0, "mem_mib": 1, "mem_used_mib": 0,
        }))
        .unwrap();
        n.agent = Some("10.0.0.2:7071".into());
        n.agent_version = Some(version.into());
        n
    }

    #[test]
    fn agents_more_than_a_minor_release_behind_the_new_version_block_it() {
        let nodes = [
            node("a", "0.5.1"),
            node("b", "0.4.0"),
            node("c", "0.3.2"),
            node("d", "0.5.0"),
            node("e", "0.6.0"),
        ];
        let (agents, refused) = agents_after(&nodes, "0.5.1");
        let after: Vec<(&str, &str)> = agents.iter().map(|a| (a.node.as_str(), a.after)).collect();
        assert_eq!(
            after,
            [
                ("a", "same"),
                ("b", "behind"),
                ("c", "refused"),
                ("d", "patch-behind"),
                ("e", "refused")
            ]
        );
        assert_eq!(refused.len(), 2);
        assert!(
            refused[0].contains("first bring the agent on c"),
            "{}",
            refused[0]
        );
        assert!(
            refused[1].contains("upgrade the controller first"),
            "{}",
            refused[1]
        );
    }
}
