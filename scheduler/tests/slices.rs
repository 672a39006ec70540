//! Slices of one card (`--gres=gpu:TYPE.D:1`, `--gres=shard:N`): packed onto sliced cards,
//! never beside a whole-GPU job, whole jobs kept off sliced cards, and put back after a
//! restart holding the shards they held.

#[allow(dead_code)]
mod common;

use common::*;
use labpool_scheduler::admission::AdmissionError;
use labpool_scheduler::node::NodeSpec;
use labpool_scheduler::slice::{Slice, shards_of};
use labpool_scheduler::{Allocation, Decision, JobId, JobSpec, Resources, Scheduler, Timestamp};

/// A node whose `rtx4090`s are cut into halves and quarters (4 shards each), 24 GiB each,
/// beside any other GPUs named.
fn sliced_node(name: &str, gpus: &[&str]) -> NodeSpec {
    let mut n = node(name, gpus, 16);
    for g in n.gpus.iter_mut().filter(|g| g.gpu_type == "rtx4090") {
        g.slices = vec![2, 4];
        g.share = shards_of(&g.slices).unwrap();
        g.memory_mib = 24 * 1024;
    }
    n
}

fn slice_res(slice: Slice, ty: Option<&str>) -> Resources {
    Resources {
        slice: Some(slice),
        ..res(1, ty)
    }
}

fn units(d: &[Decision], id: u64) -> u8 {
    d.iter()
        .find_map(|d| match d {
            Decision::Start {
                job, allocation, ..
            } if job.0 == id => {
                assert!(allocation.shared);
                Some(allocation.units)
            }
            _ => None,
        })
        .expect("started")
}

#[test]
fn quarters_pack_onto_one_card_and_a_half_takes_the_next() {
    let mut s = sched();
    s.upsert_node(sliced_node("box", &["rtx4090", "rtx4090"]))
        .unwrap();
    for id in 1..=4 {
        submit(
            &mut s,
            id,
            slice_res(Slice::Fraction(4), Some("rtx4090")),
            None,
        );
    }
    submit(&mut s, 5, slice_res(Slice::Fraction(2), None), None);
    let d = s.schedule(Timestamp(0));
    let st = started(&d);
    for id in 1..=4 {
        assert_eq!(st[&id], ("box".to_string(), vec![0]), "quarter {id}");
        assert_eq!(units(&d, id), 1);
    }
    assert_eq!(st[&5], ("box".to_string(), vec![1]));
    assert_eq!(units(&d, 5), 2);
    assert_eq!(s.node("box").unwrap().shared_units(0), 4);
    assert_eq!(s.node("box").unwrap().shared_units(1), 2);
    // Two shards are left on card 1: three shards do not fit, two do, and a whole job waits.
    submit(&mut s, 6, slice_res(Slice::Shards(3), None), None);
    submit(&mut s, 7, slice_res(Slice::Shards(2), None), None);
    submit(&mut s, 8, res(1, None), None);
    let d = s.schedule(Timestamp(1));
    assert_eq!(ids(&d), [7]);
    assert_eq!(started(&d)[&7].1, vec![1]);
    s.check_invariants().unwrap();
    // When the quarters end, the three shards, first in line, take their card; the whole job
    // still waits, since no card is wholly free.
    for id in 1..=4 {
        end(&mut s, id, Timestamp(2));
    }
    let d = s.schedule(Timestamp(3));
    assert_eq!(ids(&d), [6]);
    assert_eq!((started(&d)[&6].1.clone(), units(&d, 6)), (vec![0], 3));
    s.check_invariants().unwrap();
}

#[test]
fn a_slice_never_lands_beside_a_whole_job() {
    let mut s = sched();
    s.upsert_node(sliced_node("box", &["rtx4090"])).unwrap();
    submit(&mut s, 1, res(1, None), None);
    assert_eq!(ids(&s.schedule(Timestamp(0))), [1]);
    submit(&mut s, 2, slice_res(Slice::Fraction(4), None), None);
    assert!(ids(&s.schedule(Timestamp(1))).is_empty());
    assert_eq!(s.node("box").unwrap().gpu_holders(0), [JobId(1)]);
    s.check_invariants().unwrap();
}

#[test]
fn whole_jobs_are_packed_away_from_sliced_cards() {
    let mut s = sched();
    // The sliced card is GPU 0, the lowest index a whole job would otherwise take.
    s.upsert_node(sliced_node("box", &["rtx4090", "a100", "a100"]))
        .unwrap();
    submit(&mut s, 1, res(1, None), None);
    submit(&mut s, 2, res(1, None), None);
    let st = started(&s.schedule(Timestamp(0)));
    assert_eq!((st[&1].1.clone(), st[&2].1.clone()), (vec![1], vec![2]));
    // With nothing else free, a whole job still takes the sliced card.
    submit(&mut s, 3, res(1, None), None);
    assert_eq!(started(&s.schedule(Timestamp(1)))[&3].1, vec![0]);
    s.check_invariants().unwrap();
}

#[test]
fn a_slice_no_card_offers_is_refused_at_submit_with_what_is_offered() {
    let mut s = sched();
    s.upsert_node(sliced_node("box", &["rtx4090", "a100"]))
        .unwrap();
    let eighth = slice_res(Slice::Fraction(8), None);
    let e = s.admit(&req("u", &eighth)).unwrap_err();
    assert!(matches!(e, AdmissionError::NoSlicedGpus { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("1/8 of a GPU") && text.contains("sliced: rtx4090 into 1/2, 1/4 on box"),
        "{text}"
    );
    // An a100 is not sliced at all.
    let a100 = slice_res(Slice::Fraction(2), Some("a100"));
    assert!(s.admit(&req("u", &a100)).is_err());
    // Five shards are more than a card has.
    assert!(
        s.admit(&req("u", &slice_res(Slice::Shards(5), None)))
            .is_err()
    );
    assert!(
        s.admit(&req("u", &slice_res(Slice::Shards(4), None)))
            .is_ok()
    );
}

#[test]
fn a_restored_slice_holds_its_shards_again() {
    let mut s = sched();
    s.upsert_node(sliced_node("box", &["rtx4090"])).unwrap();
    let half = |id: u64| {
        let mut j: JobSpec = job(id, "u", 1, H);
        j.resources.slice = Some(Slice::Fraction(2));
        j
    };
    let alloc = Allocation {
        start: Timestamp(0),
        node: "box".into(),
        gpus: vec![0],
        cpus: 1,
        mem_mib: 0,
        shared: true,
        // What a caller that does not know the units passes.
        units: 1,
        others: Vec::new(),
        ports: None,
    };
    s.restore_running(half(1), alloc.clone()).unwrap();
    s.restore_running(half(2), alloc.clone()).unwrap();
    assert_eq!(s.node("box").unwrap().shared_units(0), 4);
    let e = s.restore_running(half(3), alloc).unwrap_err();
    assert!(
        e.to_string().contains("holding 4 of its 4 share units"),
        "{e}"
    );
    s.check_invariants().unwrap();
    // Nothing more fits on the card until a half ends.
    submit(&mut s, 4, slice_res(Slice::Fraction(4), None), None);
    assert!(ids(&s.schedule(Timestamp(1))).is_empty());
    end(&mut s, 1, Timestamp(2));
    assert_eq!(ids(&s.schedule(Timestamp(3))), [4]);
    s.check_invariants().unwrap();
}

#[test]
fn a_slice_counts_by_its_fraction_in_limits_and_charges() {
    let mut s = sched();
    s.upsert_node(sliced_node("box", &["rtx4090", "rtx4090"]))
        .unwrap();
    s.set_user_limits(
        "u",
        labpool_scheduler::policy::Limits {
            max_gpus_per_user: Some(1),
            ..Default::default()
        },
    );
    // MaxTRESPerUser=gres/gpu=1 lets four quarters run, not five.
    for id in 1..=5 {
        submit(&mut s, id, slice_res(Slice::Fraction(4), None), None);
    }
    let d = s.schedule(Timestamp(0));
    assert_eq!(ids(&d), [1, 2, 3, 4]);
    assert!(
        reason(&s, 5).contains("u holds 1 GPUs and this job asks for 0.25"),
        "{}",
        reason(&s, 5)
    );
    // An hour of a quarter costs a quarter of a GPU-hour.
    let alloc = d
        .iter()
        .find_map(|d| match d {
            Decision::Start {
                job, allocation, ..
            } if job.0 == 1 => Some(allocation.clone()),
            _ => None,
        })
        .unwrap();
    let spec = s.job(JobId(1)).unwrap().clone();
    assert_eq!(s.held_milli(&alloc), 250);
    assert!((s.charge_for(&spec, &alloc, Timestamp(3_600_000)) - 0.25).abs() < 1e-9);
    // Three shards of a four-shard card count as three quarters.
    assert_eq!(
        s.ran_milli(&slice_res(Slice::Shards(3), None), "box", &[0]),
        750
    );
    assert_eq!(s.ran_milli(&res(2, None), "box", &[0, 1]), 2000);
}

#[test]
fn a_partition_hands_out_a_slice_unless_the_job_asks_for_more() {
    let mut debug = partition("debug", false, 0, 3600);
    debug.default_slice = Some(4);
    let mut s = Scheduler::new(vec![partition("normal", true, 0, 86_400), debug]).unwrap();
    s.upsert_node(sliced_node("box", &["rtx4090", "a100"]))
        .unwrap();
    let quarter = Some(Slice::Fraction(4));
    assert_eq!(s.partition_slice(Some("debug"), &res(1, None)), quarter);
    // Two GPUs, a named type, a slice of its own, or --gpu-share: what the job asked for.
    assert_eq!(s.partition_slice(Some("debug"), &res(2, None)), None);
    assert_eq!(
        s.partition_slice(Some("debug"), &res(1, Some("rtx4090"))),
        None
    );
    let half = slice_res(Slice::Fraction(2), None);
    assert_eq!(s.partition_slice(Some("debug"), &half), None);
    assert_eq!(s.partition_slice(Some("debug"), &share_res(1)), None);
    // Other partitions hand out whole GPUs.
    assert_eq!(s.partition_slice(None, &res(1, None)), None);
    // A slice no node of the partition offers is not handed out.
    let mut eighth = partition("tiny", false, 0, 3600);
    eighth.default_slice = Some(8);
    let mut s = Scheduler::new(vec![partition("normal", true, 0, 86_400), eighth]).unwrap();
    s.upsert_node(sliced_node("box", &["rtx4090"])).unwrap();
    assert_eq!(s.partition_slice(Some("tiny"), &res(1, None)), None);
}

/// A node of four GPUs linked in pairs 0-1 and 2-3, cut into halves and quarters when `sliced`.
fn paired_node(sliced: bool) -> NodeSpec {
    let mut n = if sliced {
        sliced_node("box", &["rtx4090"; 4])
    } else {
        node("box", &["rtx4090"; 4], 16)
    };
    for g in &mut n.gpus {
        g.nvlink_peer = Some(g.index ^ 1);
    }
    n
}

fn hold_whole(s: &mut Scheduler, id: u64, gpu: u32) {
    let alloc = Allocation {
        start: Timestamp(0),
        node: "box".into(),
        gpus: vec![gpu],
        cpus: 1,
        mem_mib: 0,
        shared: false,
        units: 1,
        others: Vec::new(),
        ports: None,
    };
    s.restore_running(job(id, "u", 1, H), alloc).unwrap();
}

#[test]
fn one_gpu_jobs_and_slices_fill_a_broken_nvlink_pair_before_breaking_another() {
    // GPU 2 is held: the next one-GPU job takes its partner 3, not GPU 0, and a two-GPU job
    // then finds the linked pair 0-1.
    let mut s = sched();
    s.upsert_node(paired_node(false)).unwrap();
    hold_whole(&mut s, 1, 2);
    submit(&mut s, 2, res(1, None), None);
    assert_eq!(started(&s.schedule(Timestamp(1)))[&2].1, vec![3]);
    submit(&mut s, 3, res(2, None), None);
    assert_eq!(started(&s.schedule(Timestamp(2)))[&3].1, vec![0, 1]);
    s.check_invariants().unwrap();

    // The first slice on a sliced node goes the same way.
    let mut s = sched();
    s.upsert_node(paired_node(true)).unwrap();
    hold_whole(&mut s, 1, 2);
    submit(&mut s, 2, slice_res(Slice::Fraction(4), None), None);
    assert_eq!(started(&s.schedule(Timestamp(1)))[&2].1, vec![3]);
    submit(&mut s, 3, res(2, None), None);
    assert_eq!(started(&s.schedule(Timestamp(2)))[&3].1, vec![0, 1]);
    s.check_invariants().unwrap();
}
