//go:build !race

// The race detector's instrumentation makes frames larger and doubles the
// stack guard, so this file measures the build that runs in production:
// make test-stack runs it without -race.

package app

import (
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"seckill/internal/testenv"
)

// stackProbe is how much stack the probe asks for after a purchase, from
// the top of the connection's goroutine: more than an 8 KiB stack has left
// there, less than a 16 KiB one has.
const stackProbe = 8 << 10

// TestPurchaseStackDepth holds the purchase path to the stack of a new
// connection: in a sale's burst most purchases arrive on connections opened
// for them, and a goroutine whose stack outgrows 8 KiB copies it into a
// 16 KiB one, a copy every new connection of a burst would pay on its
// first purchase. Two hundred buyers on connections of their
// own buy while Redis is stopped, so all but the few whose goroutine sends
// a pipeline wait in the admission's batch, the deepest point of the path;
// then each connection's goroutine, with its stack as the purchase left
// it, asks for stackProbe more bytes and says whether its stack had to
// move for them (it had when it is still 8 KiB).
func TestPurchaseStackDepth(t *testing.T) {
	redis := testenv.StartRedisServer(t)
	e := newTestEnv(t, "", func(m map[string]string) { m["SECKILL_REDIS_URL"] = redis.URL() })
	voucher := e.createCampaign(1000)
	// The campaign known to this process, as in the middle of a sale.
	if p, err := e.buy(nil, e.token(1, false), voucher); err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("first purchase: %+v, %v", p, err)
	}

	var purchases, grew atomic.Int64
	h := e.app.Handler(nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.URL.Path == "/graphql" {
			purchases.Add(1)
			if !stackMoves(stackProbe) {
				grew.Add(1)
			}
		}
	}))
	t.Cleanup(srv.Close)

	// No collection while the goroutines are measured: it shrinks stacks,
	// and sets the size new goroutines start with (the average in use).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	start := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
	if metrics.Read(start); start[0].Value.Uint64() > stackProbe {
		t.Skipf("new goroutines start with %d bytes of stack here: they never outgrow 8 KiB", start[0].Value.Uint64())
	}
	const buyers = 200
	tokens := make([]string, buyers)
	for i := range tokens {
		tokens[i] = e.token(int64(100+i), false)
	}
	redis.Pause()
	var wg sync.WaitGroup
	errs := make(chan error, buyers)
	for i := range buyers {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{}, Timeout: time.Minute}
			defer client.CloseIdleConnections()
			p, err := buyAt(client, srv.URL, tokens[i], voucher)
			if err == nil && p.Outcome != "ACCEPTED" {
				t.Errorf("buyer %d: %s", i, p.Outcome)
			}
			errs <- err
		})
	}
	time.Sleep(2 * time.Second) // every purchase on its way, or waiting for Redis
	redis.Resume()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := purchases.Load(); n != buyers {
		t.Fatalf("%d purchases reached the server, want %d", n, buyers)
	}
	// The goroutines that sent a pipeline went deeper, into go-redis: a
	// few, one per flush slot.
	if n := grew.Load(); n > buyers/10 {
		t.Fatalf("%d of %d connections' goroutines outgrew an 8 KiB stack in a purchase; "+
			"the purchase path's frames grew: keep the calls between the handler and the admission's wait small", n, buyers)
	}
	t.Logf("%d of %d connections' goroutines outgrew 8 KiB (the pipelines' senders)", grew.Load(), buyers)
}

// stackMoves asks for n bytes of stack and reports whether the goroutine's
// stack had to be copied into a larger one for them.
//
//go:noinline
func stackMoves(n int) bool {
	var here byte
	before := uintptr(unsafe.Pointer(&here))
	useStack(n)
	return uintptr(unsafe.Pointer(&here)) != before
}

//go:noinline
func useStack(n int) byte {
	var buf [512]byte
	buf[n%len(buf)] = byte(n)
	if n <= len(buf) {
		return buf[0]
	}
	return useStack(n-len(buf)) + buf[(n/2)%len(buf)]
}
