package auth

import (
	"sync"
	"time"

	"seckill/internal/seckill"
)

// tokenCache remembers verified tokens until they expire. Only tokens that
// passed full verification are stored, keyed by their exact text, so a
// forged or altered token is never found in it. When it is full it forgets
// expired entries and, if that is not enough, an arbitrary part of the rest
// (Go's map order is random), which keeps it bounded without bookkeeping on
// the read path.
type tokenCache struct {
	mu      sync.RWMutex
	entries map[string]cachedUser
	max     int
}

type cachedUser struct {
	user    seckill.User
	expires time.Time
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{entries: make(map[string]cachedUser), max: max}
}

func (c *tokenCache) get(token string, now time.Time) (seckill.User, bool) {
	c.mu.RLock()
	e, ok := c.entries[token]
	c.mu.RUnlock()
	if !ok || !now.Before(e.expires) {
		return seckill.User{}, false
	}
	return e.user, true
}

func (c *tokenCache) put(token string, u seckill.User, expires, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		c.evict(now)
	}
	c.entries[token] = cachedUser{user: u, expires: expires}
}

// evict makes room for at least a quarter of the capacity. c.mu is held.
func (c *tokenCache) evict(now time.Time) {
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
	for k := range c.entries {
		if len(c.entries) <= c.max*3/4 {
			break
		}
		delete(c.entries, k)
	}
}
