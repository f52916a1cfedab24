package jobs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"seckill/internal/seckill"
)

type recorder struct {
	mu      sync.Mutex
	batches [][]seckill.Admission
	err     error
	delay   time.Duration
}

func (r *recorder) persist(ctx context.Context, adms []seckill.Admission) error {
	time.Sleep(r.delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, append([]seckill.Admission(nil), adms...))
	return r.err
}

func adm(i int64) seckill.Admission {
	return seckill.Admission{OrderID: seckill.OrderID(1, i), VoucherID: 1, UserID: i, AdmittedAt: time.Now()}
}

func TestBatcherGathersConcurrentTasks(t *testing.T) {
	rec := &recorder{}
	b := NewBatcher(rec.persist, 50, 50*time.Millisecond)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Persist(context.Background(), adm(int64(i+1))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, batch := range rec.batches {
		if len(batch) > 50 {
			t.Fatalf("batch of %d, max 50", len(batch))
		}
		for _, a := range batch {
			if seen[a.OrderID] {
				t.Fatalf("order %d written twice", a.OrderID)
			}
			seen[a.OrderID] = true
		}
	}
	if len(seen) != 200 {
		t.Fatalf("%d orders written, want 200", len(seen))
	}
	if len(rec.batches) > 20 {
		t.Fatalf("%d batches for 200 concurrent tasks: not batching", len(rec.batches))
	}
}

func TestBatcherFlushesAfterMaxWait(t *testing.T) {
	rec := &recorder{}
	b := NewBatcher(rec.persist, 100, 5*time.Millisecond)
	start := time.Now()
	if err := b.Persist(context.Background(), adm(1)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a lone task waited %s", d)
	}
	if len(rec.batches) != 1 || len(rec.batches[0]) != 1 {
		t.Fatalf("batches %v, want one of one", rec.batches)
	}
}

func TestBatcherFullBatchDoesNotWait(t *testing.T) {
	rec := &recorder{}
	b := NewBatcher(rec.persist, 3, time.Hour) // only a full batch can flush
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = b.Persist(context.Background(), adm(int64(i+1))) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a full batch waited for the timer")
	}
}

func TestBatcherErrorFailsEveryTaskOfTheBatch(t *testing.T) {
	boom := errors.New("postgres down")
	rec := &recorder{err: boom}
	b := NewBatcher(rec.persist, 10, 20*time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for i := range 5 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- b.Persist(context.Background(), adm(int64(i+1))) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, boom) {
			t.Fatalf("task error %v, want %v", err, boom)
		}
	}
}

func TestBatcherHonoursTaskContext(t *testing.T) {
	rec := &recorder{delay: 300 * time.Millisecond}
	b := NewBatcher(rec.persist, 2, time.Millisecond) // written by the timer, not inline
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Persist(ctx, adm(1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the task's deadline", err)
	}
}

func TestParseAdmission(t *testing.T) {
	good := adm(7)
	task, err := NewOrderPersistTask(good)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseAdmission(task.Payload())
	if err != nil || got.OrderID != good.OrderID || got.UserID != good.UserID {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for name, payload := range map[string]string{
		"not json":       "{",
		"no user":        `{"order_id":4294967297,"voucher_id":1,"user_id":0,"admitted_at":"2026-01-01T00:00:00Z"}`,
		"wrong voucher":  `{"order_id":4294967297,"voucher_id":2,"user_id":5,"admitted_at":"2026-01-01T00:00:00Z"}`,
		"no admitted_at": `{"order_id":4294967297,"voucher_id":1,"user_id":5}`,
		"zero sequence":  `{"order_id":4294967296,"voucher_id":1,"user_id":5,"admitted_at":"2026-01-01T00:00:00Z"}`,
		"negative order": `{"order_id":-1,"voucher_id":-1,"user_id":5,"admitted_at":"2026-01-01T00:00:00Z"}`,
	} {
		h := NewOrderPersistHandler(NewBatcher((&recorder{}).persist, 1, time.Millisecond))
		err := h.ProcessTask(context.Background(), asynq.NewTask(TypeOrderPersist, []byte(payload)))
		if !errors.Is(err, asynq.SkipRetry) {
			t.Errorf("%s: error %v, want one that skips retries", name, err)
		}
	}
}
