//! Submit fields a member sets, sent as the attacks sent them (a raw API body where the CLI
//! would stop them): a batch job that calls itself interactive to dodge preemption, half price
//! for `--preemptible` on jobs nothing can preempt, a login-shell timeout of 136 years, control
//! characters in a comment that `show` prints to other members, and a `--mail-user` that
//! forges lines in the controller's log. Each is refused with what was wrong; nothing is queued.

use crate::pool::{Pool, fails_stderr, has, post_raw, s};

#[test]
fn member_set_fields_cannot_dodge_preemption_or_reach_others_raw() {
    let mut pool = Pool::new("2:t4");
    pool.edit_config(|t| t.replacen("[jobs]\n", "[jobs]\ninteractive_idle = \"10m\"\n", 1));
    pool.start();
    let sock = pool.dir.join("labpool.sock");
    let base = serde_json::json!({
        "name": "train",
        "script": "#!/bin/sh\npython train.py\n",
        "workdir": pool.work,
        "gpus": 1,
    });
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut b = base.clone();
        f(&mut b);
        b
    };
    let session = "#!/bin/sh\nexec labpool session-host --socket /tmp/x/s.sock --idle 999999s -- python train.py\n";
    let cases = [
        (
            with(&|b| b["interactive"] = true.into()),
            vec!["interactive: only a session started by `labpool run --pty`"],
        ),
        (
            with(&|b| {
                b["interactive"] = true.into();
                b["script"] = session.into();
            }),
            vec!["idle limit (999999 s) is longer than the pool's [jobs] interactive_idle (600 s)"],
        ),
        (
            with(&|b| {
                b["preemptible"] = true.into();
                b["emergency"] = true.into();
                b["reservation"] = "r".into();
            }),
            vec![
                "an emergency job (--emergency) is never preempted",
                "a job in a reservation is never preempted",
            ],
        ),
        (
            with(&|b| b["get_user_env"] = 4_294_967_295u32.into()),
            vec!["get_user_env: 4294967295 s; the login shell may be given 1 to 600 s"],
        ),
        (
            with(&|b| b["comment"] = "fine\u{1b}]0;pwned\u{7}\r\n".into()),
            vec!["--comment holds the control character '\\u{1b}'"],
        ),
        (
            with(&|b| {
                b["mail_user"] = "alice\nINFO labpool: admin granted lp-bob 1000 credits".into()
            }),
            vec!["--mail-user \"alice\\nINFO"],
        ),
    ];
    for (body, expected) in cases {
        let (status, answer) = post_raw(&sock, "/v1/jobs", &body);
        assert_eq!(status, 400, "{body}: {answer}");
        let error = answer["error"].as_str().unwrap();
        has(error, &["the job was not queued"]);
        has(error, &expected);
    }
    // The CLI gives the same answers.
    let err = fails_stderr(&pool, &["run", "--pty", "--preemptible", "bash"]);
    has(
        &err,
        &["--preemptible: an interactive session is never preempted"],
    );
    let err = fails_stderr(
        &pool,
        &["submit", "--emergency", "--preemptible", "--wrap", "true"],
    );
    has(&err, &["an emergency job (--emergency) is never preempted"]);
    assert!(pool.queue().is_empty());
    assert!(pool.history().is_empty());

    // What is fine still goes in: a real session's script within the pool's idle limit.
    let (status, answer) = post_raw(
        &sock,
        "/v1/jobs",
        &with(&|b| {
            b["interactive"] = true.into();
            b["gpus"] = 0.into();
            b["script"] =
                "#!/bin/sh\nexec labpool session-host --socket /tmp/x/s.sock --idle 600s -- true\n"
                    .into();
        }),
    );
    assert_eq!(status, 200, "{answer}");
    let id = answer["job_id"].as_u64().unwrap();
    assert_eq!(s(&pool.job(id), "name"), "train");

    // A path is text a member chose too: `show` prints its escape sequences as text.
    let odd = pool.work.join("w\u{1b}]0;owned\u{7}\r");
    std::fs::create_dir(&odd).unwrap();
    let out = pool
        .command(&["submit", "--parsable", "--hold", "--wrap", "true"])
        .current_dir(&odd)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let held = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let shown = pool.ok(&["show", &held]);
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\r'),
        "{shown:?}"
    );
    assert!(shown.contains("w\\u{1b}]0;owned\\u{7}\\u{d}"), "{shown}");
    pool.stop();
}
