-- The journal's id, a random UUID (version 4) recorded once: Spark's ordo_events_by_tag source
-- writes it into its offsets, so that a checkpoint resumed against another journal is refused
-- instead of skipping that journal's events before the checkpointed position. A journal
-- upgraded to this version gets its id here too.
INSERT INTO ordo_metadata (key, value) VALUES ('journal_id', gen_random_uuid()::text)
ON CONFLICT (key) DO NOTHING
