-- The logical schema of DESIGN.md "Storage", following Akka Persistence Cassandra's tables.
-- Identifiers use the C collation: bytewise order, as in SQLite, on any server locale.
CREATE TABLE IF NOT EXISTS ordo_metadata (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS messages (
    persistence_id TEXT COLLATE "C" NOT NULL,
    sequence_nr BIGINT NOT NULL,
    timeuuid BYTEA NOT NULL,
    writer_uuid TEXT NOT NULL,
    serializer TEXT NOT NULL,
    manifest TEXT NOT NULL,
    payload BYTEA NOT NULL,
    metadata TEXT,
    tags TEXT NOT NULL,
    PRIMARY KEY (persistence_id, sequence_nr)
);

CREATE TABLE IF NOT EXISTS all_persistence_ids (
    persistence_id TEXT COLLATE "C" PRIMARY KEY,
    deleted_to BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS tag_views (
    tag TEXT COLLATE "C" NOT NULL,
    timebucket BIGINT NOT NULL,
    timeuuid BYTEA NOT NULL,
    persistence_id TEXT COLLATE "C" NOT NULL,
    tag_pid_sequence_nr BIGINT NOT NULL,
    sequence_nr BIGINT NOT NULL,
    persistence_id_hash BIGINT NOT NULL,
    writer_uuid TEXT NOT NULL,
    serializer TEXT NOT NULL,
    manifest TEXT NOT NULL,
    payload BYTEA NOT NULL,
    metadata TEXT,
    tags TEXT NOT NULL,
    PRIMARY KEY (tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr)
);

CREATE TABLE IF NOT EXISTS tag_write_progress (
    persistence_id TEXT COLLATE "C" NOT NULL,
    tag TEXT COLLATE "C" NOT NULL,
    sequence_nr BIGINT NOT NULL,
    tag_pid_sequence_nr BIGINT NOT NULL,
    timeuuid BYTEA NOT NULL,
    PRIMARY KEY (persistence_id, tag)
);

CREATE TABLE IF NOT EXISTS tag_scanning (
    persistence_id TEXT COLLATE "C" PRIMARY KEY,
    sequence_nr BIGINT NOT NULL
);
