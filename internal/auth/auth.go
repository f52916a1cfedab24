// Package auth issues and verifies the bearer tokens (HS256 JWTs) that carry
// a user's id and role, and puts the verified user into a request's context.
package auth

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/seckill"
)

// Roles carried in the "role" claim.
const (
	RoleUser  = "user"
	RoleAdmin = "admin"
)

// Tokens issues and verifies HS256 tokens signed with one secret. It is safe
// for concurrent use.
type Tokens struct {
	secret []byte
	issuer string
	parser *jwt.Parser
	macs   *macPool // nil: every token goes through the jwt parser

	// Now is the clock; nil means time.Now. Set it before use.
	Now func() time.Time
}

// NewTokens returns Tokens that sign with secret and stamp and require
// issuer. It verifies the tokens Issue makes without the jwt package's
// generic decoding (fast.go), at a fraction of its cost (see
// BenchmarkParse); anything else goes through the jwt package.
func NewTokens(secret []byte, issuer string) *Tokens {
	t := &Tokens{secret: secret, issuer: issuer, macs: newMACPool(secret)}
	t.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(issuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(t.now),
	)
	return t
}

func (t *Tokens) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// claims is the payload of a token: sub is the decimal user id.
type claims struct {
	Role string `json:"role"`
	jwt.RegisteredClaims
}

// Issue returns a signed token for a user that expires after ttl.
func (t *Tokens) Issue(userID int64, admin bool, ttl time.Duration) (string, error) {
	if userID <= 0 || seckill.IsExternalUserID(userID) {
		return "", fmt.Errorf("auth: issue token: user id %d is not between 1 and %d (the ids from %d are identity provider subjects')", userID, seckill.FirstExternalUserID-1, seckill.FirstExternalUserID)
	}
	if ttl <= 0 {
		return "", fmt.Errorf("auth: issue token: ttl %v is not positive", ttl)
	}
	role := RoleUser
	if admin {
		role = RoleAdmin
	}
	now := t.now()
	c := claims{
		Role: role,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   strconv.FormatInt(userID, 10),
			Issuer:    t.issuer,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(t.secret)
	if err != nil {
		return "", fmt.Errorf("auth: sign token: %w", err)
	}
	return s, nil
}

// Parse verifies a token (without the "Bearer " prefix) and returns its user.
// It accepts only HS256 tokens signed with the secret, from the issuer, not
// expired, whose sub is a positive decimal id below
// seckill.FirstExternalUserID and whose role is "user" or
// "admin". It takes only the compact serialization (see compact), and
// exp, nbf and iat only as JSON numbers. Every failure is an
// EUNAUTHENTICATED error with a message safe to show the client.
func (t *Tokens) Parse(token string) (*seckill.User, error) {
	if token == "" {
		return nil, seckill.Errorf(seckill.EUNAUTHENTICATED, "missing token")
	}
	if !compact(token) {
		return nil, invalidToken()
	}
	return t.parse(token)
}

// parse is Parse of a compact token.
func (t *Tokens) parse(token string) (*seckill.User, error) {
	switch u, res, err := t.parseFast(token, t.now()); res {
	case fastAccepted:
		return &u, nil
	case fastRefused:
		return nil, err
	}
	// The jwt package takes a date written as a string
	// ("exp":"9999999999"); the fast path reads only numbers.
	payload, err := base64.RawURLEncoding.DecodeString(token[strings.IndexByte(token, '.')+1 : strings.LastIndexByte(token, '.')])
	if err != nil {
		return nil, invalidToken()
	}
	if _, ok := readWritten(payload); !ok {
		return nil, invalidToken()
	}
	var c claims
	if _, err := t.parser.ParseWithClaims(token, &c, t.key); err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return nil, tokenExpired()
		}
		return nil, invalidToken()
	}
	return userFromClaims(&c)
}

func (t *Tokens) key(*jwt.Token) (any, error) { return t.secret, nil }

func userFromClaims(c *claims) (*seckill.User, error) {
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || id <= 0 || seckill.IsExternalUserID(id) {
		return nil, invalidToken()
	}
	switch c.Role {
	case RoleUser:
		return &seckill.User{ID: id}, nil
	case RoleAdmin:
		return &seckill.User{ID: id, Admin: true}, nil
	}
	return nil, invalidToken()
}

func invalidToken() error { return seckill.Errorf(seckill.EUNAUTHENTICATED, "invalid token") }

func tokenExpired() error { return seckill.Errorf(seckill.EUNAUTHENTICATED, "token expired") }
