//! The binary's layers, as crates the compiler holds apart. From the bottom:
//! - the domain libraries (`scheduler/`, `lifecycle/`, `cache/`, `snapshots/`, …);
//! - `api/` (the wire types), `settings/` (the config file), `host/` (this machine), `link/`
//!   (how the parts talk);
//! - the node agent with the shim (`agent/`) and the web dashboard (`web/`);
//! - the controller (`controller/`, with the Slurm gate and the snapshot copies), over the
//!   dashboard but never the agent: the binary hands it the agent's start function;
//! - the command line (`cli/`: the arguments, a command for each, interactive sessions), over
//!   the controller, the agent and the web;
//! - Slurm's command names (`slurm_commands/`), over the CLI, which never depends on them;
//! - the binary (`src/`), which wires the last two.
//!
//! Cargo refuses a cycle, so dependencies already point one way; this test holds which way, so
//! that the controller and the agent never come to depend on each other, and no layer on one
//! above it.

/// The labpool crates `krate`'s manifest depends on (normal and dev dependencies).
fn labpool_deps(krate: &str) -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join(krate).join("Cargo.toml")).unwrap();
    manifest
        .lines()
        .filter_map(|l| l.split(['.', '=', ' ']).next())
        .filter(|name| name.starts_with("labpool-"))
        .map(str::to_string)
        .collect()
}

const LIBRARIES: [&str; 14] = [
    "labpool-units",
    "labpool-gpu-slice",
    "labpool-isolation",
    "labpool-scheduler",
    "labpool-lifecycle",
    "labpool-cache",
    "labpool-snapshots",
    "labpool-quotas",
    "labpool-envs",
    "labpool-cluster",
    "labpool-monitor",
    "labpool-reports",
    "labpool-sim",
    "labpool-testkit",
];

#[test]
fn each_layer_depends_only_on_the_layers_below_it() {
    let shared = [
        "labpool-api",
        "labpool-settings",
        "labpool-host",
        "labpool-link",
    ];
    let above_the_nodes = [
        "labpool-api",
        "labpool-settings",
        "labpool-host",
        "labpool-link",
        "labpool-web",
        "labpool-agent",
        "labpool-controller",
    ];
    let layers: [(&str, &[&str]); 9] = [
        ("api", &[]),
        ("settings", &[]),
        ("host", &["labpool-api", "labpool-settings"]),
        ("link", &["labpool-api", "labpool-settings", "labpool-host"]),
        ("agent", &shared),
        ("web", &shared),
        (
            "controller",
            &[
                "labpool-api",
                "labpool-settings",
                "labpool-host",
                "labpool-link",
                "labpool-web",
            ],
        ),
        ("cli", &above_the_nodes),
        ("slurm_commands", &["labpool-cli"]),
    ];
    let mut problems = Vec::new();
    for (krate, allowed) in layers {
        let deps = labpool_deps(krate);
        assert!(
            !deps.is_empty(),
            "{krate}/Cargo.toml names no labpool crate"
        );
        for dep in deps {
            if !allowed.contains(&dep.as_str()) && !LIBRARIES.contains(&dep.as_str()) {
                problems.push(format!("{krate}/ depends on {dep}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
