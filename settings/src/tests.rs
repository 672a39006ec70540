//! The config file's unit tests: defaults, paths, and how mistakes are explained.

use super::*;
use std::time::Duration;

const MINIMAL: &str = "[controller]\nstate_dir = \"state\"\nsocket = \"/run/labpool.sock\"\n";

#[test]
fn minimal_file_gets_defaults_and_absolute_paths() {
    let c = Config::parse(MINIMAL, Path::new("/srv/lp/labpool.toml")).unwrap();
    assert_eq!(c.controller.state_dir, Path::new("/srv/lp/state"));
    assert_eq!(c.controller.socket, Path::new("/run/labpool.sock"));
    assert_eq!(c.spool_dir(), Path::new("/srv/lp/state/spool"));
    assert_eq!(c.controller.kill_grace, Duration::from_secs(30));
    assert_eq!(c.partitions.iter().filter(|p| p.default).count(), 1);
}

#[test]
fn typo_names_line_and_key() {
    let text = format!("{MINIMAL}kill_grase = \"5s\"\n");
    let e = Config::parse(&text, Path::new("/x/labpool.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 4") && e.contains("kill_grase"), "{e}");
}

#[test]
fn bad_values_are_explained() {
    let text = format!("{MINIMAL}kill_grace = \"soon\"\n");
    let e = Config::parse(&text, Path::new("/x/labpool.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("invalid duration 'soon'"), "{e}");
    let text = format!("{MINIMAL}[node]\nvirtual_gpus = \"four\"\n");
    let e = Config::parse(&text, Path::new("/x/labpool.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 5") && e.contains("4:rtx4090"), "{e}");
    let text = format!(
        "{MINIMAL}[[partition]]\nname = \"a\"\ndefault_time = \"1:00:00\"\nmax_time = \"2:00:00\"\n"
    );
    let e = Config::parse(&text, Path::new("/x/labpool.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("0 partitions are marked default"), "{e}");
}

#[test]
fn snapshot_sources_default_to_datasets_and_home_and_are_checked() {
    let c = Config::parse(MINIMAL, Path::new("/srv/lp/labpool.toml")).unwrap();
    let names: Vec<_> = c
        .snapshot_sources()
        .into_iter()
        .map(|s| (s.name, s.path))
        .collect();
    assert_eq!(
        names,
        vec![
            ("datasets".to_string(), PathBuf::from("/shared/datasets")),
            ("home".to_string(), PathBuf::from("/shared/home"))
        ]
    );
    assert_eq!(c.snapshot_repo(), Path::new("/srv/lp/state/snapshots"));
    assert_eq!(c.snapshot_policy().keep_daily, 7);
    let src = |name: &str, schedule: &str| {
        format!(
            "{MINIMAL}[[snapshots.source]]\nname = \"{name}\"\npath = \"data\"\nschedule = \"{schedule}\"\n"
        )
    };
    let c = Config::parse(
        &src("lab", "15 2 * * 1-5"),
        Path::new("/srv/lp/labpool.toml"),
    )
    .unwrap();
    assert_eq!(c.snapshot_sources()[0].path, Path::new("/srv/lp/data"));
    assert!(c.snapshot_sources()[0].one_file_system);
    let e = Config::parse(&src("lab", "nightly"), Path::new("/x.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[[snapshots.source]] lab") && e.contains("0 3 * * *"),
        "{e}"
    );
    let e = Config::parse(&src("a b", "0 3 * * *"), Path::new("/x.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("use letters, digits"), "{e}");
    let twice = format!(
        "{}{}",
        src("x", "0 3 * * *"),
        src("x", "0 4 * * *").replace(MINIMAL, "")
    );
    let e = Config::parse(&twice, Path::new("/x.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("given twice"), "{e}");
}

#[test]
fn dataset_and_cache_settings_are_checked() {
    let c = Config::parse(MINIMAL, Path::new("/srv/lp/labpool.toml")).unwrap();
    assert_eq!(c.datasets.root, Path::new("/shared/datasets"));
    assert_eq!(c.cache_dir(), Path::new("/srv/lp/state/cache"));
    assert_eq!(c.policy().placement.prefetch_horizon_s, Some(1800));
    assert_eq!(c.policy().placement.locality_wait_s, Some(1800));
    assert_eq!(c.policy().placement.stage_in_wait_s, Some(7 * 86_400));
    let text = format!(
        "{MINIMAL}[datasets]\nroot = \"data\"\n[cache]\ndir = \"ssd\"\ncapacity = \"500G\"\nbandwidth = \"200M\"\nprefetch_horizon = \"0s\"\nlocality_wait = \"0s\"\nstage_in_wait = \"0s\"\n"
    );
    let c = Config::parse(&text, Path::new("/srv/lp/labpool.toml")).unwrap();
    assert_eq!(c.datasets.root, Path::new("/srv/lp/data"));
    assert_eq!(c.cache_dir(), Path::new("/srv/lp/ssd"));
    assert_eq!(c.cache.capacity, Some(500 << 30));
    assert_eq!(c.cache.bandwidth, Some(200 << 20));
    assert_eq!(c.policy().placement.prefetch_horizon_s, None);
    assert_eq!(c.policy().placement.locality_wait_s, None);
    assert_eq!(c.policy().placement.stage_in_wait_s, None);
    let bad = |extra: &str| {
        Config::parse(&format!("{MINIMAL}{extra}"), Path::new("/x/labpool.toml"))
            .unwrap_err()
            .to_string()
    };
    let e = bad("[cache]\nhigh_watermark = 0.5\nlow_watermark = 0.7\n");
    assert!(
        e.contains("low_watermark (0.7) <= high_watermark (0.5)"),
        "{e}"
    );
    let e = bad("[cache]\ncapacity = \"lots\"\n");
    assert!(
        e.contains("invalid size 'lots'") && e.contains("500G"),
        "{e}"
    );
    let e = bad("[cache]\nworkers = 0\n");
    assert!(e.contains("at least 1"), "{e}");
}

#[test]
fn virtual_gpu_forms() {
    assert_eq!(
        VirtualGpus::parse("4:RTX4090").unwrap(),
        VirtualGpus {
            count: 4,
            gpu_type: "rtx4090".into(),
            memory_mib: 0,
        }
    );
    assert_eq!(
        VirtualGpus::parse("2:l40s:48G").unwrap().memory_mib,
        48 * 1024
    );
    assert!(VirtualGpus::parse("2:l40s:lots").is_err());
    assert_eq!(VirtualGpus::parse("2").unwrap().gpu_type, "virtual");
    assert!(VirtualGpus::parse("0").is_err());
    assert!(VirtualGpus::parse("2:").is_err());
}

#[test]
fn metrics_default_to_one_port_for_the_controller_and_the_next_for_an_agent() {
    let at = |text: &str| {
        Config::parse(text, Path::new("/srv/lp/labpool.toml"))
            .unwrap()
            .metrics
            .address()
            .map(str::to_string)
    };
    let agent = format!(
        "{MINIMAL}[agent]\njoin = \"10.0.0.1:7070\"\nkey = \"cluster.key\"\nlisten = \"0.0.0.0:7071\"\n"
    );
    assert_eq!(at(MINIMAL).as_deref(), Some("127.0.0.1:9400"));
    assert_eq!(at(&agent).as_deref(), Some("127.0.0.1:9401"));
    let off = format!("{agent}[metrics]\nlisten = \"off\"\n");
    assert_eq!(at(&off), None);
    let given = format!("{MINIMAL}[metrics]\nlisten = \"0.0.0.0:9500\"\n");
    assert_eq!(at(&given).as_deref(), Some("0.0.0.0:9500"));
}

#[test]
fn slices_are_checked() {
    let parse = |node: &str| {
        Config::parse(
            &format!("{MINIMAL}\n[node]\nvirtual_gpus = \"2:rtx4090:24G\"\n{node}\n"),
            Path::new("/x/labpool.toml"),
        )
    };
    let c = parse("slices = { rtx4090 = [4, 2, 2] }").unwrap();
    assert_eq!(c.node.slices.as_ref().unwrap().of("rtx4090"), [2, 4]);
    assert!(c.node.slices.as_ref().unwrap().of("a100").is_empty());
    let e = parse("slices = [3, 7, 16]").unwrap_err().to_string();
    assert!(e.contains("[3, 7, 16]") && e.contains("at most 64"), "{e}");
    let e = parse("slices = [1]").unwrap_err().to_string();
    assert!(e.contains("each slice is 2 to 16"), "{e}");
    let e = parse("slices = [2]\ngpu_share = { rtx4090 = 2 }")
        .unwrap_err()
        .to_string();
    assert!(e.contains("both shared (gpu_share) and sliced"), "{e}");
}

#[test]
fn a_partition_may_set_its_own_idle_rule_and_a_bad_one_is_refused() {
    let text = format!(
        "{MINIMAL}[jobs]\nidle_gpu_percent = 10\n\n[[partition]]\nname = \"normal\"\ndefault = true\ndefault_time = \"1:00:00\"\nmax_time = \"2:00:00\"\n\n[[partition]]\nname = \"interactive\"\ndefault_time = \"1:00:00\"\nmax_time = \"4:00:00\"\nidle_after = \"20m\"\nidle_grace = \"2m\"\n"
    );
    let c = Config::parse(&text, Path::new("/x/labpool.toml")).unwrap();
    let rule = c.idle_rule("interactive");
    assert_eq!(
        (rule.busy_percent, rule.idle_after_ms, rule.grace_ms),
        (10.0, 1_200_000, 120_000)
    );
    let rule = c.idle_rule("normal");
    assert_eq!(
        (rule.busy_percent, rule.idle_after_ms, rule.grace_ms),
        (10.0, 3_600_000, 600_000)
    );
    for (bad, said) in [
        (
            "[jobs]\nidle_gpu_percent = 120\n",
            "[jobs] idle_gpu_percent = 120",
        ),
        ("[jobs]\nidle_grace = \"0s\"\n", "[jobs] idle_grace"),
        (
            "[[partition]]\nname = \"p\"\ndefault = true\ndefault_time = \"1:00:00\"\nmax_time = \"2:00:00\"\nidle_gpu_percent = -1\n",
            "[[partition]] p idle_gpu_percent = -1",
        ),
    ] {
        let e = Config::parse(&format!("{MINIMAL}{bad}"), Path::new("/x/labpool.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(said), "{bad}: {e}");
    }
}
