-- Two small partial indexes, so that reading the inbox's rare rows never walks the whole
-- table: a row enters the first only when an attempt failed, the second (a short key)
-- when it is claimed. (SQLite needs neither: its planner reads the problems through the
-- status index, which holds no dead entries there, and it holds claims in memory.)
--
-- The list of problems (`/status`, `inbox problems`): failed rows and retries, newest
-- first. Without it the newest-first order walked the primary key backwards through
-- every row of the table to find none.
CREATE INDEX inbox_events_problems ON inbox_events (id)
    WHERE status = 'failed' OR (status = 'pending' AND attempts > 0);
-- Claims whose lease ran out, looked for before every claim: the status index holds an
-- entry for every version of a row that was ever claimed until the table is vacuumed,
-- and the look-up visited each one's row; here the lease end is the key, so a lease
-- still running is passed over in the index.
CREATE INDEX inbox_events_leases ON inbox_events (lease_until) WHERE status = 'processing';
