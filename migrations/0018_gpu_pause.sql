-- The GPUs a running attempt gave back while suspended (an idle session checkpointed to host
-- memory), since when, and its earlier suspended time (JSON: labpool_lifecycle::GpuPause).
-- NULL for an attempt never suspended.
ALTER TABLE jobs ADD COLUMN pause TEXT;
