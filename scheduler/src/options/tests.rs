//! The options: layering, resolution and patterns.

use super::*;

#[test]
fn overlay_prefers_upper_layer() {
    let script = JobOptions {
        job_name: Some("s".into()),
        gres: Some("gpu:2".into()),
        mem: Some("1G".into()),
        ..Default::default()
    };
    let cli = JobOptions {
        job_name: Some("c".into()),
        gpus: Some("1".into()),
        ..Default::default()
    };
    let merged = script.overlay(cli);
    assert_eq!(merged.job_name.as_deref(), Some("c"));
    assert_eq!((merged.gres, merged.gpus.as_deref()), (None, Some("1")));
    assert_eq!(merged.mem.as_deref(), Some("1G"));
}

#[test]
fn resolve_defaults_and_errors() {
    let r = JobOptions::default().resolve().unwrap();
    assert_eq!(
        (r.gpus.count, r.cpus, r.mem_mib, r.time_limit),
        (0, 1, 0, None)
    );
    let both = JobOptions {
        gres: Some("gpu:1".into()),
        gpus: Some("1".into()),
        ..Default::default()
    };
    assert_eq!(both.resolve(), Err(OptionError::GresAndGpus));
    let multi = JobOptions {
        nodes: Some("2".into()),
        ntasks_per_node: Some(4),
        ..Default::default()
    };
    let r = multi.resolve().unwrap();
    assert_eq!((r.node_count, r.ntasks), (2, 8));
    // An environment is staged on every node of a multi-node job.
    let staged = JobOptions {
        nodes: Some("2".into()),
        env: Some("torch".into()),
        ..Default::default()
    };
    assert_eq!(staged.resolve().unwrap().node_count, 2);
    let tasks = JobOptions {
        ntasks: Some(2),
        cpus_per_task: Some(4),
        ..Default::default()
    };
    assert_eq!(tasks.resolve().unwrap().cpus, 8);
    let lenient = JobOptions {
        qos: Some("normal".into()),
        exclusive: Some("node".into()),
        ..Default::default()
    };
    assert_eq!(lenient.resolve().unwrap().warnings.len(), 2);
    let bad_dep = JobOptions {
        dependency: Some("after:3".into()),
        ..Default::default()
    };
    assert!(matches!(bad_dep.resolve(), Err(OptionError::Dependency(_))));
    let bad_array = JobOptions {
        array: Some("5-1".into()),
        ..Default::default()
    };
    assert!(matches!(bad_array.resolve(), Err(OptionError::Array(_))));
    let zero = JobOptions {
        cpus_per_task: Some(0),
        ..Default::default()
    };
    assert_eq!(zero.resolve(), Err(OptionError::ZeroCpus));
}

#[test]
fn gpu_share_needs_gpus_and_layers_like_emergency() {
    let alone = JobOptions {
        gpu_share: true,
        ..Default::default()
    };
    let e = alone.resolve().unwrap_err();
    assert_eq!(e, OptionError::GpuShareWithoutGpus);
    assert!(e.to_string().contains("add --gpus 1"), "{e}");
    let script = JobOptions {
        gpu_share: true,
        ..Default::default()
    };
    let cli = JobOptions {
        gpus: Some("1".into()),
        ..Default::default()
    };
    let r = script.overlay(cli).resolve().unwrap();
    assert!(r.gpu_share);
    assert_eq!(r.gpus.count, 1);
    let plain = JobOptions {
        gres: Some("gpu:1".into()),
        ..Default::default()
    };
    assert!(!plain.resolve().unwrap().gpu_share);
}

#[test]
fn a_slice_is_one_part_of_one_card_on_one_node() {
    let quarter = JobOptions {
        gres: Some("gpu:rtx4090.4:1".into()),
        ..Default::default()
    };
    let r = quarter.resolve().unwrap();
    assert_eq!(
        (r.gpus.count, r.gpus.gpu_type.as_deref(), r.gpus.slice),
        (1, Some("rtx4090"), Some(crate::slice::Slice::Fraction(4)))
    );
    let both = JobOptions {
        gpu_share: true,
        nodes: Some("2".into()),
        ..quarter
    };
    let all: Vec<String> = both
        .resolve_all()
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        all.iter().any(|e| e.contains("leave out --gpu-share")),
        "{all:?}"
    );
    assert!(
        all.iter().any(|e| e.contains("--nodes asks for 2")),
        "{all:?}"
    );
}

#[test]
fn patterns() {
    let v = PatternValues {
        array: Some((5, 2)),
        ..PatternValues::batch(7, "n", "u", "h", None)
    };
    assert_eq!(
        expand_pattern("%j.%x.%u.%N.%%.%q.%A_%a.%", &v),
        "7.n.u.h.%.%q.5_2.%"
    );
    // The batch script is Slurm's step 4294967291, task 0 on node 0.
    assert_eq!(
        expand_pattern("%J|%s|%t|%n|%3t|%4j|%12j|%2x|%7q", &v),
        "7.4294967291|4294967291|0|0|000|0007|0000000007|n|%7q"
    );
    let step = PatternValues {
        step: 3,
        task: 12,
        node_index: 1,
        ..PatternValues::batch(42, "n", "u", "h", None)
    };
    assert_eq!(
        expand_pattern("%j_%t_log.out %J %2n %a", &step),
        "42_12_log.out 42.3 01 4294967294"
    );
    // A backslash anywhere: taken as written, backslashes removed.
    assert_eq!(expand_pattern("out\\%j_%t", &step), "out%j_%t");
}
