-- Datasets: registered sources, their versions (a version is the hash of the source's
-- manifest), and which version each job was given. Times are milliseconds since the epoch.
CREATE TABLE datasets (
    name        TEXT    PRIMARY KEY,
    path        TEXT    NOT NULL,
    description TEXT    NOT NULL DEFAULT '',
    created     INTEGER NOT NULL,
    created_by  TEXT    NOT NULL,
    current     TEXT    NOT NULL     -- the version new jobs get
);

CREATE TABLE dataset_versions (
    name          TEXT    NOT NULL REFERENCES datasets (name),
    version       TEXT    NOT NULL,
    created       INTEGER NOT NULL,
    files         INTEGER NOT NULL,
    bytes         INTEGER NOT NULL,
    changed_files INTEGER NOT NULL,  -- against the version before (all files for the first)
    changed_bytes INTEGER NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE job_datasets (
    job_id  INTEGER NOT NULL,
    name    TEXT    NOT NULL,
    version TEXT    NOT NULL,
    PRIMARY KEY (job_id, name)
);
