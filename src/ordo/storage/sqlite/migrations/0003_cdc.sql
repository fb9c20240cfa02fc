-- Change data capture: the schema registry (versions per table, accepted or waiting for an
-- operator), the messages a materializer emitted, and the last micro-batch each materializer
-- applied (written in the same transaction as its messages and rows: exactly once).
CREATE TABLE IF NOT EXISTS cdc_schemas (
    schema_id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name TEXT NOT NULL,
    version INTEGER NOT NULL,
    schema_json TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    is_accepted INTEGER NOT NULL,
    registered_at INTEGER NOT NULL,
    UNIQUE (table_name, version)
);

CREATE TABLE IF NOT EXISTS cdc_messages (
    materializer TEXT NOT NULL,
    batch_id INTEGER NOT NULL,
    ordinal INTEGER NOT NULL,
    table_name TEXT NOT NULL,
    key_json TEXT NOT NULL,
    op TEXT NOT NULL,
    before_json TEXT,
    after_json TEXT,
    schema_id INTEGER,
    write_time INTEGER NOT NULL,
    source TEXT NOT NULL,
    replica TEXT NOT NULL,
    segment TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (materializer, batch_id, ordinal)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS cdc_messages_by_key ON cdc_messages (materializer, table_name, key_json);

CREATE TABLE IF NOT EXISTS cdc_materializer_progress (
    materializer TEXT PRIMARY KEY,
    batch_id INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
