//! The READMEs do not contradict themselves or labpool: an option the sbatch table says works
//! is not also listed as refused; no example puts the state directory (database, spool) under
//! `/etc`; the Chinese README says where `init` puts homes as the English one does.

use std::collections::BTreeSet;

fn readme(name: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap()
}

/// The long options named in the first cell of each table row of the README.
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
    let text = readme("README.md");
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
                "README lists {o} as refused and as \"{what}\""
            );
        }
    }
}

#[test]
fn no_example_keeps_the_state_under_etc_and_both_readmes_say_where_homes_go() {
    for name in ["README.md", "README.zh-CN.md"] {
        let text = readme(name);
        assert!(
            !text.contains("init --dir /etc"),
            "{name}: an example puts the database and spool under /etc"
        );
    }
    let zh = readme("README.zh-CN.md");
    assert!(
        !zh.contains("DIR/shared/{datasets,home,scratch}"),
        "README.zh-CN says init puts homes under DIR/shared/home; it finds the real ones"
    );
    assert!(zh.contains("--home-root"), "README.zh-CN names --home-root");
}
