DROP TABLE IF EXISTS audit_log;

--bun:split

DROP TABLE IF EXISTS admin_session;

--bun:split

DROP TABLE IF EXISTS admin_user;
