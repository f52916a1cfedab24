DROP TABLE auth_subject;
