package batch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// poisonError is a member's error: the item it names cannot be committed.
type poisonError struct{ item int }

func (e poisonError) Error() string { return fmt.Sprintf("item %d cannot be stored", e.item) }

func isPoison(err error) bool { return errors.As(err, new(poisonError)) }

var errDown = errors.New("store is down")

// ledger is an all-or-nothing Func over ints, as a transaction is: a batch
// with a negative item fails with that item's poisonError and applies
// nothing; else it applies every item (counted) and answers its double.
// down, while set, fails every commit with errDown.
type ledger struct {
	gate    chan struct{} // when set, the first commit waits until it is closed
	once    sync.Once
	down    atomic.Bool
	downAt  atomic.Int64 // when above 0, commits from this one on fail with errDown
	commits atomic.Int64

	mu      sync.Mutex
	applied map[int]int
}

func newLedger() *ledger { return &ledger{applied: map[int]int{}} }

func (l *ledger) commit(_ context.Context, items []int, out []int) error {
	n := l.commits.Add(1)
	if l.gate != nil {
		l.once.Do(func() { <-l.gate })
	}
	if l.down.Load() || l.downAt.Load() > 0 && n >= l.downAt.Load() {
		return errDown
	}
	for _, v := range items {
		if v < 0 {
			return fmt.Errorf("commit %d items: %w", len(items), poisonError{v})
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, v := range items {
		l.applied[v]++
		out[i] = 2 * v
	}
	return nil
}

// oneBatch has calls (each a caller's items) committed as one batch of c:
// a first call holds the only commit slot at l's gate while the others
// queue behind it. It returns each call's results and error.
func oneBatch(t *testing.T, c *Committer[int, int], l *ledger, calls [][]int) ([][]int, []error) {
	t.Helper()
	got, errs := make([][]int, len(calls)), make([]error, len(calls))
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := c.Do(context.Background(), 1_000_000); err != nil {
			t.Errorf("the call holding the slot: %v", err)
		}
	})
	for l.commits.Load() == 0 {
		runtime.Gosched()
	}
	n := 0
	for _, items := range calls {
		n += len(items)
	}
	for i, items := range calls {
		wg.Go(func() { got[i], errs[i] = c.Do(context.Background(), items...) })
	}
	for c.Waiting() < n {
		runtime.Gosched()
	}
	close(l.gate)
	wg.Wait()
	return got, errs
}

// TestIsolatePoison: a batch with poison calls among good ones answers each
// poison call its own error and every good call its own results, applied
// exactly once; the poison calls' items are never applied.
func TestIsolatePoison(t *testing.T) {
	for _, tc := range []struct {
		name   string
		good   int
		poison []int // indexes of the poison calls among good+len(poison)
		wide   bool  // each call has three items, the poison one in the middle
	}{
		{name: "one among 100", good: 99, poison: []int{42}},
		{name: "first and last", good: 98, poison: []int{0, 99}},
		{name: "several", good: 90, poison: []int{3, 4, 17, 50, 51, 52, 77, 80, 96, 99}},
		{name: "alone", good: 0, poison: []int{0}},
		{name: "all", good: 0, poison: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{name: "in a call of three", good: 49, poison: []int{25}, wide: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			l.gate = make(chan struct{})
			c := New(l.commit, Options{MaxBatch: 1000, Flushes: 1, Backlog: 1000, Isolate: isPoison})
			total := tc.good + len(tc.poison)
			poison := map[int]bool{}
			for _, i := range tc.poison {
				poison[i] = true
			}
			calls := make([][]int, total)
			for i := range calls {
				v := 10 * (i + 1)
				calls[i] = []int{v}
				if tc.wide {
					calls[i] = []int{v, v + 1, v + 2}
				}
				if poison[i] {
					calls[i][len(calls[i])/2] = -v
				}
			}
			got, errs := oneBatch(t, c, l, calls)
			for i, items := range calls {
				if poison[i] {
					var pe poisonError
					if !errors.As(errs[i], &pe) || pe.item != -10*(i+1) {
						t.Errorf("poison call %d: got %v, %v; want its own poisonError", i, got[i], errs[i])
					}
					for _, v := range items {
						if n := l.applied[v]; n != 0 {
							t.Errorf("item %d of poison call %d applied %d times", v, i, n)
						}
					}
					continue
				}
				if errs[i] != nil {
					t.Errorf("good call %d: %v", i, errs[i])
					continue
				}
				want := make([]int, len(items))
				for j, v := range items {
					want[j] = 2 * v
					if n := l.applied[v]; n != 1 {
						t.Errorf("item %d applied %d times, want once", v, n)
					}
				}
				if diff := cmp.Diff(want, got[i]); diff != "" {
					t.Errorf("good call %d (-want +got):\n%s", i, diff)
				}
			}
			t.Logf("%d calls, %d poison: %d commits", total, len(tc.poison), l.commits.Load())
		})
	}
}

// TestIsolateNotTransient: an error that is not a member's fails the batch
// once, every caller gets it, and nothing is committed again; and once a
// part of a split batch meets one, the parts not committed yet get it
// without a commit.
func TestIsolateNotTransient(t *testing.T) {
	calls := make([][]int, 100)
	for i := range calls {
		calls[i] = []int{i + 1}
	}
	t.Run("down", func(t *testing.T) {
		l := newLedger()
		l.gate = make(chan struct{})
		c := New(l.commit, Options{MaxBatch: 1000, Flushes: 1, Backlog: 1000, Isolate: isPoison})
		calls := append([][]int{{-7}}, calls...) // a poison call does not make it split
		l.downAt.Store(2)                        // the holder's commit passes; the batch's fails
		_, errs := oneBatch(t, c, l, calls)
		for i, err := range errs {
			if !errors.Is(err, errDown) {
				t.Errorf("call %d: %v, want errDown", i, err)
			}
		}
		if n := l.commits.Load(); n != 2 {
			t.Errorf("%d commits, want 2: the holder's and the failed batch's, never split", n)
		}
	})
	t.Run("down during the split", func(t *testing.T) {
		l := newLedger()
		l.gate = make(chan struct{})
		c := New(l.commit, Options{MaxBatch: 1000, Flushes: 1, Backlog: 1000, Isolate: isPoison})
		calls := append(calls[:50:50], append([][]int{{-7}}, calls[50:]...)...)
		l.downAt.Store(3) // the batch fails for its poison call, then the store goes down
		_, errs := oneBatch(t, c, l, calls)
		for i, err := range errs {
			if !errors.Is(err, errDown) {
				t.Errorf("call %d: %v, want errDown", i, err)
			}
		}
		if n := l.commits.Load(); n != 3 {
			t.Errorf("%d commits, want 3: the holder's, the batch's, its first half's", n)
		}
	})
	t.Run("without Isolate", func(t *testing.T) {
		l := newLedger()
		l.gate = make(chan struct{})
		c := New(l.commit, Options{MaxBatch: 1000, Flushes: 1, Backlog: 1000})
		calls := append([][]int{{-7}}, calls...)
		_, errs := oneBatch(t, c, l, calls)
		for i, err := range errs {
			if !isPoison(err) {
				t.Errorf("call %d: %v, want the batch's poisonError", i, err)
			}
		}
		if n := l.commits.Load(); n != 2 {
			t.Errorf("%d commits, want 2", n)
		}
	})
}

// TestIsolateConcurrent: 600 goroutines call Do at once, every 37th with a
// poison item, through a Committer with two slots; each gets its own answer
// and every good item is applied exactly once.
func TestIsolateConcurrent(t *testing.T) {
	l := newLedger()
	c := New(l.commit, Options{MaxBatch: 64, Flushes: 2, Backlog: 1000, Isolate: isPoison})
	const callers = 600
	var wg sync.WaitGroup
	start := make(chan struct{})
	var poisoned atomic.Int64
	for i := range callers {
		wg.Go(func() {
			<-start
			v := i + 1
			if i%37 == 0 {
				v = -v
			}
			got, err := c.Do(context.Background(), v)
			if v < 0 {
				var pe poisonError
				if !errors.As(err, &pe) || pe.item != v {
					t.Errorf("poison caller %d: %v, %v", i, got, err)
				}
				poisoned.Add(1)
				return
			}
			if err != nil || len(got) != 1 || got[0] != 2*v {
				t.Errorf("caller %d: %v, %v; want [%d]", i, got, err, 2*v)
			}
		})
	}
	close(start)
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for v, n := range l.applied {
		if v < 0 || n != 1 {
			t.Errorf("item %d applied %d times", v, n)
		}
	}
	if want := callers - int(poisoned.Load()); len(l.applied) != want {
		t.Errorf("%d items applied, want %d", len(l.applied), want)
	}
}
