-- Change data capture: the schema registry (versions per table, accepted or waiting for an
-- operator), the messages a materializer emitted, and the last micro-batch each materializer
-- applied (written in the same transaction as its messages and rows: exactly once).
CREATE TABLE IF NOT EXISTS cdc_schemas (
    schema_id BIGSERIAL PRIMARY KEY,
    table_name TEXT COLLATE "C" NOT NULL,
    version BIGINT NOT NULL,
    schema_json TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    is_accepted BOOLEAN NOT NULL,
    registered_at BIGINT NOT NULL,
    UNIQUE (table_name, version)
);

CREATE TABLE IF NOT EXISTS cdc_messages (
    materializer TEXT COLLATE "C" NOT NULL,
    batch_id BIGINT NOT NULL,
    ordinal BIGINT NOT NULL,
    table_name TEXT COLLATE "C" NOT NULL,
    key_json TEXT COLLATE "C" NOT NULL,
    op TEXT NOT NULL,
    before_json TEXT,
    after_json TEXT,
    schema_id BIGINT,
    write_time BIGINT NOT NULL,
    source TEXT NOT NULL,
    replica TEXT NOT NULL,
    segment TEXT NOT NULL,
    position BIGINT NOT NULL,
    PRIMARY KEY (materializer, batch_id, ordinal)
);

CREATE INDEX IF NOT EXISTS cdc_messages_by_key ON cdc_messages (materializer, table_name, key_json);

CREATE TABLE IF NOT EXISTS cdc_materializer_progress (
    materializer TEXT COLLATE "C" PRIMARY KEY,
    batch_id BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
