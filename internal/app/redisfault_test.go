package app

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// The tests in this file run the purchase path end to end (HTTP, Redis,
// Asynq workers, Postgres) against a private redis-server that they kill,
// restart empty or restart with its AOF cut back, in the middle of a sale
// with concurrent buyers. Afterwards every ACCEPTED answer must be a row for
// that buyer or an explicit FAILED the buyer can read, no order id may
// belong to two buyers, nobody may hold two orders, Postgres may not be
// oversold, and Redis must agree with Postgres.

// redisServer is a private redis-server (testenv.RedisServer) whose files
// a test may cut back or wipe while it is down.
type redisServer struct {
	*testenv.RedisServer
	t *testing.T
}

func startRedisServer(t *testing.T) *redisServer {
	t.Helper()
	return &redisServer{RedisServer: testenv.StartRedisServer(t), t: t}
}

// snapshotAOF copies the AOF directory as it is on disk now.
func (r *redisServer) snapshotAOF() string {
	r.t.Helper()
	src := filepath.Join(r.Dir, "appendonlydir")
	dst := filepath.Join(r.t.TempDir(), "aof")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		r.t.Fatal(err)
	}
	return dst
}

// restoreAOF replaces the AOF directory with a snapshot: the server comes
// back without every write made after the snapshot, as after a host crash
// under appendfsync everysec (up to a second lost) or worse.
func (r *redisServer) restoreAOF(snapshot string) {
	r.t.Helper()
	dir := filepath.Join(r.Dir, "appendonlydir")
	if err := os.RemoveAll(dir); err != nil {
		r.t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(snapshot)); err != nil {
		r.t.Fatal(err)
	}
}

// wipe deletes everything the server persisted: it restarts empty.
func (r *redisServer) wipe() {
	r.t.Helper()
	if err := os.RemoveAll(filepath.Join(r.Dir, "appendonlydir")); err != nil {
		r.t.Fatal(err)
	}
}

// answer is what one buyer was told.
type answer struct {
	user    int64
	voucher int64 // set by the tests that buy several campaigns
	repeat  bool  // the user bought this voucher before and was told ACCEPTED
	outcome string
	orderID int64
	err     string        // the error code, when the purchase failed
	began   time.Time     // when the buyer asked
	took    time.Duration // how long the answer took
}

// attempt buys one unit of voucher as user through client and returns what
// the buyer was told.
func (e *testEnv) attempt(client *http.Client, user, voucher int64) answer {
	tok := e.token(user, false)
	began := time.Now()
	p, err := e.buy(client, tok, voucher)
	a := answer{user: user, outcome: p.Outcome, began: began, took: time.Since(began)}
	if err != nil {
		a.err = errorCode(err)
	} else if p.OrderID != nil {
		a.orderID, _ = strconv.ParseInt(*p.OrderID, 10, 64)
	}
	return a
}

// startBuyers starts n buyers that buy at once and again and again, each
// time as a new user: buyer b's kth attempt is user 1_000_000+b*100_000+k.
// newBuyer(b) returns buyer b's attempt, which buys and returns what the
// buyer was told; a buyer told an error backs off 20 ms before the next
// one. The returned stop ends the buyers and waits for them.
func startBuyers(n int, newBuyer func(b int) func(k, user int64) answer) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for b := range n {
		attempt := newBuyer(b)
		wg.Go(func() {
			for k := int64(0); ; k++ {
				select {
				case <-done:
					return
				default:
				}
				if a := attempt(k, int64(1_000_000+b*100_000)+k); a.err != "" {
					time.Sleep(20 * time.Millisecond) // a client backing off
				}
			}
		})
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// saleUnderFault runs a sale of stock units with concurrent buyers, each
// buying once with a user of its own, against a private Redis; fault runs
// after faultAfter. It checks every invariant at the end and reports what
// the fault cost.
func saleUnderFault(t *testing.T, stock int, fault func(t *testing.T, e *testEnv, r *redisServer)) {
	saleUnderFaultOn(t, stock, 1, fault)
}

// saleUnderFaultOn is saleUnderFault for a campaign of shards stock shards
// (all on the one Redis, so the fault loses every one).
func saleUnderFaultOn(t *testing.T, stock, shards int, fault func(t *testing.T, e *testEnv, r *redisServer)) {
	r := startRedisServer(t)
	e := newTestEnv(t, "", func(m map[string]string) {
		m["SECKILL_REDIS_URL"] = r.URL()
		m["SECKILL_REDIS_TIMEOUT"] = "1s"
		m["SECKILL_USER_RATE"] = "0"
		m["SECKILL_RECONCILE_INTERVAL"] = "250ms"
	})
	voucher := e.createCampaign(stock)
	if shards > 1 {
		voucher = e.createShardedCampaign(stock, shards, 900)
	}
	e.worker()
	e.reconciler()

	const buyers = 24
	var (
		mu        sync.Mutex
		answers   []answer
		lastError time.Time
		faultAt   time.Time
		firstOK   time.Time // first ACCEPTED after the fault
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: buyers}, Timeout: 10 * time.Second}
	stop := startBuyers(buyers, func(int) func(k, user int64) answer {
		return func(_, user int64) answer {
			a := e.attempt(client, user, voucher)
			mu.Lock()
			answers = append(answers, a)
			now := time.Now()
			if a.err != "" {
				lastError = now
			}
			if a.outcome == "ACCEPTED" && !faultAt.IsZero() && firstOK.IsZero() {
				firstOK = now
			}
			mu.Unlock()
			return a
		}
	})
	time.Sleep(1500 * time.Millisecond)
	fault(t, e, r)
	mu.Lock()
	faultAt = time.Now()
	mu.Unlock()
	time.Sleep(3 * time.Second)
	stop()

	// Let every admission reach Postgres and every campaign be restored.
	settled := time.Now()
	eventually(t, 60*time.Second, "pending admissions persisted and the campaign restored", func() bool {
		need, err := e.app.Admitter.NeedsRebuild(e.ctx, []int64{voucher})
		if err != nil || len(need) > 0 {
			return false
		}
		q, err := e.app.Admitter.Queued(e.ctx, []int64{voucher})
		return err == nil && q[voucher] == 0
	})
	settleTook := time.Since(settled)

	checkSale(t, e, voucher, stock, answers, nil)
	if n := testutil.ToFloat64(e.app.Metrics.Rewarmed); n < 1 {
		t.Errorf("seckill_rewarmed_campaigns_total = %v after Redis restarted, want the rebuild counted", n)
	}

	errs := map[string]int{}
	accepted := 0
	var slowest time.Duration
	for _, a := range answers {
		if a.err != "" {
			errs[a.err]++
			slowest = max(slowest, a.took)
		}
		if a.outcome == "ACCEPTED" {
			accepted++
		}
	}
	resumed := "never"
	if !firstOK.IsZero() {
		resumed = firstOK.Sub(faultAt).Round(time.Millisecond).String()
	}
	quiet := "none"
	if !lastError.IsZero() {
		quiet = lastError.Sub(faultAt).Round(time.Millisecond).String()
	}
	t.Logf("fault cost: %d attempts, %d accepted, errors %v (slowest %s); first ACCEPTED %s after Redis was back, last error %s after that; settled %s after the load",
		len(answers), accepted, errs, slowest.Round(time.Millisecond), resumed, quiet, settleTook.Round(time.Millisecond))
	// SECKILL_REDIS_TIMEOUT is 1s here: a refusal comes within a few of
	// them (a dial, a read, a retry), never after the client gave up.
	if slowest > 6*time.Second {
		t.Errorf("a purchase took %s to be refused while Redis was away", slowest)
	}
	if accepted == 0 {
		t.Error("nothing was accepted: the test did not exercise the sale")
	}
	for code := range errs {
		if code != seckill.EUNAVAILABLE {
			t.Errorf("%d purchases answered %s; want UNAVAILABLE (retryable) while Redis is away", errs[code], code)
		}
	}
}

// checkSale asserts the invariants of a finished sale against what the
// buyers were told, and returns how many ACCEPTED answers read CREATED and
// how many FAILED.
//
// A buyer answered with an error code in untold may hold an order nobody
// told them of: a request that died with the API serving it (NETWORK), or
// whose admission's reply died with a Redis master (UNAVAILABLE). Postgres
// may hold it for that buyer, and for no other.
func checkSale(t *testing.T, e *testEnv, voucher int64, stock int, answers []answer, untold map[string]bool) (created, failed int) {
	t.Helper()
	ctx := e.ctx
	owner := map[int64]int64{}
	told := map[int64]int64{} // user -> the order they were told ACCEPTED for
	// story is everything user was answered, in order.
	story := func(user int64) string {
		var out []string
		for _, b := range answers {
			if b.user == user {
				out = append(out, fmt.Sprintf("%s %s%s %d", b.began.Format("15:04:05.000"), b.outcome, b.err, b.orderID))
			}
		}
		return strings.Join(out, ", ")
	}
	reasons := map[string]int{}
	for _, a := range answers {
		if a.outcome != "ACCEPTED" {
			continue
		}
		if prev, ok := owner[a.orderID]; ok {
			t.Errorf("order id %d was handed to users %d and %d", a.orderID, prev, a.user)
			continue
		}
		owner[a.orderID] = a.user
		if first, ok := told[a.user]; ok {
			t.Errorf("user %d was told ACCEPTED twice for voucher %d: orders %d (epoch %d) and %d (epoch %d); answers: %s",
				a.user, voucher, first, seckill.OrderEpoch(first), a.orderID, seckill.OrderEpoch(a.orderID), story(a.user))
		} else {
			told[a.user] = a.orderID
		}
		// The read is the check's, not a buyer's answer: one that Redis
		// or Postgres cannot serve in time (an i/o timeout on a loaded
		// machine) is asked again, a few times.
		o, err := e.app.Purchases.Order(asUser(ctx, a.user, false), a.orderID)
		for try := 0; seckill.ErrorCode(err) == seckill.EUNAVAILABLE && try < 5; try++ {
			time.Sleep(200 * time.Millisecond)
			o, err = e.app.Purchases.Order(asUser(ctx, a.user, false), a.orderID)
		}
		if err != nil {
			t.Errorf("user %d was told ACCEPTED with order %d, which reads as %v", a.user, a.orderID, err)
			continue
		}
		switch {
		case o.Status == seckill.OrderCreated && o.UserID == a.user:
			created++
		case o.Status == seckill.OrderFailed && o.FailureReason != "":
			failed++
			reasons[o.FailureReason]++
		default:
			t.Errorf("user %d's order %d: %+v, want CREATED for them or FAILED with a reason", a.user, a.orderID, o)
		}
	}

	var orders []struct {
		ID     int64
		UserID int64
	}
	if err := e.app.DB.NewSelect().Table("voucher_order").Column("id", "user_id").
		Where("voucher_id = ?", voucher).Scan(ctx, &orders); err != nil {
		t.Fatal(err)
	}
	// Users whose answers may not tell of their order: an error in untold,
	// or ALREADY_PURCHASED without an ACCEPTED before it. go-redis sends a
	// call again when its connection dies; when the first one ran and its
	// reply died with Redis (kill -9 after the script, its effects in the
	// AOF), the second finds the buyer holding the unit and says so. That
	// answer is true, and it names no order id.
	lost := map[int64]bool{}
	accepted := map[int64]bool{}
	for _, a := range answers {
		accepted[a.user] = accepted[a.user] || a.outcome == "ACCEPTED"
	}
	for _, a := range answers {
		if untold[a.err] || (a.outcome == "ALREADY_PURCHASED" && !accepted[a.user]) {
			lost[a.user] = true
		}
	}
	unknown := 0
	holders := map[int64]int{}
	for _, o := range orders {
		holders[o.UserID]++
		if holders[o.UserID] == 2 {
			t.Errorf("user %d holds two orders", o.UserID)
		}
		if _, ok := owner[o.ID]; !ok && lost[o.UserID] {
			unknown++
			continue
		}
		if u, ok := owner[o.ID]; !ok || u != o.UserID {
			t.Errorf("Postgres holds order %d of user %d, which no buyer was told (told: %d); the user's answers: %s", o.ID, o.UserID, u, story(o.UserID))
		}
	}
	pg := e.pgStock(voucher)
	if len(orders) > stock || pg < 0 || pg != int64(stock-len(orders)) {
		t.Errorf("Postgres: %d orders, stock %d of %d: oversold or inconsistent", len(orders), pg, stock)
	}
	if len(orders)-unknown != created {
		t.Errorf("%d orders in Postgres, %d ACCEPTED answers read CREATED", len(orders), created)
	}
	if r := e.remaining(voucher); r != pg {
		t.Errorf("Redis has %d units left, Postgres %d", r, pg)
	}
	t.Logf("sale: %d ACCEPTED, %d CREATED, %d FAILED %v, %d orders of buyers answered an error or ALREADY_PURCHASED first; stock %d, %d left",
		len(owner), created, failed, reasons, unknown, stock, pg)
	return created, failed
}

func errorCode(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "("); i >= 0 && strings.HasSuffix(msg, ")") {
		return msg[i+1 : len(msg)-1]
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return "NETWORK"
	}
	return fmt.Sprintf("OTHER: %v", err)
}

// TestRedisRestartedEmpty: Redis comes back with nothing. The campaign is
// rebuilt from Postgres in a new epoch; the admissions that were pending
// are lost with it, and their buyers read FAILED.
func TestRedisRestartedEmpty(t *testing.T) {
	saleUnderFault(t, 2000, func(t *testing.T, e *testEnv, r *redisServer) {
		r.Kill()
		r.wipe()
		r.Start()
	})
}

// TestRedisLostItsLastWrites: Redis comes back from an AOF that misses its
// last writes (a host crash under appendfsync everysec). Its campaign state
// is behind what it acknowledged: it must not admit until it is rebuilt,
// and no order id may be handed out again.
func TestRedisLostItsLastWrites(t *testing.T) {
	saleUnderFault(t, 2000, func(t *testing.T, e *testEnv, r *redisServer) {
		snap := r.snapshotAOF()
		time.Sleep(700 * time.Millisecond) // sell on; these writes will be lost
		r.Kill()
		r.restoreAOF(snap)
		r.Start()
	})
}

// TestRedisRestartedEmptySharded and TestRedisLostItsLastWritesSharded are
// the two faults for a campaign of 3 stock shards: every shard is lost
// together, so the whole campaign is rebuilt at once, from Postgres's stock.
// Its admissions run faster than one shard's: 10,000 units, so that the
// fault strikes in the middle of the sale.
func TestRedisRestartedEmptySharded(t *testing.T) {
	saleUnderFaultOn(t, 10000, 3, func(t *testing.T, e *testEnv, r *redisServer) {
		r.Kill()
		r.wipe()
		r.Start()
	})
}

func TestRedisLostItsLastWritesSharded(t *testing.T) {
	saleUnderFaultOn(t, 10000, 3, func(t *testing.T, e *testEnv, r *redisServer) {
		snap := r.snapshotAOF()
		time.Sleep(700 * time.Millisecond)
		r.Kill()
		r.restoreAOF(snap)
		r.Start()
	})
}

// TestRedisDownForAWhile: Redis is gone for two seconds and comes back with
// its data. Meanwhile purchases are answered UNAVAILABLE (retryable) within
// a bounded time, and nothing is lost.
func TestRedisDownForAWhile(t *testing.T) {
	saleUnderFault(t, 2000, func(t *testing.T, e *testEnv, r *redisServer) {
		r.Kill()
		time.Sleep(2 * time.Second)
		r.Start()
	})
}

// TestRedisKilled: kill -9 of Redis with everysec loses nothing the OS
// holds; the campaign is rebuilt all the same (a restart cannot tell).
func TestRedisKilled(t *testing.T) {
	saleUnderFault(t, 2000, func(t *testing.T, e *testEnv, r *redisServer) {
		r.Kill()
		r.Start()
	})
}

// TestRedisEmptyWhilePostgresSlow: Redis restarts empty while Postgres holds
// the campaign's row lock, so batches from before the loss commit only
// after the restart, racing the rebuild; nothing may be oversold and Redis
// must not sell a unit that Postgres gave to a batch from before.
func TestRedisEmptyWhilePostgresSlow(t *testing.T) {
	saleUnderFault(t, 2000, func(t *testing.T, e *testEnv, r *redisServer) {
		tx, err := e.app.DB.BeginTx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(e.ctx, "SELECT 1 FROM seckill_campaign FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // batches pile up behind the lock
		r.Kill()
		r.wipe()
		r.Start()
		go func() {
			time.Sleep(time.Second)
			_ = tx.Rollback()
		}()
	})
}
