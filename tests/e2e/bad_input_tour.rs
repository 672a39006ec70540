//! A newcomer's wrong turns, each command's whole standard error in one snapshot
//! (`tests/e2e/shown/bad_input_tour.snap`, paths filtered), so every message can be read and
//! reviewed in one place (see [`crate::shown`] for how to accept a change made on purpose).

use crate::pool::Pool;
use crate::shown::assert_shown;

#[test]
fn the_bad_input_tour_says_what_went_wrong_and_what_to_do() {
    let mut pool = Pool::new("2:t4");
    pool.start();
    let dir = pool.dir.display().to_string();
    let tour: Vec<Vec<&str>> = vec![
        vec!["submit"],
        vec!["submit", "no-such-script.sh"],
        vec!["submit", "--gpus", "9", "--wrap", "true"],
        vec!["submit", "--mem", "1.5G", "--wrap", "true"],
        vec!["submit", "--time", "99-00:00:00", "--wrap", "true"],
        vec!["submit", "-o", "no-such-dir/%j.out", "--wrap", "true"],
        vec!["submit", "--dataset", "nope", "--wrap", "true"],
        vec!["submit", "--dependency", "afterok:999", "--wrap", "true"],
        vec!["show", "999"],
        vec!["cancel", "999"],
        vec!["snapshot", "find", "/etc/passwd"],
        vec!["snapshot", "restore", "/etc/passwd"],
        vec!["snapshot", "restore", "/etc/passwd", "--at", "last tuesday"],
        vec!["snapshot", "ls", "ffffffff"],
        vec!["quota", "set", "lp-nobody-here", "--home", "1G"],
        vec!["quota", "set", "root", "--home", "-5G"],
        vec![
            "quota", "set", "root", "--fs", "home", "--soft", "2G", "--hard", "1G",
        ],
        vec!["dataset", "add", "x", "/nonexistent"],
        vec!["env", "create", "x", "--file", "no-such-requirements.txt"],
        vec!["--config", "/nonexistent/labpool.toml", "queue"],
    ];
    let mut shown = String::new();
    let mut walk = |tour: &[Vec<&str>], filters: &[(String, &str)]| {
        for args in tour {
            let out = pool.cli(args);
            assert!(!out.status.success(), "labpool {args:?} succeeded");
            let mut stderr = String::from_utf8_lossy(&out.stderr)
                .replace(&dir, "[DIR]")
                .replace(&std::env::var("HOME").unwrap_or_default(), "[HOME]");
            for (from, to) in filters {
                stderr = stderr.replace(from.as_str(), to);
            }
            let mut line = args.join(" ").replace(&dir, "[DIR]");
            for (from, to) in filters {
                line = line.replace(from.as_str(), to);
            }
            shown.push_str(&format!(
                "$ labpool {line}\n[exit {}]\n{}\n",
                out.status.code().unwrap_or(-1),
                stderr.trim_end()
            ));
        }
    };
    walk(&tour, &[]);

    // With a snapshot of home: what is not in it, and what it does not cover.
    let home = pool.dir.join("shared/home");
    std::fs::create_dir_all(home.join("alice")).unwrap();
    std::fs::write(home.join("alice/notes.txt"), "n").unwrap();
    pool.ok(&["snapshot", "create", "--source", "home"]);
    let list: serde_json::Value =
        serde_json::from_str(&pool.ok(&["snapshot", "list", "--json"])).unwrap();
    let id = list[0]["id"].as_str().unwrap().to_string();
    let gone = home.join("alice/thesis.tex").display().to_string();
    let short = id[..8].to_string();
    let second = vec![
        vec!["snapshot", "find", "/etc/passwd"],
        vec!["snapshot", "restore", "/etc/passwd"],
        vec!["snapshot", "restore", gone.as_str()],
        vec!["snapshot", "restore", gone.as_str(), "--at", "2000-01-01"],
        vec!["snapshot", "restore", gone.as_str(), "--at", short.as_str()],
        vec!["snapshot", "ls", short.as_str(), gone.as_str()],
        vec!["snapshot", "ls", short.as_str(), "/etc"],
    ];
    walk(&second, &[(short.clone(), "[SNAP]")]);
    // Nothing above changed anything.
    assert!(pool.queue().is_empty());
    assert!(pool.history().is_empty());
    assert_shown("bad_input_tour", &pool.dir, &shown);
}
