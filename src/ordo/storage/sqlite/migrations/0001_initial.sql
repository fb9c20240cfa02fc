-- The logical schema of DESIGN.md "Storage", following Akka Persistence Cassandra's tables.
CREATE TABLE IF NOT EXISTS ordo_metadata (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS messages (
    persistence_id TEXT NOT NULL,
    sequence_nr INTEGER NOT NULL,
    timeuuid BLOB NOT NULL,
    writer_uuid TEXT NOT NULL,
    serializer TEXT NOT NULL,
    manifest TEXT NOT NULL,
    payload BLOB NOT NULL,
    metadata TEXT,
    tags TEXT NOT NULL,
    PRIMARY KEY (persistence_id, sequence_nr)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS all_persistence_ids (
    persistence_id TEXT PRIMARY KEY,
    deleted_to INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS tag_views (
    tag TEXT NOT NULL,
    timebucket INTEGER NOT NULL,
    timeuuid BLOB NOT NULL,
    persistence_id TEXT NOT NULL,
    tag_pid_sequence_nr INTEGER NOT NULL,
    sequence_nr INTEGER NOT NULL,
    persistence_id_hash INTEGER NOT NULL,
    writer_uuid TEXT NOT NULL,
    serializer TEXT NOT NULL,
    manifest TEXT NOT NULL,
    payload BLOB NOT NULL,
    metadata TEXT,
    tags TEXT NOT NULL,
    PRIMARY KEY (tag, timebucket, timeuuid, persistence_id, tag_pid_sequence_nr)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS tag_write_progress (
    persistence_id TEXT NOT NULL,
    tag TEXT NOT NULL,
    sequence_nr INTEGER NOT NULL,
    tag_pid_sequence_nr INTEGER NOT NULL,
    timeuuid BLOB NOT NULL,
    PRIMARY KEY (persistence_id, tag)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS tag_scanning (
    persistence_id TEXT PRIMARY KEY,
    sequence_nr INTEGER NOT NULL
) WITHOUT ROWID;
