//! The files the developers' documents name exist: `docs/architecture.md` (one job's path, file
//! by file) and `docs/security.md` (the test that holds each line). A rename or a split that
//! forgets a document fails here.

/// Every `path/with.ext` in backquotes in `doc` that names a source, script or config file
/// (a `::test_name` after it is the test in that file), and those of them that do not exist.
fn named_files(doc: &str) -> (usize, Vec<String>) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(doc)).unwrap();
    let mut named = 0;
    let mut missing = Vec::new();
    for quoted in text.split('`') {
        let path = quoted.split("::").next().unwrap_or_default();
        let is_path = path.contains('/')
            && !path.contains(' ')
            && [".rs", ".sh", ".sql", ".toml", ".py", ".md"]
                .iter()
                .any(|ext| path.ends_with(ext));
        if is_path {
            named += 1;
            if !root.join(path).exists() {
                missing.push(path.to_string());
            }
        }
    }
    (named, missing)
}

#[test]
fn every_file_the_architecture_and_security_documents_name_exists() {
    for (doc, at_least) in [("docs/architecture.md", 20), ("docs/security.md", 5)] {
        let (named, missing) = named_files(doc);
        assert!(
            named > at_least,
            "only {named} files named in {doc}: is the document still there?"
        );
        assert!(
            missing.is_empty(),
            "{doc} names files that do not exist: {missing:?}"
        );
    }
}
