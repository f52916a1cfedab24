package auth

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"seckill/internal/seckill"
)

// verified is a bounded cache of the tokens verified lately, keyed by the
// SHA-256 of the token, so that a token's signature (an RSA or ECDSA
// verification, 20–100 times an HMAC) is checked once per process in its
// lifetime rather than on every request.
type verified struct {
	c *lru.Cache[[sha256.Size]byte, verifiedEntry]
}

type verifiedEntry struct {
	user  seckill.User
	until int64 // Unix ns: the entry answers before it, and is gone after
}

// hashers are SHA-256 states to reuse: a token is a string, and hashing
// it through []byte(token) would copy it (about 800 bytes for an RS256
// token) on every request.
var hashers = sync.Pool{New: func() any { return sha256.New() }}

// tokenHash is the verification cache's key of token.
func tokenHash(token string) [sha256.Size]byte {
	h := hashers.Get().(hash.Hash)
	h.Reset()
	_, _ = io.WriteString(h, token)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	hashers.Put(h)
	return sum
}

func newVerified(size int) (*verified, error) {
	c, err := lru.New[[sha256.Size]byte, verifiedEntry](size)
	if err != nil {
		return nil, fmt.Errorf("auth: verification cache: %w", err)
	}
	return &verified{c: c}, nil
}

// get returns the user of a token verified before, if its entry is still
// good at now.
func (v *verified) get(h [sha256.Size]byte, now time.Time) (seckill.User, bool) {
	e, ok := v.c.Get(h)
	if !ok {
		return seckill.User{}, false
	}
	if now.UnixNano() >= e.until {
		v.c.Remove(h)
		return seckill.User{}, false
	}
	return e.user, true
}

func (v *verified) add(h [sha256.Size]byte, u seckill.User, until time.Time) {
	v.c.Add(h, verifiedEntry{user: u, until: until.UnixNano()})
}
