-- Jobs, their events, and nodes. Times are milliseconds since the Unix epoch.
CREATE TABLE jobs (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    name           TEXT    NOT NULL,
    user           TEXT    NOT NULL,
    uid            INTEGER NOT NULL,
    gid            INTEGER NOT NULL,
    partition      TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    reason         TEXT,
    reason_detail  TEXT,
    gpus_requested INTEGER NOT NULL,
    gpu_type       TEXT,
    cpus           INTEGER NOT NULL,
    mem_mib        INTEGER NOT NULL,
    time_limit_s   INTEGER,            -- NULL: unlimited
    node           TEXT,
    gpus           TEXT    NOT NULL DEFAULT '',  -- allocated GPU indexes, comma-separated
    exit_code      INTEGER,
    signal         INTEGER,
    submit_time    INTEGER NOT NULL,
    start_time     INTEGER,
    end_time       INTEGER,
    attempt        INTEGER NOT NULL DEFAULT 0,
    cancel_requested_by TEXT,          -- set while a cancel of the running job is in progress
    workdir        TEXT    NOT NULL,
    stdout         TEXT,
    stderr         TEXT,
    request        TEXT    NOT NULL    -- the submit request as JSON: script, arguments, environment
);
CREATE INDEX jobs_state ON jobs (state);
CREATE INDEX jobs_end_time ON jobs (end_time);
CREATE INDEX jobs_user ON jobs (user, end_time);

CREATE TABLE job_events (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL,
    time   INTEGER NOT NULL,
    event  TEXT    NOT NULL,
    detail TEXT
);
CREATE INDEX job_events_job ON job_events (job_id);

CREATE TABLE nodes (
    name       TEXT    PRIMARY KEY,
    spec       TEXT    NOT NULL,   -- NodeSpec as JSON
    gpu_source TEXT    NOT NULL,
    last_seen  INTEGER NOT NULL
);
