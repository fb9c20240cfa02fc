-- Tracking processors (Axon): one token per (processor, segment) with its claim, requests to
-- split or merge a segment that another process owns, the last processed position of every
-- persistence id (exactly-once with transactional handlers), and dead letters.
CREATE TABLE IF NOT EXISTS tokens (
    processor TEXT COLLATE "C" NOT NULL,
    segment_id BIGINT NOT NULL,
    mask BIGINT NOT NULL,
    token TEXT,
    owner TEXT,
    claimed_at BIGINT,
    replay_until TEXT,
    PRIMARY KEY (processor, segment_id)
);

CREATE TABLE IF NOT EXISTS segment_requests (
    processor TEXT COLLATE "C" NOT NULL,
    segment_id BIGINT NOT NULL,
    action TEXT NOT NULL,
    target_owner TEXT,
    requested_at BIGINT NOT NULL,
    PRIMARY KEY (processor, segment_id)
);

CREATE TABLE IF NOT EXISTS processed_positions (
    processor TEXT COLLATE "C" NOT NULL,
    persistence_id TEXT COLLATE "C" NOT NULL,
    position BIGINT NOT NULL,
    PRIMARY KEY (processor, persistence_id)
);

CREATE TABLE IF NOT EXISTS dead_letters (
    id BIGSERIAL PRIMARY KEY,
    processor TEXT COLLATE "C" NOT NULL,
    segment_id BIGINT NOT NULL,
    persistence_id TEXT COLLATE "C" NOT NULL,
    sequence_nr BIGINT NOT NULL,
    position BIGINT NOT NULL,
    event_offset BYTEA NOT NULL,
    error TEXT NOT NULL,
    failed_at BIGINT NOT NULL
);

-- Processors over all events read the journal in TimeUUID order.
CREATE INDEX IF NOT EXISTS messages_by_timeuuid ON messages (timeuuid);
