//! The seed corpus, written by labpool's own encoders so the fuzzers start from inputs that
//! parse: mutations then explore what lies just beside them.

use std::path::Path;

fn put(dir: &Path, target: &str, name: &str, bytes: &[u8]) {
    let d = dir.join(target);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(name), bytes).unwrap();
}

/// Writes every target's seeds under `dir`.
pub fn write(dir: &Path) {
    for (i, s) in [
        "#!/bin/bash\n#SBATCH --job-name=resnet\n#SBATCH --gres=gpu:a100:2\n#SBATCH --time=1-00:00:00\n#SBATCH --mem=64G\n#SBATCH -c 8\n#SBATCH -o logs/%x-%j.out\npython train.py\n",
        "#!/bin/sh\n#SBATCH --array=0-9%2\n#SBATCH --dependency=afterok:12:13\n#LABPOOL --dataset imagenet\n#LABPOOL --env torch\n#SBATCH --export=ALL,SEED=1\nsrun python sweep.py $SLURM_ARRAY_TASK_ID\n",
        "#!/bin/bash\n#SBATCH --gpus=2 --partition=long --account=vision --qos=normal\n#SBATCH --time=30:00 --no-requeue --emergency\nexit 0\n",
    ]
    .iter()
    .enumerate()
    {
        put(dir, "script", &format!("seed-{i}"), s.as_bytes());
    }
    for (i, s) in [
        "[controller]\nstate_dir = \"state\"\nsocket = \"labpool.sock\"\n",
        "[controller]\nstate_dir = \"/var/lib/labpool\"\nsocket = \"/run/labpool.sock\"\nkill_grace = \"30s\"\n[node]\nname = \"gpu1\"\ncpus = 32\nmemory = \"250G\"\nvirtual_gpus = \"4:a100\"\ngpu_share = { rtx3090 = 2 }\n[cache]\ncapacity = \"500G\"\nbandwidth = \"200M\"\n[[partition]]\nname = \"short\"\ndefault = true\nmax_time = \"4:00:00\"\n[[partition]]\nname = \"long\"\nmax_time = \"3-00:00:00\"\nallow_accounts = [\"vision\"]\n",
        "[controller]\nstate_dir = \"s\"\nsocket = \"s.sock\"\n[quotas.home]\nsoft = \"40G\"\nhard = \"50G\"\ngrace = \"7d\"\n[purge]\nmax_age = \"30d\"\nwarn_days = 7\n[snapshots]\nkeep_daily = 7\n[[snapshots.source]]\nname = \"home\"\npath = \"/home\"\nschedule = \"0 3 * * *\"\n[credits]\nmonthly_grant = 1000\ngpu_weights = { a100 = 2.0 }\n[priority]\nweight_age = 1000\nmax_age = \"7d\"\n",
    ]
    .iter()
    .enumerate()
    {
        put(dir, "config", &format!("seed-{i}"), s.as_bytes());
    }
    for (i, s) in [
        r##"{"name":"train","script":"#!/bin/sh\ntrue\n","args":["--lr","0.1"],"workdir":"/home/alice","gpus":2,"gpu_type":"a100","cpus":8,"mem_mib":65536,"time_limit":{"Seconds":3600},"environment":{"PATH":"/usr/bin"},"umask":18,"datasets":["imagenet"],"array":"0-3","idempotency_key":"abc"}"##,
        r#"{"ids":[1,2,3]}"#,
        "user=alice&since_ms=5&limit=10&after=1700000000000.12",
    ]
    .iter()
    .enumerate()
    {
        put(dir, "api", &format!("seed-{i}"), s.as_bytes());
    }
    for (i, s) in [
        r#"{"node":"n1","instance":"i-1","seq":3,"reports":[{"Ended":{"node":"n1","job":7,"attempt":1,"outcome":{"state":"COMPLETED","exit_code":0,"signal":null,"end_time_ms":5,"reason":null}}},{"NeverStarted":{"node":"n1","job":8,"attempt":2}}]}"#,
        r#"{"node":"n1","instance":"i-1","running":2,"load":0.5,"mem_available_mib":1024}"#,
        "POST\n/v1/agent/reports\n0000000000000000000000000000000000000000000000000000000000000000\n0\n1000000\nnonce-1\nabcdef\n",
    ]
    .iter()
    .enumerate()
    {
        put(dir, "agent", &format!("seed-{i}"), s.as_bytes());
    }
    manifests(dir);
    trees(dir);
    repository(dir);
    locks(dir);
    for (i, s) in [
        "500G",
        "1.5TiB",
        "16Gbit",
        "2m 30s",
        "1-00:00:00",
        "0-15:4%2",
        "afterok:12:13,afterany:5",
    ]
    .iter()
    .enumerate()
    {
        put(dir, "units", &format!("seed-{i}"), s.as_bytes());
    }
}

fn manifests(dir: &Path) {
    use labpool_cache::manifest::{Entry, Kind, Manifest};
    let entry = |path: &str, kind: Kind, size: u64| Entry {
        path: path.into(),
        kind,
        size,
        mtime_ns: 1_700_000_000_000_000_000,
        mode: 0o644,
        target: (kind == Kind::Symlink).then(|| "a/b".into()),
        hash: (kind == Kind::File).then(|| "ab".repeat(32)),
    };
    let sets = [
        vec![
            entry("", Kind::Dir, 0),
            entry("a", Kind::Dir, 0),
            entry("a/b", Kind::File, 12),
        ],
        vec![entry("", Kind::Dir, 0), entry("l", Kind::Symlink, 0)],
        vec![],
    ];
    for (i, entries) in sets.into_iter().enumerate() {
        let m = Manifest { entries };
        put(
            dir,
            "manifest",
            &format!("seed-{i}"),
            &serde_json::to_vec(&m).unwrap(),
        );
    }
}

fn trees(dir: &Path) {
    use labpool_snapshots::blob::BlobId;
    use labpool_snapshots::tree::{Node, NodeKind, Tree};
    let node = |name: &str, kind: NodeKind| Node {
        name: name.as_bytes().to_vec(),
        kind,
        mode: 0o644,
        uid: 1000,
        gid: 1000,
        mtime_ns: 1,
        ctime_ns: 2,
        size: 3,
        dev: 4,
        inode: 5,
        links: 1,
        rdev: 0,
        content: if kind == NodeKind::File {
            vec![BlobId([7; 32])]
        } else {
            vec![]
        },
        subtree: (kind == NodeKind::Dir).then_some(BlobId([9; 32])),
        target: if kind == NodeKind::Symlink {
            b"x".to_vec()
        } else {
            vec![]
        },
    };
    let sets = [
        vec![node("a.txt", NodeKind::File), node("d", NodeKind::Dir)],
        vec![node("link", NodeKind::Symlink), node("p", NodeKind::Fifo)],
        vec![],
    ];
    for (i, nodes) in sets.into_iter().enumerate() {
        put(dir, "tree", &format!("seed-{i}"), &Tree { nodes }.encode());
    }
}

/// A real repository: its packs and its index.
fn repository(dir: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("a.txt"), b"hello").unwrap();
    std::fs::write(src.join("sub/b.bin"), vec![42u8; 3000]).unwrap();
    std::os::unix::fs::symlink("a.txt", src.join("link")).unwrap();
    let repo_dir = tmp.path().join("repo");
    let repo = labpool_snapshots::Repository::init(&repo_dir).unwrap();
    let opts = labpool_snapshots::BackupOptions {
        source: "seed".into(),
        path: src,
        excludes: vec![],
        one_file_system: true,
        host: "seed".into(),
        time: "2026-12-04T00:00:00Z".parse().unwrap(),
    };
    labpool_snapshots::create(&repo, &opts, &labpool_snapshots::Progress::default()).unwrap();
    let mut packs: Vec<_> = walk(&repo.packs_dir());
    packs.sort();
    for (i, p) in packs.iter().take(3).enumerate() {
        put(
            dir,
            "pack",
            &format!("seed-{i}"),
            &std::fs::read(p).unwrap(),
        );
    }
    put(dir, "pack", "seed-short", b"too short");
    put(dir, "pack", "seed-magic", &[0u8; 12]);
    drop(repo);
    let index = std::fs::read(repo_dir.join("index.sqlite")).unwrap();
    put(dir, "index", "seed-0", &index);
    put(dir, "index", "seed-empty", b"");
    put(dir, "index", "seed-junk", b"SQLite format 3\0junk");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn locks(dir: &Path) {
    use labpool_envs::EnvKind;
    use labpool_envs::lock::Lock;
    let lock = |kind: EnvKind, text: &str| Lock {
        kind,
        lock: text.into(),
        platform: "linux-x86_64-py3.11".into(),
        id: "0123456789abcdef".into(),
        spec: text.into(),
        image: (kind == EnvKind::Container).then(|| "image.sif".into()),
    };
    let all = [
        lock(EnvKind::Venv, "numpy==2.1.0 --hash=sha256:00ff\n"),
        lock(EnvKind::Conda, "dependencies:\n- python=3.11\n"),
        lock(EnvKind::Container, "blake3:00ff image.sif"),
        lock(EnvKind::Modules, "cuda/12.2\n"),
    ];
    for (i, l) in all.iter().enumerate() {
        put(
            dir,
            "lock",
            &format!("seed-{i}"),
            &serde_json::to_vec(l).unwrap(),
        );
    }
}
