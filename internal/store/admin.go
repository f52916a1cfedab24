package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/seckill"
)

// Operators and their sessions (seckill.OperatorStore). The password
// policy, the hashing and the session tokens are the domain's
// (seckill.Operators); this keeps rows.

var _ seckill.OperatorStore = (*Store)(nil)

// adminRow is a row of admin_user.
type adminRow struct {
	bun.BaseModel `bun:"table:admin_user,alias:a"`

	ID           int64     `bun:"id,pk,autoincrement"`
	Name         string    `bun:"name,notnull"`
	PasswordHash string    `bun:"password_hash,nullzero"` // NULL for an identity provider's operator
	CreatedAt    time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
}

// sessionRow is a row of admin_session.
type sessionRow struct {
	bun.BaseModel `bun:"table:admin_session,alias:s"`

	TokenHash   []byte    `bun:"token_hash,pk"`
	AdminUserID int64     `bun:"admin_user_id,notnull"`
	CreatedAt   time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	ExpiresAt   time.Time `bun:"expires_at,notnull"`
}

func toDomainAdmin(r *adminRow) *seckill.Admin {
	return &seckill.Admin{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt.UTC()}
}

// InsertAdmin adds an operator with a password hash. ECONFLICT when the
// name is taken.
func (s *Store) InsertAdmin(ctx context.Context, name, hash string) (*seckill.Admin, error) {
	row := &adminRow{Name: name, PasswordHash: hash}
	_, err := s.db.NewInsert().Model(row).Returning("id, created_at").Exec(ctx)
	if sqlState(err) == codeUniqueViolation {
		return nil, seckill.Errorf(seckill.ECONFLICT, "admin %q exists already", name)
	} else if err != nil {
		return nil, fmt.Errorf("store: insert admin: %w", err)
	}
	return toDomainAdmin(row), nil
}

// UpsertProviderAdmin returns the operator of an identity provider's
// subject, creating it at first sign-in, named name (or, when another
// operator holds that name, name and a digest of the subject). Its name
// follows the provider's on later sign-ins.
func (s *Store) UpsertProviderAdmin(ctx context.Context, issuer, subject, name, fallback string) (*seckill.Admin, error) {
	for _, n := range []string{name, fallback} {
		var row adminRow
		err := s.db.NewRaw(`INSERT INTO admin_user (name, issuer, subject) VALUES (?, ?, ?)
			ON CONFLICT (issuer, subject) DO UPDATE SET name = EXCLUDED.name
			RETURNING id, name, created_at`, n, issuer, subject).Scan(ctx, &row)
		if sqlState(err) == codeUniqueViolation {
			continue // the name is another operator's
		} else if err != nil {
			return nil, fmt.Errorf("store: upsert provider admin: %w", err)
		}
		return toDomainAdmin(&row), nil
	}
	return nil, seckill.Errorf(seckill.ECONFLICT, "operator names %q and %q are taken", name, fallback)
}

// AdminByName returns an operator and its password hash. ENOTFOUND.
func (s *Store) AdminByName(ctx context.Context, name string) (*seckill.Admin, string, error) {
	var row adminRow
	err := s.db.NewSelect().Model(&row).Where("name = ?", name).Scan(ctx)
	if err := oneRow(err, "select", "admin", name); err != nil {
		return nil, "", err
	}
	return toDomainAdmin(&row), row.PasswordHash, nil
}

// SetAdminPassword replaces an operator's hash, if it is still old, and
// ends its sessions, in one transaction.
func (s *Store) SetAdminPassword(ctx context.Context, adminID int64, old, hash string) (bool, error) {
	changed := false
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewUpdate().Model((*adminRow)(nil)).Set("password_hash = ?", hash).
			Where("id = ?", adminID).Where("password_hash = ?", old).Exec(ctx)
		if err != nil {
			return fmt.Errorf("update admin: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		if _, err := tx.NewDelete().Model((*sessionRow)(nil)).Where("admin_user_id = ?", adminID).Exec(ctx); err != nil {
			return fmt.Errorf("delete sessions: %w", err)
		}
		changed = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: set password of admin %d: %w", adminID, err)
	}
	return changed, nil
}

// InsertSession stores a session for ttl and returns its expiry, deleting
// expired sessions of every operator on the way. ENOTFOUND for an unknown
// operator.
func (s *Store) InsertSession(ctx context.Context, adminID int64, tokenHash []byte, ttl time.Duration) (time.Time, error) {
	row := &sessionRow{TokenHash: tokenHash, AdminUserID: adminID}
	_, err := s.db.NewInsert().Model(row).
		Value("expires_at", "now() + ?::interval", fmt.Sprintf("%d microseconds", ttl.Microseconds())).
		Returning("created_at, expires_at").Exec(ctx)
	if sqlState(err) == codeForeignKeyViolation {
		return time.Time{}, seckill.Errorf(seckill.ENOTFOUND, "admin %d not found", adminID)
	} else if err != nil {
		return time.Time{}, fmt.Errorf("store: insert session: %w", err)
	}
	if _, err := s.db.NewDelete().Model((*sessionRow)(nil)).Where("expires_at <= now()").Exec(ctx); err != nil {
		return time.Time{}, fmt.Errorf("store: delete expired sessions: %w", err)
	}
	return row.ExpiresAt.UTC(), nil
}

// SessionAdmin returns the operator of a live session. ENOTFOUND.
func (s *Store) SessionAdmin(ctx context.Context, tokenHash []byte) (*seckill.Admin, error) {
	var row adminRow
	err := s.db.NewSelect().Model(&row).
		Join("JOIN admin_session AS s ON s.admin_user_id = a.id").
		Where("s.token_hash = ?", tokenHash).
		Where("s.expires_at > now()").
		Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "no session")
	} else if err != nil {
		return nil, fmt.Errorf("store: select session: %w", err)
	}
	return toDomainAdmin(&row), nil
}

// DeleteSession ends a session, if it exists.
func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if _, err := s.db.NewDelete().Model((*sessionRow)(nil)).Where("token_hash = ?", tokenHash).Exec(ctx); err != nil {
		return fmt.Errorf("store: delete session: %w", err)
	}
	return nil
}
