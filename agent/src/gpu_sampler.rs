//! The node's GPU sampler: every `[metrics] sample_interval` it reads each GPU through NVML
//! (utilisation, memory, temperature, power, energy, SM clock, throttle reasons, ECC, retired
//! pages, processes with their memory and SM share) and tells each process's labpool job from
//! its cgroup or, failing that, its environment. The latest reading is published on a watch
//! channel: heartbeats carry it to the controller, and the node's `/metrics` serves it.
//!
//! A value NVML refuses (NotSupported on consumer cards, say) is left `None`. XID errors come
//! through NVML's event API, watched in a thread of its own.

use labpool_monitor::sample::{Ecc, GpuProcess, GpuSample, NodeSample};
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, RetirementCause, TemperatureSensor,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Where running attempts' memory is read: the node's isolation and its job spool.
pub struct JobsMemory {
    /// The cgroups the node offers.
    pub support: labpool_isolation::Support,
    /// The spool: one directory per running attempt.
    pub spool: PathBuf,
}

/// Starts sampling with the NVML at `library` (the system's when None, none when
/// `nvml_present` is false) and, where the node has memory isolation, each running attempt's
/// memory. With neither the channel stays empty.
pub fn start(
    library: Option<PathBuf>,
    every: Duration,
    nvml_present: bool,
    memory: JobsMemory,
) -> crate::embedded::Samples {
    let (tx, rx) = watch::channel(None);
    let nvml = if nvml_present {
        match crate::discovery::load_nvml(library.as_deref()) {
            Ok(n) => Some(Arc::new(n)),
            Err(e) => {
                tracing::warn!("GPU sampling is off: NVML did not load ({e})");
                None
            }
        }
    } else {
        None
    };
    let memory = Arc::new(memory);
    if nvml.is_none() && memory.support.memory.is_none() {
        return rx;
    }
    let xids: Xids = Arc::default();
    if let Some(n) = &nvml {
        watch_xids(n.clone(), xids.clone());
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_process_ts = BTreeMap::new();
        loop {
            tick.tick().await;
            let (n, m, x) = (nvml.clone(), memory.clone(), xids.clone());
            let ts = std::mem::take(&mut last_process_ts);
            let reading = tokio::task::spawn_blocking(move || {
                let (mut sample, ts) = match &n {
                    Some(n) => read(n, ts),
                    None => (
                        NodeSample {
                            at_ms: crate::transport::cluster_now_ms(),
                            ..NodeSample::default()
                        },
                        ts,
                    ),
                };
                sample.jobs_memory = jobs_memory(&m);
                let seen = x.lock().unwrap_or_else(|p| p.into_inner());
                for g in &mut sample.gpus {
                    g.xid = seen.get(&g.index).cloned();
                }
                drop(seen);
                (sample, ts)
            });
            let Ok((sample, ts)) = reading.await else {
                return;
            };
            last_process_ts = ts;
            if tx.send(Some(sample)).is_err() {
                return;
            }
        }
    });
    rx
}

/// XID errors seen since the agent started, by GPU index.
type Xids = Arc<std::sync::Mutex<BTreeMap<u32, labpool_monitor::sample::Xid>>>;

/// Waits for XID errors on every GPU in a thread of its own (NVML's event API blocks), counting
/// them with the last code. A driver without the event API leaves the counts empty.
fn watch_xids(nvml: Arc<Nvml>, xids: Xids) {
    use nvml_wrapper::bitmasks::event::EventTypes;
    use nvml_wrapper::enums::event::XidError;
    use nvml_wrapper::error::NvmlError;
    let spawned = std::thread::Builder::new()
        .name("nvml-xid".into())
        .spawn(move || {
            let Ok(mut set) = nvml.create_event_set() else {
                tracing::info!("NVML gives no events here: XID errors are not counted");
                return;
            };
            for index in 0..nvml.device_count().unwrap_or(0) {
                let Ok(dev) = nvml.device_by_index(index) else {
                    continue;
                };
                set = match dev.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::info!("XID events cannot be watched on GPU {index}: {e}");
                        return;
                    }
                };
            }
            loop {
                match set.wait(1000) {
                    Ok(event) => {
                        let Ok(index) = event.device.index() else {
                            continue;
                        };
                        let code = match event.event_data {
                            Some(XidError::Value(v)) => v,
                            _ => 999,
                        };
                        tracing::warn!(gpu = index, xid = code, "XID error");
                        let mut seen = xids.lock().unwrap_or_else(|p| p.into_inner());
                        let x = seen.entry(index).or_default();
                        x.count += 1;
                        x.last = code;
                    }
                    Err(NvmlError::Timeout) => {}
                    Err(e) => {
                        tracing::warn!("stopped watching XID errors: {e}");
                        return;
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the XID watcher: {e}");
    }
}

/// Each running attempt's memory, from its cgroup.
fn jobs_memory(m: &JobsMemory) -> Vec<labpool_monitor::sample::JobMemory> {
    if m.support.memory.is_none() {
        return Vec::new();
    }
    crate::jobdir::JobDir::list(&m.spool)
        .unwrap_or_default()
        .iter()
        .filter_map(|dir| {
            let name = crate::executor::cgroup_name(dir);
            Some(labpool_monitor::sample::JobMemory {
                job: dir.job,
                attempt: dir.attempt,
                bytes: labpool_isolation::memory_used(&m.support, &name)?,
            })
        })
        .collect()
}

/// One reading of every GPU. `since` keeps, per GPU, the timestamp of the last per-process
/// sample seen, so each reading asks NVML only for newer ones.
pub fn read(nvml: &Nvml, mut since: BTreeMap<u32, u64>) -> (NodeSample, BTreeMap<u32, u64>) {
    let began = Instant::now();
    let count = nvml.device_count().unwrap_or(0);
    let mut gpus = Vec::with_capacity(count as usize);
    for index in 0..count {
        let Ok(dev) = nvml.device_by_index(index) else {
            continue;
        };
        let util = dev.utilization_rates().ok();
        let mem = dev.memory_info().ok();
        let mib = |b: u64| b / (1024 * 1024);
        let ecc = |e: MemoryError, c: EccCounter| dev.total_ecc_errors(e, c).ok();
        let mut sm: BTreeMap<u32, u32> = BTreeMap::new();
        let last = since.get(&index).copied();
        if let Ok(samples) = dev.process_utilization_stats(last) {
            for s in samples {
                since.insert(
                    index,
                    s.timestamp.max(since.get(&index).copied().unwrap_or(0)),
                );
                sm.insert(s.pid, s.sm_util);
            }
        }
        let processes = dev
            .running_compute_processes()
            .unwrap_or_default()
            .into_iter()
            .map(|p| GpuProcess {
                pid: p.pid,
                used_mib: match p.used_gpu_memory {
                    nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => mib(b),
                    nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => 0,
                },
                sm_util: sm.get(&p.pid).copied(),
                job: job_of(p.pid),
            })
            .collect();
        gpus.push(GpuSample {
            index,
            uuid: dev.uuid().ok(),
            model: dev.name().unwrap_or_default(),
            minor: dev.minor_number().ok(),
            util: util.as_ref().map(|u| u.gpu),
            mem_util: util.as_ref().map(|u| u.memory),
            fb_used_mib: mem.as_ref().map(|m| mib(m.used)),
            fb_free_mib: mem.as_ref().map(|m| mib(m.free)),
            temp_c: dev.temperature(TemperatureSensor::Gpu).ok(),
            power_w: dev.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
            energy_mj: dev.total_energy_consumption().ok(),
            sm_clock_mhz: dev.clock_info(Clock::SM).ok(),
            throttle: dev.current_throttle_reasons().ok().map(|r| r.bits()),
            ecc: Ecc {
                sbe_volatile: ecc(MemoryError::Corrected, EccCounter::Volatile),
                dbe_volatile: ecc(MemoryError::Uncorrected, EccCounter::Volatile),
                sbe_aggregate: ecc(MemoryError::Corrected, EccCounter::Aggregate),
                dbe_aggregate: ecc(MemoryError::Uncorrected, EccCounter::Aggregate),
            },
            retired_pages: match (
                dev.retired_pages(RetirementCause::MultipleSingleBitEccErrors),
                dev.retired_pages(RetirementCause::DoubleBitEccError),
            ) {
                (Ok(s), Ok(d)) => Some((s.len() as u64, d.len() as u64)),
                _ => None,
            },
            xid: None,
            processes,
        });
    }
    let sample = NodeSample {
        at_ms: crate::transport::cluster_now_ms(),
        gpus,
        took_us: began.elapsed().as_micros() as u64,
        jobs_memory: Vec::new(),
    };
    (sample, since)
}

/// A node's own `/metrics` page: its GPUs, labelled with the jobs whose processes are on them
/// (the node does not know their users; the controller's page has both).
pub fn render_node(node: &str, latest: &Option<NodeSample>) -> String {
    use labpool_monitor::exposition::{Exposition, Kind};
    let mut page = Exposition::new();
    if let Some(sample) = latest {
        labpool_monitor::dcgm::write_node(&mut page, node, sample, |index| {
            let jobs = sample
                .gpus
                .iter()
                .find(|g| g.index == index)
                .map(|g| g.jobs())
                .unwrap_or_default();
            labpool_monitor::dcgm::Holder {
                job: jobs
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                user: String::new(),
            }
        });
        page.family(
            "labpool_gpu_sample_duration_seconds",
            Kind::Gauge,
            "How long the node's last GPU reading took (the sampling overhead).",
        );
        page.sample(
            "labpool_gpu_sample_duration_seconds",
            &[("node", node)],
            sample.took_us as f64 / 1e6,
        );
    }
    page.finish()
}

/// The labpool job a process belongs to: from its cgroup (`…/labpool/TAG-JOB.ATTEMPT`), else
/// from `LABPOOL_JOB_ID` in its environment (readable by root, which agents run as).
pub fn job_of(pid: u32) -> Option<u64> {
    let proc = Path::new("/proc").join(pid.to_string());
    if let Ok(cgroups) = std::fs::read_to_string(proc.join("cgroup"))
        && let Some(job) = cgroups.lines().find_map(job_in_cgroup)
    {
        return Some(job);
    }
    let environ = std::fs::read(proc.join("environ")).ok()?;
    environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"LABPOOL_JOB_ID="))
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
}

/// The job in one `/proc/PID/cgroup` line, if it is a labpool attempt's cgroup.
fn job_in_cgroup(line: &str) -> Option<u64> {
    let (_, rest) = line.split_once("/labpool/")?;
    let name = rest.split('/').next()?;
    let (_, job_attempt) = name.split_once('-')?;
    let (job, attempt) = job_attempt.split_once('.')?;
    attempt.parse::<u32>().ok()?;
    job.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_read_from_labpool_cgroup_lines_only() {
        assert_eq!(job_in_cgroup("4:memory:/labpool/1a2b3c4d-12.2"), Some(12));
        assert_eq!(job_in_cgroup("0::/labpool/1a2b3c4d-7.1/sub"), Some(7));
        assert_eq!(job_in_cgroup("0::/user.slice/session-1.scope"), None);
        assert_eq!(job_in_cgroup("0::/labpool/not-a-job"), None);
    }
}
