//! The binary's layers. The node agent (`agent/`, with the shim) and the web dashboard (`web/`)
//! are crates of their own, which depend on the wire types (`api/`) and the links (`link/`) but
//! not on the binary, so the compiler keeps them from importing the controller. The controller is still a module of the
//! binary: this test holds the other direction until it is a crate too. The two meet through
//! `labpool_api` and, for the in-process node, `labpool_link::embedded`.

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                out.push((p, text));
            }
        }
    }
    out
}

#[test]
fn the_controller_never_imports_the_agent() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = sources(&root.join("src/controller"));
    assert!(files.len() > 10, "src/controller has {} files", files.len());
    let mut crossings = Vec::new();
    for (path, text) in files {
        for (n, line) in text.lines().enumerate() {
            let crosses = ["crate::agent", "crate::shim", "labpool_agent"]
                .iter()
                .any(|name| line.contains(name));
            if crosses {
                crossings.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        crossings.is_empty(),
        "the controller imports the agent:\n{}",
        crossings.join("\n")
    );
}

/// The agent's and the dashboard's crates list no dependency on the binary, on each other, or on
/// anything that holds the controller: what the compiler enforces, stated where a reader of the
/// tree will look.
#[test]
fn the_agent_and_the_dashboard_depend_only_on_the_layers_below_them() {
    for krate in ["agent", "web"] {
        check_below(krate);
    }
}

fn check_below(krate: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join(krate).join("Cargo.toml")).unwrap();
    let deps: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.split(['.', '=', ' ']).next())
        .filter(|name| name.starts_with("labpool"))
        .collect();
    assert!(deps.contains(&"labpool-api"), "{deps:?}");
    let below = [
        "labpool-api",
        "labpool-host",
        "labpool-link",
        "labpool-settings",
        "labpool-units",
        "labpool-isolation",
        "labpool-scheduler",
        "labpool-lifecycle",
        "labpool-cache",
        "labpool-snapshots",
        "labpool-envs",
        "labpool-cluster",
        "labpool-monitor",
        "labpool-reports",
        "labpool-testkit",
    ];
    let above: Vec<&&str> = deps.iter().filter(|d| !below.contains(d)).collect();
    assert!(above.is_empty(), "{krate}/ depends on {above:?}");
}
