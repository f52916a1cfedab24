package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/crypto/bcrypt"

	"seckill/internal/seckill"
)

// BcryptCost is the work factor of new password hashes. Tests lower it.
var BcryptCost = bcrypt.DefaultCost

// adminRow is a row of admin_user.
type adminRow struct {
	bun.BaseModel `bun:"table:admin_user,alias:a"`

	ID           int64     `bun:"id,pk,autoincrement"`
	Name         string    `bun:"name,notnull"`
	PasswordHash string    `bun:"password_hash,notnull"`
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

func hashPassword(password string) (string, error) {
	if err := seckill.ValidateAdminPassword(password); err != nil {
		return "", err
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), BcryptCost)
	if err != nil {
		return "", fmt.Errorf("store: hash password: %w", err)
	}
	return string(h), nil
}

// CreateAdmin adds an operator with a bcrypt hash of password. EINVALID for
// a bad name or password; ECONFLICT when the name is taken.
func (s *Store) CreateAdmin(ctx context.Context, name, password string) (*seckill.Admin, error) {
	if err := seckill.ValidateAdminName(name); err != nil {
		return nil, err
	}
	hash, err := hashPassword(password)
	if err != nil {
		return nil, err
	}
	row := &adminRow{Name: name, PasswordHash: hash}
	_, err = s.db.NewInsert().Model(row).Returning("id, created_at").Exec(ctx)
	if sqlState(err) == codeUniqueViolation {
		return nil, seckill.Errorf(seckill.ECONFLICT, "admin %q exists already", name)
	} else if err != nil {
		return nil, fmt.Errorf("store: insert admin: %w", err)
	}
	return toDomainAdmin(row), nil
}

// EnsureAdmin makes an operator with this name and password exist: it
// creates one, or sets the password of an existing one whose password
// differs (ending that operator's sessions). It reports whether it changed
// anything. EINVALID for a bad name or password.
func (s *Store) EnsureAdmin(ctx context.Context, name, password string) (bool, error) {
	if err := seckill.ValidateAdminName(name); err != nil {
		return false, err
	}
	if err := seckill.ValidateAdminPassword(password); err != nil {
		return false, err
	}
	changed := false
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var row adminRow
		err := tx.NewSelect().Model(&row).Where("name = ?", name).For("UPDATE").Scan(ctx)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			hash, err := hashPassword(password)
			if err != nil {
				return err
			}
			row = adminRow{Name: name, PasswordHash: hash}
			if _, err := tx.NewInsert().Model(&row).On("CONFLICT (name) DO NOTHING").Exec(ctx); err != nil {
				return fmt.Errorf("store: insert admin: %w", err)
			}
			changed = true
			return nil
		case err != nil:
			return fmt.Errorf("store: select admin: %w", err)
		}
		if bcrypt.CompareHashAndPassword([]byte(row.PasswordHash), []byte(password)) == nil {
			return nil
		}
		hash, err := hashPassword(password)
		if err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model((*adminRow)(nil)).Set("password_hash = ?", hash).Where("id = ?", row.ID).Exec(ctx); err != nil {
			return fmt.Errorf("store: update admin: %w", err)
		}
		if _, err := tx.NewDelete().Model((*sessionRow)(nil)).Where("admin_user_id = ?", row.ID).Exec(ctx); err != nil {
			return fmt.Errorf("store: delete sessions: %w", err)
		}
		changed = true
		return nil
	})
	return changed, err
}

var (
	dummyOnce sync.Once
	dummyHash []byte
)

// AuthenticateAdmin returns the operator whose name and password these are.
// A wrong name and a wrong password are the same EUNAUTHENTICATED error and
// take the same time, so the answer tells a prober nothing.
func (s *Store) AuthenticateAdmin(ctx context.Context, name, password string) (*seckill.Admin, error) {
	wrong := seckill.Errorf(seckill.EUNAUTHENTICATED, "wrong user name or password")
	var row adminRow
	err := s.db.NewSelect().Model(&row).Where("name = ?", name).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		dummyOnce.Do(func() {
			dummyHash, _ = bcrypt.GenerateFromPassword([]byte("no such admin, no such password"), BcryptCost)
		})
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		return nil, wrong
	} else if err != nil {
		return nil, fmt.Errorf("store: select admin: %w", err)
	}
	if bcrypt.CompareHashAndPassword([]byte(row.PasswordHash), []byte(password)) != nil {
		return nil, wrong
	}
	return toDomainAdmin(&row), nil
}

// sessionTokenBytes is the entropy of a session token.
const sessionTokenBytes = 32

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// CreateAdminSession starts a session for an operator that lasts ttl and
// returns its token (for the cookie; only its hash is stored) and expiry.
// Expired sessions of every operator are deleted on the way.
func (s *Store) CreateAdminSession(ctx context.Context, adminID int64, ttl time.Duration) (string, time.Time, error) {
	if ttl <= 0 {
		return "", time.Time{}, fmt.Errorf("store: session ttl %v is not positive", ttl)
	}
	var raw [sessionTokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("store: session token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	row := &sessionRow{TokenHash: hashToken(token), AdminUserID: adminID}
	_, err := s.db.NewInsert().Model(row).
		Value("expires_at", "now() + ?::interval", fmt.Sprintf("%d microseconds", ttl.Microseconds())).
		Returning("created_at, expires_at").Exec(ctx)
	if sqlState(err) == codeForeignKeyViolation {
		return "", time.Time{}, seckill.Errorf(seckill.ENOTFOUND, "admin %d not found", adminID)
	} else if err != nil {
		return "", time.Time{}, fmt.Errorf("store: insert session: %w", err)
	}
	if _, err := s.db.NewDelete().Model((*sessionRow)(nil)).Where("expires_at <= now()").Exec(ctx); err != nil {
		return "", time.Time{}, fmt.Errorf("store: delete expired sessions: %w", err)
	}
	return token, row.ExpiresAt.UTC(), nil
}

// AdminBySession returns the operator of a session that exists and has not
// expired. EUNAUTHENTICATED otherwise.
func (s *Store) AdminBySession(ctx context.Context, token string) (*seckill.Admin, error) {
	if token == "" || len(token) > 128 {
		return nil, seckill.Errorf(seckill.EUNAUTHENTICATED, "no session")
	}
	var row adminRow
	err := s.db.NewSelect().Model(&row).
		Join("JOIN admin_session AS s ON s.admin_user_id = a.id").
		Where("s.token_hash = ?", hashToken(token)).
		Where("s.expires_at > now()").
		Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, seckill.Errorf(seckill.EUNAUTHENTICATED, "no session")
	} else if err != nil {
		return nil, fmt.Errorf("store: select session: %w", err)
	}
	return toDomainAdmin(&row), nil
}

// DeleteAdminSession ends a session; ending one that does not exist is not
// an error.
func (s *Store) DeleteAdminSession(ctx context.Context, token string) error {
	if token == "" {
		return nil
	}
	if _, err := s.db.NewDelete().Model((*sessionRow)(nil)).Where("token_hash = ?", hashToken(token)).Exec(ctx); err != nil {
		return fmt.Errorf("store: delete session: %w", err)
	}
	return nil
}
