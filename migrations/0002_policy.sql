-- Accounts, QOS limits and the credit ledger; jobs gain their account, lane and array place.
CREATE TABLE accounts (
    name        TEXT    PRIMARY KEY,
    description TEXT    NOT NULL DEFAULT '',
    limits      TEXT    NOT NULL DEFAULT '{}',   -- Limits as JSON
    created     INTEGER NOT NULL
);

CREATE TABLE account_members (
    account TEXT NOT NULL REFERENCES accounts (name) ON DELETE CASCADE,
    user    TEXT NOT NULL,
    PRIMARY KEY (account, user)
);

CREATE TABLE user_limits (
    user   TEXT PRIMARY KEY,
    limits TEXT NOT NULL                     -- Limits as JSON
);

-- Append-only: rows are never updated or deleted.
CREATE TABLE ledger (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    time   INTEGER NOT NULL,
    user   TEXT    NOT NULL,
    kind   TEXT    NOT NULL,                 -- grant, charge, rebate, emergency_token
    amount REAL    NOT NULL,
    job    INTEGER,
    note   TEXT
);
CREATE INDEX ledger_user_time ON ledger (user, time);

ALTER TABLE jobs ADD COLUMN account TEXT;
ALTER TABLE jobs ADD COLUMN emergency INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN array_id INTEGER;
ALTER TABLE jobs ADD COLUMN array_task INTEGER;
CREATE INDEX jobs_array ON jobs (array_id);
