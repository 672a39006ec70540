-- Reservations: GPUs of one node booked for a window, as JSON (the scheduler's Reservation:
-- start, end, node, GPUs, users, account). Ended ones are deleted by the controller.
CREATE TABLE reservations (
    name TEXT PRIMARY KEY,
    booking TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
