//! Every environment variable labpool reads, in one place.

/// Path of the config file, when `--config` is not given.
pub const LABPOOL_CONFIG: &str = "LABPOOL_CONFIG";
/// Where to load NVML from, when the config does not say (`nvml_library`).
pub const LABPOOL_NVML_LIBRARY: &str = "LABPOOL_NVML_LIBRARY";
/// Log filter for `serve` and the other daemons, in `tracing` syntax (e.g. `labpool=debug`).
pub const LABPOOL_LOG: &str = "LABPOOL_LOG";
