//! The web dashboard in a real browser (headless Chromium over the DevTools protocol) as a
//! member and as an admin: the pool shows the member's running job on its GPU, the queue shows
//! why a job waits, cancel works on one's own job and is refused for another's, restore brings a
//! deleted file back, and the pages follow the browser's language. And its door, by raw HTTP:
//! no session is a login page, a login URL works once and not after it expires, and a form
//! without the session's CSRF token or from another site changes nothing.

use crate::browser::Browser;
use crate::pool::{Pool, ensure_user, have_root, have_tool, read_line, stdout_of};
use serde_json::Value;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// `labpool web --json` as `uid`: the one-time login URL.
fn login_url(pool: &Pool, uid: u32, gid: u32, next: Option<&str>) -> String {
    let mut args = vec!["web", "--json"];
    if let Some(n) = next {
        args.extend(["--next", n]);
    }
    let out = pool.cli_as(uid, gid, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    v["url"].as_str().unwrap().to_string()
}

fn submit_as(pool: &Pool, uid: u32, gid: u32, args: &[&str]) -> u64 {
    let mut all = vec!["submit", "--parsable"];
    all.extend_from_slice(args);
    let out = pool.cli_as(uid, gid, &all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout_of(&out).trim().parse().unwrap()
}

fn state_of(pool: &Pool, id: u64) -> String {
    pool.job(id)["state"].as_str().unwrap().to_string()
}

/// Waits until the browser's page text holds every one of `parts`, reloading it.
fn until_page_has(b: &mut Browser, url: &str, parts: &[&str]) -> String {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        b.open(url);
        let text = b.text();
        if parts.iter().all(|p| text.contains(p)) {
            return text;
        }
        assert!(
            Instant::now() < end,
            "{url} never showed {parts:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn web_base(pool: &Pool) -> String {
    format!(
        "http://{}",
        read_line(&pool.dir.join("state/web.addr")).trim()
    )
}

#[test]
fn members_and_admins_use_the_dashboard_in_a_real_browser() {
    let name = "members_and_admins_use_the_dashboard_in_a_real_browser";
    if !have_root(name) || !have_tool(name, "chromium") {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let (bob, bob_gid) = ensure_user("lp-bob");
    let (admin, admin_gid) = crate::pool::ensure_user_in("lp-admin", Some("labpool-admins"));
    let mut pool = Pool::new("2:rtx4090").for_users();
    let home = pool.dir.join("shared/home/lp-alice");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("notes.md"), "monday's notes").unwrap();
    std::os::unix::fs::chown(&home, Some(alice), Some(alice_gid)).unwrap();
    std::os::unix::fs::chown(home.join("notes.md"), Some(alice), Some(alice_gid)).unwrap();
    pool.start();
    pool.ok(&["snapshot", "create", "--source", "home"]);
    std::fs::remove_file(home.join("notes.md")).unwrap();
    pool.ok(&["snapshot", "create", "--source", "home"]);

    let mine = submit_as(
        &pool,
        alice,
        alice_gid,
        &[
            "--gres=gpu:1",
            "-J",
            "train-a",
            "--wrap",
            "echo hello from alice; sleep 300",
        ],
    );
    let bobs = submit_as(
        &pool,
        bob,
        bob_gid,
        &["--gres=gpu:1", "-J", "train-b", "--wrap", "sleep 300"],
    );
    pool.wait_for(mine, Duration::from_secs(30), |j| j["state"] == "RUNNING");
    pool.wait_for(bobs, Duration::from_secs(30), |j| j["state"] == "RUNNING");
    let waiting = submit_as(
        &pool,
        alice,
        alice_gid,
        &["--gres=gpu:1", "-J", "waits", "--wrap", "true"],
    );

    let mut b = Browser::start("en-US,en;q=0.9");
    b.open(&login_url(&pool, alice, alice_gid, None));
    assert!(
        b.url().ends_with('/'),
        "login lands on the pool page: {}",
        b.url()
    );

    // The pool: alice's job on its GPU.
    let gpu = b.eval(&format!(
        "[...document.querySelectorAll('.gpu')].filter(g => g.innerText.includes('#{mine}')).map(g => g.innerText).join('|')"
    ));
    let gpu = gpu.as_str().unwrap();
    assert!(gpu.contains("lp-alice") && gpu.contains("rtx4090"), "{gpu}");
    b.screenshot("member-pool");

    // The queue: the waiting job and why.
    let text = until_page_has(
        &mut b,
        &format!("{}/queue", web_base(&pool)),
        &[&waiting.to_string(), "Resources"],
    );
    assert!(
        text.contains("Why it waits") && text.contains("Estimated start"),
        "{text}"
    );
    b.screenshot("member-queue");

    // My jobs: the running job's output.
    until_page_has(
        &mut b,
        &format!("{}/jobs", web_base(&pool)),
        &["hello from alice", "train-a"],
    );
    assert!(
        !b.text().contains("train-b"),
        "bob's job is not on alice's list"
    );
    b.screenshot("member-jobs");

    // Bob's job: no cancel button, and a forged post from alice's page is refused by the API.
    b.open(&format!("{}/jobs/{bobs}", web_base(&pool)));
    assert_eq!(b.eval("document.querySelectorAll('form.cancel').length"), 0);
    assert!(
        !b.text().contains("Output"),
        "another member's output is not shown"
    );
    b.then_load(&format!(
        "const f = document.createElement('form'); f.method = 'post'; f.action = '/jobs/{bobs}/cancel';
         f.appendChild(document.querySelector('input[name=csrf]').cloneNode()); document.body.appendChild(f); f.submit();"
    ));
    let text = b.text();
    assert!(
        text.contains("may cancel only your own jobs"),
        "the API's own refusal: {text}"
    );
    b.screenshot("member-cancel-refused");
    assert_eq!(state_of(&pool, bobs), "RUNNING");

    // Alice's own job: cancel from its page.
    b.open(&format!("{}/jobs/{mine}", web_base(&pool)));
    b.then_load("document.querySelector('form.cancel button').click()");
    pool.wait_for(mine, Duration::from_secs(30), |j| j["state"] == "CANCELLED");
    until_page_has(
        &mut b,
        &format!("{}/jobs/{mine}", web_base(&pool)),
        &["CANCELLED"],
    );
    b.screenshot("member-job-cancelled");

    // Snapshots: find the deleted file and restore it.
    let notes = home.join("notes.md");
    b.open(&format!(
        "{}/snapshots?path={}",
        web_base(&pool),
        notes.display()
    ));
    b.screenshot("member-snapshots");
    b.then_load("document.querySelector('form.restore button').click()");
    let progress = b.url();
    until_page_has(&mut b, &progress, &["Done"]);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "monday's notes");

    // The other pages load, and alerts are for admins.
    for (page, heading) in [("/me", "Credits"), ("/data", "Datasets")] {
        b.open(&format!("{}{page}", web_base(&pool)));
        assert!(b.text().contains(heading), "{page}: {}", b.text());
        b.screenshot(&format!("member{}", page.replace('/', "-")));
    }
    b.open(&format!("{}/alerts", web_base(&pool)));
    assert!(b.text().contains("Alerts are for admins."), "{}", b.text());
    assert!(b.text().contains("Log out"));

    // Chinese first, as most members read.
    let mut zh = Browser::start("zh-CN,zh;q=0.9,en;q=0.5");
    zh.open(&login_url(&pool, alice, alice_gid, Some("/jobs")));
    let text = zh.text();
    assert!(
        text.contains("我的作业") && text.contains("最近结束") && text.contains("退出码"),
        "{text}"
    );
    assert_eq!(zh.eval("document.documentElement.lang"), "zh-CN");
    zh.screenshot("member-jobs-zh");

    // An admin sees the alerts page and everyone's jobs on the pool.
    let mut a = Browser::start("en-US");
    a.open(&login_url(&pool, admin, admin_gid, Some("/alerts")));
    let text = a.text();
    assert!(
        text.contains("Firing") && text.contains("Resolved"),
        "{text}"
    );
    a.screenshot("admin-alerts");
    a.open(&format!("{}/", web_base(&pool)));
    assert!(a.text().contains("lp-bob"), "{}", a.text());
    a.screenshot("admin-pool");
}

/// One raw HTTP/1.1 request; returns status, head and body.
fn http(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let addr = base.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    conn.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_string(), body.to_string())
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        l.split_once(": ")
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

#[test]
fn the_dashboard_door_lets_in_only_a_fresh_login_and_its_own_forms() {
    let name = "the_dashboard_door_lets_in_only_a_fresh_login_and_its_own_forms";
    if !have_root(name) {
        return;
    }
    let (alice, alice_gid) = ensure_user("lp-alice");
    let mut pool = Pool::new("1:t4").for_users();
    pool.edit_config(|t| {
        t.replace(
            "# login_token_lifetime = \"2m\"",
            "login_token_lifetime = \"1s\"",
        )
    });
    pool.start();
    let base = web_base(&pool);
    let job = submit_as(
        &pool,
        alice,
        alice_gid,
        &["--gres=gpu:1", "--wrap", "sleep 300"],
    );
    pool.wait_for(job, Duration::from_secs(30), |j| j["state"] == "RUNNING");

    // No session: the login page says what to run, and no page or action is reachable.
    let (status, _, body) = http(&base, "GET", "/", &[], "");
    assert_eq!(status, 401);
    assert!(body.contains("labpool web"), "{body}");
    assert_eq!(
        http(
            &base,
            "POST",
            &format!("/jobs/{job}/cancel"),
            &[("Content-Type", "application/x-www-form-urlencoded")],
            "csrf=x"
        )
        .0,
        401
    );
    assert_eq!(http(&base, "GET", "/login?token=0123abcd", &[], "").0, 401);

    // A login URL works once, and gives an HttpOnly, SameSite=Strict cookie.
    let url = login_url(&pool, alice, alice_gid, None);
    let path = &url[url.find("/login").unwrap()..];
    let (status, head, _) = http(&base, "GET", path, &[], "");
    assert_eq!(status, 303, "{head}");
    let cookie = header(&head, "set-cookie").unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert_eq!(header(&head, "referrer-policy"), Some("same-origin"));
    let session = cookie.split(';').next().unwrap().to_string();
    let (status, _, body) = http(&base, "GET", path, &[], "");
    assert_eq!(status, 401, "a reused login URL is refused");
    assert!(body.contains("expired or was already used"), "{body}");

    // An expired one too.
    let late = login_url(&pool, alice, alice_gid, None);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        http(&base, "GET", &late[late.find("/login").unwrap()..], &[], "").0,
        401
    );

    // The session works; its CSRF token is on the page.
    let (status, head, page) = http(&base, "GET", "/jobs", &[("Cookie", &session)], "");
    assert_eq!(status, 200);
    assert!(
        header(&head, "content-security-policy").is_some_and(|c| c.contains("default-src 'none'"))
    );
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();

    // Forms without the token, with a wrong one, or from another site change nothing.
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    let cancel = format!("/jobs/{job}/cancel");
    for (headers, body) in [
        (vec![("Cookie", session.as_str()), form], String::new()),
        (
            vec![("Cookie", session.as_str()), form],
            "csrf=deadbeef".to_string(),
        ),
        (
            vec![
                ("Cookie", session.as_str()),
                form,
                ("Origin", "http://evil.example"),
            ],
            format!("csrf={csrf}"),
        ),
        (
            vec![
                ("Cookie", session.as_str()),
                form,
                ("Sec-Fetch-Site", "cross-site"),
            ],
            format!("csrf={csrf}"),
        ),
    ] {
        let (status, _, body) = http(&base, "POST", &cancel, &headers, &body);
        assert_eq!(status, 403, "{body}");
    }
    assert_eq!(state_of(&pool, job), "RUNNING");

    // The same form from the page itself works.
    let (status, _, _) = http(
        &base,
        "POST",
        &cancel,
        &[("Cookie", &session), form, ("Origin", &base)],
        &format!("csrf={csrf}"),
    );
    assert_eq!(status, 303);
    pool.wait_for(job, Duration::from_secs(30), |j| j["state"] == "CANCELLED");

    // A login URL cannot send the browser elsewhere.
    let out = pool.cli_as(alice, alice_gid, &["web", "--next", "//evil.example/"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a dashboard page"));
}
