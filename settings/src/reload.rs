//! A config file read again while the controller runs (SIGHUP, `systemctl reload labpool`):
//! which sections changed, which of them a running controller takes at once (the scheduling
//! policy), and, for each other one, why it waits for a restart.

use crate::Config;

/// The sections a running controller takes from a reloaded file: the partitions and the
/// policy the scheduler applies to the next job and the next pass. Jobs already queued or
/// running keep what they were admitted with.
pub const LIVE: [&str; 4] = ["partition", "credits", "priority", "preemption"];

/// What differs between the running config and a reloaded one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Changed sections taken at once, as the file names them (`partition`, `credits`).
    pub live: Vec<String>,
    /// Changed sections that take effect at the next restart, each with why.
    pub at_restart: Vec<(String, &'static str)>,
}

/// Why a section is read only at start.
fn why_at_restart(section: &str) -> &'static str {
    match section {
        "controller" => {
            "the socket, the state directory, the listeners and the admin group are set up at start"
        }
        "node" => "this node's cores, memory and GPUs are registered at start",
        "datasets" | "cache" => "the dataset registry and the node cache are opened at start",
        "snapshots" | "quotas" | "purge" => "its timers are scheduled at start",
        "metrics" | "web" => "its listener is bound at start",
        "alerts" | "zombies" | "mail" | "reports" => "its service reads it when it starts",
        "executor" => "who runs jobs is chosen at start",
        "jobs" => "the node launches jobs under the rules it read at start",
        "envs" => "the environment store is opened at start",
        "agent" => "it is read by a node agent at its start",
        _ => "it is read at start",
    }
}

impl Config {
    /// What differs in `new`, section by section, in name order.
    pub fn changes_to(&self, new: &Config) -> Changes {
        let (old, new) = (sections(self), sections(new));
        let mut changes = Changes::default();
        let names = old
            .keys()
            .chain(new.keys().filter(|k| !old.contains_key(*k)));
        for name in names {
            if name == "path" || old.get(name) == new.get(name) {
                continue;
            }
            if LIVE.contains(&name.as_str()) {
                changes.live.push(name.clone());
            } else {
                changes
                    .at_restart
                    .push((name.clone(), why_at_restart(name)));
            }
        }
        changes
    }

    /// This config with the [`LIVE`] sections of `new`.
    pub fn with_live_from(&self, new: &Config) -> Config {
        Config {
            partitions: new.partitions.clone(),
            credits: new.credits.clone(),
            priority: new.priority.clone(),
            preemption: new.preemption.clone(),
            ..self.clone()
        }
    }
}

/// The config's sections as values, by the name the file gives them.
fn sections(c: &Config) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(c) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;
    use std::path::Path;

    const BASE: &str = "[controller]\nstate_dir = \"/s\"\nsocket = \"/s/sock\"\n[metrics]\nlisten = \"off\"\n[[partition]]\nname = \"debug\"\ndefault = true\ndefault_time = \"30:00\"\nmax_time = \"1:00:00\"\n";

    #[test]
    fn a_reload_names_what_changes_live_and_why_the_rest_waits() {
        let old = Config::parse(BASE, Path::new("/etc/labpool/labpool.toml")).unwrap();
        let text = BASE
            .replace("max_time = \"1:00:00\"", "max_time = \"3:00:00\"")
            .replace("listen = \"off\"", "listen = \"127.0.0.1:9999\"")
            + "[credits]\nmonthly_grant = 5\n";
        let new = Config::parse(&text, Path::new("/etc/labpool/labpool.toml")).unwrap();
        let changes = old.changes_to(&new);
        assert_eq!(changes.live, ["credits", "partition"]);
        assert_eq!(
            changes.at_restart,
            [("metrics".to_string(), "its listener is bound at start")]
        );
        let merged = old.with_live_from(&new);
        assert_eq!(merged.credits.monthly_grant, 5.0);
        assert_eq!(merged.metrics.listen, old.metrics.listen);
        assert!(old.changes_to(&old).live.is_empty());
    }
}
