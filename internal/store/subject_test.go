package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/uptrace/bun"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

// queryCounter counts the statements a DB sends.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return ctx
}
func (q *queryCounter) AfterQuery(_ context.Context, _ *bun.QueryEvent) { q.n.Add(1) }

// TestUserIDForSubject gives 250 new subjects their ids from two processes
// (two pools on one database) at once, 500 first requests in all: each
// subject gets one id, in the providers' range, and no two share one.
func TestUserIDForSubject(t *testing.T) {
	dsn := storetest.NewDSN(t)
	var stores [2]*store.Store
	var counts [2]*queryCounter
	for i := range stores {
		db, err := store.Open(t.Context(), dsn, 16)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		counts[i] = &queryCounter{}
		db.AddQueryHook(counts[i])
		stores[i] = store.New(db)
	}
	const subjects = 250
	ids := make([][2]int64, subjects)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range subjects {
		for p := range 2 {
			wg.Go(func() {
				<-start
				id, err := stores[p].UserIDForSubject(context.Background(), "https://idp.example", fmt.Sprintf("user-%d", i))
				if err != nil {
					t.Error(err)
				}
				ids[i][p] = id
			})
		}
	}
	close(start)
	wg.Wait()
	owner := map[int64]int{}
	for i, pair := range ids {
		if pair[0] != pair[1] {
			t.Fatalf("subject %d got ids %d and %d", i, pair[0], pair[1])
		}
		if !seckill.IsExternalUserID(pair[0]) {
			t.Fatalf("subject %d got id %d, below seckill.FirstExternalUserID", i, pair[0])
		}
		if j, ok := owner[pair[0]]; ok {
			t.Fatalf("subjects %d and %d share id %d", i, j, pair[0])
		}
		owner[pair[0]] = i
	}
	statements := counts[0].n.Load() + counts[1].n.Load()
	t.Logf("%d first requests of %d new subjects: %d statements (%.2f a request)", 2*subjects, subjects, statements, float64(statements)/(2*subjects))
	if statements > 2*2*subjects {
		t.Errorf("%d statements for %d requests: more than two each", statements, 2*subjects)
	}

	// Known: one statement, the same id. Another issuer: another id.
	before := counts[0].n.Load()
	again, err := stores[0].UserIDForSubject(t.Context(), "https://idp.example", "user-0")
	if err != nil || again != ids[0][0] {
		t.Errorf("user-0 again: %d, %v; want %d", again, err, ids[0][0])
	}
	if n := counts[0].n.Load() - before; n != 1 {
		t.Errorf("a known subject took %d statements, want 1", n)
	}
	other, err := stores[0].UserIDForSubject(t.Context(), "https://other.example", "user-0")
	if err != nil || other == ids[0][0] {
		t.Errorf("user-0 of another issuer: %d, %v; want a new id", other, err)
	}
}

// TestUserIDsForSubjects looks up overlapping batches from two processes at
// once, with duplicates inside a batch and known subjects among new ones:
// every subject one id, the batches in the order asked, and no deadlock
// (the inserts lock in one order).
func TestUserIDsForSubjects(t *testing.T) {
	dsn := storetest.NewDSN(t)
	var stores [2]*store.Store
	for i := range stores {
		db, err := store.Open(t.Context(), dsn, 8)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		stores[i] = store.New(db)
	}
	const iss = "https://idp.example"
	known, err := stores[0].UserIDForSubject(t.Context(), iss, "known")
	if err != nil {
		t.Fatal(err)
	}
	const batches, size = 40, 100
	results := make([][]int64, batches)
	asked := make([][]seckill.Subject, batches)
	var wg sync.WaitGroup
	for b := range batches {
		subs := []seckill.Subject{{Issuer: iss, Subject: "known"}}
		for i := range size {
			// Each batch overlaps the next; forward and backward orders.
			n := (b*size/2 + i) % (batches * size / 2)
			if b%2 == 1 {
				n = (b*size/2 + size - 1 - i) % (batches * size / 2)
			}
			subs = append(subs, seckill.Subject{Issuer: iss, Subject: fmt.Sprintf("s-%d", n)})
		}
		subs = append(subs, subs[1]) // a duplicate
		asked[b] = subs
		wg.Go(func() {
			ids, err := stores[b%2].UserIDsForSubjects(context.Background(), subs)
			if err != nil {
				t.Error(err)
			}
			results[b] = ids
		})
	}
	wg.Wait()
	idOf := map[seckill.Subject]int64{}
	owner := map[int64]seckill.Subject{}
	for b := range batches {
		if len(results[b]) != len(asked[b]) {
			t.Fatalf("batch %d: %d ids for %d subjects", b, len(results[b]), len(asked[b]))
		}
		for i, k := range asked[b] {
			id := results[b][i]
			if prev, ok := idOf[k]; ok && prev != id {
				t.Fatalf("%v got ids %d and %d", k, prev, id)
			}
			if o, ok := owner[id]; ok && o != k {
				t.Fatalf("%v and %v share id %d", o, k, id)
			}
			idOf[k], owner[id] = id, k
		}
	}
	if idOf[seckill.Subject{Issuer: iss, Subject: "known"}] != known {
		t.Errorf("a known subject got another id")
	}
	if len(idOf) != batches*size/2+1 {
		t.Errorf("%d subjects, want %d", len(idOf), batches*size/2+1)
	}
}
