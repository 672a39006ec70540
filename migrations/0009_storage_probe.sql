-- One row the controller rewrites to learn whether the state file system has room again after
-- it filled up (see src/controller/storage.rs).
CREATE TABLE storage_probe (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL
);
