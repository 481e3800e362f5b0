-- Who holds a claimed inbox event: a restarted process takes its own claims back at
-- once instead of waiting for their leases to run out, and a heartbeat keeps the leases
-- of events still in hand alive.
ALTER TABLE inbox_events ADD COLUMN lease_owner TEXT;

-- /readyz proves the database takes writes by committing one here.
CREATE TABLE write_probe (
    id        INTEGER PRIMARY KEY,
    probed_at INTEGER NOT NULL,
    pad       TEXT    NOT NULL
);
