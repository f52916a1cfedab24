package auth

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
	// The store refuses a subject it cannot hold with INVALID_INPUT (a
	// second line behind checkSubject): that one caller is answered, the
	// rest of its batch looked up without it.
	s.batch = batch.New(lookup, batch.Options{MaxBatch: subjectBatch, Flushes: subjectFlushes, Backlog: subjectBacklog,
		Isolate: func(err error) bool { return seckill.ErrorCode(err) == seckill.EINVALID }})
	return s, nil
}

// userID returns subject's user id, from the cache or the store. A subject
// the store cannot take (checkSubject) never reaches the batch, where it
// would fail every other subject of its statement.
func (s *subjects) userID(ctx context.Context, issuer, subject string) (int64, error) {
	if err := checkSubject(issuer, subject); err != nil {
		return 0, err
	}
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

// maxSubjectChars is auth_subject's bound on an issuer and a subject
// (char_length, in characters).
const maxSubjectChars = 1024

// checkSubject returns the EUNAUTHENTICATED error of a token whose subject
// or issuer auth_subject cannot hold, nil for one it can: Postgres text
// takes neither a NUL nor bytes that are not UTF-8, and the table's checks
// bound both to maxSubjectChars characters and the subject to at least one.
// Such a token is refused for good: trying again cannot help.
func checkSubject(issuer, subject string) error {
	if subject == "" {
		return invalidToken()
	}
	if why := unstorable(subject); why != "" {
		return seckill.Errorf(seckill.EUNAUTHENTICATED, "the token's subject (sub) is not acceptable: it %s", why)
	}
	if why := unstorable(issuer); why != "" {
		return seckill.Errorf(seckill.EUNAUTHENTICATED, "the token's issuer (iss) is not acceptable: it %s", why)
	}
	return nil
}

// unstorable says why auth_subject cannot hold s, or "".
func unstorable(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "holds a NUL character"
	case utf8.RuneCountInString(s) > maxSubjectChars:
		return fmt.Sprintf("is longer than %d characters", maxSubjectChars)
	}
	return ""
}

// checkWrittenSubject refuses, like checkSubject, a token whose subject or
// issuer is written with bytes that are not UTF-8 or with a \u escape of an
// unpaired UTF-16 surrogate: encoding/json decodes each to U+FFFD, so that
// two subjects the provider tells apart would be one user here.
func checkWrittenSubject(c writtenClaims) error {
	if notUTF8(c.Sub) {
		return seckill.Errorf(seckill.EUNAUTHENTICATED, "the token's subject (sub) is not acceptable: it is not UTF-8")
	}
	if notUTF8(c.Iss) {
		return seckill.Errorf(seckill.EUNAUTHENTICATED, "the token's issuer (iss) is not acceptable: it is not UTF-8")
	}
	return nil
}

// notUTF8 reports whether a JSON string, as written (quotes included),
// is not UTF-8 text: bytes that are not UTF-8, or a \u escape of a UTF-16
// surrogate that is not half of a pair. encoding/json decodes both to
// U+FFFD, so that two different subjects would come out as one.
func notUTF8(raw []byte) bool {
	if !utf8.Valid(raw) {
		return true
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 < len(raw) && raw[i+1] != 'u' {
			i++ // \" \\ \/ \b \f \n \r \t
			continue
		}
		r, ok := hex4(raw, i+2)
		if !ok {
			return true
		}
		i += 5
		switch {
		case r >= 0xdc00 && r < 0xe000:
			return true // a low half first
		case r >= 0xd800 && r < 0xdc00:
			if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return true
			}
			lo, ok := hex4(raw, i+3)
			if !ok || lo < 0xdc00 || lo >= 0xe000 {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 reads the four hex digits of a \u escape at raw[at:].
func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
