package jobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"seckill/internal/batch"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// stalledRedis accepts connections and never answers, like a Redis that
// hangs. Closing it drops every connection.
type stalledRedis struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newStalledRedis(t *testing.T) *stalledRedis {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stalledRedis{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	return s
}

func (s *stalledRedis) Close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

// TestEnqueuerBoundedWhileRedisHangs: with Redis hanging, EnqueuePersist
// keeps answering at once; once EnqueueBacklog admissions wait it refuses
// with batch.ErrBusy (they stay pending for the reconciler), and the
// Enqueuer starts no goroutine per batch.
func TestEnqueuerBoundedWhileRedisHangs(t *testing.T) {
	srv := newStalledRedis(t)
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.ln.Addr().String(), DialTimeout: time.Second})
	defer client.Close()
	e := NewEnqueuer(client, 1000, slog.New(slog.DiscardHandler))
	before := runtime.NumGoroutine()

	ctx := context.Background()
	const extra = 5000
	var taken, busy int
	for i := range int64(EnqueueBacklog + 2*1000 + extra) {
		start := time.Now()
		switch err := e.EnqueuePersist(ctx, adm(i+1)); {
		case err == nil:
			taken++
		case errors.Is(err, batch.ErrBusy):
			busy++
		default:
			t.Fatalf("admission %d: %v", i+1, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("admission %d waited %s for an answer", i+1, d)
		}
	}
	// One batch is stuck sending; the backlog holds the rest.
	if taken > EnqueueBacklog+2*1000 || busy < extra {
		t.Fatalf("%d admissions taken, %d refused as busy: want at most %d taken", taken, busy, EnqueueBacklog+2*1000)
	}
	// The enqueue in flight and go-redis's own; nothing per batch.
	if g := runtime.NumGoroutine(); g > before+20 {
		t.Fatalf("%d goroutines with Redis hanging, %d before", g, before)
	}
	t.Logf("%d taken, %d busy, goroutines %d -> %d", taken, busy, before, runtime.NumGoroutine())

	srv.Close() // every enqueue now fails fast; Close returns once all did
	done := make(chan struct{})
	go func() { e.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return after Redis went away")
	}
}

// TestEnqueuerPacesTasks: 50 callers hand over 3,000 admissions over about
// 300 ms, as a busy API process would; the Enqueuer sends at most one task
// per EnqueuePace (plus the first), and the tasks carry every admission
// once. Without the pause a local Redis takes a task every few hundred
// microseconds: many times more tasks.
func TestEnqueuerPacesTasks(t *testing.T) {
	srv := testenv.StartRedisServer(t)
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer client.Close()
	e := NewEnqueuer(client, 1000, slog.New(slog.DiscardHandler))

	const callers, each = 50, 60
	start := time.Now()
	var wg sync.WaitGroup
	for c := range int64(callers) {
		wg.Go(func() {
			for i := range int64(each) {
				if err := e.EnqueuePersist(context.Background(), adm(c*each+i+1)); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	e.Close()
	elapsed := time.Since(start)

	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	tasks, err := insp.ListPendingTasks(QueueOrders, asynq.PageSize(10000))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, task := range tasks {
		adms, err := parseAdmissions(task.Payload)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range adms {
			if seen[a.OrderID] {
				t.Fatalf("order %d in two tasks", a.OrderID)
			}
			seen[a.OrderID] = true
		}
	}
	if len(seen) != callers*each {
		t.Fatalf("tasks carry %d admissions, want %d", len(seen), callers*each)
	}
	if most := int(elapsed/EnqueuePace) + 1; len(tasks) > most {
		t.Fatalf("%d tasks in %s: want at most %d, one per %s", len(tasks), elapsed, most, EnqueuePace)
	}
	t.Logf("%d admissions in %d tasks over %s", len(seen), len(tasks), elapsed)
}

// BenchmarkCoalescerDo measures the Coalescer's own cost: 64 callers, a sink
// that does nothing.
func BenchmarkCoalescerDo(b *testing.B) {
	c := NewCoalescer(func(context.Context, []seckill.Admission) error { return nil }, 1000, 2, 4000)
	b.SetParallelism(32)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := c.Do(ctx, adm(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCoalescerSubmit measures the Enqueuer's path: 64 callers hand
// admissions over without waiting.
func BenchmarkCoalescerSubmit(b *testing.B) {
	c := NewCoalescer(func(context.Context, []seckill.Admission) error { return nil }, 1000, 2, EnqueueBacklog)
	b.SetParallelism(32)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := c.Submit(ctx, adm(1)); err != nil && !errors.Is(err, batch.ErrBusy) {
				b.Error(err)
				return
			}
		}
	})
	if err := c.Wait(context.Background()); err != nil {
		b.Fatal(err)
	}
}
