-- Submit idempotency: the key a client sends with a submit, and the answer it got. A retry
-- with the same key (the reply was lost when the controller died after committing) gets the
-- same answer instead of queueing the job again. Written in the same transaction as the jobs.
CREATE TABLE submit_keys (
    uid INTEGER NOT NULL,
    key TEXT NOT NULL,
    reply TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (uid, key)
);
