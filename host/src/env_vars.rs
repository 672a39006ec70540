//! Every environment variable labpool reads, in one place; then the `LABPOOL_*` variables it
//! sets in each job's environment, which job scripts read.

/// Path of the config file, when `--config` is not given.
pub const LABPOOL_CONFIG: &str = "LABPOOL_CONFIG";
/// Where to load NVML from, when the config does not say (`nvml_library`).
pub const LABPOOL_NVML_LIBRARY: &str = "LABPOOL_NVML_LIBRARY";
/// Log filter for `serve` and the other daemons, in `tracing` syntax (e.g. `labpool=debug`).
pub const LABPOOL_LOG: &str = "LABPOOL_LOG";
/// The Python that `labpool env build-locked` builds venvs with: the controller sets it for
/// the build from `[envs] python`; unset, the build looks for one.
pub const LABPOOL_ENV_PYTHON: &str = "LABPOOL_ENV_PYTHON";
/// Marks a job attempt's processes: set in the job's environment, and looked for in
/// `/proc/PID/environ` to find every process the attempt left behind.
pub const LABPOOL_JOB_KEY: &str = "LABPOOL_JOB_KEY";
/// Shifts this process's clock for signing and checking cluster requests, in milliseconds
/// (e.g. `-600000`): the test hook for the clock-skew refusal. Never set it in production.
pub const LABPOOL_TEST_CLOCK_OFFSET_MS: &str = "LABPOOL_TEST_CLOCK_OFFSET_MS";
/// Runs this process's clock faster, as `SCALE@ORIGIN_MS` (e.g. `60@1765000000000`: from that
/// moment on, a real second reads as a minute): the test hook that replays a trace through a
/// real pool in seconds. Every process of the pool is given the same value, so they share one
/// time. Never set it in production.
pub const LABPOOL_TEST_CLOCK_SCALE: &str = "LABPOOL_TEST_CLOCK_SCALE";
/// When `1`, the controller aborts right after committing a batch that took a submit, before
/// it answers: the test hook for a reply lost to a crash. Never set it in production.
pub const LABPOOL_TEST_CRASH_AFTER_SUBMIT: &str = "LABPOOL_TEST_CRASH_AFTER_SUBMIT";
/// The search path: `labpool demo` passes it on to its jobs.
pub const PATH: &str = "PATH";
/// The home directory: `labpool demo` passes it on to its jobs.
pub const HOME: &str = "HOME";

/// Set for a job: its id.
pub const LABPOOL_JOB_ID: &str = "LABPOOL_JOB_ID";
/// Set for a job: its name.
pub const LABPOOL_JOB_NAME: &str = "LABPOOL_JOB_NAME";
/// Set for a job: which attempt this is, from 1 (requeues add one).
pub const LABPOOL_ATTEMPT: &str = "LABPOOL_ATTEMPT";
/// Set for a job: its GPUs, comma-separated, as `CUDA_VISIBLE_DEVICES` numbers them.
pub const LABPOOL_GPUS: &str = "LABPOOL_GPUS";
/// Set for a job: the node it runs on.
pub const LABPOOL_NODE: &str = "LABPOOL_NODE";
/// Set for a job on a node with an agent of its own: the address other machines reach the node
/// at, where the job's session port listens.
pub const LABPOOL_NODE_ADDR: &str = "LABPOOL_NODE_ADDR";
/// Set for a job: its partition.
pub const LABPOOL_PARTITION: &str = "LABPOOL_PARTITION";
/// Set for a job: the CPU cores it was given.
pub const LABPOOL_CPUS: &str = "LABPOOL_CPUS";
/// Set for a job that names an account: the account.
pub const LABPOOL_ACCOUNT: &str = "LABPOOL_ACCOUNT";
/// Set for a job that declares datasets: the directory of links to their node-local copies.
pub const LABPOOL_DATASETS: &str = "LABPOOL_DATASETS";
/// Set for a job with a time limit: the limit in seconds.
pub const LABPOOL_TIME_LIMIT_S: &str = "LABPOOL_TIME_LIMIT_S";
/// Set for a job: the file its `srun` steps are recorded in (one JSON record a line).
pub const LABPOOL_STEPS: &str = "LABPOOL_STEPS";
/// A multi-node job's gang file (nodes, hosts, tasks per node, secret), private to its user;
/// `srun` reads it.
pub const LABPOOL_GANG: &str = "LABPOOL_GANG";
/// An MPI hostfile (`host slots=N` lines) for the job's nodes.
pub const LABPOOL_HOSTFILE: &str = "LABPOOL_HOSTFILE";
/// The ports leased to the job, `FIRST-LAST`: `MASTER_PORT` is the first.
pub const LABPOOL_PORTS: &str = "LABPOOL_PORTS";
/// The file the agent writes when the job is preempted (absent until then): a job that polls
/// it, or traps its notice signal, saves a checkpoint and exits before the grace ends.
pub const LABPOOL_PREEMPT_NOTICE: &str = "LABPOOL_PREEMPT_NOTICE";
