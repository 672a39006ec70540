-- Why an admin drains a node (NULL: not draining); it stays drained across restarts.
ALTER TABLE nodes ADD COLUMN drain TEXT;
