//! One of Slurm's nodes as `scontrol show node -o` writes it: its state and reason, its
//! features, and what it has (`Gres=` GPUs, `CPUTot`, `RealMemory`). Over Slurm, a node needs
//! no labpool agent to take jobs: its GPUs are read from here (see [`NodeLine::spec`]).

use labpool_scheduler::node::{GpuDevice, NodeSpec};

/// The GPU type of a `Gres=gpu:N` that names none.
pub const UNTYPED_GPU: &str = "gpu";

/// The most GPUs one node is taken to have, whatever `Gres=` says.
const MAX_GPUS: u32 = 64;

/// One node as `scontrol show node -o` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLine {
    /// `NodeName`.
    pub name: String,
    /// `State`, such as `IDLE`, `MIXED+DRAIN`, `DOWN*`.
    pub state: String,
    /// `Reason`, when one is set (it runs to the end of the line after `Reason=`).
    pub reason: String,
    /// `AvailableFeatures`.
    pub features: String,
    /// `Gres`, such as `gpu:a100:8(S:0-1)` or `gpu:4,shard:8`; `(null)` for none.
    pub gres: String,
    /// `CPUTot`.
    pub cpus: u32,
    /// `RealMemory`, MiB.
    pub mem_mib: u64,
}

impl NodeLine {
    /// Reads one line; None for a line that names no node.
    pub fn parse(line: &str) -> Option<NodeLine> {
        // The reason is free text: everything after `Reason=` (it is the last field but for
        // the dates that follow it in brackets), so fields are looked for before it.
        let (fields, reason) = match line.find(" Reason=") {
            Some(at) => (&line[..at], line[at + 8..].trim().to_string()),
            None => (line, String::new()),
        };
        let field = |key: &str| -> Option<String> {
            fields
                .split(' ')
                .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_string)
        };
        Some(NodeLine {
            name: field("NodeName")?,
            state: field("State").unwrap_or_default(),
            reason,
            features: field("AvailableFeatures").unwrap_or_default(),
            gres: field("Gres").unwrap_or_default(),
            cpus: field("CPUTot").and_then(|c| c.parse().ok()).unwrap_or(1),
            mem_mib: field("RealMemory")
                .and_then(|m| m.parse().ok())
                .unwrap_or(1),
        })
    }

    /// DOWN (or failing, or not responding): its jobs are lost.
    pub fn is_down(&self) -> bool {
        // `IDLE*` and the like (slurmd briefly not answering) are not down: Slurm sets DOWN
        // itself after SlurmdTimeout, and its jobs run on meanwhile.
        self.state.starts_with("DOWN") || self.state.contains("FAIL")
    }

    /// Draining or drained: it takes no new jobs, and its jobs run on.
    pub fn is_draining(&self) -> bool {
        self.state.contains("DRAIN")
    }

    /// Its GPUs by type, as `Gres=` counts them (`gpu:a100:8` is 8 of `a100`, `gpu:4` is 4 of
    /// [`UNTYPED_GPU`]); other generic resources (`shard`, `mps`) are not GPUs.
    pub fn gpus(&self) -> Vec<(String, u32)> {
        gres_gpus(&self.gres)
    }

    /// Slurm's shards on each of its GPUs (`Gres=gpu:a100:8,shard:32` is 4): the node's
    /// `shard` count over its GPUs, rounded down; 0 when it has no shards or no GPUs.
    pub fn shards_per_gpu(&self) -> u32 {
        let gpus: u32 = self.gpus().iter().map(|(_, n)| n).sum();
        if gpus == 0 {
            return 0;
        }
        let shards: u32 = items_named(&self.gres, "shard")
            .into_iter()
            .map(|(_, n)| n)
            .fold(0u32, u32::saturating_add);
        shards / gpus
    }

    /// The node as labpool schedules it when no agent serves it: its `Gres=` GPUs numbered from
    /// 0 in the order Slurm lists them, its cores and memory, and its features less the
    /// `ds_` ones labpool itself sets. A node with Slurm shards has its cards cut into them
    /// ([`slices_of_shards`]), so `--gres=shard:N` jobs are placed there; their memory is not
    /// known from Slurm, so no cap is set on them until an agent serves the node.
    pub fn spec(&self) -> NodeSpec {
        let (share, slices) = slices_of_shards(self.shards_per_gpu());
        let mut gpus = Vec::new();
        for (gpu_type, count) in self.gpus() {
            for _ in 0..count {
                if gpus.len() as u32 >= MAX_GPUS {
                    break;
                }
                gpus.push(GpuDevice {
                    index: gpus.len() as u32,
                    gpu_type: gpu_type.clone(),
                    product: "from Slurm's Gres".to_string(),
                    memory_mib: 0,
                    uuid: None,
                    share,
                    slices: slices.clone(),
                    nvlink_peer: None,
                });
            }
        }
        NodeSpec {
            name: self.name.clone(),
            gpus,
            cpus: self.cpus.max(1),
            mem_mib: self.mem_mib.max(1),
            features: self
                .features
                .split(',')
                .filter(|f| {
                    !f.is_empty()
                        && *f != "(null)"
                        && !f.starts_with(crate::slurm_gate::view::FEATURE_PREFIX)
                })
                .map(str::to_string)
                .collect(),
        }
    }
}

/// How labpool cuts a card that Slurm cuts into `shards`: every slice (denominator) from 2 to
/// the largest labpool takes that divides the shards, and the shards they make (their least
/// common multiple: `shards` itself up to 16). `(1, [])` when the card has fewer than 2.
pub fn slices_of_shards(shards: u32) -> (u32, Vec<u32>) {
    use labpool_scheduler::slice::{MAX_DENOMINATOR, shards_of};
    let slices: Vec<u32> = (2..=MAX_DENOMINATOR.min(shards))
        .filter(|d| shards.is_multiple_of(*d))
        .collect();
    match shards_of(&slices) {
        Some(share) if !slices.is_empty() => (share, slices),
        _ => (1, Vec::new()),
    }
}

/// The GPUs of a `Gres=` value by type, in the order listed, types merged, lowercased, and an
/// untyped `gpu:N` as [`UNTYPED_GPU`].
pub fn gres_gpus(gres: &str) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = Vec::new();
    for (ty, count) in gres_items(gres) {
        let ty = ty.unwrap_or(UNTYPED_GPU).to_ascii_lowercase();
        match out.iter_mut().find(|(t, _)| *t == ty) {
            Some((_, n)) => *n = n.saturating_add(count).min(MAX_GPUS),
            None => out.push((ty, count.min(MAX_GPUS))),
        }
    }
    out
}

/// Each GPU item of a gres text as Slurm writes it, in node lines (`Gres=gpu:a100:8(S:0-1)`)
/// and in a job's gres detail (`gpu:a100:2(IDX:0-1),gpu:t4:1(IDX:3)`): its type as written
/// (None for `gpu:N`) and its count. Other generic resources (`shard`, `mps`) are not GPUs.
pub fn gres_items(gres: &str) -> Vec<(Option<&str>, u32)> {
    items_named(gres, "gpu")
}

/// Each item of generic resource `name` (`gpu`, `shard`) in a gres text: its type as written
/// (None for `NAME:N`) and its count.
fn items_named<'a>(gres: &'a str, name: &str) -> Vec<(Option<&'a str>, u32)> {
    let mut out = Vec::new();
    for item in split_top_level(gres) {
        // `gpu:a100:8(S:0-1)`: what is in brackets is not part of the count.
        let item = item.split('(').next().unwrap_or_default();
        let parts: Vec<&str> = item.split(':').collect();
        let (ty, count) = match parts.as_slice() {
            [g, n] if *g == name => (None, *n),
            [g, ty, n] if *g == name => (Some(*ty), *n),
            _ => continue,
        };
        if let Some(count) = parse_count(count) {
            out.push((ty, count));
        }
    }
    out
}

/// `8`, or `2K` as Slurm writes large counts; None for anything else.
fn parse_count(text: &str) -> Option<u32> {
    match text.strip_suffix(['K', 'k']) {
        Some(n) => n.parse::<u32>().ok()?.checked_mul(1024),
        None => text.parse().ok(),
    }
}

/// The comma-separated items of `text`, commas inside brackets kept (`gpu:a100:4(S:0,1)`).
fn split_top_level(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut from) = (0u32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&text[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[from..]);
    out.retain(|s| !s.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lines_are_read_as_scontrol_writes_them() {
        let l = "NodeName=gn1 Arch=x86_64 CoresPerSocket=32 CPUAlloc=0 CPUTot=64 AvailableFeatures=a100,ib,ds_imgs ActiveFeatures=a100,ib Gres=gpu:a100:8(S:0-1) GresDrain=N/A RealMemory=491520 State=IDLE+DRAIN ThreadsPerCore=1 Reason=disk swap Gres=x [root@2026-12-05T10:00:00]";
        let n = NodeLine::parse(l).unwrap();
        assert_eq!(n.name, "gn1");
        assert_eq!(n.state, "IDLE+DRAIN");
        assert_eq!(n.features, "a100,ib,ds_imgs");
        assert_eq!(n.reason, "disk swap Gres=x [root@2026-12-05T10:00:00]");
        assert!(n.is_draining() && !n.is_down());
        assert_eq!(n.gpus(), [("a100".to_string(), 8)]);
        let spec = n.spec();
        assert_eq!(spec.gpus.len(), 8);
        assert_eq!(spec.gpus[7].index, 7);
        assert_eq!((spec.cpus, spec.mem_mib), (64, 491520));
        assert_eq!(
            spec.features,
            ["a100", "ib"],
            "labpool's own ds_ features are not the node's"
        );
        let d = NodeLine::parse("NodeName=gn2 State=DOWN* Reason=Not responding").unwrap();
        assert!(d.is_down());
        assert!(d.gpus().is_empty() && d.spec().gpus.is_empty());
        assert!(NodeLine::parse("No nodes in the system").is_none());
    }

    #[test]
    fn gres_counts_gpus_by_type_and_nothing_else() {
        let g = |s: &str| gres_gpus(s);
        assert_eq!(g("gpu:4"), [(UNTYPED_GPU.to_string(), 4)]);
        assert_eq!(
            g("gpu:A100:4(S:0,1),gpu:v100:2,shard:a100:16,mps:200"),
            [("a100".to_string(), 4), ("v100".to_string(), 2)]
        );
        assert_eq!(g("gpu:a100:2,gpu:a100:2"), [("a100".to_string(), 4)]);
        assert!(g("(null)").is_empty() && g("").is_empty() && g("gpu:x:y").is_empty());
        assert_eq!(g("gpu:1K"), [(UNTYPED_GPU.to_string(), MAX_GPUS)]);
    }

    #[test]
    fn slurm_shards_cut_the_cards_of_a_node_without_an_agent() {
        let n = NodeLine::parse("NodeName=gn1 Gres=gpu:a100:8(S:0-1),shard:32(S:0-1) State=IDLE")
            .unwrap();
        assert_eq!(n.shards_per_gpu(), 4);
        let spec = n.spec();
        assert_eq!(
            (spec.gpus[3].share, spec.gpus[3].slices.clone()),
            (4, vec![2, 4])
        );
        assert_eq!(slices_of_shards(6), (6, vec![2, 3, 6]));
        // Beyond sixteenths, labpool's slices stop at 16: its cards hold 16 shards.
        assert_eq!(slices_of_shards(32), (16, vec![2, 4, 8, 16]));
        assert_eq!(slices_of_shards(1), (1, Vec::new()));
        assert_eq!(slices_of_shards(0), (1, Vec::new()));
        let plain = NodeLine::parse("NodeName=gn2 Gres=gpu:2 State=IDLE").unwrap();
        assert_eq!(plain.shards_per_gpu(), 0);
        assert_eq!(plain.spec().gpus[0].share, 1);
        let none = NodeLine::parse("NodeName=gn3 Gres=shard:8 State=IDLE").unwrap();
        assert_eq!(none.shards_per_gpu(), 0, "shards without GPUs cut nothing");
    }
}
