-- A waiting job's hold (--hold, labpool hold): JSON {"by": user, "kind": "User"|"Admin"}, NULL when not held.
ALTER TABLE jobs ADD COLUMN hold TEXT;
