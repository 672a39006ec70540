//! What a job used of its GPUs: each sample attributed to the jobs holding the cards, and the
//! running summary kept with the job (mean and peak utilisation, peak memory, energy).
//!
//! Attribution, per GPU: a card held by one job gives that job its utilisation, framebuffer and
//! power. A card shared by several (`--gpu-share`) gives each job its own processes' SM share
//! where NVML samples processes, else an equal split; memory is each job's own processes', and
//! power is split in proportion to utilisation (equally when the card is idle). A job on
//! several cards gets the mean utilisation and the summed memory and power.

use crate::sample::NodeSample;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One sample's share for one job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobReading {
    /// Mean utilisation over its GPUs, percent.
    pub util: f64,
    /// GPU memory used, MiB.
    pub mem_mib: u64,
    /// Power, W.
    pub power_w: f64,
    /// Its processes on the GPUs.
    pub processes: u32,
    /// GPUs it holds that were read.
    pub gpus: u32,
}

/// Splits one node sample among the jobs holding its GPUs (`holders`: GPU index to jobs).
pub fn attribute(
    sample: &NodeSample,
    holders: &BTreeMap<u32, Vec<u64>>,
) -> BTreeMap<u64, JobReading> {
    let mut out: BTreeMap<u64, JobReading> = BTreeMap::new();
    for gpu in &sample.gpus {
        let Some(jobs) = holders.get(&gpu.index).filter(|j| !j.is_empty()) else {
            continue;
        };
        let util = f64::from(gpu.util.unwrap_or(0));
        let power = gpu.power_w.unwrap_or(0.0);
        let own = |job: u64| gpu.processes.iter().filter(move |p| p.job == Some(job));
        if let [job] = jobs.as_slice() {
            let r = out.entry(*job).or_default();
            r.util += util;
            r.mem_mib += gpu.fb_used_mib.unwrap_or(0);
            r.power_w += power;
            r.processes += own(*job).count() as u32;
            r.gpus += 1;
            continue;
        }
        let per_process = gpu.processes.iter().any(|p| p.sm_util.is_some());
        let shares: Vec<f64> = jobs
            .iter()
            .map(|&job| {
                if per_process {
                    own(job).map(|p| f64::from(p.sm_util.unwrap_or(0))).sum()
                } else {
                    util / jobs.len() as f64
                }
            })
            .collect();
        let total: f64 = shares.iter().sum();
        for (&job, share) in jobs.iter().zip(&shares) {
            let r = out.entry(job).or_default();
            r.util += share.min(100.0);
            r.mem_mib += own(job).map(|p| p.used_mib).sum::<u64>();
            r.power_w += if total > 0.0 {
                power * share / total
            } else {
                power / jobs.len() as f64
            };
            r.processes += own(job).count() as u32;
            r.gpus += 1;
        }
    }
    for r in out.values_mut() {
        r.util /= f64::from(r.gpus.max(1));
    }
    out
}

/// The running summary of one attempt's GPU use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobUsage {
    /// Samples taken.
    pub samples: u64,
    /// Sum of the samples' utilisation, for the mean.
    pub util_sum: f64,
    /// Highest utilisation seen, percent.
    pub util_peak: f64,
    /// Highest GPU memory seen, MiB.
    pub mem_peak_mib: u64,
    /// Energy, J: power integrated over the time between samples.
    pub energy_j: f64,
    /// Since when its utilisation has stayed below the low mark (ms), if it has.
    pub low_since_ms: Option<i64>,
    /// Since when it has held GPUs with no process on them (ms), if it has.
    pub idle_since_ms: Option<i64>,
    /// Since when its cards have held memory with none of its processes left (ms), if so.
    pub leak_since_ms: Option<i64>,
    /// The last sample's time.
    pub last_ms: Option<i64>,
    /// The last sample's reading.
    #[serde(default)]
    pub last: JobReading,
}

/// Longest gap between two samples that is still integrated for energy: beyond it (an agent
/// away for a while) the gap counts as unknown rather than as the last power held throughout.
pub const MAX_GAP_MS: i64 = 60_000;

/// Memory a card may keep with no process on it before it counts as leaked, MiB (the driver's
/// own context holds a little).
pub const LEAK_MIB: u64 = 256;

impl JobUsage {
    /// Adds one sample's reading, taken at `now_ms`; `low_percent` is the zombie rule's mark.
    pub fn add(&mut self, now_ms: i64, reading: &JobReading, low_percent: f64) {
        if self.last_ms.is_some_and(|t| now_ms <= t) {
            return;
        }
        if let Some(last) = self.last_ms {
            let gap = now_ms - last;
            if gap <= MAX_GAP_MS {
                self.energy_j += self.last.power_w * gap as f64 / 1000.0;
            }
        }
        self.samples += 1;
        self.util_sum += reading.util;
        self.util_peak = self.util_peak.max(reading.util);
        self.mem_peak_mib = self.mem_peak_mib.max(reading.mem_mib);
        self.low_since_ms = if reading.util < low_percent {
            self.low_since_ms.or(Some(now_ms))
        } else {
            None
        };
        self.idle_since_ms = if reading.processes == 0 {
            self.idle_since_ms.or(Some(now_ms))
        } else {
            None
        };
        self.leak_since_ms = if reading.processes == 0 && reading.mem_mib > LEAK_MIB {
            self.leak_since_ms.or(Some(now_ms))
        } else {
            None
        };
        self.last_ms = Some(now_ms);
        self.last = reading.clone();
    }

    /// Mean utilisation, percent (0 before the first sample).
    pub fn util_mean(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.util_sum / self.samples as f64
        }
    }

    /// Energy, kWh.
    pub fn energy_kwh(&self) -> f64 {
        self.energy_j / 3.6e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{GpuProcess, GpuSample};

    fn gpu(index: u32, util: u32, fb: u64, power: f64, procs: Vec<GpuProcess>) -> GpuSample {
        GpuSample {
            index,
            util: Some(util),
            fb_used_mib: Some(fb),
            power_w: Some(power),
            processes: procs,
            ..GpuSample::default()
        }
    }

    fn proc(pid: u32, job: u64, mib: u64, sm: Option<u32>) -> GpuProcess {
        GpuProcess {
            pid,
            used_mib: mib,
            sm_util: sm,
            job: Some(job),
        }
    }

    #[test]
    fn a_sole_holder_gets_the_card_and_a_shared_card_is_split_by_process() {
        let sample = NodeSample {
            at_ms: 0,
            gpus: vec![
                gpu(0, 80, 10_000, 300.0, vec![proc(1, 7, 9_000, None)]),
                gpu(1, 40, 20_000, 200.0, vec![proc(1, 7, 9_000, None)]),
                gpu(
                    2,
                    90,
                    30_000,
                    400.0,
                    vec![proc(2, 8, 5_000, Some(60)), proc(3, 9, 7_000, Some(20))],
                ),
            ],
            took_us: 0,
            jobs_memory: Vec::new(),
        };
        let holders = BTreeMap::from([(0, vec![7]), (1, vec![7]), (2, vec![8, 9])]);
        let r = attribute(&sample, &holders);
        assert_eq!(r[&7].util, 60.0);
        assert_eq!(r[&7].mem_mib, 30_000);
        assert_eq!(r[&7].power_w, 500.0);
        assert_eq!(r[&7].gpus, 2);
        assert_eq!(r[&8].util, 60.0);
        assert_eq!(r[&9].util, 20.0);
        assert_eq!(r[&8].mem_mib, 5_000);
        assert_eq!(r[&9].mem_mib, 7_000);
        assert_eq!(r[&8].power_w, 300.0);
        assert_eq!(r[&9].power_w, 100.0);
    }

    #[test]
    fn energy_integrates_power_and_low_use_is_timed() {
        let mut u = JobUsage::default();
        let at = |util: f64, power: f64, processes: u32| JobReading {
            util,
            power_w: power,
            processes,
            mem_mib: 1000,
            gpus: 1,
        };
        u.add(0, &at(2.0, 100.0, 1), 5.0);
        u.add(5_000, &at(3.0, 100.0, 1), 5.0);
        u.add(10_000, &at(50.0, 300.0, 0), 5.0);
        // A repeated or older sample changes nothing.
        u.add(10_000, &at(99.0, 300.0, 1), 5.0);
        assert_eq!(u.samples, 3);
        assert_eq!(u.energy_j, 1000.0);
        assert!((u.util_mean() - 55.0 / 3.0).abs() < 1e-9);
        assert_eq!(u.util_peak, 50.0);
        assert_eq!(u.low_since_ms, None);
        assert_eq!(u.idle_since_ms, Some(10_000));
        assert_eq!(u.leak_since_ms, Some(10_000));
        u.add(10_000 + MAX_GAP_MS + 1, &at(1.0, 300.0, 1), 5.0);
        assert_eq!(u.energy_j, 1000.0, "a long gap is not integrated");
        assert_eq!(u.low_since_ms, Some(10_000 + MAX_GAP_MS + 1));
    }
}
