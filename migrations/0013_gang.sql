-- A gang's (multi-node job's) other nodes with what it holds on each, as JSON, and the ports
-- leased to a placed job, as JSON; NULL when the job is on one node / has no lease.
ALTER TABLE jobs ADD COLUMN others TEXT;
ALTER TABLE jobs ADD COLUMN ports TEXT;
