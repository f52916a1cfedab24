package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
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

// UserIDForSubject returns the user id of subject at issuer, giving it the
// next id of auth_subject_user_id_seq (from seckill.FirstExternalUserID)
// at first sight. It is one round trip, new subject or known: the insert
// and the read are one statement. Only when another transaction inserts
// the same subject at that moment does the statement find nothing (its
// snapshot predates the other's row, and DO NOTHING waited for it to
// commit), and a second, plain read gets the row.
func (s *Store) UserIDForSubject(ctx context.Context, issuer, subject string) (int64, error) {
	var ids []int64
	err := s.db.NewRaw(`WITH ins AS (
			INSERT INTO auth_subject (issuer, subject) VALUES (?, ?)
			ON CONFLICT (issuer, subject) DO NOTHING
			RETURNING user_id)
		SELECT user_id FROM ins
		UNION ALL
		SELECT user_id FROM auth_subject WHERE issuer = ? AND subject = ?`,
		issuer, subject, issuer, subject).Scan(ctx, &ids)
	if err != nil {
		return 0, fmt.Errorf("store: user id for subject: %w", err)
	}
	if len(ids) > 0 {
		return ids[0], nil
	}
	var row subjectRow
	err = s.db.NewSelect().Model(&row).Column("user_id").Where("issuer = ? AND subject = ?", issuer, subject).Scan(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: user id for subject, after a concurrent insert: %w", err)
	}
	return row.UserID, nil
}
