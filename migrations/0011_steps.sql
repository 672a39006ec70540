-- The srun steps of each job attempt, as the node reported them when the attempt ended.
CREATE TABLE steps (
    job        INTEGER NOT NULL,
    attempt    INTEGER NOT NULL,
    step       INTEGER NOT NULL,
    name       TEXT NOT NULL,
    tasks      INTEGER NOT NULL,
    nodes      TEXT NOT NULL,
    start_time INTEGER NOT NULL,
    end_time   INTEGER NOT NULL,
    exit_code  INTEGER NOT NULL,
    signal     INTEGER,
    PRIMARY KEY (job, attempt, step)
);
