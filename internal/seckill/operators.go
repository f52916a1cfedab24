package seckill

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// Admin is an operator of the dashboard.
type Admin struct {
	ID        int64
	Name      string
	CreatedAt time.Time
}

// Limits on operators' credentials. bcrypt reads at most 72 bytes.
const (
	MaxAdminNameLen      = 64
	MinAdminPasswordLen  = 12
	MaxAdminPasswordSize = 72
)

var adminNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]*$`)

// ValidateAdminName checks an operator's name: 1 to 64 letters, digits and
// ". _ @ -", starting with a letter or digit. EINVALID on field "user".
func ValidateAdminName(name string) error {
	if name == "" {
		return Invalidf("user", "user name is required")
	}
	if len(name) > MaxAdminNameLen || !adminNameRE.MatchString(name) {
		return Invalidf("user", "user name must be 1 to %d letters, digits or . _ @ -, starting with a letter or digit", MaxAdminNameLen)
	}
	return nil
}

// ValidateAdminPassword checks an operator's password: at least 12
// characters and at most 72 bytes. EINVALID on field "password".
func ValidateAdminPassword(password string) error {
	if utf8.RuneCountInString(password) < MinAdminPasswordLen {
		return Invalidf("password", "password must be at least %d characters", MinAdminPasswordLen)
	}
	if len(password) > MaxAdminPasswordSize {
		return Invalidf("password", "password must be at most %d bytes", MaxAdminPasswordSize)
	}
	return nil
}

// Limit is a budget of Burst attempts; one comes back every Every.
type Limit struct {
	Burst int
	Every time.Duration
}

// LoginLimits are the budgets of an admin's sign-in attempts, which the
// dashboard's in-memory limiter and the Redis one both take.
type LoginLimits struct {
	// PerPair is per client address and user name: one guesser at one
	// operator. A right password hands its attempt back.
	PerPair Limit
	// PerAddress is per client address (an IPv6 /64): one guesser at many
	// names, and a bound on the password checks (bcrypt) one address can
	// cause, right or wrong. A proxy or an office shares one.
	PerAddress Limit
	// Failures are wrong passwords per user name from every address; when
	// spent, attempts on the name are slowed down (the dashboard's
	// LoginSlowDown), and refused only from an address that has itself
	// failed on the name within FailureMemory.
	Failures Limit
}

// FailureMemory is how long a wrong password from an address on a user
// name is remembered: until the pair's budget, which it spent, would be
// full again.
func (l LoginLimits) FailureMemory() time.Duration {
	return time.Duration(max(1, l.PerPair.Burst)) * max(time.Millisecond, l.PerPair.Every)
}

// Operators are the dashboard's operators: their credentials (bcrypt
// hashes, policy above) and their sessions (random tokens of which only a
// hash is stored).
type Operators struct {
	store OperatorStore
	cost  int
}

// OperatorStore keeps operators and their sessions (Postgres).
type OperatorStore interface {
	// InsertAdmin adds an operator with a password hash. ECONFLICT when
	// the name is taken.
	InsertAdmin(ctx context.Context, name, hash string) (*Admin, error)
	// AdminByName returns an operator and its password hash ("" for an
	// identity provider's operator). ENOTFOUND.
	AdminByName(ctx context.Context, name string) (*Admin, string, error)
	// UpsertProviderAdmin returns the operator of an identity provider's
	// subject, creating it (named name, or fallback when name is another
	// operator's) at first sight. ECONFLICT when both names are taken.
	UpsertProviderAdmin(ctx context.Context, issuer, subject, name, fallback string) (*Admin, error)
	// SetAdminPassword replaces an operator's hash and ends its sessions,
	// in one transaction, unless its hash is no longer old (another
	// process changed it first); it reports whether it replaced it.
	SetAdminPassword(ctx context.Context, adminID int64, old, hash string) (bool, error)
	// InsertSession stores a session by its token's hash for ttl and
	// returns its expiry; expired sessions go on the way. ENOTFOUND for an
	// unknown operator.
	InsertSession(ctx context.Context, adminID int64, tokenHash []byte, ttl time.Duration) (time.Time, error)
	// SessionAdmin returns the operator of a live session by its
	// token's hash. ENOTFOUND.
	SessionAdmin(ctx context.Context, tokenHash []byte) (*Admin, error)
	// DeleteSession ends a session by its token's hash, if it exists.
	DeleteSession(ctx context.Context, tokenHash []byte) error
}

// DefaultBcryptCost is the work factor of new password hashes.
const DefaultBcryptCost = bcrypt.DefaultCost

// NewOperators returns the operators kept in store, hashing passwords at
// cost (DefaultBcryptCost; tests lower it to bcrypt.MinCost).
func NewOperators(store OperatorStore, cost int) (*Operators, error) {
	if store == nil {
		return nil, errors.New("seckill: operators need a store")
	}
	if cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
		return nil, fmt.Errorf("seckill: bcrypt cost %d out of range", cost)
	}
	return &Operators{store: store, cost: cost}, nil
}

func (o *Operators) hash(password string) (string, error) {
	if err := ValidateAdminPassword(password); err != nil {
		return "", err
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), o.cost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// CreateAdmin adds an operator. EINVALID for a bad name or password;
// ECONFLICT when the name is taken.
func (o *Operators) CreateAdmin(ctx context.Context, name, password string) (*Admin, error) {
	if err := ValidateAdminName(name); err != nil {
		return nil, err
	}
	hash, err := o.hash(password)
	if err != nil {
		return nil, err
	}
	return o.store.InsertAdmin(ctx, name, hash)
}

// EnsureAdmin makes an operator with this name and password exist: it
// creates one, or sets the password of an existing one whose password
// differs (ending that operator's sessions). It reports whether it changed
// anything. EINVALID for a bad name or password.
func (o *Operators) EnsureAdmin(ctx context.Context, name, password string) (bool, error) {
	if err := ValidateAdminName(name); err != nil {
		return false, err
	}
	if err := ValidateAdminPassword(password); err != nil {
		return false, err
	}
	for range 3 { // another process may create or change it meanwhile
		a, old, err := o.store.AdminByName(ctx, name)
		if ErrorCode(err) == ENOTFOUND {
			hash, err := o.hash(password)
			if err != nil {
				return false, err
			}
			if _, err := o.store.InsertAdmin(ctx, name, hash); ErrorCode(err) == ECONFLICT {
				continue
			} else if err != nil {
				return false, err
			}
			return true, nil
		} else if err != nil {
			return false, err
		}
		if bcrypt.CompareHashAndPassword([]byte(old), []byte(password)) == nil {
			return false, nil
		}
		hash, err := o.hash(password)
		if err != nil {
			return false, err
		}
		if ok, err := o.store.SetAdminPassword(ctx, a.ID, old, hash); err != nil {
			return false, err
		} else if ok {
			return true, nil
		}
	}
	return false, Errorf(EUNAVAILABLE, "operator %q keeps changing; try again", name)
}

var (
	dummyOnce sync.Once
	dummyHash []byte
)

// AuthenticateAdmin returns the operator whose name and password these are.
// A wrong name and a wrong password are the same EUNAUTHENTICATED error and
// take the same time, so the answer tells a prober nothing.
func (o *Operators) AuthenticateAdmin(ctx context.Context, name, password string) (*Admin, error) {
	wrong := Errorf(EUNAUTHENTICATED, "wrong user name or password")
	a, hash, err := o.store.AdminByName(ctx, name)
	if ErrorCode(err) == ENOTFOUND || (err == nil && hash == "") { // no such operator, or one without a password (the provider's)
		dummyOnce.Do(func() {
			dummyHash, _ = bcrypt.GenerateFromPassword([]byte("no such admin, no such password"), o.cost)
		})
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		return nil, wrong
	} else if err != nil {
		return nil, err
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) != nil {
		return nil, wrong
	}
	return a, nil
}

// ProviderAdminPrefix begins the name of every operator an identity
// provider vouches for; ValidateAdminName refuses it (":" is not allowed),
// so no local operator can be given such a name.
const ProviderAdminPrefix = "sso:"

// ProviderAdmin returns the operator an identity provider says signed in
// (issuer, subject), creating it at first sight; it has no password, so it
// signs in only through the provider. Its name is ProviderAdminPrefix and
// name (the provider's preferred_username or email), cut to
// MaxAdminNameLen; when another operator holds it, the prefix and a digest
// of issuer and subject. ECONFLICT when both are taken.
func (o *Operators) ProviderAdmin(ctx context.Context, issuer, subject, name string) (*Admin, error) {
	if subject == "" {
		return nil, Invalidf("subject", "no subject")
	}
	sum := sha256.Sum256([]byte(issuer + "\x00" + subject))
	fallback := ProviderAdminPrefix + base64.RawURLEncoding.EncodeToString(sum[:9])
	n := ProviderAdminPrefix + name
	if name == "" || !utf8.ValidString(n) {
		n = fallback
	}
	for len(n) > MaxAdminNameLen {
		_, size := utf8.DecodeLastRuneInString(n)
		n = n[:len(n)-size]
	}
	return o.store.UpsertProviderAdmin(ctx, issuer, subject, n, fallback)
}

// sessionTokenBytes is the entropy of a session token.
const sessionTokenBytes = 32

// maxSessionToken bounds the tokens looked up: longer ones are none of ours.
const maxSessionToken = 128

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// CreateAdminSession starts a session for an operator that lasts ttl and
// returns its token (for the cookie; only its hash is stored) and expiry.
// ENOTFOUND for an unknown operator.
func (o *Operators) CreateAdminSession(ctx context.Context, adminID int64, ttl time.Duration) (string, time.Time, error) {
	if ttl <= 0 {
		return "", time.Time{}, fmt.Errorf("session ttl %v is not positive", ttl)
	}
	var raw [sessionTokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("session token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	exp, err := o.store.InsertSession(ctx, adminID, hashToken(token), ttl)
	if err != nil {
		return "", time.Time{}, err
	}
	return token, exp, nil
}

// AdminBySession returns the operator of a session that exists and has not
// expired. EUNAUTHENTICATED otherwise.
func (o *Operators) AdminBySession(ctx context.Context, token string) (*Admin, error) {
	if token == "" || len(token) > maxSessionToken {
		return nil, Errorf(EUNAUTHENTICATED, "no session")
	}
	a, err := o.store.SessionAdmin(ctx, hashToken(token))
	if ErrorCode(err) == ENOTFOUND {
		return nil, Errorf(EUNAUTHENTICATED, "no session")
	}
	return a, err
}

// DeleteAdminSession ends a session; ending one that does not exist is not
// an error.
func (o *Operators) DeleteAdminSession(ctx context.Context, token string) error {
	if token == "" || len(token) > maxSessionToken {
		return nil
	}
	return o.store.DeleteSession(ctx, hashToken(token))
}
