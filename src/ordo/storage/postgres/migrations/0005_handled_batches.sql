-- Tracking processors whose policy spreads a persistence id's events over segments (property:,
-- concurrent) have no per-id position: each batch records the events it handled, so that a
-- segment that starts back_track_period before its token (after a restart, split, merge or
-- release) skips exactly what was handled and still handles a late event behind the token.
-- One row per batch: first and last offset key, and the events as a JSON list of
-- [persistence id, position]. Rows behind the point where every segment's stream starts are
-- deleted as the tokens move on.
CREATE TABLE IF NOT EXISTS handled_batches (
    processor TEXT COLLATE "C" NOT NULL,
    last_offset BYTEA NOT NULL,
    first_offset BYTEA NOT NULL,
    events TEXT NOT NULL,
    PRIMARY KEY (processor, last_offset)
);
