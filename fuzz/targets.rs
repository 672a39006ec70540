//! The bodies of the fuzz targets, one function per parser: the libFuzzer targets in
//! `fuzz_targets/` call them, and `tests/fuzz_corpus/main.rs` runs every committed input (seeds and
//! the crashes found, kept as regressions) through them on stable Rust in the test suite.

use labpool::api;
use labpool::api::agent;
use labpool_cache::manifest::{Manifest, diff};
use labpool_cluster::{ClusterKey, Head, Signature, Verifier};
use labpool_snapshots::index::Index;
use labpool_snapshots::pack::{decode_checked, parse_trailer};

/// What Slurm users type outside scripts: `srun`'s command line, `--begin` times, `squeue` and
/// `sinfo` formats, host lists.
pub fn slurm(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    let _ = labpool::slurm_commands::args::parse_srun(&words);
    let _ = labpool::begin::parse_slurm_time_at("--begin", text, 1_800_000_000_000);
    let pieces = labpool::slurm_commands::format::parse_format(text);
    let _ = labpool::slurm_commands::format::render(&pieces, |c| c.to_string());
    if let Ok(names) = labpool_scheduler::hostlist::expand(text) {
        let _ = labpool_scheduler::hostlist::compress(&names);
    }
}

/// `#SBATCH` and `#LABPOOL` lines of a job script, and every option they carry.
pub fn script(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = labpool_scheduler::script::parse_script(text);
    }
}

/// The config file, every section of it, resolved as `labpool serve` resolves it.
pub fn config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(config) = labpool::settings::Config::parse(
            text,
            std::path::Path::new("/etc/labpool/labpool.toml"),
        )
    {
        let _ = config.policy();
        let _ = config.scheduler_partitions();
        let _ = config.quota_filesystems();
        let _ = config.snapshot_sources();
        let _ = config.snapshot_policy();
    }
}

fn body<T: serde::de::DeserializeOwned>(data: &[u8]) -> Option<T> {
    serde_json::from_slice(data).ok()
}

fn query<T: serde::de::DeserializeOwned>(data: &[u8]) {
    let _ = serde_urlencoded::from_bytes::<T>(data);
}

/// Every API body and query string a member's client can send to the controller, with the
/// submit checks that need no state.
pub fn api(data: &[u8]) {
    if let Some(req) = body::<api::SubmitRequest>(data) {
        let _ = labpool::controller::jobs::checks::exec_problems(&req);
    }
    let _ = body::<api::CancelRequest>(data);
    let _ = body::<api::GrantRequest>(data);
    let _ = body::<api::AccountChange>(data);
    let _ = body::<api::DrainRequest>(data);
    let _ = body::<api::data::AddDatasetRequest>(data);
    let _ = body::<api::data::StageRequest>(data);
    let _ = body::<api::data::VerifyRequest>(data);
    let _ = body::<api::envs::CreateEnv>(data);
    let _ = body::<api::envs::RemoveEnv>(data);
    let _ = body::<api::quotas::LimitRequest>(data);
    let _ = body::<api::quotas::ScanRequest>(data);
    let _ = body::<api::quotas::PurgeRequest>(data);
    let _ = body::<api::quotas::AuditRequest>(data);
    let _ = body::<api::snapshots::LsRequest>(data);
    let _ = body::<api::snapshots::FindRequest>(data);
    let _ = body::<api::snapshots::DiffRequest>(data);
    let _ = body::<api::snapshots::RestoreRequest>(data);
    query::<api::JobsQuery>(data);
    query::<api::HistoryQuery>(data);
    query::<api::CreditsQuery>(data);
    query::<api::data::CacheQuery>(data);
    query::<api::envs::EnvQuery>(data);
    query::<api::quotas::QuotaQuery>(data);
    query::<api::snapshots::ListQuery>(data);
}

/// The protocol between nodes: what an agent sends the controller, what the controller sends
/// an agent, peers' stage queries, and the signature headers, checked from the headers alone.
pub fn agent(data: &[u8]) {
    let _ = serde_json::from_slice::<agent::ReportBatch>(data);
    let _ = serde_json::from_slice::<agent::OrderBatch>(data);
    let _ = serde_json::from_slice::<agent::Registration>(data);
    let _ = serde_json::from_slice::<agent::Heartbeat>(data);
    let _ = serde_urlencoded::from_bytes::<agent::PeerQuery>(data);
    // Headers as a client could send them: method, path, hash, uid, time, nonce, mac.
    if let Ok(text) = std::str::from_utf8(data) {
        let mut f = text.split('\n');
        let mut next = || f.next().unwrap_or("");
        let (method, path, hash) = (next(), next(), next());
        let uid = next().parse().ok();
        let timestamp_ms = next().parse().unwrap_or(0);
        let (nonce, mac) = (next().to_string(), next().to_string());
        let mut verifier = Verifier::new(ClusterKey::from_bytes([7; 32]), 300_000);
        let head = Head {
            method,
            path,
            body_sha256: hash,
            uid,
        };
        let sig = Signature {
            timestamp_ms,
            nonce,
            mac,
        };
        let _ = verifier.verify_head(&head, &sig, 1_000_000);
    }
}

/// A dataset manifest as a node reads it from the shared source or a peer.
pub fn manifest(data: &[u8]) {
    if let Ok(m) = Manifest::from_bytes(data, std::path::Path::new("fuzz.json")) {
        let _ = m.bytes();
        let _ = diff(&m, &m);
    }
}

/// A snapshot tree as a restore reads it: names must come out safe to create.
pub fn tree(data: &[u8]) {
    if let Ok(tree) = labpool_snapshots::tree::Tree::decode(data) {
        for n in &tree.nodes {
            assert!(labpool_snapshots::tree::check_name(&n.name).is_ok());
            let _ = tree.get(&n.name);
        }
        // What decodes encodes back to the same tree.
        let again = labpool_snapshots::tree::Tree::decode(&tree.encode()).unwrap();
        assert_eq!(again.nodes.len(), tree.nodes.len());
    }
    let _ = serde_json::from_slice::<labpool_snapshots::Snapshot>(data);
}

/// A pack file's trailer, and each blob it points at, as `snapshot check` and restores read them.
pub fn pack(data: &[u8]) {
    if let Ok(entries) = parse_trailer(data, "fuzz") {
        for e in entries.iter().take(64) {
            let start = e.offset as usize;
            let stored = &data[start..start + e.stored_len as usize];
            let _ = decode_checked(stored, "fuzz", e);
        }
    }
}

/// The snapshot index (an SQLite file) as a repository opens and reads it: a damaged file is
/// an error, never a panic.
pub fn index(data: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    std::fs::write(&path, data).unwrap();
    if let Ok(index) = Index::open(&path) {
        if let Ok(packs) = index.packs() {
            for pack in packs.keys().take(8) {
                let _ = index.blobs_in(pack);
            }
        }
        let _ = index.blob_totals();
        let _ = index.snapshots();
    }
}

/// An environment's lock file, as a node checks it before it uses a build.
pub fn lock(data: &[u8]) {
    if let Ok(lock) = serde_json::from_slice::<labpool_envs::lock::Lock>(data) {
        let _ = labpool_envs::verify::check_lock(&lock);
    }
}

/// Sizes, rates and durations as config files and options write them; what the printer
/// writes reads back.
pub fn units(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(n) = labpool_units::parse_size(text) {
        labpool_units::parse_size(&labpool_units::format_size(n)).unwrap();
    }
    let _ = labpool_units::parse_mem_mib(text);
    let _ = labpool_units::parse_rate(text);
    if let Ok(d) = labpool_units::parse_duration(text) {
        let _ = labpool_units::format_duration(d);
    }
    let _ = labpool_scheduler::time::parse_time_limit(text);
    let _ = labpool_scheduler::array::parse_array(text);
    let _ = labpool_scheduler::dependency::parse_dependencies(text);
}
