-- Operators an identity provider vouches for (issue #22): they sign in to
-- the dashboard through the provider and have no password here. Each is
-- one (issuer, subject); a local operator has neither, and a password.
ALTER TABLE admin_user
    ADD COLUMN issuer  text,
    ADD COLUMN subject text,
    ALTER COLUMN password_hash DROP NOT NULL,
    DROP CONSTRAINT admin_user_password_hash_check,
    ADD CONSTRAINT admin_user_password_hash_check
        CHECK (CASE WHEN subject IS NULL THEN password_hash LIKE '$2%' ELSE password_hash IS NULL END),
    ADD CONSTRAINT admin_user_subject_check CHECK ((issuer IS NULL) = (subject IS NULL));

--bun:split

ALTER TABLE admin_user ADD CONSTRAINT admin_user_issuer_subject_key UNIQUE (issuer, subject);
