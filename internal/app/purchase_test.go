package app

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/internal/testenv"
	"seckill/jobs"
)

// rush sends users × attempts purchases of voucher at once, user u's
// attempt a through apis[(u+a) % len(apis)], for users firstUser,
// firstUser+1, ... It fails t unless every answer came, exactly stock were
// ACCEPTED, each with an order id of its own, no user twice, and the rest
// SOLD_OUT or ALREADY_PURCHASED. It returns the accepted order ids, each
// with its user.
func rush(t *testing.T, apis []*testEnv, voucher int64, firstUser, users, attempts, stock int) map[string]int {
	t.Helper()
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = apis[0].token(int64(firstUser+i), false)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: users * attempts}}
	defer client.CloseIdleConnections()
	type answer struct {
		user int
		p    purchase
		err  error
	}
	answers := make(chan answer, users*attempts)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for u := range users {
		for a := range attempts {
			e := apis[(u+a)%len(apis)]
			wg.Go(func() {
				<-start
				p, err := e.buy(client, tokens[u], voucher)
				answers <- answer{firstUser + u, p, err}
			})
		}
	}
	close(start)
	wg.Wait()
	close(answers)

	outcomes := map[string]int{}
	orderIDs := map[string]int{} // order id -> user
	acceptedBy := map[int]int{}
	for a := range answers {
		if a.err != nil {
			t.Fatalf("user %d: %v", a.user, a.err)
		}
		outcomes[a.p.Outcome]++
		if a.p.Outcome == string(seckill.OutcomeAccepted) {
			if a.p.OrderID == nil {
				t.Fatal("ACCEPTED without an order id")
			}
			if prev, dup := orderIDs[*a.p.OrderID]; dup {
				t.Fatalf("order id %s handed to users %d and %d", *a.p.OrderID, prev, a.user)
			}
			orderIDs[*a.p.OrderID] = a.user
			if acceptedBy[a.user]++; acceptedBy[a.user] > 1 {
				t.Fatalf("user %d accepted twice", a.user)
			}
		}
	}
	if outcomes["ACCEPTED"] != stock {
		t.Fatalf("ACCEPTED %d times, want exactly %d; outcomes %v", outcomes["ACCEPTED"], stock, outcomes)
	}
	if got := outcomes["SOLD_OUT"] + outcomes["ALREADY_PURCHASED"]; got != users*attempts-stock {
		t.Fatalf("rejections: %v, want %d SOLD_OUT or ALREADY_PURCHASED", outcomes, users*attempts-stock)
	}
	return orderIDs
}

// TestSeedScenario is the experiment the project grew from, through the real
// HTTP GraphQL handler: 1000 distinct users, each trying twice at once,
// against stock 200.
func TestSeedScenario(t *testing.T) {
	e := newTestEnv(t, "")
	e.worker()
	// As serve does: the reconciler requeues an admission whose enqueue
	// failed (a Redis call that timed out on this loaded machine).
	e.reconciler()
	const users, attempts, stock = 1000, 2, 200
	voucher := e.createCampaign(stock)

	orderIDs := rush(t, []*testEnv{e}, voucher, 10_000, users, attempts, stock)

	// The funnel counts each answer once, in the layer that gave it. Once
	// the campaign sold out, the process answers from its mark: a later
	// buyer costs Redis nothing, and is counted as the mark's.
	funnel := func(layer string) float64 { return testutil.ToFloat64(e.app.Metrics.Funnel.WithLabelValues(layer)) }
	total := 0.0
	for _, l := range seckill.Layers {
		total += funnel(l)
	}
	if total != users*attempts || funnel(seckill.LayerAdmitted) != stock {
		t.Errorf("funnel: %.0f answers counted, %.0f admitted; want %d and %d", total, funnel(seckill.LayerAdmitted), users*attempts, stock)
	}
	marked := funnel(seckill.LayerSoldOutMark)
	for u := int64(1); funnel(seckill.LayerSoldOutMark) == marked; u++ {
		if u > 5 {
			t.Fatalf("five purchases after the sell-out, none answered by the sold-out mark (funnel %s: %.0f)", seckill.LayerSoldOutMark, marked)
		}
		if p, err := e.buy(nil, e.token(90_000+u, false), voucher); err != nil || p.Outcome != string(seckill.OutcomeSoldOut) {
			t.Fatalf("a purchase after the sell-out: %+v, %v; want SOLD_OUT", p, err)
		}
	}

	eventually(t, 60*time.Second, "200 orders in Postgres", func() bool { return e.rows(voucher) >= stock })
	time.Sleep(200 * time.Millisecond) // anything beyond 200 would show now
	if n := e.rows(voucher); n != stock {
		t.Fatalf("Postgres holds %d orders, want %d", n, stock)
	}
	var persisted []string
	if err := e.app.DB.NewSelect().Table("voucher_order").Column("id").Where("voucher_id = ?", voucher).Scan(e.ctx, &persisted); err != nil {
		t.Fatal(err)
	}
	accepted := make([]string, 0, len(orderIDs))
	for id := range orderIDs {
		accepted = append(accepted, id)
	}
	sort.Strings(accepted)
	sort.Strings(persisted)
	if diff := cmp.Diff(accepted, persisted); diff != "" {
		t.Fatalf("persisted orders differ from accepted ones (-accepted +persisted):\n%s", diff)
	}
	if s := e.pgStock(voucher); s != 0 {
		t.Fatalf("Postgres stock %d, want 0", s)
	}
	if r := e.remaining(voucher); r != 0 {
		t.Fatalf("Redis remaining %d, want 0", r)
	}
	eventually(t, 10*time.Second, "no pending admissions", func() bool {
		q, err := e.app.Admitter.Queued(e.ctx, []int64{voucher})
		return err == nil && q[voucher] == 0
	})
}

// TestPersistIsIdempotent delivers every task twice, concurrently, and
// persists overlapping batches: still exactly one row per order.
func TestPersistIsIdempotent(t *testing.T) {
	e := newTestEnv(t, "")
	const stock = 150
	voucher := e.createCampaign(stock)
	var adms []seckill.Admission
	for u := range 120 {
		o, adm, err := e.app.Admitter.Admit(e.ctx, voucher, int64(500+u), seckill.Ticket{})
		if err != nil || o != seckill.OutcomeAccepted {
			t.Fatalf("admit: %v %v", o, err)
		}
		adms = append(adms, adm)
	}

	handler := jobs.NewPersistHandler(jobs.NewCoalescer(e.app.Purchases.PersistAdmissions, 32, 2, 64))
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(adms)+20)
	for _, adm := range adms[:80] {
		task, err := jobs.NewOrderPersistTask(adm)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the same task delivered twice
			wg.Add(1)
			go func() { defer wg.Done(); errs <- handler.ProcessTask(e.ctx, task) }()
		}
	}
	// Overlapping batch tasks, as an API process and the reconciler make
	// them, and overlapping batches straight through the service, as two
	// workers would run them after a lease expired.
	for _, part := range [][]seckill.Admission{adms[60:100], adms[70:120], adms[90:120], adms[:120]} {
		task, err := jobs.NewOrderPersistBatchTask(part)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() { defer wg.Done(); errs <- handler.ProcessTask(e.ctx, task) }()
		go func() { defer wg.Done(); errs <- e.app.Purchases.PersistAdmissions(e.ctx, part) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := e.rows(voucher); n != 120 {
		t.Fatalf("%d rows, want 120", n)
	}
	if s := e.pgStock(voucher); s != stock-120 {
		t.Fatalf("Postgres stock %d, want %d", s, stock-120)
	}
	if q, _ := e.app.Admitter.Queued(e.ctx, []int64{voucher}); q[voucher] != 0 {
		t.Fatalf("%d admissions still pending after persistence", q[voucher])
	}
	// And once more, after everything is done: nothing changes.
	if err := e.app.Purchases.PersistAdmissions(e.ctx, adms); err != nil {
		t.Fatal(err)
	}
	if n, s := e.rows(voucher), e.pgStock(voucher); n != 120 || s != stock-120 {
		t.Fatalf("re-delivery changed state: %d rows, stock %d", n, s)
	}
}

// TestEnqueueTwiceMakesOneTask checks that the task id derived from the order
// id keeps a requeue (the reconciler's) from making a second task.
func TestEnqueueTwiceMakesOneTask(t *testing.T) {
	e := newTestEnv(t, "")
	voucher := e.createCampaign(5)
	_, adm, err := e.app.Admitter.Admit(e.ctx, voucher, 42, seckill.Ticket{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := e.app.Enqueuer.RequeuePersist(e.ctx, adm); err != nil {
			t.Fatal(err)
		}
	}
	info, err := asynq.NewInspectorFromRedisClient(e.app.Redis).GetQueueInfo(jobs.QueueOrders)
	if err != nil {
		t.Fatal(err)
	}
	if info.Pending != 1 {
		t.Fatalf("%d pending tasks, want 1", info.Pending)
	}
}

// TestRetriesWhilePostgresUnreachable: admission does not need Postgres; the
// worker keeps retrying until Postgres is back, then the order is CREATED.
func TestRetriesWhilePostgresUnreachable(t *testing.T) {
	proxy, dsn := newPostgresProxy(t)
	e := newTestEnv(t, dsn)
	voucher := e.createCampaign(10)
	e.worker()

	proxy.down()
	user := e.token(77, false)
	p, err := e.buy(nil, user, voucher)
	if err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("purchase while Postgres is down: %+v %v", p, err)
	}
	orderID, _ := strconv.ParseInt(*p.OrderID, 10, 64)
	time.Sleep(1500 * time.Millisecond) // the worker tries and fails meanwhile
	o, err := e.app.Purchases.Order(asUser(e.ctx, 77, false), orderID)
	if err != nil || o.Status != seckill.OrderQueued {
		t.Fatalf("order while Postgres is down: %+v %v", o, err)
	}
	inspector := asynq.NewInspectorFromRedisClient(e.app.Redis)
	// A lone purchase goes as a batch of one.
	task, err := inspector.GetTaskInfo(jobs.QueueOrders, jobs.BatchTaskID([]seckill.Admission{{OrderID: orderID}}))
	if err != nil {
		t.Fatal(err)
	}
	if task.Retried == 0 || task.LastErr == "" {
		t.Fatalf("the worker has not failed yet while Postgres is down: %+v", task)
	}

	proxy.up()
	eventually(t, 30*time.Second, "the order to be created after Postgres came back", func() bool {
		o, err := e.app.Purchases.Order(asUser(e.ctx, 77, false), orderID)
		return err == nil && o.Status == seckill.OrderCreated
	})
	if n := e.rows(voucher); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// TestReconcilerEnqueuesStaleAdmissions simulates a process that died between
// the Lua admission and the enqueue.
func TestReconcilerEnqueuesStaleAdmissions(t *testing.T) {
	e := newTestEnv(t, "")
	voucher := e.createCampaign(10)
	e.worker()
	for u := range 5 {
		if o, _, err := e.app.Admitter.Admit(e.ctx, voucher, int64(900+u), seckill.Ticket{}); err != nil || o != seckill.OutcomeAccepted {
			t.Fatalf("admit: %v %v", o, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n := e.rows(voucher); n != 0 {
		t.Fatalf("%d rows before any enqueue: the test would prove nothing", n)
	}
	n, err := e.app.Purchases.Reconcile(e.ctx, 0, 100)
	if err != nil || n != 5 {
		t.Fatalf("Reconcile = %d, %v; want 5", n, err)
	}
	eventually(t, 20*time.Second, "5 orders persisted", func() bool { return e.rows(voucher) == 5 })
	// The acknowledgement follows the commit: a look between the two still
	// finds the batch pending (seen on the cluster).
	eventuallyWhy(t, 5*time.Second, "nothing stale once persisted", func() string {
		if stale, err := e.app.Admitter.Stale(e.ctx, []int64{voucher}, 0, 100); err != nil || len(stale) != 0 {
			return fmt.Sprintf("stale: %v %v", stale, err)
		}
		return ""
	})
}

// TestReconcilerLoopFindsStaleAdmissions checks the periodic loop itself, as
// serve and worker run it.
func TestReconcilerLoopFindsStaleAdmissions(t *testing.T) {
	e := newTestEnv(t, "")
	voucher := e.createCampaign(10)
	e.worker()
	if _, _, err := e.app.Admitter.Admit(e.ctx, voucher, 4242, seckill.Ticket{}); err != nil {
		t.Fatal(err)
	}
	e.reconciler()
	eventually(t, 20*time.Second, "the loop to persist the stale admission", func() bool { return e.rows(voucher) == 1 })
}

// TestRewarmAfterRedisLoss empties Redis under a running campaign; the next
// purchase restores it from Postgres, in a new epoch, and nothing is
// oversold or handed out twice.
func TestRewarmAfterRedisLoss(t *testing.T) {
	e := newTestEnv(t, "")
	voucher := e.createCampaign(10)
	e.worker()
	var first []int64
	for u := range 4 {
		p, err := e.buy(nil, e.token(int64(300+u), false), voucher)
		if err != nil || p.Outcome != "ACCEPTED" {
			t.Fatalf("buy: %+v %v", p, err)
		}
		id, _ := strconv.ParseInt(*p.OrderID, 10, 64)
		first = append(first, id)
	}
	eventually(t, 20*time.Second, "4 orders persisted", func() bool { return e.rows(voucher) == 4 })
	eventually(t, 5*time.Second, "pending drained", func() bool {
		q, _ := e.app.Admitter.Queued(e.ctx, []int64{voucher})
		return q[voucher] == 0
	})

	if err := testenv.FlushRedis(e.ctx, e.app.Redis); err != nil { // Redis restarted empty
		t.Fatal(err)
	}
	p, err := e.buy(nil, e.token(399, false), voucher)
	if err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("the first purchase after the loss (restores the campaign): %+v %v", p, err)
	}
	if id, _ := strconv.ParseInt(*p.OrderID, 10, 64); seckill.OrderEpoch(id) != seckill.OrderEpoch(first[0])+1 {
		t.Logf("epochs: before %d, after %d", seckill.OrderEpoch(first[0]), seckill.OrderEpoch(id))
		t.Fatalf("order %d after the loss is not in the next epoch", id)
	}
	restored, _ := strconv.ParseInt(*p.OrderID, 10, 64)
	first = append(first, restored)
	if r := e.remaining(voucher); r != 5 {
		t.Fatalf("remaining after the restore %d, want 5", r)
	}
	for u := range 4 {
		p, err := e.buy(nil, e.token(int64(300+u), false), voucher)
		if err != nil || p.Outcome != "ALREADY_PURCHASED" {
			t.Fatalf("earlier buyer %d after re-warm: %+v %v", 300+u, p, err)
		}
	}
	accepted := 1
	for u := range 10 {
		p, err := e.buy(nil, e.token(int64(400+u), false), voucher)
		if err != nil {
			t.Fatal(err)
		}
		if p.Outcome == "ACCEPTED" {
			accepted++
			id, _ := strconv.ParseInt(*p.OrderID, 10, 64)
			for _, old := range first {
				if id == old {
					t.Fatalf("order id %d handed out again after re-warm", id)
				}
			}
		}
	}
	if accepted != 6 {
		t.Fatalf("accepted %d after re-warm, want the 6 units left", accepted)
	}
	eventually(t, 20*time.Second, "10 orders persisted", func() bool { return e.rows(voucher) == 10 })
	if s := e.pgStock(voucher); s != 0 {
		t.Fatalf("Postgres stock %d, want 0", s)
	}
	// Nothing is left to restore.
	if n, err := e.app.Purchases.RestoreCampaigns(e.ctx); err != nil || n != 0 {
		t.Fatalf("RestoreCampaigns = %d, %v; want 0", n, err)
	}
}

// TestPurchaseAfterScriptFlush: Redis forgot the cached scripts; EVALSHA
// answers NOSCRIPT and the admission falls back to EVAL.
func TestPurchaseAfterScriptFlush(t *testing.T) {
	e := newTestEnv(t, "")
	voucher := e.createCampaign(3)
	if err := e.app.Redis.ScriptFlush(e.ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p, err := e.buy(nil, e.token(5, false), voucher)
	if err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("purchase after SCRIPT FLUSH: %+v %v", p, err)
	}
	if r := e.remaining(voucher); r != 2 {
		t.Fatalf("remaining %d, want 2", r)
	}
}

// TestPurchaseUnknownVoucher: a voucher Postgres does not know answers
// NOT_FOUND (not UNAVAILABLE, not a rebuild), and the made-up ids of a flood
// of such purchases leave nothing behind in Redis.
func TestPurchaseUnknownVoucher(t *testing.T) {
	e := newTestEnv(t, "")
	tok := e.token(7, false)
	for _, v := range []int64{999_999, 999_999, 123_456} {
		_, err := e.buy(nil, tok, v)
		if err == nil || !strings.HasSuffix(err.Error(), "(NOT_FOUND)") {
			t.Errorf("buy voucher %d: %v, want NOT_FOUND", v, err)
		}
	}
	keys, err := e.app.Redis.Keys(e.ctx, "*{v999999}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("an unknown voucher left keys in Redis: %v", keys)
	}
}

// TestCampaignLostAlone: one campaign's keys vanish (its shard lost them,
// say) while another's stay. The reconciler rebuilds that campaign alone,
// from Postgres, in its next epoch; the other keeps its state and epoch.
// Admissions left pending are requeued campaign by campaign from what
// Postgres lists, and no key outside a campaign's hash tag (no index) is
// there to decide anything.
func TestCampaignLostAlone(t *testing.T) {
	e := newTestEnv(t, "")
	lost, kept := e.createCampaign(10), e.createCampaign(10)
	e.worker()
	for u := range 3 {
		for _, v := range []int64{lost, kept} {
			if p, err := e.buy(nil, e.token(int64(500+u), false), v); err != nil || p.Outcome != "ACCEPTED" {
				t.Fatalf("buy: %+v %v", p, err)
			}
		}
	}
	eventually(t, 20*time.Second, "6 orders persisted", func() bool { return e.rows(lost) == 3 && e.rows(kept) == 3 })
	eventually(t, 5*time.Second, "pending drained", func() bool {
		q, _ := e.app.Admitter.Queued(e.ctx, []int64{lost, kept})
		return q[lost] == 0 && q[kept] == 0
	})
	keptKey := fmt.Sprintf("seckill:{v%d}:campaign", kept)
	keptBefore := e.app.Redis.HGetAll(e.ctx, keptKey).Val()
	epochs := func() (int64, int64) {
		a, err1 := e.app.Store.CampaignEpochs(e.ctx, lost)
		b, err2 := e.app.Store.CampaignEpochs(e.ctx, kept)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		return a.Campaign, b.Campaign
	}
	lostEpoch, keptEpoch := epochs()

	for _, k := range []string{"campaign", "buyers", "pending", "pending_at"} {
		if err := e.app.Redis.Del(e.ctx, fmt.Sprintf("seckill:{v%d}:%s", lost, k)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	e.app.reconcileOnce(e.ctx)
	if a, b := epochs(); a != lostEpoch+1 || b != keptEpoch {
		t.Fatalf("epochs after the loss: lost %d→%d, kept %d→%d; want only the lost one rebuilt", lostEpoch, a, keptEpoch, b)
	}
	if diff := cmp.Diff(keptBefore, e.app.Redis.HGetAll(e.ctx, keptKey).Val()); diff != "" {
		t.Errorf("the kept campaign changed (-before +after):\n%s", diff)
	}
	if r := e.remaining(lost); r != 7 {
		t.Errorf("remaining of the rebuilt campaign %d, want 7", r)
	}
	if p, err := e.buy(nil, e.token(500, false), lost); err != nil || p.Outcome != "ALREADY_PURCHASED" {
		t.Errorf("an earlier buyer after the rebuild: %+v %v", p, err)
	}

	// An admission whose enqueue never happened, on each campaign: the
	// reconciler finds both through Postgres.
	for _, v := range []int64{lost, kept} {
		if o, _, err := e.app.Admitter.Admit(e.ctx, v, 599, seckill.Ticket{}); err != nil || o != seckill.OutcomeAccepted {
			t.Fatalf("admit: %s %v", o, err)
		}
	}
	// Reconcile takes admissions strictly older than age by Redis's clock,
	// in milliseconds: let the admissions' millisecond pass.
	time.Sleep(5 * time.Millisecond)
	if n, err := e.app.Purchases.Reconcile(e.ctx, 0, 100); err != nil || n != 2 {
		t.Fatalf("Reconcile = %d, %v; want 2", n, err)
	}
	eventually(t, 20*time.Second, "both requeued orders persisted", func() bool { return e.rows(lost) == 4 && e.rows(kept) == 4 })

	var stray []string
	err := testenv.ForEachServer(e.ctx, e.app.Redis, func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, "seckill:*", 1000).Iterator()
		for iter.Next(ctx) {
			if k := iter.Val(); !campaignKey.MatchString(k) {
				stray = append(stray, k)
			}
		}
		return iter.Err()
	})
	if err != nil || len(stray) > 0 {
		t.Errorf("keys outside a campaign's hash tag: %q %v", stray, err)
	}
}

// campaignKey matches the keys of one campaign.
var campaignKey = regexp.MustCompile(`^seckill:\{v[0-9]+\}:[a-z_]+(:[0-9a-zA-Z_-]+)?$`)

// TestRetireEndedCampaigns: the reconciler trims a campaign that ended
// RetireAfter ago from Redis, once its orders are persisted: its buyers go,
// its hash stays, a purchase still hears ENDED and Redis still agrees with
// Postgres about its stock.
func TestRetireEndedCampaigns(t *testing.T) {
	e := newTestEnv(t, "")
	e.worker()
	voucher := e.createCampaign(5)
	if p, err := e.buy(nil, e.token(700, false), voucher); err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("buy: %+v %v", p, err)
	}
	eventually(t, 20*time.Second, "the order persisted", func() bool {
		q, err := e.app.Admitter.Queued(e.ctx, []int64{voucher})
		return e.rows(voucher) == 1 && err == nil && q[voucher] == 0
	})
	// The sale ended long ago, in both stores.
	end := time.Now().Add(-seckill.RetireAfter - time.Hour)
	if _, err := e.app.DB.NewRaw(`UPDATE seckill_campaign SET begin_time = ?, end_time = ? WHERE voucher_id = ?`,
		end.Add(-time.Hour), end, voucher).Exec(e.ctx); err != nil {
		t.Fatal(err)
	}
	campaign := fmt.Sprintf("seckill:{v%d}:campaign", voucher)
	if err := e.app.Redis.HSet(e.ctx, campaign, "begin_ms", end.Add(-time.Hour).UnixMilli(), "end_ms", end.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	e.app.reconcileOnce(e.ctx)
	if n := e.app.Redis.Exists(e.ctx, fmt.Sprintf("seckill:{v%d}:buyers", voucher)).Val(); n != 0 {
		t.Error("the ended campaign's buyers are still in Redis")
	}
	if n := e.app.Redis.Exists(e.ctx, campaign).Val(); n != 1 {
		t.Error("the ended campaign's hash left Redis")
	}
	if p, err := e.buy(nil, e.token(700, false), voucher); err != nil || p.Outcome != "ENDED" {
		t.Errorf("a purchase after the trim: %+v %v; want ENDED", p, err)
	}
	if r, s := e.remaining(voucher), e.pgStock(voucher); r != s || r != 4 {
		t.Errorf("Redis remaining %d, Postgres stock %d; want 4 and 4", r, s)
	}
}

// droppingQueue accepts every requeue and runs none of them: an orphaned
// asynq task (its hash survived a failover of the queue's Redis, its list
// entry did not), whose id makes every later requeue of the order a no-op.
type droppingQueue struct{ seckill.Enqueuer }

func (droppingQueue) RequeuePersist(context.Context, seckill.Admission) error { return nil }

// TestReconcilerPersistsStuckAdmissions: an admission whose requeue never
// runs is persisted by the reconciler itself once it has been pending for
// seckill.PersistStuck past the reconciler's age, and not before.
func TestReconcilerPersistsStuckAdmissions(t *testing.T) {
	e := newTestEnv(t, "")
	voucher := e.createCampaign(10)
	for u := range 3 {
		if o, _, err := e.app.Admitter.Admit(e.ctx, voucher, int64(700+u), seckill.Ticket{}); err != nil || o != seckill.OutcomeAccepted {
			t.Fatalf("admit: %v %v", o, err)
		}
	}
	time.Sleep(5 * time.Millisecond) // Stale's cutoff is strict, in milliseconds
	var skew atomic.Int64
	purchases, err := seckill.NewPurchases(seckill.PurchaseDeps{
		Orders: e.app.Store, Campaigns: e.app.Store, Admitter: e.app.Admitter, Outbox: e.app.Admitter,
		Rebuilder: e.app.Admitter, Queue: droppingQueue{e.app.Enqueuer}, Bus: e.app.Bus, Limiter: seckill.NoLimit{},
		Challenger: e.app.Challenger, Logger: e.app.Logger,
		Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := purchases.Reconcile(e.ctx, 0, 100); err != nil || n != 3 || e.rows(voucher) != 0 {
		t.Fatalf("fresh stale admissions: Reconcile = %d, %v, %d rows; want 3 requeued, none written", n, err, e.rows(voucher))
	}
	skew.Store(int64(seckill.PersistStuck + time.Second))
	if n, err := purchases.Reconcile(e.ctx, 0, 100); err != nil || n != 3 {
		t.Fatalf("stuck admissions: Reconcile = %d, %v; want 3", n, err)
	}
	if n := e.rows(voucher); n != 3 {
		t.Fatalf("%d rows after the reconciler persisted the stuck admissions, want 3", n)
	}
	if stale, err := e.app.Admitter.Stale(e.ctx, []int64{voucher}, 0, 100); err != nil || len(stale) != 0 {
		t.Fatalf("still pending: %v %v", stale, err)
	}
}
