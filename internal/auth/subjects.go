package auth

import (
	"context"
	"fmt"
	"strconv"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// SubjectStore assigns user ids to an identity provider's subjects
// (internal/store implements it over Postgres).
type SubjectStore interface {
	// UserIDForSubject returns the user id of subject at issuer, assigning
	// the next one (from seckill.FirstExternalUserID up) at first sight.
	// It returns the same id to every caller and every process, however
	// many ask at once.
	UserIDForSubject(ctx context.Context, issuer, subject string) (int64, error)
}

// subjects is a bounded in-process cache in front of a SubjectStore, so
// that a known subject costs no Postgres round trip, and concurrent first
// requests of one subject in this process cost one.
type subjects struct {
	store  SubjectStore
	cache  *lru.Cache[subjectKey, int64]
	flight singleflight.Group
}

// subjectTimeout bounds one store call for a new subject.
const subjectTimeout = 5 * time.Second

type subjectKey struct{ issuer, subject string }

func newSubjects(store SubjectStore, size int) (*subjects, error) {
	c, err := lru.New[subjectKey, int64](size)
	if err != nil {
		return nil, fmt.Errorf("auth: subject cache: %w", err)
	}
	return &subjects{store: store, cache: c}, nil
}

// userID returns subject's user id, from the cache or the store.
func (s *subjects) userID(ctx context.Context, issuer, subject string) (int64, error) {
	k := subjectKey{issuer, subject}
	if id, ok := s.cache.Get(k); ok {
		return id, nil
	}
	v, err, _ := s.flight.Do(strconv.Quote(issuer)+" "+subject, func() (any, error) {
		// A flight that ended between our miss and this call has filled
		// the cache: look again rather than ask the store twice.
		if id, ok := s.cache.Get(k); ok {
			return id, nil
		}
		// Every waiter shares this call: one that gives up must not fail
		// the others.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), subjectTimeout)
		defer cancel()
		id, err := s.store.UserIDForSubject(ctx, issuer, subject)
		if err != nil {
			return int64(0), err
		}
		s.cache.Add(k, id)
		return id, nil
	})
	return v.(int64), err
}
