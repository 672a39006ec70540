//! The binary's layers, held by a test until they are crates of their own: the controller and
//! the node agent never import each other (they meet through `api`, the wire types, and
//! `embedded`, the in-process node).

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
fn the_controller_and_the_agent_never_import_each_other() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut crossings = Vec::new();
    for (from, other) in [("controller", "agent"), ("agent", "controller")] {
        let files = sources(&src.join(from));
        assert!(files.len() > 10, "src/{from} has {} files", files.len());
        for (path, text) in files {
            for (n, line) in text.lines().enumerate() {
                if line.contains(&format!("crate::{other}::"))
                    || line.contains(&format!("crate::{other};"))
                {
                    crossings.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        crossings.is_empty(),
        "the controller and the agent import each other:\n{}",
        crossings.join("\n")
    );
}
