-- Quotas: limits an admin set (per user and file system, or '*' for the default), usage scans
-- (the whole report as JSON), and since when a uid has been over a soft limit (for the grace).
-- Times are milliseconds since the epoch.
CREATE TABLE quota_limits (
    user       TEXT    NOT NULL,  -- login name, or '*': the default for users with none
    fs         TEXT    NOT NULL,  -- 'home' or 'scratch'
    soft_bytes INTEGER,
    hard_bytes INTEGER,
    soft_files INTEGER,
    hard_files INTEGER,
    grace_secs INTEGER,
    set_by     TEXT    NOT NULL,
    set_at     INTEGER NOT NULL,
    PRIMARY KEY (user, fs)
);

CREATE TABLE quota_scans (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    fs       TEXT    NOT NULL,
    started  INTEGER NOT NULL,
    finished INTEGER NOT NULL,
    report   TEXT    NOT NULL     -- labpool_quotas::scan::ScanReport as JSON
);
CREATE INDEX quota_scans_fs ON quota_scans (fs, id);

CREATE TABLE quota_grace (
    uid   INTEGER NOT NULL,
    fs    TEXT    NOT NULL,
    since INTEGER NOT NULL,
    PRIMARY KEY (uid, fs)
);
