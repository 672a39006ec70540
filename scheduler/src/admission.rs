//! Admission: is a job acceptable at all? A job is refused at submit only when it could never
//! run here: an unknown partition, a time over the partition's maximum, or a shape no node has
//! (a `--gpu-share` job included, where no node has enough GPUs configured with `share` > 1).
//! Anything that could run later is accepted and waits with a reason.

use crate::job::{NodeRequest, Resources};
use crate::time::TimeLimit;
use labpool_units::format_mib;
use std::collections::BTreeMap;

/// What admission looks at.
#[derive(Debug, Clone)]
pub struct AdmitRequest<'a> {
    /// The submitting user.
    pub user: &'a str,
    /// `--account`, if given.
    pub account: Option<&'a str>,
    /// `--partition`, if given.
    pub partition: Option<&'a str>,
    /// `--time`, if given.
    pub time_limit: Option<TimeLimit>,
    /// What each job needs.
    pub resources: &'a Resources,
    /// Which nodes it may run on.
    pub nodes: &'a NodeRequest,
    /// Through the emergency lane.
    pub emergency: bool,
    /// How many jobs this submission makes (an array makes several).
    pub count: u32,
}

/// A submitted job's place after admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// Its partition.
    pub partition: String,
    /// Its time limit, after the partition's default and maximum.
    pub time_limit: TimeLimit,
    /// The account it runs under: the one asked for, else the user's first, else none.
    pub account: Option<String>,
}

/// Why a job was refused at submit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// `--partition` names no partition.
    #[error("unknown partition '{name}'; partitions here: {known}")]
    UnknownPartition {
        /// What was asked for.
        name: String,
        /// The configured ones, default marked.
        known: String,
        /// The default partition.
        default: String,
    },
    /// The time limit is over the partition's maximum.
    #[error("time limit {requested} is over partition {partition}'s maximum of {max}")]
    TimeOverMax {
        /// What was asked for.
        requested: TimeLimit,
        /// The partition.
        partition: String,
        /// Its maximum.
        max: TimeLimit,
    },
    /// `--account` names no account.
    #[error("unknown account '{name}'; accounts here: {known}")]
    UnknownAccount {
        /// What was asked for.
        name: String,
        /// The configured ones.
        known: String,
    },
    /// The user is not in the account.
    #[error("{user} is not a member of account {account}; {user}'s accounts: {mine}")]
    NotMember {
        /// The user.
        user: String,
        /// The account.
        account: String,
        /// The user's accounts.
        mine: String,
    },
    /// The partition is for other accounts.
    #[error("partition {partition} is only for accounts {allowed}; this job runs under {account}")]
    PartitionNotAllowed {
        /// The partition.
        partition: String,
        /// Who may use it.
        allowed: String,
        /// The job's account, or "no account".
        account: String,
    },
    /// More GPUs than the partition allows per job.
    #[error(
        "partition {partition} takes jobs of at most {max} GPUs; this one asks for {requested}"
    )]
    PartitionGpuCap {
        /// The partition.
        partition: String,
        /// Its cap.
        max: u32,
        /// What was asked for.
        requested: u32,
    },
    /// An emergency job over the lane's size cap.
    #[error(
        "emergency jobs may ask for at most {max_gpus} GPUs and {max_time}; this one asks for {gpus} GPUs and {time}"
    )]
    EmergencyTooBig {
        /// The cap on GPUs.
        max_gpus: u32,
        /// The cap on time.
        max_time: TimeLimit,
        /// What was asked for.
        gpus: u32,
        /// Its time limit.
        time: TimeLimit,
    },
    /// Over `MaxSubmitJobsPerUser`.
    #[error(
        "{user} has {queued} jobs queued or running and this adds {adding}; MaxSubmitJobsPerUser={max}"
    )]
    SubmitLimit {
        /// The user.
        user: String,
        /// Jobs they have.
        queued: u32,
        /// Jobs being submitted.
        adding: u32,
        /// The limit.
        max: u32,
    },
    /// The partition has no nodes.
    #[error("partition {0} has no nodes yet")]
    NoNodes(String),
    /// `--nodelist` or `--exclude` names nodes the pool does not have.
    #[error("{flag} names {} that {} not in the pool: {}; nodes here: {known}", if .names.len() == 1 { "a node" } else { "nodes" }, if .names.len() == 1 { "is" } else { "are" }, .names.join(", "))]
    UnknownNodes {
        /// `--nodelist` or `--exclude`.
        flag: &'static str,
        /// The unknown names.
        names: Vec<String>,
        /// The nodes there are, compressed.
        known: String,
    },
    /// `--constraint` names features no node has.
    #[error("--constraint names {} no node has: {}; features here: {known}", if .features.len() == 1 { "a feature" } else { "features" }, .features.join(", "))]
    UnknownFeatures {
        /// The unknown features.
        features: Vec<String>,
        /// Features with their nodes, or "none".
        known: String,
    },
    /// No node of the partition passes `--constraint`, `--nodelist` and `--exclude` together.
    #[error("no node in partition {partition} matches {what}")]
    NoNodeMatches {
        /// The partition.
        partition: String,
        /// The options, as given.
        what: String,
    },
    /// No node has the GPU type.
    #[error(
        "no node in partition {partition} has GPUs of type '{requested}'; types here: {available}"
    )]
    UnknownGpuType {
        /// What was asked for.
        requested: String,
        /// The partition.
        partition: String,
        /// Types with counts, such as `rtx4090 (4 on gpu1)`.
        available: String,
    },
    /// GPUs asked for, but no node has any.
    #[error("job asks for {requested} GPUs but no node in partition {partition} has GPUs")]
    NoGpus {
        /// What was asked for.
        requested: u32,
        /// The partition.
        partition: String,
    },
    /// More GPUs than any node has.
    #[error("job asks for {requested} {what} but the node with the most, {node}, has {most}")]
    TooManyGpus {
        /// What was asked for.
        requested: u32,
        /// "GPUs" or "a100 GPUs".
        what: String,
        /// The node with the most.
        node: String,
        /// How many it has.
        most: u32,
    },
    /// A slice, but no node cuts a card of its type into it.
    #[error(
        "job asks for {slice} ({what}) but no node in partition {partition} cuts such a card into it; {available}"
    )]
    NoSlicedGpus {
        /// The slice asked for.
        slice: crate::slice::Slice,
        /// "any GPU" or "an a100".
        what: String,
        /// The partition.
        partition: String,
        /// What the partition's nodes offer.
        available: String,
    },
    /// A `--gpu-share` job, but no node has that many GPUs that may be shared.
    #[error(
        "job asks to share {requested} {what} (--gpu-share) but no node in partition {partition} has {requested} shareable {what} (share > 1); {available}"
    )]
    NoShareableGpus {
        /// GPUs asked for.
        requested: u32,
        /// "GPUs" or "a100 GPUs".
        what: String,
        /// The partition.
        partition: String,
        /// Shareable GPUs per node, such as `shareable: 2 on gpu1`, or `no GPU here is shared`.
        available: String,
    },
    /// More cores than any node has.
    #[error("job asks for {requested} CPUs but the largest node, {node}, has {most}")]
    TooManyCpus {
        /// What was asked for.
        requested: u32,
        /// The largest node.
        node: String,
        /// Its cores.
        most: u32,
    },
    /// More memory than any node has.
    #[error("job asks for {} of memory but the largest node, {node}, has {}", format_mib(*.requested), format_mib(*.most))]
    TooMuchMemory {
        /// MiB asked for.
        requested: u64,
        /// The largest node.
        node: String,
        /// Its MiB.
        most: u64,
    },
    /// A gang asks for more nodes than can ever take its per-node request.
    #[error(
        "job asks for {requested} nodes but only {count} in partition {partition} can take what it asks of each node: {fit}"
    )]
    TooFewNodes {
        /// The partition.
        partition: String,
        /// Nodes asked for.
        requested: u32,
        /// The nodes that could, compressed.
        fit: String,
        /// How many they are.
        count: u32,
    },
    /// Each limit is met by some node, but no single node meets all.
    #[error("no single node in partition {partition} has {gpus} GPUs, {cpus} CPUs and {} of memory together", format_mib(*.mem_mib))]
    NoNodeFitsAll {
        /// The partition.
        partition: String,
        /// GPUs asked for.
        gpus: u32,
        /// Cores asked for.
        cpus: u32,
        /// Memory asked for.
        mem_mib: u64,
    },
}

impl AdmissionError {
    /// A runnable next step for the user.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            AdmissionError::UnknownPartition { default, .. } => {
                format!(
                    "leave out --partition to use {default}; `labpool partition list` shows each one's limits"
                )
            }
            AdmissionError::TimeOverMax { max, .. } => format!("ask for --time={max} or less"),
            AdmissionError::UnknownAccount { .. } => {
                "leave out --account to use your default account; `labpool account list` shows them".to_string()
            }
            AdmissionError::NotMember { account, user, .. } => {
                format!("an admin can add you: labpool account add-user {account} {user}")
            }
            AdmissionError::PartitionNotAllowed { .. } => {
                "use another partition (`labpool partition list`), or ask an admin to add you to an allowed account".to_string()
            }
            AdmissionError::PartitionGpuCap { max, .. } => {
                format!("ask for at most {max} GPUs here, or use another partition")
            }
            AdmissionError::EmergencyTooBig { max_gpus, max_time, .. } => {
                format!("shrink the job (--gpus {max_gpus} --time {max_time}), or submit it without --emergency")
            }
            AdmissionError::SubmitLimit { .. } => {
                "wait for some of your jobs to end, or cancel some (`labpool queue --me`)".to_string()
            }
            AdmissionError::NoNodes(_) => {
                "start `labpool serve` (or an agent) so that a node joins".to_string()
            }
            AdmissionError::UnknownNodes { .. } => {
                "`labpool nodes` lists the nodes by name".to_string()
            }
            AdmissionError::UnknownFeatures { .. } => {
                "an admin gives a node features with features = [...] under [node] in its config; `labpool nodes --json` shows them".to_string()
            }
            AdmissionError::NoNodeMatches { .. } => {
                "`labpool nodes --json` shows each node's partition and features".to_string()
            }
            AdmissionError::UnknownGpuType { .. } => {
                "--gpus N without a type takes any type".to_string()
            }
            AdmissionError::NoGpus { .. } => {
                "leave out --gpus for a CPU-only job; on a machine without an \
                 NVIDIA driver, switch on virtual_gpus under [node] in the config"
                    .to_string()
            }
            AdmissionError::TooManyGpus { most, .. } => {
                format!("ask for at most {most} (--gpus {most})")
            }
            AdmissionError::NoShareableGpus { .. } => {
                "leave out --gpu-share to take whole GPUs; an admin makes GPUs shareable with \
                 share = N for a node or GPU type in the config"
                    .to_string()
            }
            AdmissionError::NoSlicedGpus { .. } => {
                "ask for a slice a node offers, or for a whole GPU; an admin cuts cards with \
                 slices = { TYPE = [2, 4] } under [node] in the config"
                    .to_string()
            }
            AdmissionError::TooManyCpus { most, .. } => format!("ask for at most -c {most}"),
            AdmissionError::TooMuchMemory { most, .. } => {
                format!("ask for at most --mem={}", format_mib(*most))
            }
            AdmissionError::NoNodeFitsAll { .. } => {
                "`labpool nodes` shows what each node has".to_string()
            }
            AdmissionError::TooFewNodes { count, .. } => format!(
                "ask for at most -N {count}, or for less on each node (--gpus-per-node, -c, --mem)"
            ),
        })
    }
}

/// The static shape of a node, as admission sees it.
pub(crate) struct NodeShape<'a> {
    pub name: &'a str,
    pub gpu_types: Vec<&'a str>,
    /// Whether each GPU (as in `gpu_types`) may be shared.
    pub gpu_shareable: Vec<bool>,
    /// Each GPU's slices and shards (as in `gpu_types`): `([], 1)` when it is not sliced.
    pub gpu_slices: Vec<(&'a [u32], u32)>,
    pub cpus: u32,
    pub mem_mib: u64,
}

/// Explains why no node can ever take `res`; called only once the chain found none.
pub(crate) fn explain_misfit(
    partition: &str,
    nodes: &[NodeShape<'_>],
    res: &Resources,
) -> AdmissionError {
    if nodes.is_empty() {
        return AdmissionError::NoNodes(partition.to_string());
    }
    if res.gpus > 0 {
        let wanted = res.gpu_type.as_deref();
        let count = |n: &NodeShape<'_>| {
            n.gpu_types
                .iter()
                .filter(|t| wanted.is_none_or(|w| w == **t))
                .count() as u32
        };
        // max_by_key keeps the last maximum; reverse so that the first node in order wins ties.
        let best = nodes
            .iter()
            .rev()
            .max_by_key(|n| count(n))
            .expect("nodes is not empty");
        if let Some(t) = wanted
            && count(best) == 0
        {
            let mut types: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            for n in nodes {
                let mut per: BTreeMap<&str, u32> = BTreeMap::new();
                for g in &n.gpu_types {
                    *per.entry(g).or_default() += 1;
                }
                for (g, c) in per {
                    types
                        .entry(g)
                        .or_default()
                        .push(format!("{c} on {}", n.name));
                }
            }
            let available = if types.is_empty() {
                "none (no node has GPUs)".to_string()
            } else {
                types
                    .iter()
                    .map(|(t, on)| format!("{t} ({})", on.join(", ")))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return AdmissionError::UnknownGpuType {
                requested: t.to_string(),
                partition: partition.to_string(),
                available,
            };
        }
        if wanted.is_none() && count(best) == 0 {
            return AdmissionError::NoGpus {
                requested: res.gpus,
                partition: partition.to_string(),
            };
        }
        let what = wanted.map_or("GPUs".to_string(), |t| format!("{t} GPUs"));
        if count(best) < res.gpus {
            return AdmissionError::TooManyGpus {
                requested: res.gpus,
                what,
                node: best.name.to_string(),
                most: count(best),
            };
        }
        if let Some(slice) = res.slice {
            let takes = |(cut, shards): &(&[u32], u32)| match slice {
                crate::slice::Slice::Fraction(d) => cut.contains(&d),
                crate::slice::Slice::Shards(n) => !cut.is_empty() && n <= *shards,
            };
            let fits = |n: &NodeShape<'_>| {
                n.gpu_types
                    .iter()
                    .zip(&n.gpu_slices)
                    .any(|(t, c)| takes(c) && wanted.is_none_or(|w| w == *t))
            };
            if !nodes.iter().any(fits) {
                let mut on: Vec<String> = Vec::new();
                for n in nodes {
                    for (t, (cut, _)) in n.gpu_types.iter().zip(&n.gpu_slices) {
                        let cuts: Vec<String> = cut.iter().map(|d| format!("1/{d}")).collect();
                        let line = format!("{t} into {} on {}", cuts.join(", "), n.name);
                        if !cut.is_empty() && !on.contains(&line) {
                            on.push(line);
                        }
                    }
                }
                return AdmissionError::NoSlicedGpus {
                    slice,
                    what: wanted.map_or("any GPU".to_string(), |t| format!("a {t}")),
                    partition: partition.to_string(),
                    available: if on.is_empty() {
                        "no card here is sliced".to_string()
                    } else {
                        format!("sliced: {}", on.join("; "))
                    },
                };
            }
        }
        if res.gpu_share {
            let shareable = |n: &NodeShape<'_>| {
                n.gpu_types
                    .iter()
                    .zip(&n.gpu_shareable)
                    .filter(|(t, s)| **s && wanted.is_none_or(|w| w == **t))
                    .count() as u32
            };
            if nodes.iter().all(|n| shareable(n) < res.gpus) {
                let on: Vec<String> = nodes
                    .iter()
                    .filter(|n| shareable(n) > 0)
                    .map(|n| format!("{} on {}", shareable(n), n.name))
                    .collect();
                return AdmissionError::NoShareableGpus {
                    requested: res.gpus,
                    what,
                    partition: partition.to_string(),
                    available: if on.is_empty() {
                        "no GPU here is shared".to_string()
                    } else {
                        format!("shareable: {}", on.join(", "))
                    },
                };
            }
        }
    }
    let biggest_cpu = nodes
        .iter()
        .rev()
        .max_by_key(|n| n.cpus)
        .expect("nodes is not empty");
    if biggest_cpu.cpus < res.cpus {
        return AdmissionError::TooManyCpus {
            requested: res.cpus,
            node: biggest_cpu.name.to_string(),
            most: biggest_cpu.cpus,
        };
    }
    let biggest_mem = nodes
        .iter()
        .rev()
        .max_by_key(|n| n.mem_mib)
        .expect("nodes is not empty");
    if biggest_mem.mem_mib < res.mem_mib {
        return AdmissionError::TooMuchMemory {
            requested: res.mem_mib,
            node: biggest_mem.name.to_string(),
            most: biggest_mem.mem_mib,
        };
    }
    AdmissionError::NoNodeFitsAll {
        partition: partition.to_string(),
        gpus: res.gpus,
        cpus: res.cpus,
        mem_mib: res.mem_mib,
    }
}
