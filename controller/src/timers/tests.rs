//! The timer service on a clock of its own: tokio's paused time, so ten minutes pass at once.

use super::*;
use std::sync::Mutex;

/// Wall time that moves with tokio's (paused) clock, from `base`.
struct TestClock {
    base_ms: i64,
    start: tokio::time::Instant,
}

impl Clock for TestClock {
    fn now_ms(&self) -> i64 {
        self.base_ms + self.start.elapsed().as_millis() as i64
    }
}

fn at(text: &str) -> i64 {
    text.parse::<DateTime<Utc>>().unwrap().timestamp_millis()
}

/// Runs recorded as (task, wall time in ms).
type Log = Arc<Mutex<Vec<(String, i64)>>>;

/// A task that runs every minute (seconds field 0, so no time zone matters) and fails its
/// first `failures` runs.
fn task(name: &str, log: &Log, clock: &Arc<TestClock>, failures: usize) -> Task {
    let (name_owned, log, clock) = (name.to_string(), log.clone(), clock.clone());
    let tries = Arc::new(Mutex::new(0usize));
    Task {
        name: name.to_string(),
        schedule: Schedule::parse("0 * * * * *").unwrap(),
        run: Box::new(move || {
            let (name, log, clock, tries) = (
                name_owned.clone(),
                log.clone(),
                clock.clone(),
                tries.clone(),
            );
            Box::pin(async move {
                log.lock().unwrap().push((name.clone(), clock.now_ms()));
                let mut n = tries.lock().unwrap();
                *n += 1;
                if *n <= failures {
                    Err(format!("{name} failed (try {n})"))
                } else {
                    Ok(format!("{name} done"))
                }
            })
        }),
    }
}

async fn run_for(timers: Timers, minutes: u64) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let handle = tokio::spawn(timers.run(stop_rx));
    tokio::time::sleep(Duration::from_secs(minutes * 60 + 30)).await;
    stop_tx.send(true).unwrap();
    handle.await.unwrap();
}

/// When `name` ran, as wall times `HH:MM:SS`.
fn runs(log: &Log, name: &str) -> Vec<String> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, ms)| {
            DateTime::from_timestamp_millis(*ms)
                .unwrap()
                .format("%H:%M:%S")
                .to_string()
        })
        .collect()
}

/// Seconds between consecutive runs of `name`.
fn gaps(log: &Log, name: &str) -> Vec<i64> {
    let times: Vec<i64> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, ms)| *ms)
        .collect();
    times.windows(2).map(|w| (w[1] - w[0]) / 1000).collect()
}

#[tokio::test(start_paused = true)]
async fn tasks_run_on_time_in_order_and_a_failure_is_retried_after_the_pause_alone() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock {
        base_ms: at("2026-12-03T02:59:00.500Z"),
        start: tokio::time::Instant::now(),
    });
    let log: Log = Arc::default();
    let timers = Timers {
        name: "test",
        state_file: dir.path().join("timer.json"),
        tasks: vec![
            task("steady", &log, &clock, 0),
            task("flaky", &log, &clock, 2),
        ],
        clock: clock.clone(),
    };
    run_for(timers, 13).await;
    // First run at its next time (not at start), then every minute.
    let steady = runs(&log, "steady");
    assert_eq!(steady.len(), 13, "{steady:?}");
    assert_eq!(steady[0], "03:00:00");
    assert!(gaps(&log, "steady").iter().all(|g| *g == 60), "{steady:?}");
    // Failed twice, each time tried again after the pause though due every minute
    // meanwhile; then succeeded and is back to every minute.
    let flaky = runs(&log, "flaky");
    assert_eq!(flaky[0], "03:00:00");
    let g = gaps(&log, "flaky");
    assert!(g.len() >= 3, "{flaky:?}");
    assert!(
        (300..=360).contains(&g[0]) && (300..=360).contains(&g[1]),
        "{flaky:?}"
    );
    assert!(g[2..].iter().all(|g| *g == 60), "{flaky:?}");
    // Due together: one at a time, in the order they were added.
    let first_two: Vec<String> = log.lock().unwrap()[..2]
        .iter()
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(first_two, vec!["steady", "flaky"]);
    let state: BTreeMap<String, DateTime<Utc>> =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("timer.json")).unwrap())
            .unwrap();
    assert_eq!(state.len(), 2, "{state:?}");
}

#[tokio::test(start_paused = true)]
async fn a_run_missed_while_down_is_caught_up_once_and_a_new_task_waits_for_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let state_file = dir.path().join("timer.json");
    // The controller was down for an hour: 60 runs missed.
    let mut before = BTreeMap::new();
    before.insert(
        "old",
        "2026-12-03T02:00:00Z".parse::<DateTime<Utc>>().unwrap(),
    );
    std::fs::write(&state_file, serde_json::to_string(&before).unwrap()).unwrap();
    let clock = Arc::new(TestClock {
        base_ms: at("2026-12-03T03:00:20Z"),
        start: tokio::time::Instant::now(),
    });
    let log: Log = Arc::default();
    let timers = Timers {
        name: "test",
        state_file: state_file.clone(),
        tasks: vec![task("old", &log, &clock, 0), task("new", &log, &clock, 0)],
        clock: clock.clone(),
    };
    run_for(timers, 2).await;
    assert_eq!(
        runs(&log, "old"),
        vec!["03:00:20", "03:01:00", "03:02:00"],
        "one catch-up run at start"
    );
    assert_eq!(runs(&log, "new"), vec!["03:01:00", "03:02:00"]);
    // One time for every task (the older file form) is read too.
    std::fs::write(&state_file, "\"2026-12-03T02:00:00Z\"").unwrap();
    let log: Log = Arc::default();
    let timers = Timers {
        name: "test",
        state_file,
        tasks: vec![task("a", &log, &clock, 0), task("b", &log, &clock, 0)],
        clock: clock.clone(),
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let handle = tokio::spawn(timers.run(stop_rx));
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop_tx.send(true).unwrap();
    handle.await.unwrap();
    assert_eq!(log.lock().unwrap().len(), 2, "both caught up at start");
}

#[test]
fn a_failed_run_is_retried_after_a_pause_and_others_are_not_held_up() {
    let task = |name: &str| Task {
        name: name.into(),
        // Every minute (seconds field 0), so the test does not depend on the time zone.
        schedule: Schedule::parse("0 * * * * *").unwrap(),
        run: Box::new(|| Box::pin(async { Ok(String::new()) })),
    };
    let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
    let tasks = vec![task("home"), task("data")];
    let mut last = BTreeMap::new();
    last.insert("home".to_string(), t("2026-12-03T03:00:00Z"));
    last.insert("data".to_string(), t("2026-12-03T03:00:30Z"));
    let names = |v: Vec<usize>| v.iter().map(|i| tasks[*i].name.clone()).collect::<Vec<_>>();
    let mut retry = BTreeMap::new();
    let now = t("2026-12-03T03:01:10Z");
    assert_eq!(
        names(due_now(&tasks, &last, &retry, now)),
        vec!["home", "data"]
    );
    // home failed: not again until its retry time, though still due; data ran.
    retry.insert("home".to_string(), now + RETRY_AFTER);
    last.insert("data".to_string(), now);
    assert!(due_now(&tasks, &last, &retry, t("2026-12-03T03:02:10Z")).len() == 1);
    assert_eq!(
        names(due_now(&tasks, &last, &retry, t("2026-12-03T03:02:10Z"))),
        vec!["data"]
    );
    assert_eq!(
        names(due_now(&tasks, &last, &retry, t("2026-12-03T03:06:10Z"))),
        vec!["home", "data"]
    );
    // A task never seen before is not run at once: its first run is its next time.
    assert!(due_now(&tasks[..1], &BTreeMap::new(), &BTreeMap::new(), now).is_empty());
}
