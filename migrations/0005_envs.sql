-- Software environments: builds (by id: the hash of kind, lock and platform) and the names
-- that point at them. A member's names are theirs; names with owner '' are shared ones that
-- an admin published. Times are milliseconds since the epoch.
CREATE TABLE envs (
    id            TEXT    PRIMARY KEY,
    kind          TEXT    NOT NULL,
    lock          TEXT    NOT NULL,
    platform      TEXT    NOT NULL,
    spec          TEXT    NOT NULL,
    dir           TEXT    NOT NULL,
    archive       TEXT    NOT NULL,
    bytes         INTEGER NOT NULL,
    archive_bytes INTEGER NOT NULL,
    built         INTEGER NOT NULL,
    built_by      TEXT    NOT NULL,
    build_ms      INTEGER NOT NULL,
    build_log     TEXT    NOT NULL
);

CREATE TABLE env_names (
    owner   TEXT    NOT NULL,
    name    TEXT    NOT NULL,
    id      TEXT    NOT NULL REFERENCES envs (id),
    updated INTEGER NOT NULL,
    PRIMARY KEY (owner, name)
);

-- What isolation was in force for a job's run, in words.
ALTER TABLE jobs ADD COLUMN isolation TEXT;
