//! The generated tree the snapshot benchmark backs up: small text-like files, shards (some
//! byte-identical copies) and checkpoints; the 1% change, its undo, and a count of files and bytes.

use crate::common::xorshift;
use std::path::{Path, PathBuf};

/// Incompressible filler, fast to make: a 64-bit pattern per file.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut buf = Vec::with_capacity(len + 8);
    while buf.len() < len {
        buf.extend_from_slice(&xorshift(&mut x).to_le_bytes());
    }
    buf.truncate(len);
    buf
}

const WORDS: [&str; 64] = [
    "epoch",
    "loss",
    "acc",
    "train",
    "val",
    "step",
    "lr",
    "batch",
    "grad",
    "norm",
    "time",
    "gpu",
    "node",
    "rank",
    "mem",
    "iter",
    "warmup",
    "decay",
    "sample",
    "token",
    "image",
    "label",
    "mask",
    "layer",
    "head",
    "dim",
    "seed",
    "run",
    "eval",
    "test",
    "top1",
    "top5",
    "bleu",
    "f1",
    "recall",
    "precision",
    "ckpt",
    "save",
    "load",
    "shard",
    "worker",
    "queue",
    "wait",
    "done",
    "start",
    "stop",
    "error",
    "warn",
    "info",
    "debug",
    "user",
    "group",
    "job",
    "task",
    "data",
    "set",
    "path",
    "file",
    "size",
    "hash",
    "rate",
    "mean",
    "std",
    "max",
];

/// Text-like filler (log and CSV lines): words from a small vocabulary and random hex numbers,
/// so zstd shrinks it by about half, not to nothing.
fn text(seed: u64, len: usize) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut buf = Vec::with_capacity(len + 128);
    while buf.len() < len {
        let w = xorshift(&mut x);
        for k in 0..6 {
            buf.extend_from_slice(WORDS[((w >> (k * 6)) & 63) as usize].as_bytes());
            buf.push(b' ');
        }
        let mut n = xorshift(&mut x);
        for _ in 0..16 {
            buf.push(HEX[(n & 15) as usize]);
            n >>= 4;
        }
        buf.push(b'\n');
    }
    buf.truncate(len);
    buf
}

/// One small file: where, and how to make it again.
pub struct Small {
    pub path: PathBuf,
    seed: u64,
    len: usize,
}

impl Small {
    fn write(&self) {
        std::fs::write(&self.path, text(self.seed, self.len)).unwrap();
    }
}

/// The generated tree: its small files and checkpoints, and the checkpoints' length.
pub struct Tree {
    pub small: Vec<Small>,
    pub checkpoints: Vec<PathBuf>,
    ckpt_len: usize,
}

/// How many small files, shards and copies, and how large a checkpoint, at `scale`.
pub fn sizes(scale: f64) -> (usize, usize, usize, usize) {
    let n_small = ((60_000.0 * scale) as usize).max(200);
    let n_shards = ((200.0 * scale) as usize).max(3);
    let n_dups = ((10.0 * scale) as usize).clamp(1, n_shards);
    let ckpt = ((200.0 * scale).max(8.0) as usize) << 20;
    (n_small, n_shards, n_dups, ckpt)
}

/// Writes the tree under `root` at `scale`.
pub fn generate(root: &Path, scale: f64) -> Tree {
    let (n_small, n_shards, n_dups, ckpt_len) = sizes(scale);
    let mut rng = 0x1234_5678_u64;
    for d in 0..200 {
        std::fs::create_dir_all(root.join(format!("small/d{d:03}"))).unwrap();
    }
    for d in ["shards", "checkpoints"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let mut small = Vec::with_capacity(n_small);
    for i in 0..n_small {
        let f = Small {
            path: root.join(format!("small/d{:03}/f{i:06}.txt", i % 200)),
            seed: i as u64,
            len: 1024 + (xorshift(&mut rng) % (31 * 1024)) as usize,
        };
        f.write();
        small.push(f);
    }
    for i in 0..n_shards {
        let len = (1 << 20) + (xorshift(&mut rng) % (7 << 20)) as usize;
        let p = root.join(format!("shards/shard-{i:04}.tar"));
        std::fs::write(&p, noise(1_000_000 + i as u64, len)).unwrap();
        if i < n_dups {
            // The same bytes under another name (a re-uploaded dataset, a copied folder).
            std::fs::copy(&p, root.join(format!("shards/copy-of-shard-{i:04}.tar"))).unwrap();
        }
    }
    let checkpoints: Vec<PathBuf> = (0..3)
        .map(|i| root.join(format!("checkpoints/step-{i}.pt")))
        .collect();
    for (i, p) in checkpoints.iter().enumerate() {
        std::fs::write(p, noise(2_000_000 + i as u64, ckpt_len)).unwrap();
    }
    Tree {
        small,
        checkpoints,
        ckpt_len,
    }
}

/// The 1% change. Returns what to undo: the files it added.
pub fn change(tree: &Tree, root: &Path) -> Vec<PathBuf> {
    let n = tree.small.len();
    for (k, f) in tree.small.iter().step_by(100).enumerate() {
        std::fs::write(&f.path, text(5_000_000 + k as u64, f.len + 1 + k % 7)).unwrap();
    }
    for f in tree.small.iter().skip(7).step_by(500) {
        std::fs::remove_file(&f.path).unwrap();
    }
    let mut added = Vec::new();
    for k in 0..(n / 500).max(1) {
        let p = root.join(format!("small/d{:03}/new-{k:05}.txt", (k * 7) % 200));
        std::fs::write(
            &p,
            text(7_000_000 + k as u64, 1024 + (k * 997) % (31 * 1024)),
        )
        .unwrap();
        added.push(p);
    }
    let ck = &tree.checkpoints[0];
    let mut data = std::fs::read(ck).unwrap();
    let mid = data.len() / 2;
    data.splice(mid..mid, noise(3_000_000, 4096));
    std::fs::write(ck, data).unwrap();
    added
}

/// Puts the tree back as `generate` made it.
pub fn undo(tree: &Tree, added: &[PathBuf]) {
    for f in tree.small.iter().step_by(100) {
        f.write();
    }
    for f in tree.small.iter().skip(7).step_by(500) {
        f.write();
    }
    for p in added {
        std::fs::remove_file(p).unwrap();
    }
    std::fs::write(&tree.checkpoints[0], noise(2_000_000, tree.ckpt_len)).unwrap();
}

/// Regular files and their bytes under `root`.
pub fn count(root: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    for e in std::fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        let m = e.path().symlink_metadata().unwrap();
        if m.is_dir() {
            let (f, b) = count(&e.path());
            files += f;
            bytes += b;
        } else if m.is_file() {
            files += 1;
            bytes += m.len();
        }
    }
    (files, bytes)
}
