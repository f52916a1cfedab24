ALTER TABLE payment DROP COLUMN provider_ref;
