-- The notice that preempts a running job (JSON: the job it is stopped for, when, and why);
-- kept after its requeue until it is placed again. NULL when it was never preempted.
ALTER TABLE jobs ADD COLUMN preemption TEXT;
