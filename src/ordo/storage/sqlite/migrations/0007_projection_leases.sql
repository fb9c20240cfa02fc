-- The leases of running Spark projections. A projection holds no claim on its segments, so a
-- reset could not tell that it runs: its driver writes this row before the stream starts,
-- renews it every few seconds while the query is active and deletes it when the query ends.
-- A crashed driver's row stops being renewed, and a reset no longer refuses once it is older
-- than the claim timeout. heartbeat_at is epoch milliseconds of the driver's clock.
CREATE TABLE IF NOT EXISTS projection_leases (
    processor TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    heartbeat_at INTEGER NOT NULL
) WITHOUT ROWID;
