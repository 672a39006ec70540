//! `history` answers in pages: no request makes the controller build an answer that grows with
//! the whole history, and paging with `after=` visits every job once.

use crate::pool::{Pool, get_raw, has, wait_until};
use std::time::Duration;

#[test]
fn history_is_paged_with_a_cursor_and_a_page_has_a_cap() {
    let mut pool = Pool::new("1:t4");
    pool.start();
    pool.ok(&["submit", "--array", "0-4", "-c", "1", "--wrap", "true"]);
    wait_until(
        Duration::from_secs(30),
        || pool.history().len() >= 5,
        || format!("{:?}", pool.queue()),
    );
    let sock = pool.dir.join("labpool.sock");
    let (status, answer) = get_raw(&sock, "/v1/history?limit=4294967295");
    assert_eq!(status, 400, "{answer}");
    has(
        answer["error"].as_str().unwrap(),
        &["a page holds 1 to 1000 jobs"],
    );

    let (_, all) = get_raw(&sock, "/v1/history");
    let ids = |page: &serde_json::Value| -> Vec<u64> {
        page["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_u64().unwrap())
            .collect()
    };
    let everything = ids(&all);
    assert_eq!(everything.len(), 5, "{all}");
    assert!(all["next"].is_null(), "{all}");
    let mut paged = Vec::new();
    let mut path = "/v1/history?limit=2".to_string();
    let mut pages = 0;
    loop {
        let (status, page) = get_raw(&sock, &path);
        assert_eq!(status, 200, "{page}");
        paged.extend(ids(&page));
        pages += 1;
        match page["next"].as_str() {
            Some(next) => path = format!("/v1/history?limit=2&after={next}"),
            None => break,
        }
    }
    assert_eq!(paged, everything, "every job once, newest first");
    assert_eq!(pages, 3);
    let (status, answer) = get_raw(&sock, "/v1/history?after=nonsense");
    assert_eq!(status, 400, "{answer}");

    // Only the jobs named (the array's id: all its tasks), by index; bad ids all named. The
    // array's id is also its first task's, so a task other than the first is named alone.
    let array = all["jobs"][0]["array_id"].as_u64().unwrap();
    let task = *everything.iter().find(|id| **id != array).unwrap();
    let (_, named) = get_raw(&sock, &format!("/v1/history?ids={task},999"));
    assert_eq!(ids(&named), [task], "{named}");
    let (_, tasks) = get_raw(&sock, &format!("/v1/history?ids={array}"));
    assert_eq!(ids(&tasks).len(), 5, "{tasks}");
    let (status, answer) = get_raw(&sock, "/v1/history?ids=1,x,-2");
    assert_eq!(status, 400, "{answer}");
    has(
        answer["error"].as_str().unwrap(),
        &["x, -2 are not job ids"],
    );
    let many: Vec<String> = (0..1001).map(|i| i.to_string()).collect();
    let (status, answer) = get_raw(&sock, &format!("/v1/steps?ids={}", many.join(",")));
    assert_eq!(status, 400, "{answer}");
    has(answer["error"].as_str().unwrap(), &["at most 1000"]);

    let three = pool.ok(&["history", "--limit", "3", "--json"]);
    let three: Vec<serde_json::Value> = serde_json::from_str(&three).unwrap();
    assert_eq!(three.len(), 3);
}
