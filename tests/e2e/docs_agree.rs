//! The READMEs and the book in `docs/` do not contradict themselves or labpool: an option the
//! sbatch table says works is not also listed as refused; no example puts the state directory
//! (database, spool) under `/etc`; the Chinese chapters say where `init` puts homes as the
//! English ones do. The book holds together: `docs/SUMMARY.md` names every chapter in `docs/`
//! and each one it names exists, and every relative link of the READMEs and the book leads to a
//! file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme(name: &str) -> String {
    std::fs::read_to_string(repo().join(name)).unwrap()
}

/// The Markdown files of the book under `docs/`, `under` a folder of it ("" for all).
fn chapters(under: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = walkdir::WalkDir::new(repo().join("docs").join(under))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    out.sort();
    out
}

/// The text of `files`, all together.
fn text_of(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The English chapters' text, all together (the Chinese ones are under `zh-CN/`).
fn english_book() -> String {
    let zh = repo().join("docs/zh-CN");
    let mut files = chapters("");
    files.retain(|p| !p.starts_with(&zh));
    text_of(&files)
}

/// The Chinese chapters' text, all together.
fn chinese_book() -> String {
    text_of(&chapters("zh-CN"))
}

/// The long options named in the first cell of each table row.
fn rows(text: &str) -> Vec<(BTreeSet<String>, String)> {
    text.lines()
        .filter(|l| l.starts_with("| `-"))
        .map(|l| {
            let mut cells = l.split(" | ");
            let first = cells.next().unwrap_or_default();
            let rest: String = cells.collect::<Vec<_>>().join(" | ");
            let options = first
                .split('`')
                .skip(1)
                .step_by(2)
                .flat_map(|o| o.split([',', ' ', '=', '[']))
                .filter(|o| o.starts_with("--"))
                .map(str::to_string)
                .collect();
            (options, rest)
        })
        .collect()
}

#[test]
fn an_option_is_either_supported_or_refused_not_both() {
    // The guides' tables (the generated docs/slurm-compatibility.md has a test of its own).
    let guides: Vec<PathBuf> = ["user", "admin", "reference"]
        .iter()
        .flat_map(|part| chapters(part))
        .collect();
    let text = text_of(&guides);
    let rows = rows(&text);
    let refused: BTreeSet<&String> = rows
        .iter()
        .filter(|(_, what)| what.starts_with("refused"))
        .flat_map(|(o, _)| o)
        .collect();
    for (options, what) in rows.iter().filter(|(_, w)| !w.starts_with("refused")) {
        for o in options {
            assert!(
                !refused.contains(o),
                "the book lists {o} as refused and as \"{what}\""
            );
        }
    }
}

#[test]
fn no_example_keeps_the_state_under_etc_and_both_languages_say_where_homes_go() {
    let texts = [
        ("README.md", readme("README.md")),
        ("README.zh-CN.md", readme("README.zh-CN.md")),
        ("the English book", english_book()),
        ("the Chinese chapters", chinese_book()),
    ];
    for (name, text) in &texts {
        assert!(
            !text.contains("init --dir /etc"),
            "{name}: an example puts the database and spool under /etc"
        );
    }
    let zh = chinese_book();
    assert!(
        !zh.contains("DIR/shared/{datasets,home,scratch}"),
        "the Chinese chapters say init puts homes under DIR/shared/home; it finds the real ones"
    );
    assert!(
        zh.contains("--home-root"),
        "the Chinese chapters name --home-root"
    );
    assert!(english_book().contains("--home-root"));
}

/// The chapters `docs/SUMMARY.md` links to, relative to `docs/`.
fn summary_links() -> Vec<String> {
    let summary = readme("docs/SUMMARY.md");
    links(&summary)
}

/// The relative targets of the Markdown links `[..](target)` in `text`, less their `#anchor`.
fn links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(t, _)| t))
        .filter(|t| !t.contains("://") && !t.starts_with('#') && !t.starts_with("mailto:"))
        .map(|t| t.split('#').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_book_names_every_chapter_and_every_link_leads_somewhere() {
    let docs = repo().join("docs");
    let named: BTreeSet<PathBuf> = summary_links().iter().map(|l| docs.join(l)).collect();
    let mut problems = Vec::new();
    for chapter in &named {
        if !chapter.is_file() {
            problems.push(format!(
                "SUMMARY.md names {} which does not exist",
                chapter.display()
            ));
        }
    }
    for chapter in chapters("") {
        let summary = chapter == docs.join("SUMMARY.md");
        if !summary && !named.contains(&chapter) {
            problems.push(format!("{} is not in docs/SUMMARY.md", chapter.display()));
        }
    }
    let mut pages: Vec<PathBuf> = chapters("");
    pages.push(repo().join("README.md"));
    pages.push(repo().join("README.zh-CN.md"));
    for page in &pages {
        let dir = page.parent().unwrap();
        for link in links(&std::fs::read_to_string(page).unwrap()) {
            if !link.is_empty() && !dir.join(&link).exists() {
                problems.push(format!(
                    "{} links to {link}, which does not exist",
                    page.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
