package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// store is a BatchFunc that writes as the store does: all or nothing per
// call, idempotently (an order written twice is written once), and refusing
// a whole call with ECONFLICT when one admission is the poison user's (as
// Redis refuses to release an order pending for another user).
type store struct {
	poisonUser int64
	delay      time.Duration

	mu      sync.Mutex
	written map[int64]int // order id -> calls that wrote it
}

func (s *store) persist(_ context.Context, adms []seckill.Admission) error {
	time.Sleep(s.delay)
	for _, a := range adms {
		if a.UserID == s.poisonUser {
			return fmt.Errorf("persist orders: %w", seckill.Errorf(seckill.ECONFLICT, "order %d is pending for another user", a.OrderID))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range adms {
		s.written[a.OrderID]++
	}
	return nil
}

// TestPersistPoisonMember: 60 batch tasks of five admissions each are
// processed at once through one coalescer, so that their writes share
// batches. One task carries an admission the store refuses (ECONFLICT),
// another an admission that fails the payload's check (Go's year 0, which
// Postgres cannot hold). Every other task succeeds and every one of their
// admissions is written; the task with the refused admission ends with its
// error, not retried; the one with the bad admission writes its four others
// and ends with the bad one's error, not retried.
func TestPersistPoisonMember(t *testing.T) {
	const tasks, per = 60, 5
	const refused, checked = 17, 41 // the tasks with a poison admission
	s := &store{poisonUser: 999_999, delay: 5 * time.Millisecond, written: map[int64]int{}}
	h := NewPersistHandler(NewCoalescer(s.persist, 100, 2, 1000))
	admsOf := make([][]seckill.Admission, tasks)
	for i := range tasks {
		for j := range per {
			a := adm(int64(i*per + j + 1))
			switch {
			case i == refused && j == 2:
				a.UserID = s.poisonUser
			case i == checked && j == 3:
				a.AdmittedAt = time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC)
			}
			admsOf[i] = append(admsOf[i], a)
		}
	}
	errs := make([]error, tasks)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, adms := range admsOf {
		task, err := NewOrderPersistBatchTask(adms)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			<-start
			errs[i] = h.ProcessTask(context.Background(), task)
		})
	}
	close(start)
	wg.Wait()

	for i, err := range errs {
		switch i {
		case refused:
			if seckill.ErrorCode(err) != seckill.ECONFLICT || !errors.Is(err, asynq.SkipRetry) {
				t.Errorf("the task with the refused admission: %v, want its ECONFLICT, not retried", err)
			}
		case checked:
			if !errors.Is(err, asynq.SkipRetry) {
				t.Errorf("the task with the bad admission: %v, want an error that is not retried", err)
			}
		default:
			if err != nil {
				t.Errorf("task %d: %v", i, err)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, adms := range admsOf {
		for j, a := range adms {
			n := s.written[a.OrderID]
			switch {
			case i == refused: // its call was refused as a whole, here
			case i == checked && j == 3:
				if n != 0 {
					t.Errorf("the bad admission was written")
				}
			case n == 0:
				t.Errorf("task %d's admission %d was not written", i, j)
			}
		}
	}
}

// TestEnqueuerPoisonMember: 200 admissions are enqueued at once, one with a
// time a task's JSON cannot carry (year 10000), which would fail the
// encoding of its whole batch. It is refused alone; the tasks carry every
// other admission once.
func TestEnqueuerPoisonMember(t *testing.T) {
	srv := testenv.StartRedisServer(t)
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer client.Close()
	e := NewEnqueuer(client, 1000, slog.New(slog.DiscardHandler))
	const n, poison = 200, 120
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := int64(1); i <= n; i++ {
		wg.Go(func() {
			<-start
			a := adm(i)
			if i == poison {
				a.AdmittedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			}
			err := e.EnqueuePersist(context.Background(), a)
			if i == poison {
				if !errors.Is(err, asynq.SkipRetry) {
					t.Errorf("the poison admission: %v, want it refused", err)
				}
			} else if err != nil {
				t.Errorf("admission %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	e.Close()
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	tasks, err := insp.ListPendingTasks(QueueOrders, asynq.PageSize(10000))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, task := range tasks {
		adms, err := parseAdmissions(task.Payload)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range adms {
			seen[a.UserID]++
		}
	}
	for i := int64(1); i <= n; i++ {
		if want := 1 - b2i(i == poison); seen[i] != want {
			t.Errorf("admission %d in %d tasks, want %d", i, seen[i], want)
		}
	}
	t.Logf("%d tasks", len(tasks))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
