package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/testenv"
)

// echoScript doubles its argument, refuses multiples of 7 with an error
// reply, and counts its runs under KEYS[1], so a test can tell which calls
// reached Redis and whether each caller got its own reply.
var echoScript = redis.NewScript(`
redis.call('INCR', KEYS[1])
local n = tonumber(ARGV[1])
if n % 7 == 0 then
  return redis.error_reply('ERR seven ' .. ARGV[1])
end
return {n * 2}
`)

// runConcurrently calls p.run for args 1..n from n goroutines released
// together and returns each call's reply and error by argument.
func runConcurrently(t *testing.T, p *pipeline, key string, n int) ([][]any, []error) {
	t.Helper()
	res, errs := make([][]any, n+1), make([]error, n+1)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			<-start
			res[i], errs[i] = p.runSlice(context.Background(), []string{key}, int64(i))
		})
	}
	close(start)
	wg.Wait()
	return res, errs
}

func checkEchoReplies(t *testing.T, res [][]any, errs []error) {
	t.Helper()
	for i := 1; i < len(res); i++ {
		if i%7 == 0 {
			if errs[i] == nil || errs[i].Error() != fmt.Sprintf("ERR seven %d", i) {
				t.Errorf("call %d: error %v, want its own error reply", i, errs[i])
			}
			continue
		}
		if errs[i] != nil || len(res[i]) != 1 || res[i][0] != int64(2*i) {
			t.Errorf("call %d: reply %v, %v; want [%d]", i, res[i], errs[i], 2*i)
		}
	}
}

// TestPipelineBatches sends 400 concurrent calls through one pipeline slot:
// they must go in batches of more than one, every call must run exactly
// once, and every caller must get its own reply or error.
func TestPipelineBatches(t *testing.T) {
	rdb, prefix := testenv.MustOpenRedis(t)
	p := newPipeline(rdb, echoScript, 1, 50, 1000)
	var batches, largest atomic.Int64
	p.sent = func(n int) {
		batches.Add(1)
		for {
			l := largest.Load()
			if int64(n) <= l || largest.CompareAndSwap(l, int64(n)) {
				break
			}
		}
	}
	const n = 400
	res, errs := runConcurrently(t, p, prefix+"runs", n)
	checkEchoReplies(t, res, errs)
	if runs, err := rdb.Get(context.Background(), prefix+"runs").Int(); err != nil || runs != n {
		t.Fatalf("the script ran %d times (%v), want %d", runs, err, n)
	}
	if largest.Load() < 2 || largest.Load() > 50 {
		t.Fatalf("largest batch %d: want pipelining, at most 50 a batch", largest.Load())
	}
	t.Logf("%d calls in %d batches, largest %d", n, batches.Load(), largest.Load())
}

// TestPipelineNoScript flushes Redis's script cache: batched EVALSHAs come
// back NOSCRIPT, did not run, and are run once each with EVAL.
func TestPipelineNoScript(t *testing.T) {
	rdb, prefix := testenv.MustOpenRedis(t)
	p := newPipeline(rdb, echoScript, 1, 50, 1000)
	var batched atomic.Bool
	p.sent = func(n int) {
		if n > 1 {
			batched.Store(true)
		}
	}
	for round := range 3 {
		if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		res, errs := runConcurrently(t, p, prefix+"runs", 200)
		checkEchoReplies(t, res, errs)
		if runs, _ := rdb.Get(context.Background(), prefix+"runs").Int(); runs != 200*(round+1) {
			t.Fatalf("round %d: the script ran %d times in all, want %d", round, runs, 200*(round+1))
		}
	}
	if !batched.Load() {
		t.Fatal("no batch of more than one call was sent")
	}
}

// TestPipelineRedisDown: every caller of a batch gets the connection
// error, and nobody waits forever.
func TestPipelineRedisDown(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	p := newPipeline(rdb, echoScript, 1, 50, 1000)
	res, errs := runConcurrently(t, p, "k", 100)
	for i := 1; i <= 100; i++ {
		if errs[i] == nil || res[i] != nil {
			t.Fatalf("call %d: %v, %v; want a connection error", i, res[i], errs[i])
		}
	}
}

// TestPipelineCallerGivesUp: a caller whose context ends while its batch
// waits returns at once with the context's error. Its call still runs with
// the batch (as when a reply is lost), and the other callers are answered.
func TestPipelineCallerGivesUp(t *testing.T) {
	rdb, prefix := testenv.MustOpenRedis(t)
	p := newPipeline(rdb, echoScript, 1, 50, 1000)
	key := prefix + "runs"
	gate, sending := make(chan struct{}), make(chan int, 10)
	p.sent = func(n int) {
		sending <- n
		<-gate
	}

	first := make(chan error, 1)
	go func() {
		_, err := p.runSlice(context.Background(), []string{key}, 1)
		first <- err
	}()
	<-sending // the only pipeline is busy: the next calls wait together

	ctx, cancel := context.WithCancel(context.Background())
	follower := make(chan error, 1)
	go func() {
		_, err := p.runSlice(ctx, []string{key}, 2)
		follower <- err
	}()
	last := make(chan error, 1)
	go func() {
		res, err := p.runSlice(context.Background(), []string{key}, 3)
		if err == nil && (len(res) != 1 || res[0] != int64(6)) {
			err = fmt.Errorf("reply %v, want [6]", res)
		}
		last <- err
	}()
	testenv.WaitFor(t, func() bool { return p.batches.Waiting() == 2 })
	cancel()
	select {
	case err := <-follower:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("follower: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the follower did not give up with its context")
	}

	close(gate) // the first batch goes, then the one the follower left
	if err := <-first; err != nil {
		t.Fatalf("first caller: %v", err)
	}
	if err := <-last; err != nil {
		t.Fatalf("last caller: %v", err)
	}
	if n := <-sending; n != 2 {
		t.Fatalf("second batch of %d calls, want 2 (the follower's call stays in it)", n)
	}
	if runs, _ := rdb.Get(context.Background(), key).Int(); runs != 3 {
		t.Fatalf("the script ran %d times, want 3", runs)
	}
}

// runSlice is run for tests that look at the reply and the error only.
func (p *pipeline) runSlice(ctx context.Context, keys []string, arg int64) ([]any, error) {
	r := p.run(ctx, keys, arg)
	return r.res, r.err
}

// silentHook answers every command and pipeline without sending it: each
// command is left with neither a reply nor an error, as go-redis's cluster
// pipeline can leave admissions while the cluster fails over.
type silentHook struct{}

func (silentHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (silentHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error { return nil }
}
func (silentHook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(context.Context, []redis.Cmder) error { return nil }
}

// TestPipelineNoReply: a call that comes back with neither a reply nor an
// error may or may not have run: its caller hears UNAVAILABLE (the sale is
// unavailable for a moment), alone or in a batch, never an internal error.
func TestPipelineNoReply(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	rdb.AddHook(silentHook{})
	p := newPipeline(rdb, echoScript, 1, 50, 1000)
	for _, n := range []int{1, 100} {
		res, errs := runConcurrently(t, p, "k", n)
		for i := 1; i <= n; i++ {
			if res[i] != nil || !errors.Is(errs[i], errUnavailable) {
				t.Fatalf("%d calls, call %d: %v, %v; want UNAVAILABLE", n, i, res[i], errs[i])
			}
		}
	}
}
