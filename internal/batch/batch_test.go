package batch

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/testenv"
)

// sink is a Func over ints that doubles each item, records every batch and
// how many commits ran at once, and blocks while its gate is closed.
type sink struct {
	delay time.Duration
	gate  chan struct{} // nil: never blocks; else a commit waits until it is closed
	fail  func(items []int) error

	mu      sync.Mutex
	batches [][]int
	active  atomic.Int64
	most    atomic.Int64
	entered chan struct{} // when set, told of the commits that start while it has room
}

func (s *sink) commit(ctx context.Context, items []int, out []int) error {
	n := s.active.Add(1)
	defer s.active.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	select {
	case s.entered <- struct{}{}:
	default: // nil, or nobody counts any more
	}
	if s.gate != nil {
		<-s.gate
	}
	time.Sleep(s.delay)
	s.mu.Lock()
	s.batches = append(s.batches, slices.Clone(items))
	s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(items); err != nil {
			return err
		}
	}
	for i, v := range items {
		out[i] = 2 * v
	}
	return nil
}

// committed returns every committed item and how often it was committed.
func (s *sink) committed() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[int]int{}
	for _, b := range s.batches {
		for _, v := range b {
			seen[v]++
		}
	}
	return seen
}

// TestEveryCallerGetsItsOwnResults: 400 goroutines call Do at once, some
// with one item, some with three, against a slow sink with two slots. Each
// must get the doubles of exactly its own items, in order; every item is
// committed exactly once; batches are shared and never larger than MaxBatch;
// never more than Flushes commits run at once.
func TestEveryCallerGetsItsOwnResults(t *testing.T) {
	s := &sink{delay: 2 * time.Millisecond}
	c := New(s.commit, Options{MaxBatch: 50, Flushes: 2, Backlog: 1000})
	const callers = 400
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		items := []int{1000 * i}
		if i%2 == 1 {
			items = []int{1000 * i, 1000*i + 1, 1000*i + 2}
		}
		wg.Go(func() {
			<-start
			got, err := c.Do(context.Background(), items...)
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
				return
			}
			want := make([]int, len(items))
			for j, v := range items {
				want[j] = 2 * v
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("caller %d: results (-want +got):\n%s", i, diff)
			}
		})
	}
	close(start)
	wg.Wait()

	seen := s.committed()
	if len(seen) != callers/2+3*callers/2 {
		t.Errorf("%d distinct items committed, want %d", len(seen), callers/2+3*callers/2)
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("item %d committed %d times", v, n)
		}
	}
	largest := 0
	for _, b := range s.batches {
		largest = max(largest, len(b))
	}
	if largest > 50 || len(s.batches) >= callers/2 {
		t.Errorf("%d batches, largest %d: want shared batches of at most 50", len(s.batches), largest)
	}
	if m := s.most.Load(); m > 2 {
		t.Errorf("%d commits at once, want at most 2", m)
	}
	t.Logf("%d calls in %d batches, largest %d", callers, len(s.batches), largest)
}

// TestLoneCallCommitsAtOnce: with every slot free a call is committed by
// itself, in the caller's goroutine, with no timer to wait for.
func TestLoneCallCommitsAtOnce(t *testing.T) {
	s := &sink{}
	c := New(s.commit, Options{MaxBatch: 100, Flushes: 1})
	for i := range 3 {
		got, err := c.Do(context.Background(), i)
		if err != nil || len(got) != 1 || got[0] != 2*i {
			t.Fatalf("Do(%d) = %v, %v", i, got, err)
		}
	}
	if diff := cmp.Diff([][]int{{0}, {1}, {2}}, s.batches); diff != "" {
		t.Fatalf("batches (-want +got):\n%s", diff)
	}
}

// TestCrowdTakesTheOtherSlots: with Crowd, a batch smaller than a crowd
// waits while a commit is under way, whatever slots are free, and goes
// when it ends; a crowd takes a free slot at once.
func TestCrowdTakesTheOtherSlots(t *testing.T) {
	const crowd = 8
	s := &sink{gate: make(chan struct{}), entered: make(chan struct{}, 4)}
	c := New(s.commit, Options{MaxBatch: 100, Flushes: 4, Crowd: crowd})
	// A lone call on an idle Committer goes at once, and stalls its slot.
	if err := c.Submit(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	<-s.entered
	// Fewer than a crowd wait, three slots free or not.
	for v := 1; v < crowd; v++ {
		if err := c.Submit(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-s.entered:
		t.Fatalf("a batch of %d started beside a commit under way: want %d at least", crowd-1, crowd)
	case <-time.After(50 * time.Millisecond):
	}
	if n := c.Waiting(); n != crowd-1 {
		t.Fatalf("%d items waiting, want %d", n, crowd-1)
	}
	// The crowd's last member starts a second commit at once.
	if err := c.Submit(context.Background(), crowd); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("a crowd did not take a free slot")
	}
	if got := s.active.Load(); got != 2 {
		t.Fatalf("%d commits under way, want 2", got)
	}
	// A small batch behind them goes when a commit ends.
	if err := c.Submit(context.Background(), crowd+1); err != nil {
		t.Fatal(err)
	}
	close(s.gate)
	if err := c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0}, {1, 2, 3, 4, 5, 6, 7, 8}, {9}}
	got := slices.Clone(s.batches)
	slices.SortFunc(got, func(a, b []int) int { return a[0] - b[0] })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("batches (-want +got):\n%s", diff)
	}
}

// TestSinkErrorFailsItsBatchOnly: a commit that fails fails every call in
// its batch with its error, and no other call.
func TestSinkErrorFailsItsBatchOnly(t *testing.T) {
	boom := errors.New("sink down")
	// Every second commit fails, whatever its batch holds. (Failing every
	// batch that held a multiple of 7 failed them all whenever the batches
	// filled up with 10 items in a row, as on a busy machine, and the test
	// then proved nothing.)
	var (
		mu      sync.Mutex
		commits int
		failed  = map[int]bool{} // items whose batch failed
	)
	s := &sink{delay: time.Millisecond, fail: func(items []int) error {
		mu.Lock()
		defer mu.Unlock()
		if commits++; commits%2 == 0 {
			for _, v := range items {
				failed[v] = true
			}
			return boom
		}
		return nil
	}}
	c := New(s.commit, Options{MaxBatch: 10, Flushes: 1, Backlog: 1000})
	const callers = 300
	errs := make([]error, callers)
	res := make([][]int, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { res[i], errs[i] = c.Do(context.Background(), i) })
	}
	wg.Wait()

	if len(failed) == 0 || len(failed) == callers {
		t.Fatalf("%d of %d items in failed batches: the test proves nothing", len(failed), callers)
	}
	for i := range callers {
		switch {
		case failed[i] && (!errors.Is(errs[i], boom) || res[i] != nil):
			t.Errorf("call %d in a failed batch: %v, %v; want the sink's error", i, res[i], errs[i])
		case !failed[i] && (errs[i] != nil || len(res[i]) != 1 || res[i][0] != 2*i):
			t.Errorf("call %d in a good batch: %v, %v", i, res[i], errs[i])
		}
	}
}

// TestCallerGivesUp: a caller whose ctx ends while its batch waits returns
// ctx's error at once; its item stays in the batch, which is committed with
// the other callers' items.
func TestCallerGivesUp(t *testing.T) {
	s := &sink{gate: make(chan struct{}), entered: make(chan struct{}, 10)}
	c := New(s.commit, Options{MaxBatch: 10, Flushes: 1})

	first := make(chan error, 1)
	go func() { _, err := c.Do(context.Background(), 1); first <- err }()
	<-s.entered // the only slot is busy

	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { _, err := c.Do(ctx, 2); gaveUp <- err }()
	testenv.WaitFor(t, func() bool { return c.Waiting() == 1 })
	third := make(chan []int, 1)
	go func() { r, _ := c.Do(context.Background(), 3); third <- r }()
	testenv.WaitFor(t, func() bool { return c.Waiting() == 2 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v, want context.Canceled", err)
	}

	if _, err := c.Do(ctx, 4); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call with an ended ctx: %v, want context.Canceled", err)
	}
	close(s.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if r := <-third; len(r) != 1 || r[0] != 6 {
		t.Fatalf("third caller: %v, want [6]", r)
	}
	if diff := cmp.Diff([][]int{{1}, {2, 3}}, s.batches); diff != "" {
		t.Fatalf("batches (-want +got):\n%s", diff)
	}
}

// TestFullBacklog: when the backlog is full Submit is refused at once, Do
// waits for room until its ctx ends, and a waiting Do goes in as soon as
// room is made.
func TestFullBacklog(t *testing.T) {
	s := &sink{gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	c := New(s.commit, Options{MaxBatch: 2, Flushes: 1, Backlog: 4})
	if err := c.Submit(context.Background(), 1); err != nil { // committing, not waiting
		t.Fatal(err)
	}
	<-s.entered
	for v := 2; v <= 5; v++ { // the backlog: 4 items
		if err := c.Submit(context.Background(), v); err != nil {
			t.Fatalf("Submit(%d): %v", v, err)
		}
	}
	if err := c.Submit(context.Background(), 6); !errors.Is(err, ErrBusy) {
		t.Fatalf("Submit on a full backlog: %v, want ErrBusy", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, 7); !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do on a full backlog: %v, want ErrBusy and the deadline", err)
	}

	waiter := make(chan []int, 1)
	go func() {
		r, err := c.Do(context.Background(), 8)
		if err != nil {
			t.Error(err)
		}
		waiter <- r
	}()
	testenv.WaitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.room != nil })
	close(s.gate)
	if r := <-waiter; len(r) != 1 || r[0] != 16 {
		t.Fatalf("the caller that waited for room: %v", r)
	}
	if err := c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[int]int{1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 8: 1}
	if diff := cmp.Diff(want, s.committed()); diff != "" {
		t.Fatalf("committed (-want +got):\n%s", diff)
	}
}

// TestLargeCalls: a call with more items than MaxBatch is committed alone,
// and one larger than the backlog is let in once nothing waits.
func TestLargeCalls(t *testing.T) {
	s := &sink{}
	c := New(s.commit, Options{MaxBatch: 2, Flushes: 1, Backlog: 3})
	got, err := c.Do(context.Background(), 1, 2, 3, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{2, 4, 6, 8, 10}, got); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	if err := c.Submit(context.Background(), 6, 7, 8, 9); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{1, 2, 3, 4, 5}, {6, 7, 8, 9}}, s.batches); diff != "" {
		t.Fatalf("batches (-want +got):\n%s", diff)
	}
}

// TestWait: Wait returns when everything submitted is committed, or with
// its ctx's error while a commit is stuck.
func TestWait(t *testing.T) {
	s := &sink{gate: make(chan struct{}), entered: make(chan struct{}, 100)}
	c := New(s.commit, Options{MaxBatch: 10, Flushes: 2, Backlog: 100})
	for v := range 50 {
		if err := c.Submit(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while the sink is stuck: %v", err)
	}
	close(s.gate)
	if err := c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if seen := s.committed(); len(seen) != 50 {
		t.Fatalf("%d items committed after Wait, want 50", len(seen))
	}
}

// TestStalledSinkStaysBounded stalls the sink with both slots busy and sends
// 20 waves of 300 concurrent callers at the Committer, half with Do under a
// 20 ms deadline and half with Submit. Every caller must get a clear answer
// within its deadline (Do: ErrBusy, or its deadline while its item waits;
// Submit: taken, or ErrBusy at once), and goroutines and live heap must not
// grow from wave to wave. Once the sink recovers, the Committer has taken no
// more than the stuck commits and its backlog, and commits each item it took
// exactly once.
func TestStalledSinkStaysBounded(t *testing.T) {
	const (
		flushes, maxBatch, backlog = 2, 16, 64
		waves, callers             = 20, 300
		deadline                   = 20 * time.Millisecond
	)
	s := &sink{gate: make(chan struct{}), entered: make(chan struct{}, flushes)}
	c := New(s.commit, Options{MaxBatch: maxBatch, Flushes: flushes, Backlog: backlog})
	var submitted sync.Map // items Submit took
	// Stall both slots in the Committer's own goroutines.
	for v := range flushes {
		if err := c.Submit(context.Background(), -1-v); err != nil {
			t.Fatal(err)
		}
		submitted.Store(-1-v, true)
		<-s.entered
	}

	var (
		goroutines = make([]int, waves)
		heap       = make([]uint64, waves)
		busy, late atomic.Int64
		next       atomic.Int64
	)
	for w := range waves {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				<-start
				v := int(next.Add(1))
				if i%2 == 0 {
					switch err := c.Submit(context.Background(), v); {
					case err == nil:
						submitted.Store(v, true)
					case errors.Is(err, ErrBusy):
						busy.Add(1)
					default:
						t.Errorf("Submit: %v", err)
					}
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				began := time.Now()
				switch _, err := c.Do(ctx, v); {
				case errors.Is(err, ErrBusy) && errors.Is(err, context.DeadlineExceeded):
					busy.Add(1)
				case errors.Is(err, context.DeadlineExceeded): // waiting in the backlog
				default:
					t.Errorf("Do with a stalled sink: %v", err)
				}
				if d := time.Since(began); d > deadline+5*time.Second {
					late.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		// A caller's goroutine may still be on its way out after Done:
		// give stragglers a moment (a leak of hundreds would not settle).
		for i := 0; w > 0 && i < 200 && runtime.NumGoroutine() > goroutines[0]; i++ {
			time.Sleep(5 * time.Millisecond)
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		goroutines[w], heap[w] = runtime.NumGoroutine(), ms.HeapAlloc
	}
	t.Logf("goroutines after each wave %v", goroutines)
	t.Logf("live heap after each wave %v", heap)

	if busy.Load() == 0 || late.Load() > 0 {
		t.Errorf("%d callers told busy, %d answered late", busy.Load(), late.Load())
	}
	for w := 1; w < waves; w++ {
		if goroutines[w] > goroutines[0] {
			t.Errorf("wave %d left %d goroutines, wave 0 left %d", w, goroutines[w], goroutines[0])
		}
	}
	// Callers come and go; what the Committer holds does not grow. Allow
	// 256 KiB for the test's own and the runtime's noise.
	if growth := int64(heap[waves-1]) - int64(heap[0]); growth > 256<<10 {
		t.Errorf("live heap grew by %d bytes over %d waves", growth, waves)
	}

	close(s.gate)
	if err := c.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := s.committed()
	if len(seen) > flushes+backlog {
		t.Errorf("%d items committed after the stall, want at most %d (the stuck commits, then the backlog)", len(seen), flushes+backlog)
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("item %d committed %d times", v, n)
		}
	}
	submitted.Range(func(v, _ any) bool {
		if seen[v.(int)] != 1 {
			t.Errorf("item %d was taken by Submit but not committed", v)
		}
		return true
	})
}

// BenchmarkDo measures the Committer's own cost: 64 callers, a sink that
// does nothing.
func BenchmarkDo(b *testing.B) {
	c := New(func(_ context.Context, items []int, out []int) error { return nil }, Options{MaxBatch: 128, Flushes: 4, Backlog: 4096})
	b.SetParallelism(32)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := c.Do(ctx, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
