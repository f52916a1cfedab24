package auth

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"seckill/internal/batch"
	"seckill/internal/seckill"
)

// SubjectStore assigns user ids to an identity provider's subjects
// (internal/store implements it over Postgres).
type SubjectStore interface {
	// UserIDsForSubjects returns the user id of each subject (ids[i] is
	// subjects[i]'s), assigning the next ones (from
	// seckill.FirstExternalUserID up) at first sight. It returns the same
	// id to every caller and every process, however many ask at once.
	UserIDsForSubjects(ctx context.Context, subjects []seckill.Subject) ([]int64, error)
}

// Bounds of the lookups of new subjects: at most subjectBatch subjects a
// statement, subjectFlushes statements at once (the Postgres connections
// a sale's opening may take from persistence), subjectBacklog subjects
// waiting; subjectTimeout bounds one statement.
const (
	subjectBatch   = 500
	subjectFlushes = 2
	subjectBacklog = 50_000
	subjectTimeout = 5 * time.Second
)

// subjects is a bounded in-process cache in front of a SubjectStore, so
// that a known subject costs no Postgres round trip. Concurrent first
// requests of one subject share one lookup, and the lookups of different
// new subjects are group-committed: a sale's opening, when thousands of
// new buyers arrive at once, costs a statement per batch, not per buyer.
type subjects struct {
	cache   *lru.Cache[seckill.Subject, int64]
	flight  singleflight.Group
	batch   *batch.Committer[seckill.Subject, int64]
	lookups atomic.Int64 // subjects looked up in the store
	batches atomic.Int64 // store calls
}

func newSubjects(store SubjectStore, size int) (*subjects, error) {
	c, err := lru.New[seckill.Subject, int64](size)
	if err != nil {
		return nil, fmt.Errorf("auth: subject cache: %w", err)
	}
	s := &subjects{cache: c}
	lookup := func(ctx context.Context, items []seckill.Subject, out []int64) error {
		s.lookups.Add(int64(len(items)))
		s.batches.Add(1)
		ctx, cancel := context.WithTimeout(ctx, subjectTimeout)
		defer cancel()
		ids, err := store.UserIDsForSubjects(ctx, items)
		if err != nil {
			return err
		}
		if len(ids) != len(items) {
			return fmt.Errorf("auth: %d user ids for %d subjects", len(ids), len(items))
		}
		copy(out, ids)
		return nil
	}
	s.batch = batch.New(lookup, batch.Options{MaxBatch: subjectBatch, Flushes: subjectFlushes, Backlog: subjectBacklog})
	return s, nil
}

// userID returns subject's user id, from the cache or the store.
func (s *subjects) userID(ctx context.Context, issuer, subject string) (int64, error) {
	k := seckill.Subject{Issuer: issuer, Subject: subject}
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
		// the others (the batch's commit ignores cancellation anyway).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*subjectTimeout)
		defer cancel()
		ids, err := s.batch.Do(ctx, k)
		if err != nil {
			return int64(0), err
		}
		s.cache.Add(k, ids[0])
		return ids[0], nil
	})
	return v.(int64), err
}
