-- What each attempt used of its GPUs, summed from the agents' samples (labpool_monitor::usage).
CREATE TABLE job_gpu_usage (
    job           INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,
    summary       TEXT    NOT NULL,   -- labpool_monitor::usage::JobUsage as JSON
    util_mean     REAL    NOT NULL,
    util_peak     REAL    NOT NULL,
    mem_peak_mib  INTEGER NOT NULL,
    energy_j      REAL    NOT NULL,
    PRIMARY KEY (job, attempt)
);
