//! labpool's side of a measurement: this binary re-run as a child process, scanning a tree or
//! planning and executing a purge.

use labpool_quotas::Progress;
use labpool_quotas::purge::{self, PurgeContext, PurgePolicy};
use labpool_quotas::scan::{ScanOptions, scan};
use std::path::Path;
use std::time::Instant;

/// Set to the operation, it makes this binary labpool's side of a measurement.
pub const CHILD: &str = "BENCH_QUOTA_CHILD";

/// labpool's side, in its own process: `BENCH_QUOTA_CHILD=scan exe ROOT THREADS` or
/// `BENCH_QUOTA_CHILD=purge exe ROOT NOW AUDIT THREADS`.
pub fn child(op: &str) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = Path::new(&args[0]);
    let progress = Progress::default();
    match op {
        "scan" => {
            let options = ScanOptions {
                threads: args[1].parse().unwrap(),
                ..Default::default()
            };
            let r = scan(root, &options, &progress).unwrap();
            assert!(r.error_count == 0, "scan errors: {:?}", r.errors);
            let t = r.total();
            println!("{} {} {} {}", t.files, t.bytes, t.apparent, r.users.len());
        }
        "purge" => {
            let ctx = PurgeContext {
                now: args[1].parse().unwrap(),
                protected: vec![],
            };
            let policy = PurgePolicy {
                threads: args[3].parse().unwrap(),
                ..Default::default()
            };
            let t0 = Instant::now();
            let plan = purge::plan(root, &policy, &ctx, &progress).unwrap();
            assert!(plan.errors.is_empty(), "plan errors: {:?}", plan.errors);
            let planned = t0.elapsed().as_secs_f64();
            let file = std::fs::File::create(&args[2]).unwrap();
            let mut audit = std::io::BufWriter::new(file);
            let done = purge::execute(&plan, &ctx, &mut audit, &progress).unwrap();
            audit.into_inner().unwrap().sync_all().unwrap();
            assert!(done.skipped.is_empty(), "skipped: {:?}", done.skipped);
            println!(
                "{} {} {} {:.3} {:.3}",
                plan.delete.len(),
                done.removed.len(),
                plan.warn.len(),
                planned,
                t0.elapsed().as_secs_f64() - planned
            );
        }
        other => panic!("unknown child operation {other}"),
    }
}
