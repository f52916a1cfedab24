package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"seckill/internal/seckill"
)

// subjectRow is a row of auth_subject: an identity provider's subject and
// the user id it was given at first sight.
type subjectRow struct {
	bun.BaseModel `bun:"table:auth_subject,alias:sub"`

	Issuer    string    `bun:"issuer,pk"`
	Subject   string    `bun:"subject,pk"`
	UserID    int64     `bun:"user_id,notnull"`
	CreatedAt time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
}

// UserIDForSubject returns the user id of one subject; see
// UserIDsForSubjects.
func (s *Store) UserIDForSubject(ctx context.Context, issuer, subject string) (int64, error) {
	ids, err := s.UserIDsForSubjects(ctx, []seckill.Subject{{Issuer: issuer, Subject: subject}})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// maxSubjectLen is the most characters of an issuer or a subject, as
// auth_subject's CHECKs allow.
const maxSubjectLen = 1024

// storableSubject returns EINVALID when auth_subject cannot hold k.
func storableSubject(k seckill.Subject) error {
	if err := storableText("issuer", k.Issuer, 0, maxSubjectLen); err != nil {
		return err
	}
	return storableText("subject", k.Subject, 1, maxSubjectLen)
}

// subjectsSQL inserts the subjects not yet known (in key order, so that
// two processes inserting overlapping sets lock in one order) and reads
// every one's id, in one statement. The read's snapshot predates the
// statement: a row another transaction inserted meanwhile (DO NOTHING
// waited for it to commit) is in neither half, and is read again after.
const subjectsSQL = `WITH input AS (
		SELECT DISTINCT issuer, subject FROM unnest(?::text[], ?::text[]) AS t(issuer, subject)),
	ins AS (
		INSERT INTO auth_subject (issuer, subject)
		SELECT issuer, subject FROM input ORDER BY issuer, subject
		ON CONFLICT (issuer, subject) DO NOTHING
		RETURNING issuer, subject, user_id)
	SELECT issuer, subject, user_id FROM ins
	UNION ALL
	SELECT s.issuer, s.subject, s.user_id FROM auth_subject AS s JOIN input USING (issuer, subject)`

// UserIDsForSubjects returns the user id of each subject (ids[i] is
// subjects[i]'s), giving the ones seen for the first time the next ids of
// auth_subject_user_id_seq (from seckill.FirstExternalUserID). It is one
// statement for the whole batch, new subjects or known; a second reads the
// few that another process inserted at the same moment.
//
// A subject Postgres cannot store (text that is not UTF-8 or holds a NUL
// byte, longer than auth_subject's CHECKs allow) is EINVALID, found before
// the statement; so is any data exception or CHECK the statement meets,
// which only a member can cause. A caller batching many callers' subjects
// isolates the EINVALID one (batch.Options.Isolate) and answers the others.
func (s *Store) UserIDsForSubjects(ctx context.Context, subjects []seckill.Subject) ([]int64, error) {
	for _, k := range subjects {
		if err := storableSubject(k); err != nil {
			return nil, err
		}
	}
	issuers, subs := make([]string, len(subjects)), make([]string, len(subjects))
	for i, k := range subjects {
		issuers[i], subs[i] = k.Issuer, k.Subject
	}
	var rows []subjectRow
	if err := s.db.NewRaw(subjectsSQL, pgdialect.Array(issuers), pgdialect.Array(subs)).Scan(ctx, &rows); err != nil {
		if memberError(err) {
			return nil, seckill.Errorf(seckill.EINVALID, "a subject cannot be stored (SQLSTATE %s)", sqlState(err))
		}
		return nil, fmt.Errorf("store: user ids for subjects: %w", err)
	}
	ids := make(map[seckill.Subject]int64, len(rows))
	for _, r := range rows {
		ids[seckill.Subject{Issuer: r.Issuer, Subject: r.Subject}] = r.UserID
	}
	var missing []seckill.Subject
	for _, k := range subjects {
		if _, ok := ids[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		issuers, subs = issuers[:0], subs[:0]
		for _, k := range missing {
			issuers, subs = append(issuers, k.Issuer), append(subs, k.Subject)
		}
		rows = rows[:0]
		err := s.db.NewRaw(`SELECT s.issuer, s.subject, s.user_id FROM auth_subject AS s
			JOIN unnest(?::text[], ?::text[]) AS t(issuer, subject) USING (issuer, subject)`,
			pgdialect.Array(issuers), pgdialect.Array(subs)).Scan(ctx, &rows)
		if err != nil {
			return nil, fmt.Errorf("store: user ids for subjects, after a concurrent insert: %w", err)
		}
		for _, r := range rows {
			ids[seckill.Subject{Issuer: r.Issuer, Subject: r.Subject}] = r.UserID
		}
	}
	out := make([]int64, len(subjects))
	for i, k := range subjects {
		id, ok := ids[k]
		if !ok {
			return nil, seckill.Errorf(seckill.EUNAVAILABLE, "subject %q of %q has no user id yet; try again", k.Subject, k.Issuer)
		}
		out[i] = id
	}
	return out, nil
}
