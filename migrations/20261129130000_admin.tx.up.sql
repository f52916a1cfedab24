-- The dashboard: its operators, their sessions, and the audit log of every
-- change an operator (or an admin token) makes to a campaign.

CREATE TABLE admin_user (
    id            bigserial   PRIMARY KEY,
    name          text        NOT NULL CONSTRAINT admin_user_name_key UNIQUE
                              CONSTRAINT admin_user_name_check CHECK (char_length(name) BETWEEN 1 AND 64),
    -- bcrypt, never the password.
    password_hash text        NOT NULL CONSTRAINT admin_user_password_hash_check CHECK (password_hash LIKE '$2%'),
    created_at    timestamptz NOT NULL DEFAULT now()
);

--bun:split

-- A session is a random token held in an HttpOnly cookie; only its SHA-256 is
-- stored, so a leaked table does not log anyone in. Logout deletes the row.
CREATE TABLE admin_session (
    token_hash    bytea       PRIMARY KEY CONSTRAINT admin_session_token_hash_check CHECK (octet_length(token_hash) = 32),
    admin_user_id bigint      NOT NULL REFERENCES admin_user (id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    CONSTRAINT admin_session_expiry_check CHECK (expires_at > created_at)
);

--bun:split

CREATE INDEX admin_session_admin_user_id_idx ON admin_session (admin_user_id);

--bun:split

CREATE INDEX admin_session_expires_at_idx ON admin_session (expires_at);

--bun:split

-- Who changed what, and when. voucher_id survives the voucher (SET NULL) so
-- the record of an undone creation stays.
CREATE TABLE audit_log (
    id         bigserial   PRIMARY KEY,
    voucher_id bigint      REFERENCES voucher (id) ON DELETE SET NULL,
    actor      text        NOT NULL CONSTRAINT audit_log_actor_check CHECK (actor <> ''),
    action     text        NOT NULL CONSTRAINT audit_log_action_check CHECK (action <> ''),
    detail     text        NOT NULL DEFAULT '',
    at         timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE INDEX audit_log_voucher_id_id_idx ON audit_log (voucher_id, id DESC);
