DELETE FROM admin_user WHERE subject IS NOT NULL;

--bun:split

ALTER TABLE admin_user
    DROP CONSTRAINT admin_user_issuer_subject_key,
    DROP CONSTRAINT admin_user_subject_check,
    DROP CONSTRAINT admin_user_password_hash_check,
    DROP COLUMN issuer,
    DROP COLUMN subject,
    ALTER COLUMN password_hash SET NOT NULL,
    ADD CONSTRAINT admin_user_password_hash_check CHECK (password_hash LIKE '$2%');
