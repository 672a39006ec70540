//! This machine as a node: its spec, GPUs, isolation, dataset cache and executor. The
//! controller's in-process agent (one box) and `labpool agent` (several) start it the same way.

use crate::api::agent::{AgentOrder, AgentReport};
use crate::discovery::{GpuSource, gpu_minors, node_spec};
use crate::executor::{Executor, NodeIsolation};
use crate::settings::{Config, IsolationMode};
use crate::stager::{CacheSettings, Stager};
use anyhow::Context;
use labpool_cache::store::StageOptions;
use labpool_isolation::Support;
use labpool_scheduler::node::NodeSpec;
use std::os::unix::fs::DirBuilderExt;
use tokio::sync::mpsc;

/// A started node: what it reports, and the stager its executor uses.
pub struct LocalNode {
    /// Name, GPUs, cores, memory.
    pub spec: NodeSpec,
    /// Where the GPUs came from.
    pub source: GpuSource,
    /// The cgroup isolation it offers.
    pub support: Support,
    /// The tools environments run with.
    pub tools: labpool_envs::tools::Tools,
    /// Its dataset cache.
    pub stager: Stager,
    /// Its GPU readings, latest first; empty without NVML.
    pub gpu_samples: crate::embedded::Samples,
    /// How it checkpoints GPU state, when it can (`[jobs] suspend_idle`).
    pub checkpoint: Option<crate::checkpoint::Checkpointer>,
    isolation: NodeIsolation,
}

/// Starts the controller's in-process node: finds its GPUs and isolation, opens its cache, and
/// runs its executor, whose reports go to `reports` ([`crate::embedded::StartEmbedded`]).
pub fn start_embedded(
    config: &Config,
    reports: mpsc::UnboundedSender<AgentReport>,
) -> anyhow::Result<crate::embedded::EmbeddedNode> {
    let node = LocalNode::start(config, reports.clone())?;
    let (orders, order_rx) = mpsc::unbounded_channel();
    node.run_executor(config, reports, order_rx)?;
    Ok(crate::embedded::EmbeddedNode {
        gpu_source: node.source.as_str().to_string(),
        support: node.support.clone(),
        tools: node.tools.clone(),
        samples: node.gpu_samples.clone(),
        checkpoint: node.checkpoint.as_ref().map(|c| c.describe()),
        spec: node.spec,
        orders,
        ports: std::sync::Arc::new(crate::forward::JobPorts {
            spool: config.spool_dir(),
        }),
    })
}

impl LocalNode {
    /// Finds the node's GPUs and isolation and opens its cache; reports go to `reports`.
    pub fn start(
        config: &Config,
        reports: mpsc::UnboundedSender<AgentReport>,
    ) -> anyhow::Result<LocalNode> {
        let (spec, source) = node_spec(&config.node);
        match &source {
            GpuSource::None(why) => tracing::warn!(
                node = %spec.name,
                "no GPUs: {why}; set virtual_gpus under [node] in {} to try labpool without them",
                config.path.display()
            ),
            other => {
                tracing::info!(node = %spec.name, gpus = spec.gpus.len(), source = other.as_str(), "node GPUs found")
            }
        }
        let spool = config.spool_dir();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&spool)
            .with_context(|| format!("cannot create spool {}", spool.display()))?;
        let cache = CacheSettings {
            dir: config.cache_dir(),
            capacity: config.cache.capacity,
            high_watermark: config.cache.high_watermark,
            low_watermark: config.cache.low_watermark,
            options: StageOptions {
                workers: config.cache.workers,
                bandwidth: config.cache.bandwidth,
                ..StageOptions::default()
            },
        };
        let stager = Stager::start(spec.name.clone(), cache, reports).with_context(|| {
            format!(
                "cannot open the dataset cache {}; check dir under [cache] in {}",
                config.cache_dir().display(),
                config.path.display()
            )
        })?;
        let support = match config.jobs.isolation {
            IsolationMode::Auto => Support::detect_with(config.jobs.device_filter),
            IsolationMode::Off => Support::off(),
        };
        tracing::info!(node = %spec.name, isolation = %support.describe(), "job isolation");
        let tools = labpool_envs::tools::Tools::detect(config.envs.python.clone());
        let isolation = NodeIsolation {
            support: support.clone(),
            gpu_minors: gpu_minors(&config.node, &source, &spec.gpus),
            tools: tools.clone(),
        };
        let library = crate::discovery::nvml_library(config.node.nvml_library.as_deref());
        // A suspended job's card is kept from it by its device cgroup: no cgroup, no suspend.
        let checkpoint = (config.jobs.suspend_idle
            && !spec.gpus.is_empty()
            && support.devices.is_some())
        .then(|| {
            let driver = (source == GpuSource::Nvml)
                .then(|| crate::discovery::nvml_driver_version(library.as_deref()))
                .flatten();
            crate::checkpoint::Checkpointer::detect(config.node.cuda_checkpoint.as_deref(), driver)
        })
        .flatten();
        if let Some(c) = &checkpoint {
            tracing::info!(node = %spec.name, checkpoint = %c.describe(), "idle sessions are suspended");
        }
        let gpu_samples = crate::gpu_sampler::start(
            library,
            config.metrics.sample_interval,
            source == GpuSource::Nvml,
            crate::gpu_sampler::JobsMemory {
                support: support.clone(),
                spool: config.spool_dir(),
            },
        );
        Ok(LocalNode {
            gpu_samples,
            checkpoint,
            spec,
            source,
            support,
            tools,
            stager,
            isolation,
        })
    }

    /// Starts the executor: it carries out `orders` and reports to `reports`.
    pub fn run_executor(
        &self,
        config: &Config,
        reports: mpsc::UnboundedSender<AgentReport>,
        orders: mpsc::UnboundedReceiver<AgentOrder>,
    ) -> anyhow::Result<()> {
        let exe = std::env::current_exe()
            .context("cannot find the labpool binary to start job shims with")?;
        let executor = Executor::new(
            self.spec.name.clone(),
            config.spool_dir(),
            exe,
            reports,
            self.stager.clone(),
            self.isolation.clone(),
        )
        .with_checkpoint(self.checkpoint.clone());
        tokio::spawn(executor.run(orders));
        Ok(())
    }
}
