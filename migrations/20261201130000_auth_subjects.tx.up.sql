-- The users an identity provider vouches for (issue #22): its tokens name
-- a user by a string subject, unique within its issuer; seckill knows users
-- by a bigint. Each (issuer, subject) gets the next id of its own sequence
-- at first sight, and keeps it.
--
-- The ids start at 2^62 (seckill.FirstExternalUserID): the HS256 tokens we
-- sign carry integer subjects, which internal/auth refuses from 2^62 up,
-- so the two kinds of user never share an id. 2^62 .. 2^63-1 is 4.6e18 ids:
-- the values ON CONFLICT DO NOTHING burns on a race do not matter.
CREATE SEQUENCE auth_subject_user_id_seq AS bigint START WITH 4611686018427387904 MINVALUE 4611686018427387904;

--bun:split

CREATE TABLE auth_subject (
    issuer     text        NOT NULL CONSTRAINT auth_subject_issuer_check CHECK (char_length(issuer) <= 1024),
    subject    text        NOT NULL CONSTRAINT auth_subject_subject_check CHECK (char_length(subject) BETWEEN 1 AND 1024),
    user_id    bigint      NOT NULL DEFAULT nextval('auth_subject_user_id_seq')
                           CONSTRAINT auth_subject_user_id_key UNIQUE
                           CONSTRAINT auth_subject_user_id_check CHECK (user_id >= 4611686018427387904),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject)
);

--bun:split

ALTER SEQUENCE auth_subject_user_id_seq OWNED BY auth_subject.user_id;
