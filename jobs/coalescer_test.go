package jobs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"seckill/internal/seckill"
)

type recorder struct {
	mu      sync.Mutex
	batches [][]seckill.Admission
	err     error
	ctxErrs int // batches whose context had ended when written
	delay   time.Duration
	active  atomic.Int64
	maxSeen atomic.Int64
}

func (r *recorder) persist(ctx context.Context, adms []seckill.Admission) error {
	n := r.active.Add(1)
	defer r.active.Add(-1)
	for {
		m := r.maxSeen.Load()
		if n <= m || r.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(r.delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() != nil {
		r.ctxErrs++
	}
	r.batches = append(r.batches, append([]seckill.Admission(nil), adms...))
	return r.err
}

func adm(i int64) seckill.Admission {
	return seckill.Admission{OrderID: seckill.OrderID(1, i), VoucherID: 1, UserID: i, AdmittedAt: time.Now()}
}

// TestCoalescerGroupsWhileBusy: with slow writes, 300 concurrent submissions
// go in a few large batches, never more at once than the slots allow, and
// each admission exactly once.
func TestCoalescerGroupsWhileBusy(t *testing.T) {
	rec := &recorder{delay: 20 * time.Millisecond}
	c := NewCoalescer(rec.persist, 100, 2, 1000)
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Do(context.Background(), adm(int64(i+1))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, b := range rec.batches {
		if len(b) > 100 {
			t.Fatalf("batch of %d, max 100", len(b))
		}
		for _, a := range b {
			if seen[a.OrderID] {
				t.Fatalf("order %d written twice", a.OrderID)
			}
			seen[a.OrderID] = true
		}
	}
	if len(seen) != 300 {
		t.Fatalf("%d orders written, want 300", len(seen))
	}
	if len(rec.batches) > 30 {
		t.Fatalf("%d batches for 300 concurrent submissions: not coalescing", len(rec.batches))
	}
	if m := rec.maxSeen.Load(); m > 2 {
		t.Fatalf("%d writes at once, want at most 2", m)
	}
}

func TestCoalescerErrorFailsEverySubmissionOfTheBatch(t *testing.T) {
	boom := errors.New("postgres down")
	rec := &recorder{err: boom, delay: 10 * time.Millisecond}
	c := NewCoalescer(rec.persist, 10, 1, 1000)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- c.Do(context.Background(), adm(int64(i+1))) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("submission error %v, want %v", err, boom)
		}
	}
}

// TestCoalescerHonoursSubmitterContext: a submitter whose batch waits
// behind a slow write gives up with its deadline; its batch is still
// written, under a context its deadline does not end.
func TestCoalescerHonoursSubmitterContext(t *testing.T) {
	rec := &recorder{delay: 300 * time.Millisecond}
	c := NewCoalescer(rec.persist, 10, 1, 1000)
	if err := c.Submit(context.Background(), adm(1)); err != nil { // takes the only slot
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Do(ctx, adm(2)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the submitter's deadline", err)
	}
	if err := c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rec.batches) != 2 || rec.ctxErrs > 0 {
		t.Fatalf("%d batches written (%d with an ended context), want 2", len(rec.batches), rec.ctxErrs)
	}
}

func TestPayloadChecks(t *testing.T) {
	good := []seckill.Admission{adm(7), adm(8)}
	one, err := NewOrderPersistTask(good[0])
	if err != nil {
		t.Fatal(err)
	}
	if got, err := parseAdmission(one.Payload()); err != nil || got.OrderID != good[0].OrderID {
		t.Fatalf("single round trip: %+v %v", got, err)
	}
	many, err := NewOrderPersistBatchTask(good)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := parseAdmissions(many.Payload()); err != nil || len(got) != 2 || got[1].UserID != 8 {
		t.Fatalf("batch round trip: %+v %v", got, err)
	}
	if _, err := NewOrderPersistBatchTask(nil); err == nil {
		t.Fatal("an empty batch task was made")
	}

	rec := &recorder{}
	h := NewPersistHandler(NewCoalescer(rec.persist, 10, 1, 1000))
	bad := map[string]*asynq.Task{}
	for name, payload := range map[string]string{
		"not json":       "{",
		"no user":        `{"order_id":4294967297,"voucher_id":1,"user_id":0,"admitted_at":"2026-01-01T00:00:00Z"}`,
		"wrong voucher":  `{"order_id":4294967297,"voucher_id":2,"user_id":5,"admitted_at":"2026-01-01T00:00:00Z"}`,
		"no admitted_at": `{"order_id":4294967297,"voucher_id":1,"user_id":5}`,
		"zero sequence":  `{"order_id":4294967296,"voucher_id":1,"user_id":5,"admitted_at":"2026-01-01T00:00:00Z"}`,
		"negative order": `{"order_id":-1,"voucher_id":-1,"user_id":5,"admitted_at":"2026-01-01T00:00:00Z"}`,
	} {
		bad["single "+name] = asynq.NewTask(TypeOrderPersist, []byte(payload))
		bad["batch "+name] = asynq.NewTask(TypeOrderPersistBatch, []byte("["+payload+"]"))
	}
	bad["empty batch"] = asynq.NewTask(TypeOrderPersistBatch, []byte("[]"))
	bad["unknown type"] = asynq.NewTask("order:other", []byte("{}"))
	for name, task := range bad {
		if err := h.ProcessTask(context.Background(), task); !errors.Is(err, asynq.SkipRetry) {
			t.Errorf("%s: error %v, want one that skips retries", name, err)
		}
	}
	if len(rec.batches) != 0 {
		t.Fatalf("bad payloads reached the store: %v", rec.batches)
	}
}
