//! The files `docs/architecture.md` names on a job's path exist: a rename or a split that
//! forgets the document fails here.

#[test]
fn every_file_the_architecture_document_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut named = 0;
    let mut missing = Vec::new();
    // Every `path/with.ext` in backquotes that names a source, script or config file.
    for quoted in text.split('`') {
        let is_path = quoted.contains('/')
            && !quoted.contains(' ')
            && [".rs", ".sh", ".sql", ".toml", ".py", ".md"]
                .iter()
                .any(|ext| quoted.ends_with(ext));
        if is_path {
            named += 1;
            if !root.join(quoted).exists() {
                missing.push(quoted);
            }
        }
    }
    assert!(
        named > 20,
        "only {named} files named: is the document still there?"
    );
    assert!(
        missing.is_empty(),
        "docs/architecture.md names files that do not exist: {missing:?}"
    );
}
