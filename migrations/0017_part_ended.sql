-- The end of a gang's part that stopped the running attempt (JSON: its node, its state, why),
-- until the job ends with it. NULL otherwise.
ALTER TABLE jobs ADD COLUMN part_ended TEXT;
