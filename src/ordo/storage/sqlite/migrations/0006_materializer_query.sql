-- The Spark streaming query that applied a materializer's batches. Its id stays with its
-- checkpoint, and a new checkpoint numbers its batches from 0 again with empty fold state: a
-- batch of another query is refused, not skipped as a replay. NULL in rows written before
-- ordo recorded it, until the next batch applied records its query.
ALTER TABLE cdc_materializer_progress ADD COLUMN query_id TEXT;
