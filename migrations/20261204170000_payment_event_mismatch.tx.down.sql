DROP INDEX payment_event_mismatch_idx;

--bun:split

ALTER TABLE payment_event DROP COLUMN mismatch;

--bun:split

ALTER TABLE payment_event DROP COLUMN provider_ref;
