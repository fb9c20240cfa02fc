-- Operations (issue 7): the leases of running journals, so that reconciliation and cleanup can
-- refuse to touch persistence ids a live writer uses. A journal renews its row every few seconds
-- while open and deletes it on close, and a crashed writer's row simply stops being renewed.
-- heartbeat_at and started_at are epoch milliseconds of the writer's clock.
CREATE TABLE IF NOT EXISTS writer_leases (
    writer_uuid TEXT PRIMARY KEY,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
) WITHOUT ROWID;

-- The persistence ids a writer has started (recovered or appended to) while its lease lives.
CREATE TABLE IF NOT EXISTS writer_lease_pids (
    writer_uuid TEXT NOT NULL,
    persistence_id TEXT NOT NULL,
    PRIMARY KEY (writer_uuid, persistence_id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS writer_lease_pids_by_persistence_id
    ON writer_lease_pids (persistence_id);
