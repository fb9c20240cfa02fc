-- The journal's id, a random UUID (version 4) recorded once: Spark's ordo_events_by_tag source
-- writes it into its offsets, so that a checkpoint resumed against another journal is refused
-- instead of skipping that journal's events before the checkpointed position. A journal
-- upgraded to this version gets its id here too. SQLite has no UUID function: the id is built
-- from random bytes, with the version and variant digits of RFC 9562.
INSERT INTO ordo_metadata (key, value) VALUES (
    'journal_id',
    lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4'
    || substr(lower(hex(randomblob(2))), 2) || '-' || substr('89ab', 1 + abs(random() % 4), 1)
    || substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6)))
) ON CONFLICT (key) DO NOTHING
