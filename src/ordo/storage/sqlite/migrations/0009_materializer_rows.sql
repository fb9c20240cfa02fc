-- The rows a materializer's messages leave in its materialized table (creates and reads less
-- deletes), kept with each batch it applies, so that the sink sees a table emptied by hand
-- without counting every earlier message. NULL in rows written before ordo kept it: the next
-- batch applied counts the messages once and stores it.
ALTER TABLE cdc_materializer_progress ADD COLUMN table_rows INTEGER;
