//! Reservations through the real binary: booked GPUs are kept from jobs that would still run
//! when the window opens, a job submitted into the reservation waits for its start and then
//! runs on its GPUs, bookings survive a controller crash, and bad requests change nothing.

use crate::pool::{Pool, fails_stderr, has, read_output, s};
use serde_json::Value;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

#[test]
fn a_reservation_keeps_its_gpu_for_its_jobs_from_its_start() {
    let mut pool = Pool::new("2:t4");
    pool.edit_config(|t| t.replace("grace = \"2m\"", "grace = \"2s\""));
    pool.start();
    let booked = pool.ok(&[
        "reservation",
        "create",
        "demo",
        "--start",
        "now+6seconds",
        "--duration",
        "10:00",
        "--gpus",
        "1",
        "--users",
        "root",
    ]);
    has(&booked, &["reservation demo booked: GPUs 0 on"]);
    let opened = Instant::now() + Duration::from_secs(6);
    // Every problem of a bad booking at once, and nothing booked.
    let err = fails_stderr(
        &pool,
        &[
            "reservation",
            "create",
            "demo",
            "--start",
            "now+1hour",
            "--duration",
            "10:00",
            "--gpus",
            "9",
        ],
    );
    has(&err, &["demo exists", "--users U,... or --account A"]);
    // A job into the reservation waits for it; an hour-long job may not take GPU 0, which the
    // reservation needs in 5 s, so it takes GPU 1 and a second one waits.
    let inside = pool.submit(&[
        "--reservation",
        "demo",
        "--gpus",
        "1",
        "--time",
        "5:00",
        "--wrap",
        "echo gpus=$CUDA_VISIBLE_DEVICES",
    ]);
    let long = pool.submit(&["--gpus", "1", "--time", "1:00:00", "--wrap", "sleep 300"]);
    let l = pool.wait_for(long, T, |j| s(j, "state") == "RUNNING");
    assert_eq!(l["gpus"], serde_json::json!([1]), "{l:#}");
    // A preemptible job may use the reserved GPU until a grace before the window.
    let cheap = pool.submit(&[
        "--preemptible",
        "--gpus",
        "1",
        "--time",
        "1:00:00",
        "--wrap",
        "sleep 300",
    ]);
    let c = pool.wait_for(cheap, T, |j| s(j, "state") == "RUNNING");
    assert_eq!(c["gpus"], serde_json::json!([0]), "{c:#}");
    let second = pool.submit(&["--gpus", "1", "--time", "1:00:00", "--wrap", "sleep 300"]);
    let w = pool.wait_for(inside, T, |j| s(j, "reason") == "Reservation");
    assert!(s(&w, "reason_detail").contains("waits for reservation demo to start"));
    let list: Value = serde_json::from_str(&pool.ok(&["reservation", "list", "--json"])).unwrap();
    assert_eq!(list[0]["state"], "upcoming");
    assert_eq!(list[0]["gpus"], serde_json::json!([0]));
    has(&pool.ok(&["nodes"]), &["Reservations", "demo", "upcoming"]);
    // Booked over a crash.
    pool.kill9();
    pool.start();
    let done = pool.wait_done(inside, T);
    assert!(Instant::now() >= opened, "it ran before the window opened");
    assert_eq!(s(&done, "state"), "COMPLETED");
    assert_eq!(
        read_output(&pool.work.join(format!("labpool-{inside}.out"))).trim(),
        "gpus=0"
    );
    assert_eq!(
        s(&pool.job(second), "state"),
        "PENDING",
        "GPU 0 stays booked"
    );
    let c = pool.job(cheap);
    assert_eq!(
        s(&c, "state"),
        "PENDING",
        "stopped before the window: {c:#}"
    );
    has(
        &pool.ok(&["show", &cheap.to_string()]),
        &["preempted for a reservation (reservation demo opens)"],
    );
    // Refused submits name the problem; nothing is queued.
    let err = fails_stderr(
        &pool,
        &[
            "submit",
            "--reservation",
            "demo",
            "--time",
            "20:00",
            "--wrap",
            "true",
        ],
    );
    has(&err, &["longer than reservation demo"]);
    let err = fails_stderr(
        &pool,
        &["submit", "--reservation", "nope", "--wrap", "true"],
    );
    has(&err, &["no reservation \"nope\"; reservations: demo"]);
    has(
        &pool.ok(&["reservation", "delete", "demo"]),
        &["reservation demo deleted"],
    );
    has(&pool.ok(&["reservation", "list"]), &["no reservations"]);
    // With the booking gone, the preempted job (first in line) takes GPU 0 again.
    pool.wait_for(cheap, T, |j| {
        s(j, "state") == "RUNNING" && j["attempt"] == 2
    });
    for id in [long, second, cheap] {
        pool.ok(&["cancel", &id.to_string()]);
    }
}
