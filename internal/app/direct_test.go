package app

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"seckill/internal/seckill"
)

// queueRecorder is a seckill.Enqueuer that records what it is given.
type queueRecorder struct {
	mu   sync.Mutex
	adms []int64
}

func (q *queueRecorder) EnqueuePersist(_ context.Context, adm seckill.Admission) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.adms = append(q.adms, adm.OrderID)
	return nil
}

func (q *queueRecorder) RequeuePersist(ctx context.Context, adm seckill.Admission) error {
	return q.EnqueuePersist(ctx, adm)
}

func (q *queueRecorder) taken() []int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]int64(nil), q.adms...)
}

// TestDirectPersistHandsOver: while the workers run, admissions go to the
// process's own persistence, in batches; a batch that fails goes to the
// queue whole; before the workers start, after they stop, and for the
// reconciler's requeues, admissions go to the queue.
func TestDirectPersistHandsOver(t *testing.T) {
	q := &queueRecorder{}
	d := &directPersist{queue: q}
	ctx := context.Background()
	adm := func(i int64) seckill.Admission {
		return seckill.Admission{OrderID: seckill.OrderID(1, i), VoucherID: 1, UserID: i, AdmittedAt: time.Now()}
	}

	if err := d.EnqueuePersist(ctx, adm(1)); err != nil || len(q.taken()) != 1 {
		t.Fatalf("before the workers: %v, queue %v", err, q.taken())
	}

	var (
		mu      sync.Mutex
		written []int64
		fail    = true
	)
	persist := func(_ context.Context, adms []seckill.Admission) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			return errors.New("postgres away")
		}
		for _, a := range adms {
			written = append(written, a.OrderID)
		}
		return nil
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.run(runCtx, persist, 100, 2, time.Minute); close(done) }()
	for d.active.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	// The first batch (one admission: nothing else waited) fails and goes
	// to the queue; the next 200 are written, in batches.
	for i := int64(2); i <= 202; i++ {
		if err := d.EnqueuePersist(ctx, adm(i)); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	<-done
	if err := d.RequeuePersist(ctx, adm(300)); err != nil {
		t.Fatal(err)
	}
	if err := d.EnqueuePersist(ctx, adm(301)); err != nil {
		t.Fatal(err)
	}

	queued := q.taken()
	mu.Lock()
	defer mu.Unlock()
	if len(written)+len(queued) != 1+201+2 {
		t.Fatalf("%d written and %d queued, want each of %d admissions once", len(written), len(queued), 1+201+2)
	}
	seen := map[int64]bool{}
	for _, id := range append(append([]int64(nil), written...), queued...) {
		if seen[id] {
			t.Fatalf("order %d both written and queued, or twice", id)
		}
		seen[id] = true
	}
	if len(queued) < 4 || queued[0] != seckill.OrderID(1, 1) || queued[len(queued)-2] != seckill.OrderID(1, 300) || queued[len(queued)-1] != seckill.OrderID(1, 301) {
		t.Fatalf("queued %v: want the first, the failed batch, the requeue and the one after the stop", queued)
	}
	if len(written) < 150 {
		t.Fatalf("only %d of 201 written directly", len(written))
	}
}

// TestDirectPersistIsolatesPoison: 300 admissions persisted directly, one
// of which the store refuses as that admission's own error (ECONFLICT),
// all or nothing per batch. Only the poison one goes to the queue; every
// other one is written, once.
func TestDirectPersistIsolatesPoison(t *testing.T) {
	q := &queueRecorder{}
	d := &directPersist{queue: q}
	ctx := context.Background()
	const n, poison = 300, 150
	var (
		mu      sync.Mutex
		written = map[int64]int{}
	)
	persist := func(_ context.Context, adms []seckill.Admission) error {
		time.Sleep(time.Millisecond) // what arrives meanwhile makes a batch
		for _, a := range adms {
			if a.UserID == poison {
				return seckill.Errorf(seckill.ECONFLICT, "order %d is pending for another user", a.OrderID)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, a := range adms {
			written[a.OrderID]++
		}
		return nil
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.run(runCtx, persist, 100, 2, time.Minute); close(done) }()
	for d.active.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	for i := int64(1); i <= n; i++ {
		adm := seckill.Admission{OrderID: seckill.OrderID(1, i), VoucherID: 1, UserID: i, AdmittedAt: time.Now()}
		if err := d.EnqueuePersist(ctx, adm); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	<-done
	if queued := q.taken(); len(queued) != 1 || queued[0] != seckill.OrderID(1, poison) {
		t.Errorf("queued %v, want only the poison admission", queued)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := int64(1); i <= n; i++ {
		if got := written[seckill.OrderID(1, i)]; i != poison && got != 1 {
			t.Errorf("admission %d written %d times, want once", i, got)
		}
	}
}
