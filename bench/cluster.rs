//! Several nodes on one machine: how fast a controller places jobs on three `labpool agent`
//! processes against one `labpool serve` box with as many GPUs, and how long one dataset takes
//! to reach three node caches with and without staging from a peer, against `rsync -a`, in one
//! run, with medians and ratios.
//!
//! ```text
//! cargo bench --bench cluster                      # as root: agents run jobs as their owners
//! BENCH_RUNS=3 BENCH_JOBS=600 BENCH_DATASET_MB=96 BENCH_BW=16M cargo bench --bench cluster
//! BENCH_PARTS=place (or stage) cargo bench --bench cluster    # one part only
//! ```
//!
//! Placement: a controller with `local_node = false` and three agents of 4 virtual GPUs each
//! (joined over signed HTTP on loopback), against `labpool init --virtual-gpus 12:t4` and a
//! plain `labpool serve` (its agent in-process). Each gets one array of BENCH_JOBS one-GPU tasks
//! running `true`, submitted through the API on the Unix socket. Placements per second: the
//! tasks over the time from just before the submit to the last task's recorded start. Fresh
//! pools for every run.
//!
//! Staging: a dataset of BENCH_DATASET_MB MB in 48 files of random bytes under the controller's
//! datasets root, registered, then warmed (`POST /v1/cache/stage`, what `labpool cache stage`
//! sends) onto three agents whose `[cache] bandwidth` is BENCH_BW (bytes/s read from the shared
//! source, per node). Without peers: all three at once, none holding it. With peers: node1
//! first, then node2 and node3 at once; the controller names node1 as their peer and they pull
//! from it over HTTP (not held to the limit). Timed from the request to the version complete on
//! every node (polled every 20 ms). A fresh cluster for every way and run. Bytes from the
//! source and from the peer are each agent's own stage report, from the `staged` line it logs
//! (the controller keeps a warm-up's report nowhere).
//!
//! The peer tool: `rsync -a --bwlimit` (KiB/s equal to the limit) from the source into three
//! directories at once; and rsync chained the way peer staging works (one copy at the limit,
//! then two unlimited copies from it). rsync leaves its copies in the page cache, a staged
//! version is synced before it is complete: the "+ sync" column adds the flush.
//!
//! This file runs the two parts and prints their tables; the labpool processes are in
//! `cluster/daemon.rs`, the pool under test in `cluster/pool.rs`, the agents' stage reports in
//! `cluster/report.rs` and rsync in `cluster/rsync.rs`.

use std::path::{Path, PathBuf};
use std::time::Instant;

#[path = "common.rs"]
mod common;
#[path = "cluster/daemon.rs"]
mod daemon;
#[path = "cluster/pool.rs"]
mod pool;
#[path = "cluster/report.rs"]
mod report;
#[path = "cluster/rsync.rs"]
mod rsync;

use common::{bench_base, env_num, median, scratch_dir};
use pool::Pool;
use report::Report;
use rsync::{rsync_all, sync_time};

/// A rate such as `16M` (bytes per second in labpool's size grammar: 16 MiB/s).
fn parse_rate(s: &str) -> u64 {
    labpool_units::parse_rate(s).expect("BENCH_BW: a rate such as 16M") as u64
}

fn placement(rt: &tokio::runtime::Runtime, base: &Path, runs: usize) {
    let n: usize = env_num("BENCH_JOBS", 600);
    println!("placement: one array of {n} one-GPU tasks (`true`), {runs} runs, fresh pools each");
    let (mut multi, mut boxed) = (Vec::new(), Vec::new());
    let (mut multi_end, mut box_end) = (Vec::new(), Vec::new());
    let mut complaints = Vec::new();
    for r in 0..runs {
        // Which goes first alternates from run to run.
        let mut order = [true, false];
        if r % 2 == 1 {
            order.reverse();
        }
        let (mut start, mut end, mut bstart, mut bend) = (0.0, 0.0, 0.0, 0.0);
        for agents in order {
            let pool = if agents {
                Pool::cluster(rt, base, 3, "4:t4", None)
            } else {
                Pool::one_box(rt, base, "12:t4")
            };
            let (s, e) = pool.place(rt, n);
            complaints.extend(pool.complaints());
            drop(pool);
            if agents {
                (start, end) = (s, e);
            } else {
                (bstart, bend) = (s, e);
            }
        }
        multi.push(n as f64 / start);
        multi_end.push(end);
        boxed.push(n as f64 / bstart);
        box_end.push(bend);
        println!(
            "  run {} ({} first): 3 agents: last start {start:.2} s ({:.0}/s), last end {end:.2} s; one box: last start {bstart:.2} s ({:.0}/s), last end {bend:.2} s",
            r + 1,
            if r % 2 == 0 { "3 agents" } else { "one box" },
            multi[r],
            boxed[r]
        );
    }
    let (m, b) = (median(multi), median(boxed));
    let (me, be) = (median(multi_end), median(box_end));
    println!();
    println!(
        "| {n} one-GPU tasks, one array (median of {runs}) | 3 agents x 4 GPUs | one box, 12 GPUs | 3 agents / one box |"
    );
    println!("|---|---|---|---|");
    println!(
        "| placements per second (submit to last start) | {m:.0}/s | {b:.0}/s | {:.2}x |",
        m / b
    );
    println!(
        "| submit to last task ended | {me:.2} s | {be:.2} s | {:.2}x |",
        be / me
    );
    println!("(Slurm is not run here: bench/slurm/start.sh makes one node of 2 GPUs)");
    print_complaints(&complaints);
}

fn print_complaints(complaints: &[String]) {
    if complaints.is_empty() {
        println!("no warnings or errors in the logs");
        return;
    }
    println!(
        "{} warnings or errors in the logs, for example:",
        complaints.len()
    );
    let mut seen = std::collections::BTreeSet::new();
    for c in complaints {
        // One line per kind: the text after the timestamp, without numbers that vary.
        let kind: String = c
            .split_once(" WARN ")
            .or_else(|| c.split_once(" ERROR "))
            .map_or(c.as_str(), |(_, rest)| rest)
            .chars()
            .filter(|ch| !ch.is_ascii_digit())
            .take(80)
            .collect();
        if seen.insert(kind) && seen.len() <= 8 {
            println!("  {c}");
        }
    }
}

fn staging(rt: &tokio::runtime::Runtime, base: &Path, runs: usize) {
    let mb: f64 = env_num("BENCH_DATASET_MB", 96.0);
    let bw_text = std::env::var("BENCH_BW").unwrap_or_else(|_| "16M".into());
    let bw = parse_rate(&bw_text);
    let kib = bw / 1024;
    let third = format!("{}", bw / 3);
    println!(
        "staging: {mb} MB in 48 files onto 3 nodes, each reading the source at {bw_text} ({bw} B/s; rsync --bwlimit={kib}), {runs} runs, fresh clusters each"
    );
    #[derive(Default)]
    struct Way {
        secs: Vec<f64>,
        source: Vec<f64>,
        peer: Vec<f64>,
        sync: Vec<f64>,
    }
    let (mut nopeer, mut peer, mut shared) = (Way::default(), Way::default(), Way::default());
    let (mut first, mut rest) = (Vec::new(), Vec::new());
    let (mut rs, mut rs_chain, mut rs_shared) = (Way::default(), Way::default(), Way::default());
    let mut complaints = Vec::new();
    let mut fallbacks = Vec::new();
    let sum = |rs: &[Report], f: fn(&Report) -> u64| rs.iter().map(f).sum::<u64>() as f64;
    let check = |what: &str, reports: &[Report], nodes: usize| {
        let counts: Vec<usize> = reports.iter().map(|r| r.count).collect();
        if counts.iter().filter(|c| **c == 1).count() != nodes {
            println!("  note: {what}: stage reports seen per agent {counts:?}");
        }
    };
    for r in 0..runs {
        let seed = 0x5eed_0000 + r as u64;
        // Without peers: all three at once from the source.
        let pool = Pool::cluster(rt, base, 3, "4:t4", Some(&bw_text));
        pool.add_dataset(rt, "bench", mb, seed);
        let (t, nodes) = pool.stage(rt, "bench", None);
        assert_eq!(nodes.len(), 3, "queued on {nodes:?}");
        let reports = pool.reports();
        check("without peers", &reports, 3);
        nopeer.secs.push(t);
        nopeer.source.push(sum(&reports, |r| r.bytes_copied));
        nopeer.peer.push(sum(&reports, |r| r.bytes_from_peer));
        complaints.extend(pool.complaints());
        drop(pool);

        // With peers: node1 from the source, then node2 and node3 from node1.
        let pool = Pool::cluster(rt, base, 3, "4:t4", Some(&bw_text));
        pool.add_dataset(rt, "bench", mb, seed);
        let (t1, nodes1) = pool.stage(rt, "bench", Some("node1"));
        assert_eq!(nodes1, ["node1"]);
        let (t2, nodes2) = pool.stage(rt, "bench", None);
        assert_eq!(nodes2, ["node2", "node3"]);
        let reports = pool.reports();
        check("with peers", &reports, 3);
        for (name, rep) in pool.names.iter().zip(&reports) {
            if let Some(why) = &rep.peer_fallback {
                fallbacks.push(format!("run {}: {name}: {why}", r + 1));
            }
        }
        let peer_files: u64 = reports.iter().map(|r| r.files_from_peer).sum();
        let named: Vec<String> = pool
            .names
            .iter()
            .zip(&reports)
            .filter(|(_, r)| r.peer != "-")
            .map(|(n, r)| format!("{n} from {}", r.peer))
            .collect();
        peer.secs.push(t1 + t2);
        first.push(t1);
        rest.push(t2);
        peer.source.push(sum(&reports, |r| r.bytes_copied));
        peer.peer.push(sum(&reports, |r| r.bytes_from_peer));
        complaints.extend(pool.complaints());
        drop(pool);

        // Without peers, the source's bandwidth shared by the three (each node at a third).
        let pool = Pool::cluster(rt, base, 3, "4:t4", Some(&third));
        pool.add_dataset(rt, "bench", mb, seed);
        let (ts, _) = pool.stage(rt, "bench", None);
        let reports = pool.reports();
        shared.secs.push(ts);
        shared.source.push(sum(&reports, |r| r.bytes_copied));
        shared.peer.push(sum(&reports, |r| r.bytes_from_peer));
        complaints.extend(pool.complaints());

        // rsync, from the same source tree (the last cluster's), into fresh directories.
        let src = pool.dir.path().join("shared/datasets/bench");
        let out = scratch_dir(base, "cluster-rsync");
        let dsts: Vec<PathBuf> = (1..=3)
            .map(|i| out.path().join(format!("node{i}")))
            .collect();
        nix::unistd::sync();
        let (t, b) = rsync_all(&src, &dsts, Some(kib));
        rs.secs.push(t);
        rs.sync.push(t + sync_time());
        rs.source.push(b as f64);
        for d in &dsts {
            common::rm(d);
        }
        nix::unistd::sync();
        let (ta, ba) = rsync_all(&src, &dsts[..1], Some(kib));
        let (tb, _) = rsync_all(&dsts[0], &dsts[1..], None);
        rs_chain.secs.push(ta + tb);
        rs_chain.sync.push(ta + tb + sync_time());
        rs_chain.source.push(ba as f64);
        for d in &dsts {
            common::rm(d);
        }
        nix::unistd::sync();
        let (tc, bc) = rsync_all(&src, &dsts, Some(kib / 3));
        rs_shared.secs.push(tc);
        rs_shared.sync.push(tc + sync_time());
        rs_shared.source.push(bc as f64);
        drop(pool);
        println!(
            "  run {}: without peers {t:.2} s; with peers {:.2} s (node1 {t1:.2} s, then node2+node3 {t2:.2} s; {}, {peer_files} files from a peer); source shared {ts:.2} s; rsync x3 {:.2} s, chained {:.2} s, shared {:.2} s",
            r + 1,
            t1 + t2,
            named.join(" "),
            rs.secs[r],
            rs_chain.secs[r],
            rs_shared.secs[r]
        );
        println!(
            "    MB from the source: without peers {:.1}, with peers {:.1} (from the peer {:.1}), shared {:.1}; rsync {:.1}, chained {:.1}",
            nopeer.source[r] / 1e6,
            peer.source[r] / 1e6,
            peer.peer[r] / 1e6,
            shared.source[r] / 1e6,
            rs.source[r] / 1e6,
            rs_chain.source[r] / 1e6
        );
    }
    let m = |v: &[f64]| median(v.to_vec());
    println!();
    println!(
        "| {mb} MB onto 3 nodes, source at {bw_text} per node (median of {runs}) | labpool | labpool MB from source / from peer | rsync -a | rsync + sync | rsync MB from source | rsync / labpool |"
    );
    println!("|---|---|---|---|---|---|---|");
    let row = |what: &str, l: &Way, p: &Way| {
        let (lt, pt, ps) = (m(&l.secs), m(&p.secs), m(&p.sync));
        println!(
            "| {what} | {lt:.2} s | {:.1} / {:.1} | {pt:.2} s | {ps:.2} s | {:.1} | {:.2}x |",
            m(&l.source) / 1e6,
            m(&l.peer) / 1e6,
            m(&p.source) / 1e6,
            pt / lt
        );
    };
    row(
        "all three from the source at once (rsync: 3 in parallel)",
        &nopeer,
        &rs,
    );
    row(
        "node1 from the source, then node2 and node3 from it (rsync: chained)",
        &peer,
        &rs_chain,
    );
    row(
        &format!(
            "all three from the source, {} B/s each (a source of {bw_text} shared)",
            bw / 3
        ),
        &shared,
        &rs_shared,
    );
    println!(
        "with peers: node1 {:.2} s, then node2 and node3 {:.2} s (medians)",
        m(&first),
        m(&rest)
    );
    println!(
        "with peers / without: time {:.2}x, bytes from the source {:.2}x; against a shared source: time {:.2}x",
        m(&peer.secs) / m(&nopeer.secs),
        m(&peer.source) / m(&nopeer.source),
        m(&peer.secs) / m(&shared.secs)
    );
    if fallbacks.is_empty() {
        println!("no peer fallbacks reported");
    } else {
        println!("peer fallbacks reported:");
        for f in &fallbacks {
            println!("  {f}");
        }
    }
    print_complaints(&complaints);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    common::require_tools("cargo bench --bench cluster", &[("rsync", "rsync")]);
    let runs: usize = env_num("BENCH_RUNS", 3);
    let parts = std::env::var("BENCH_PARTS").unwrap_or_else(|_| "place,stage".into());
    let base = bench_base();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "labpool {} cluster benchmark, {} cores",
        env!("CARGO_PKG_VERSION"),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let t0 = Instant::now();
    if parts.contains("place") {
        placement(&rt, &base, runs);
        println!();
    }
    if parts.contains("stage") {
        staging(&rt, &base, runs);
    }
    println!("({:.0} s in all)", t0.elapsed().as_secs_f64());
}
