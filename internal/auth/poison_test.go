package auth_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"seckill/internal/auth"
	"seckill/internal/auth/idp"
	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

// failures counts the batches of subject lookups the store failed.
type failures struct {
	auth.SubjectStore
	batches, failed atomic.Int64
}

func (f *failures) UserIDsForSubjects(ctx context.Context, subjects []seckill.Subject) ([]int64, error) {
	f.batches.Add(1)
	ids, err := f.SubjectStore.UserIDsForSubjects(ctx, subjects)
	if err != nil {
		f.failed.Add(1)
	}
	return ids, err
}

// TestPoisonSubject sends a provider-signed token whose subject Postgres
// cannot store (a NUL) at once with 30 new buyers' tokens, against the real
// store: the 30 get their user ids, the poison token an UNAUTHENTICATED
// error that says why (for good: the same again), and no batch of lookups
// fails.
func TestPoisonSubject(t *testing.T) {
	p := idp.Start()
	t.Cleanup(p.Close)
	if _, err := p.AddNew("es", jose.ES256); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(t.Context(), storetest.NewDSN(t), 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	subjects := &failures{SubjectStore: store.New(db)}
	pr, err := auth.NewProvider(t.Context(), auth.ProviderConfig{Issuer: p.URL(), Audience: "api"}, subjects)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sign := func(subject string) string {
		s, err := p.Sign("es", idp.Claims{Subject: subject, Audience: []string{"api"}, IssuedAt: now, Expiry: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The key set once, so that the tokens below arrive together.
	if _, err := pr.Verify(t.Context(), sign("warm-up")); err != nil {
		t.Fatal(err)
	}

	const good = 30
	tokens := make([]string, good+1)
	for i := range good {
		tokens[i] = sign(fmt.Sprintf("buyer-%02d", i))
	}
	tokens[good] = sign("mallory\x00")
	users := make([]*seckill.User, len(tokens))
	errs := make([]error, len(tokens))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range tokens {
		wg.Go(func() {
			<-start
			users[i], errs[i] = pr.Verify(context.Background(), tokens[i])
		})
	}
	close(start)
	wg.Wait()

	ids := map[int64]bool{}
	for i := range good {
		if errs[i] != nil {
			t.Errorf("buyer %d: %v", i, errs[i])
			continue
		}
		if !seckill.IsExternalUserID(users[i].ID) || ids[users[i].ID] {
			t.Errorf("buyer %d: user id %d", i, users[i].ID)
		}
		ids[users[i].ID] = true
	}
	const want = "the token's subject (sub) is not acceptable: it holds a NUL character"
	for try := range 2 {
		if try == 1 {
			_, errs[good] = pr.Verify(context.Background(), tokens[good])
		}
		if seckill.ErrorCode(errs[good]) != seckill.EUNAUTHENTICATED || seckill.ErrorMessage(errs[good]) != want {
			t.Errorf("the NUL subject (try %d): %v, want UNAUTHENTICATED %q", try+1, errs[good], want)
		}
	}
	if n := subjects.failed.Load(); n != 0 {
		t.Errorf("%d of %d batches of lookups failed", n, subjects.batches.Load())
	}
}
