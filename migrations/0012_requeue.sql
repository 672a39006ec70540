-- Who asked for a running job to be requeued (labpool requeue), until its attempt has stopped.
ALTER TABLE jobs ADD COLUMN requeue_requested_by TEXT;
