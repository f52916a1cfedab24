package app

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"seckill/internal/auth"
	"seckill/internal/seckill"
	"seckill/jobs"
)

// buildInfo is seckill_build_info: always 1, labelled with the build.
func buildInfo() prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_build_info", Help: "Always 1; its labels describe the running build.",
		ConstLabels: prometheus.Labels{"version": buildVersion(), "revision": revision, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// registerCollectors adds the series read from the app's connections at
// scrape time: the Postgres pool (go_sql_*), the Redis pool, the Asynq
// queues, and whether Postgres and Redis answer.
func (a *App) registerCollectors() {
	a.Metrics.Registry.MustRegister(
		collectors.NewDBStatsCollector(a.DB.DB, "seckill"),
		redisPoolCollector{a},
		queueCollector{a.dashboard.queues},
		&dependencyCollector{a: a},
		&refundCollector{refunds: a.Refunds, logger: a.Logger},
		&eventCollector{events: a.Store, logger: a.Logger},
		&roomCollector{campaigns: a.Store, rooms: a.Rooms, logger: a.Logger, now: time.Now},
	)
	if a.Provider != nil {
		a.Metrics.Registry.MustRegister(authCollector{a.Provider})
	}
}

var (
	eventsDesc = prometheus.NewDesc("seckill_events",
		"Order events in the outbox, by state (pending: not delivered yet; dead: used up their attempts, holding back their order's later events; delivered: kept for redelivery until SECKILL_EVENTS_RETENTION), every endpoint together, read from Postgres: every process reports the same (aggregate with max).",
		[]string{"state"}, nil)
	eventsOldestDesc = prometheus.NewDesc("seckill_events_oldest_pending_seconds",
		"Age of the oldest order event not delivered yet (dead ones aside); 0 when none.", nil, nil)
)

// eventCollector reports the outbox from Postgres, read at most once per
// refundStatsTTL however often it is scraped.
type eventCollector struct {
	events interface {
		EventStats(ctx context.Context, endpointID int64) (seckill.EventStats, error)
	}
	logger interface {
		Warn(msg string, args ...any)
	}

	mu  sync.Mutex
	at  time.Time
	st  seckill.EventStats
	err error
}

func (c *eventCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- eventsDesc
	ch <- eventsOldestDesc
}

func (c *eventCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.at) >= refundStatsTTL {
		ctx, cancel := context.WithTimeout(context.Background(), dependencyPingTimeout)
		c.st, c.err = c.events.EventStats(ctx, 0)
		cancel()
		c.at = time.Now()
		if c.err != nil {
			c.logger.Warn("read the event outbox for the metrics", "err", c.err)
		}
	}
	st, err := c.st, c.err
	c.mu.Unlock()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.GaugeValue, float64(st.Pending), "pending")
	ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.GaugeValue, float64(st.Dead), "dead")
	ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.GaugeValue, float64(st.Delivered), "delivered")
	ch <- prometheus.MustNewConstMetric(eventsOldestDesc, prometheus.GaugeValue, st.Oldest.Seconds())
}

var (
	refundsDesc = prometheus.NewDesc("seckill_refunds",
		"Payments owed back, by refund status (REFUND_NEEDED, REFUNDING, REFUNDED, REFUND_FAILED), read from Postgres: every process reports the same (aggregate with max).",
		[]string{"status"}, nil)
	refundAmountDesc = prometheus.NewDesc("seckill_refund_amount",
		"What the payments owed back add up to, in the currency's minor unit, by refund status and currency.",
		[]string{"status", "currency"}, nil)
	refundsStuckDesc = prometheus.NewDesc("seckill_refunds_stuck",
		"Refunds owed (not sent, or sent and not confirmed) for longer than an hour.", nil, nil)
)

// refundStatuses are the statuses seckill_refunds reports, 0 included.
var refundStatuses = []seckill.PaymentStatus{seckill.PaymentRefundNeeded, seckill.PaymentRefunding,
	seckill.PaymentRefunded, seckill.PaymentRefundFailed}

// refundStatsTTL is how long a scrape reuses the refunds read from
// Postgres.
const refundStatsTTL = 10 * time.Second

// refundCollector reports refunds by status from Postgres, read at most
// once per refundStatsTTL however often it is scraped.
type refundCollector struct {
	refunds *seckill.Refunds
	logger  interface {
		Warn(msg string, args ...any)
	}

	mu  sync.Mutex
	at  time.Time
	st  seckill.RefundStats
	err error
}

func (c *refundCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- refundsDesc
	ch <- refundAmountDesc
	ch <- refundsStuckDesc
}

func (c *refundCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.at) >= refundStatsTTL {
		ctx, cancel := context.WithTimeout(context.Background(), dependencyPingTimeout)
		c.st, c.err = c.refunds.Stats(ctx, 0)
		cancel()
		c.at = time.Now()
		if c.err != nil {
			c.logger.Warn("read refunds for the metrics", "err", c.err)
		}
	}
	st, err := c.st, c.err
	c.mu.Unlock()
	if err != nil {
		return // no numbers rather than wrong ones; the alerts see them absent
	}
	for _, s := range refundStatuses {
		t := st.ByStatus[s]
		ch <- prometheus.MustNewConstMetric(refundsDesc, prometheus.GaugeValue, float64(t.Count), string(s))
		for cur, n := range t.Amounts {
			ch <- prometheus.MustNewConstMetric(refundAmountDesc, prometheus.GaugeValue, float64(n), string(s), cur)
		}
	}
	ch <- prometheus.MustNewConstMetric(refundsStuckDesc, prometheus.GaugeValue, float64(st.Stuck))
}

var (
	redisPoolDesc = map[string]*prometheus.Desc{
		"hits":     prometheus.NewDesc("seckill_redis_pool_hits_total", "Times a free connection was found in the Redis pool.", nil, nil),
		"misses":   prometheus.NewDesc("seckill_redis_pool_misses_total", "Times no free connection was found in the Redis pool.", nil, nil),
		"timeouts": prometheus.NewDesc("seckill_redis_pool_timeouts_total", "Times a wait for a Redis pool connection timed out.", nil, nil),
		"conns":    prometheus.NewDesc("seckill_redis_pool_connections", "Connections in the Redis pool, by state (idle or in use).", []string{"state"}, nil),
		"stale":    prometheus.NewDesc("seckill_redis_pool_stale_connections_total", "Stale connections removed from the Redis pool.", nil, nil),
		"max":      prometheus.NewDesc("seckill_redis_pool_max_connections", "The Redis pool's size, per Redis server.", nil, nil),
	}
)

// redisPoolCollector reads go-redis' pool statistics at scrape time.
type redisPoolCollector struct{ a *App }

func (c redisPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range redisPoolDesc {
		ch <- d
	}
}

func (c redisPoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.a.Redis.PoolStats()
	counter := func(name string, v uint32) {
		ch <- prometheus.MustNewConstMetric(redisPoolDesc[name], prometheus.CounterValue, float64(v))
	}
	counter("hits", s.Hits)
	counter("misses", s.Misses)
	counter("timeouts", s.Timeouts)
	counter("stale", s.StaleConns)
	ch <- prometheus.MustNewConstMetric(redisPoolDesc["conns"], prometheus.GaugeValue, float64(s.IdleConns), "idle")
	ch <- prometheus.MustNewConstMetric(redisPoolDesc["conns"], prometheus.GaugeValue, float64(s.TotalConns-s.IdleConns), "in_use")
	ch <- prometheus.MustNewConstMetric(redisPoolDesc["max"], prometheus.GaugeValue, float64(c.a.redisPoolSize))
}

var (
	queueTasksDesc = prometheus.NewDesc("seckill_queue_tasks",
		"Asynq tasks by queue and state (pending, active, scheduled, retry, archived, completed, aggregating).",
		[]string{"queue", "state"}, nil)
	queueLatencyDesc = prometheus.NewDesc("seckill_queue_latency_seconds",
		"Age of the oldest pending task of an Asynq queue: how far the workers are behind.", []string{"queue"}, nil)
	queueProcessedDesc = prometheus.NewDesc("seckill_queue_processed_today",
		"Tasks an Asynq queue processed today (UTC), failed ones included.", []string{"queue"}, nil)
	queueFailedDesc = prometheus.NewDesc("seckill_queue_failed_today",
		"Tasks of an Asynq queue that failed today (UTC).", []string{"queue"}, nil)
	queueReadErrorsDesc = prometheus.NewDesc("seckill_queue_stats_up",
		"1 when the Asynq queues could be read at the last scrape, 0 otherwise.", nil, nil)
)

// queueCollector reports the Asynq queues through the dashboard's cached
// reader, so a scrape costs at most one inspection per DefaultQueueTTL.
type queueCollector struct{ q *jobs.QueueStats }

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{queueTasksDesc, queueLatencyDesc, queueProcessedDesc, queueFailedDesc, queueReadErrorsDesc} {
		ch <- d
	}
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	info, _, err := c.q.Get()
	up := 1.0
	if err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(queueReadErrorsDesc, prometheus.GaugeValue, up)
	for _, q := range info {
		for state, n := range map[string]int{"pending": q.Pending, "active": q.Active, "scheduled": q.Scheduled,
			"retry": q.Retry, "archived": q.Archived, "completed": q.Completed, "aggregating": q.Aggregating} {
			ch <- prometheus.MustNewConstMetric(queueTasksDesc, prometheus.GaugeValue, float64(n), q.Queue, state)
		}
		ch <- prometheus.MustNewConstMetric(queueLatencyDesc, prometheus.GaugeValue, q.Latency.Seconds(), q.Queue)
		ch <- prometheus.MustNewConstMetric(queueProcessedDesc, prometheus.GaugeValue, float64(q.Processed), q.Queue)
		ch <- prometheus.MustNewConstMetric(queueFailedDesc, prometheus.GaugeValue, float64(q.Failed), q.Queue)
	}
}

var dependencyUpDesc = prometheus.NewDesc("seckill_dependency_up",
	"1 when the dependency answered a ping at the last scrape, 0 otherwise.", []string{"dependency"}, nil)

// dependencyPingTimeout bounds each ping a scrape makes.
const dependencyPingTimeout = time.Second

// dependencyCollector pings Postgres and Redis at scrape time, both at
// once, so an unreachable one shows within one scrape.
type dependencyCollector struct{ a *App }

func (c *dependencyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- dependencyUpDesc }

func (c *dependencyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), dependencyPingTimeout)
	defer cancel()
	var pg, rd error
	var wg sync.WaitGroup
	wg.Go(func() { pg = c.a.DB.PingContext(ctx) })
	wg.Go(func() { rd = c.a.Redis.Ping(ctx).Err() })
	wg.Wait()
	for name, err := range map[string]error{"postgres": pg, "redis": rd} {
		v := 1.0
		if err != nil {
			v = 0
		}
		ch <- prometheus.MustNewConstMetric(dependencyUpDesc, prometheus.GaugeValue, v, name)
	}
}

// consistencyMetrics are the results of the last consistency check: the
// domain's stock balance (seckill.ReadBalance: initial = remaining + queued
// + awaiting payment + paid, and Postgres's orders agree with its stock),
// the one the dashboard shows, for every campaign live or ended within
// consistencyWindow.
type consistencyMetrics struct {
	campaigns *prometheus.GaugeVec
	drift     prometheus.Gauge
	lastCheck prometheus.Gauge
}

func newConsistencyMetrics(reg prometheus.Registerer) *consistencyMetrics {
	m := &consistencyMetrics{
		campaigns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_consistency_campaigns",
			Help: "Campaigns by the state of their Redis/Postgres balance at the last check (ok, settling, mismatch, unknown).",
		}, []string{"state"}),
		drift: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_consistency_drift_units",
			Help: "Units by which Redis and Postgres disagree, summed over mismatched campaigns at the last check.",
		}),
		lastCheck: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_consistency_last_check_timestamp_seconds",
			Help: "When the consistency check last completed (Unix time).",
		}),
	}
	for _, s := range seckill.BalanceStates {
		m.campaigns.WithLabelValues(string(s))
	}
	reg.MustRegister(m.campaigns, m.drift, m.lastCheck)
	return m
}

// Consistency check timing: how often, and how long after its end a
// campaign is still checked.
const (
	consistencyInterval = 30 * time.Second
	consistencyWindow   = time.Hour
)

// RunConsistencyCheck checks every recent campaign's balance each
// consistencyInterval until ctx ends, for the consistency metrics.
func (a *App) RunConsistencyCheck(ctx context.Context) {
	t := time.NewTicker(consistencyInterval)
	defer t.Stop()
	for {
		if err := a.checkConsistency(ctx); err != nil && ctx.Err() == nil {
			a.Logger.WarnContext(ctx, "consistency check", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkConsistency reads every recent campaign's balance as the dashboard
// does (seckill.DefaultBalanceReads). A Redis or Postgres it cannot read
// fails the check, which leaves the metrics as they were: no numbers
// rather than wrong ones (seckill_consistency_last_check_timestamp_seconds
// then ages, and seckill_dependency_up says which store is down).
func (a *App) checkConsistency(ctx context.Context) error {
	vs, err := a.Store.Campaigns(ctx, seckill.CampaignFilter{Limit: 1000, EndedAfter: time.Now().Add(-consistencyWindow)})
	if err != nil {
		return err
	}
	counts := map[seckill.BalanceState]int{}
	var drift int64
	for _, v := range vs {
		b, err := seckill.ReadBalance(ctx, a.Admitter, a.Store, v.ID, seckill.DefaultBalanceReads)
		if err != nil {
			return err
		}
		counts[b.State]++
		drift += b.Drift()
	}
	m := a.Metrics.consistency
	for _, s := range seckill.BalanceStates {
		m.campaigns.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
	m.drift.Set(float64(drift))
	m.lastCheck.SetToCurrentTime()
	return nil
}

var (
	authKeyFetchesDesc = prometheus.NewDesc("seckill_auth_key_fetches_total",
		"Fetches of the identity provider's key set, by result: fetched, or limited (refused by SECKILL_AUTH_MIN_REFETCH: unknown kids came faster).",
		[]string{"result"}, nil)
	authSignaturesDesc = prometheus.NewDesc("seckill_auth_signature_checks_total",
		"Identity provider tokens whose signature this process checked (first sight of each token).", nil, nil)
	authCacheHitsDesc = prometheus.NewDesc("seckill_auth_cache_hits_total",
		"Identity provider tokens answered from this process's cache of verified tokens.", nil, nil)
	authVerifiedDesc = prometheus.NewDesc("seckill_auth_verified_tokens",
		"Identity provider tokens in this process's cache of verified tokens (bounded by SECKILL_AUTH_CACHE_SIZE).", nil, nil)
	authSubjectLookupsDesc = prometheus.NewDesc("seckill_auth_subject_lookups_total",
		"Subjects this process looked up in Postgres (counted=subjects: first sight in the process) and the batched lookups they took (counted=batches: one statement each, a second read only on a race with another process).",
		[]string{"counted"}, nil)
	authKnownSubjectsDesc = prometheus.NewDesc("seckill_auth_known_subjects",
		"Subjects whose user id this process keeps (bounded by SECKILL_AUTH_SUBJECT_CACHE_SIZE).", nil, nil)
)

// authCollector reports the identity provider's counters (auth.Provider.Stats).
type authCollector struct{ p *auth.Provider }

func (c authCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{authKeyFetchesDesc, authSignaturesDesc, authCacheHitsDesc, authVerifiedDesc, authSubjectLookupsDesc, authKnownSubjectsDesc} {
		ch <- d
	}
}

func (c authCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.p.Stats()
	ch <- prometheus.MustNewConstMetric(authKeyFetchesDesc, prometheus.CounterValue, float64(st.KeyFetches), "fetched")
	ch <- prometheus.MustNewConstMetric(authKeyFetchesDesc, prometheus.CounterValue, float64(st.KeyFetchesLimited), "limited")
	ch <- prometheus.MustNewConstMetric(authSignaturesDesc, prometheus.CounterValue, float64(st.SignatureChecks))
	ch <- prometheus.MustNewConstMetric(authCacheHitsDesc, prometheus.CounterValue, float64(st.CacheHits))
	ch <- prometheus.MustNewConstMetric(authVerifiedDesc, prometheus.GaugeValue, float64(st.VerifiedTokens))
	ch <- prometheus.MustNewConstMetric(authSubjectLookupsDesc, prometheus.CounterValue, float64(st.SubjectLookups), "subjects")
	ch <- prometheus.MustNewConstMetric(authSubjectLookupsDesc, prometheus.CounterValue, float64(st.SubjectBatches), "batches")
	ch <- prometheus.MustNewConstMetric(authKnownSubjectsDesc, prometheus.GaugeValue, float64(st.KnownSubjects))
}

var (
	roomBuyersDesc = prometheus.NewDesc("seckill_waiting_room_buyers",
		"Buyers of an open waiting room (a campaign not ended whose room has opened), by layer: joined; waiting (their turn not come); let_through (their turn came: passes_live + expired); passes_live (their pass valid now); expired (their turn over, the pass used or not); admitted (units taken, each with a pass). At most maxRoomSeries rooms, the newest; read from Redis through the rooms' shared view.",
		[]string{"voucher_id", "layer"}, nil)
	roomsOpenDesc = prometheus.NewDesc("seckill_waiting_rooms_open",
		"Waiting rooms open now (campaigns not ended whose room has opened), those beyond seckill_waiting_room_buyers' limit included.", nil, nil)
)

// Room layers, as seckill_waiting_room_buyers labels them, in funnel order.
var roomLayers = []string{"joined", "waiting", "let_through", "passes_live", "expired", "admitted"}

// maxRoomSeries bounds seckill_waiting_room_buyers to this many campaigns
// (six series each), however many sales run at once.
const maxRoomSeries = 20

// roomStatsTTL is how long a scrape reuses the rooms it read (each room's
// own figures are at most seckill.RoomRefresh old).
const roomStatsTTL = time.Second

// roomCollector reports the open waiting rooms' funnels (seckill.Rooms.Funnel),
// read at most once per roomStatsTTL however often it is scraped.
type roomCollector struct {
	campaigns interface {
		Campaigns(ctx context.Context, f seckill.CampaignFilter) ([]*seckill.Voucher, error)
	}
	rooms interface {
		Funnel(ctx context.Context, voucherID int64) (seckill.RoomFunnel, error)
	}
	logger interface {
		Warn(msg string, args ...any)
	}
	now func() time.Time

	mu      sync.Mutex
	at      time.Time
	open    int
	funnels []roomFunnel
	err     error
}

type roomFunnel struct {
	voucherID int64
	f         seckill.RoomFunnel
}

func (c *roomCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- roomBuyersDesc
	ch <- roomsOpenDesc
}

func (c *roomCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.at) >= roomStatsTTL {
		ctx, cancel := context.WithTimeout(context.Background(), dependencyPingTimeout)
		c.open, c.funnels, c.err = c.read(ctx)
		cancel()
		c.at = time.Now()
		if c.err != nil {
			c.logger.Warn("read the waiting rooms for the metrics", "err", c.err)
		}
	}
	open, funnels, err := c.open, c.funnels, c.err
	c.mu.Unlock()
	if err != nil {
		return // no numbers rather than wrong ones
	}
	ch <- prometheus.MustNewConstMetric(roomsOpenDesc, prometheus.GaugeValue, float64(open))
	for _, r := range funnels {
		id := strconv.FormatInt(r.voucherID, 10)
		for i, n := range []int64{r.f.Joined, r.f.Waiting, r.f.LetThrough, r.f.PassesLive, r.f.Expired, r.f.Admitted} {
			ch <- prometheus.MustNewConstMetric(roomBuyersDesc, prometheus.GaugeValue, float64(n), id, roomLayers[i])
		}
	}
}

// read lists the open rooms and the funnels of the newest maxRoomSeries.
func (c *roomCollector) read(ctx context.Context) (int, []roomFunnel, error) {
	now := c.now()
	vs, err := c.campaigns.Campaigns(ctx, seckill.CampaignFilter{Limit: 1000, EndedAfter: now})
	if err != nil {
		return 0, nil, err
	}
	open := 0
	var out []roomFunnel
	for _, v := range vs { // newest first
		cm := v.Campaign
		if cm == nil || !cm.Room.Enabled() || now.Before(cm.BeginTime.Add(-cm.Room.OpensBefore)) {
			continue
		}
		open++
		if len(out) == maxRoomSeries {
			continue
		}
		f, err := c.rooms.Funnel(ctx, v.ID)
		if err != nil {
			return 0, nil, err
		}
		out = append(out, roomFunnel{voucherID: v.ID, f: f})
	}
	return open, out, nil
}
