-- Tracking processors (Axon): one token per (processor, segment) with its claim, requests to
-- split or merge a segment that another process owns, the last processed position of every
-- persistence id (exactly-once with transactional handlers), and dead letters.
CREATE TABLE IF NOT EXISTS tokens (
    processor TEXT NOT NULL,
    segment_id INTEGER NOT NULL,
    mask INTEGER NOT NULL,
    token TEXT,
    owner TEXT,
    claimed_at INTEGER,
    replay_until TEXT,
    PRIMARY KEY (processor, segment_id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS segment_requests (
    processor TEXT NOT NULL,
    segment_id INTEGER NOT NULL,
    action TEXT NOT NULL,
    target_owner TEXT,
    requested_at INTEGER NOT NULL,
    PRIMARY KEY (processor, segment_id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS processed_positions (
    processor TEXT NOT NULL,
    persistence_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (processor, persistence_id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS dead_letters (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    processor TEXT NOT NULL,
    segment_id INTEGER NOT NULL,
    persistence_id TEXT NOT NULL,
    sequence_nr INTEGER NOT NULL,
    position INTEGER NOT NULL,
    event_offset BLOB NOT NULL,
    error TEXT NOT NULL,
    failed_at INTEGER NOT NULL
);

-- Processors over all events read the journal in TimeUUID order.
CREATE INDEX IF NOT EXISTS messages_by_timeuuid ON messages (timeuuid);
