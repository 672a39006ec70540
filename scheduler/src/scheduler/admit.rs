//! Admission: whether a job may enter the queue (partition, account, time limit, the emergency
//! lane's cap, the submit limit, and whether any node could ever take it).

use super::Scheduler;
use crate::admission::{AdmissionError, AdmitRequest, Admitted, NodeShape, explain_misfit};
use crate::cache_view::NoCache;
use crate::hostlist::compress;
use crate::job::{JobSpec, NodeRequest};
use crate::partition::Partition;
use crate::placement::{Candidate, PlacementContext};
use crate::profile::Profile;
use crate::time::{TimeLimit, Timestamp};
use std::collections::BTreeMap;

impl Scheduler {
    fn partition(&self, name: &str) -> Option<&Partition> {
        self.partitions.iter().find(|p| p.name == name)
    }

    /// The slice the partition hands a job that asked for `r` (`partition`: as named, `None`
    /// for the default one): its `default_slice` when the job asks for one GPU of no named type,
    /// no slice and no `--gpu-share`, on one node, and some node of the partition cuts its cards
    /// into that slice. `None`: the job keeps what it asked for.
    pub fn partition_slice(
        &self,
        partition: Option<&str>,
        r: &crate::job::Resources,
    ) -> Option<crate::slice::Slice> {
        let part = match partition {
            Some(name) => self.partition(name)?,
            None => self.partitions.iter().find(|p| p.default)?,
        };
        let d = part.default_slice?;
        let plain = r.gpus == 1
            && r.node_count() == 1
            && r.gpu_type.is_none()
            && r.slice.is_none()
            && !r.gpu_share;
        let offered = self
            .nodes
            .values()
            .filter(|n| part.has_node(n.name()))
            .any(|n| n.spec.gpus.iter().any(|g| g.slices.contains(&d)));
        (plain && offered).then_some(crate::slice::Slice::Fraction(d))
    }

    /// Decides whether jobs may enter the queue: partition, account, time limit, the emergency
    /// lane's cap, the submit limit, and whether any node could ever take them. A job that could
    /// run later is admitted.
    pub fn admit(&self, req: &AdmitRequest<'_>) -> Result<Admitted, AdmissionError> {
        let default = self
            .partitions
            .iter()
            .find(|p| p.default)
            .expect("checked at construction");
        let part = match req.partition {
            None => default,
            Some(name) => self
                .partition(name)
                .ok_or_else(|| AdmissionError::UnknownPartition {
                    name: name.to_string(),
                    known: self
                        .partitions
                        .iter()
                        .map(|p| {
                            if p.default {
                                format!("{} (default)", p.name)
                            } else {
                                p.name.clone()
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(", "),
                    default: default.name.clone(),
                })?,
        };
        let account = match req.account {
            Some(name) => {
                let Some(a) = self.accounts.get(name) else {
                    let known: Vec<&str> = self.accounts.keys().map(String::as_str).collect();
                    return Err(AdmissionError::UnknownAccount {
                        name: name.to_string(),
                        known: if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        },
                    });
                };
                if !a.members.contains(req.user) {
                    let mine: Vec<&str> = self
                        .accounts
                        .iter()
                        .filter(|(_, a)| a.members.contains(req.user))
                        .map(|(n, _)| n.as_str())
                        .collect();
                    return Err(AdmissionError::NotMember {
                        user: req.user.to_string(),
                        account: name.to_string(),
                        mine: if mine.is_empty() {
                            "none".to_string()
                        } else {
                            mine.join(", ")
                        },
                    });
                }
                Some(name.to_string())
            }
            None => self.default_account(req.user).map(str::to_string),
        };
        if let Some(allowed) = &part.allow_accounts
            && !account.as_ref().is_some_and(|a| allowed.contains(a))
        {
            return Err(AdmissionError::PartitionNotAllowed {
                partition: part.name.clone(),
                allowed: if allowed.is_empty() {
                    "none yet".to_string()
                } else {
                    allowed.join(", ")
                },
                account: account.clone().unwrap_or_else(|| "no account".to_string()),
            });
        }
        // A gang's GPUs count over all of its nodes.
        let total_gpus = req
            .resources
            .gpus
            .saturating_mul(req.resources.node_count());
        if let Some(max) = part.max_gpus_per_job
            && total_gpus > max
        {
            return Err(AdmissionError::PartitionGpuCap {
                partition: part.name.clone(),
                max,
                requested: total_gpus,
            });
        }
        let time_limit = match (req.time_limit, part.max_time) {
            (None, _) => part.default_time,
            (Some(TimeLimit::Unlimited), max) => max,
            (Some(TimeLimit::Seconds(s)), TimeLimit::Seconds(m)) if s > m => {
                return Err(AdmissionError::TimeOverMax {
                    requested: TimeLimit::Seconds(s),
                    partition: part.name.clone(),
                    max: part.max_time,
                });
            }
            (Some(t), _) => t,
        };
        if req.emergency {
            let c = &self.policy.credits;
            let too_long = match time_limit {
                TimeLimit::Unlimited => true,
                TimeLimit::Seconds(s) => s > c.emergency_max_time_s,
            };
            if total_gpus > c.emergency_max_gpus || too_long {
                return Err(AdmissionError::EmergencyTooBig {
                    max_gpus: c.emergency_max_gpus,
                    max_time: TimeLimit::Seconds(c.emergency_max_time_s),
                    gpus: total_gpus,
                    time: time_limit,
                });
            }
        }
        self.check_node_request(part, req.nodes)?;
        let probe = JobSpec {
            nodes: req.nodes.clone(),
            user: req.user.to_string(),
            account: account.clone(),
            partition: part.name.clone(),
            resources: req.resources.clone(),
            time_limit,
            ..JobSpec::default()
        };
        if let Some(max) = self.limits_for(&probe).max_submit_jobs_per_user {
            let queued = self
                .pending
                .values()
                .chain(self.running.values().map(|(j, _)| j))
                .filter(|j| j.user == req.user)
                .count() as u32;
            if queued + req.count.max(1) > max {
                return Err(AdmissionError::SubmitLimit {
                    user: req.user.to_string(),
                    queued,
                    adding: req.count.max(1),
                    max,
                });
            }
        }
        let ctx = PlacementContext {
            partition: part,
            now: Timestamp(0),
            cache: &NoCache,
        };
        let fitting: Vec<String> = self
            .nodes
            .values()
            .filter(|node| {
                let profile = Profile::new(Timestamp(0), node.free_capacity());
                self.chain.statically_fits(
                    &probe,
                    &Candidate {
                        node,
                        profile: &profile,
                    },
                    &ctx,
                )
            })
            .map(|n| n.name().to_string())
            .collect();
        let needed = req.resources.node_count();
        if !fitting.is_empty() && (fitting.len() as u32) < needed {
            return Err(AdmissionError::TooFewNodes {
                partition: part.name.clone(),
                requested: needed,
                fit: compress(&fitting),
                count: fitting.len() as u32,
            });
        }
        if fitting.is_empty() {
            let shapes: Vec<NodeShape<'_>> = self
                .nodes
                .values()
                .filter(|n| part.has_node(n.name()))
                .filter(|n| req.nodes.allows(n.name(), &n.spec.features))
                .map(|n| NodeShape {
                    name: n.name(),
                    gpu_types: n.spec.gpus.iter().map(|g| g.gpu_type.as_str()).collect(),
                    gpu_shareable: n.spec.gpus.iter().map(|g| g.shareable()).collect(),
                    gpu_slices: n
                        .spec
                        .gpus
                        .iter()
                        .map(|g| (g.slices.as_slice(), g.share))
                        .collect(),
                    cpus: n.spec.cpus,
                    mem_mib: n.spec.mem_mib,
                })
                .collect();
            return Err(explain_misfit(&part.name, &shapes, req.resources));
        }
        Ok(Admitted {
            partition: part.name.clone(),
            time_limit,
            account,
        })
    }

    /// Refuses `--nodelist`/`--exclude` names and `--constraint` features the pool does not
    /// have (as Slurm does), and a combination no node of the partition matches.
    fn check_node_request(
        &self,
        part: &Partition,
        nodes: &NodeRequest,
    ) -> Result<(), AdmissionError> {
        if nodes.is_any() {
            return Ok(());
        }
        let all: Vec<String> = self.nodes.keys().cloned().collect();
        for (flag, names) in [
            ("--nodelist", &nodes.nodelist),
            ("--exclude", &nodes.exclude),
        ] {
            let unknown: Vec<String> = names
                .iter()
                .filter(|n| !self.nodes.contains_key(*n))
                .cloned()
                .collect();
            if !unknown.is_empty() {
                return Err(AdmissionError::UnknownNodes {
                    flag,
                    names: unknown,
                    known: if all.is_empty() {
                        "none".into()
                    } else {
                        compress(&all)
                    },
                });
            }
        }
        if let Some(c) = &nodes.constraint {
            let mut have: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            for n in self.nodes.values() {
                for f in &n.spec.features {
                    have.entry(f).or_default().push(n.name().to_string());
                }
            }
            let missing: Vec<String> = c
                .features()
                .into_iter()
                .filter(|f| !have.contains_key(f))
                .map(str::to_string)
                .collect();
            if !missing.is_empty() {
                let known: Vec<String> = have
                    .iter()
                    .map(|(f, on)| format!("{f} ({})", compress(on)))
                    .collect();
                return Err(AdmissionError::UnknownFeatures {
                    features: missing,
                    known: if known.is_empty() {
                        "none".into()
                    } else {
                        known.join(", ")
                    },
                });
            }
        }
        let matches = self
            .nodes
            .values()
            .any(|n| part.has_node(n.name()) && nodes.allows(n.name(), &n.spec.features));
        if !matches {
            let mut what = Vec::new();
            if let Some(c) = &nodes.constraint {
                what.push(format!("--constraint {c}"));
            }
            if !nodes.nodelist.is_empty() {
                what.push(format!("--nodelist {}", compress(&nodes.nodelist)));
            }
            if !nodes.exclude.is_empty() {
                what.push(format!("--exclude {}", compress(&nodes.exclude)));
            }
            return Err(AdmissionError::NoNodeMatches {
                partition: part.name.clone(),
                what: what.join(" with "),
            });
        }
        Ok(())
    }
}
