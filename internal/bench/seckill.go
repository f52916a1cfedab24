package bench

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
	"seckill/internal/bench/verify"
	"seckill/internal/seckill"
	"seckill/internal/store"
)

// seckillTarget is a seckill server to measure: the one at --url, or one
// that --compare fsync started.
type seckillTarget struct {
	label     string // report.TargetSeckill, TargetEverysec, ...
	url       string // GraphQL endpoint
	voucherID int64  // an existing campaign; 0 creates one
	voucherOf string // whose voucher it is, when not the server at --url's
	// Its stores, for direct verification; "" verifies through GraphQL.
	databaseURL, redisURL string
	// redisNodes are the Redis Cluster's nodes (host:port) when the
	// server runs on one; its CPU is theirs, not redisURL's.
	redisNodes []string
	// lag measures each order's persistence lag (--expiry-storm's sales).
	lag bool
	// afterLoad, when set, is called once the load is over, before the
	// wait for persistence.
	afterLoad func()
	// shards, when above 0, gives the campaign created that many stock
	// shards (--shards).
	shards int
}

// cpuTarget is where t's processes listen, for the CPU probe.
func (t seckillTarget) cpuTarget() cpuTarget {
	nodes := t.redisNodes
	if len(nodes) == 0 {
		nodes = redisAddrs(t.redisURL)
	}
	return cpuTarget{serverURL: t.url, redisAddrs: nodes, databaseURL: t.databaseURL}
}

// seckillRun is one seckill target being measured: its campaign and the
// bench's direct access to the server's stores.
type seckillRun struct {
	t          seckillTarget
	control    *controlClient
	voucherID  int64
	stock      int64 // units on sale when the run began
	soldBefore int64 // orders of the campaign before the run
	pg         *verify.Postgres
	queue      verify.Queue
	live       *admission.Admitter // Redis's side of the books; nil when not reached
	begin      time.Time           // when the campaign created with a waiting room begins
	notes      []string
	closers    []func()
}

// runSeckill measures the server t and verifies what it persisted.
func (r *runner) runSeckill(ctx context.Context, t seckillTarget) (*report.Report, error) {
	probe := findCPU(ctx, t.cpuTarget())
	s, err := r.prepare(ctx, t)
	if err != nil {
		return nil, err
	}
	defer s.close()

	smp := verify.StartSampler(ctx, s.queue, s.voucherID, metricsURL(t.url))
	if r.cfg.Challenge != "" && t.voucherID == 0 {
		r.makeBody = r.solver(t.url, s.voucherID)
		defer func() { r.makeBody = nil }()
	}
	var room *roomRun
	if r.cfg.Room.On && t.voucherID == 0 {
		room = r.newRoomRun(t.url, s.voucherID, s.begin)
		r.makeBody, r.makeBodyTimeout, r.makeBodyLabel = room.prepare, room.timeout(), "room"
		defer func() { r.makeBody, r.makeBodyTimeout, r.makeBodyLabel = nil, 0, "" }()
		go room.probe(ctx)
	}
	var pay *payers
	if r.cfg.Pay.On && t.url == r.cfg.URL {
		if s.pg == nil {
			// Without the orders' statuses, units resold would read as oversold.
			return nil, fmt.Errorf("--pay-ratio: cannot verify payments without the server's Postgres (SECKILL_DATABASE_URL): %s", strings.Join(s.notes, "; "))
		}
		if pay, err = newPayers(ctx, r.cfg.Pay, t.url, r.auth); err != nil {
			return nil, err
		}
		r.onAccept = pay.accepted
		defer func() { r.onAccept = nil }()
	}
	probe.start()
	defer probe.stop()
	rec := r.load(ctx, t.label, t.url, load.PurchaseBody(s.voucherID))
	if t.afterLoad != nil {
		t.afterLoad()
	}
	interrupted := ctx.Err() != nil
	rep := report.Build(t.label, t.url, s.voucherID, s.stock, rec, interrupted)
	rep.VoucherOf = t.voucherOf
	if room != nil {
		rep.Room = room.report(rec.Snapshot().Accepted)
	}

	// Wait until every accepted order is persisted; after Ctrl-C look
	// once instead, so the partial report comes at once.
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PersistTimeout+30*time.Second)
	defer cancel()
	timeout := r.cfg.PersistTimeout
	if interrupted {
		timeout = 0
	}
	p, doneAt, err := r.awaitPersisted(vctx, s, rep.Accepted, timeout)
	if err != nil {
		return nil, fmt.Errorf("wait for persistence: %w", err)
	}
	cpuWin := probe.stop()
	smp.Stop()
	p.MaxQueueDepth = smp.MaxQueueDepth()
	rep.Server = smp.ServerStats()

	if err := r.verifySeckill(vctx, s, p, rec, doneAt); err != nil {
		return nil, err
	}
	if pay != nil {
		if err := r.verifyPayments(vctx, s, p, rep, rec, pay); err != nil {
			return nil, err
		}
	}
	p.Note = strings.Join(s.notes, "; ")
	rep.Persistence = p
	rep.CPU = cpuWin.report(map[string]int64{report.UnitAccepted: rep.Accepted, report.UnitPersisted: p.Rows})
	rep.Judge()
	return rep, nil
}

// prepare creates or reads t's campaign and connects to its stores where
// it can; what it cannot reach becomes a note, not an error.
func (r *runner) prepare(ctx context.Context, t seckillTarget) (*seckillRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	s := &seckillRun{t: t, control: newControlClient(t.url, r.admin), voucherID: t.voucherID}
	if s.voucherID == 0 {
		extra := challengeInput(r.cfg.Challenge, r.cfg.PoWBits)
		if pay := r.cfg.Pay.campaignInput(); pay != nil {
			if extra == nil {
				extra = map[string]any{}
			}
			maps.Copy(extra, pay)
		}
		if t.shards > 0 {
			if extra == nil {
				extra = map[string]any{}
			}
			extra["shards"] = t.shards
		}
		if r.cfg.Room.On {
			s.begin = r.cfg.Room.roomBegin(time.Now())
			if extra == nil {
				extra = map[string]any{}
			}
			maps.Copy(extra, r.cfg.Room.campaignInput(s.begin))
		}
		id, err := s.control.createCampaign(ctx, r.cfg.Stock, time.Until(r.end), extra)
		if err != nil {
			return nil, err
		}
		s.voucherID, s.stock = id, r.cfg.Stock
	} else {
		st, err := s.control.campaign(ctx, s.voucherID)
		if err != nil {
			return nil, err
		}
		if st.Status != "ACTIVE" {
			return nil, fmt.Errorf("voucher %d is %s, not on sale: create a campaign (omit --voucher) or pick another", s.voucherID, st.Status)
		}
		s.stock, s.soldBefore = st.Remaining, st.Sold
	}
	if t.databaseURL != "" {
		s.openPostgres(ctx)
	}
	if t.redisURL != "" {
		s.openRedis(ctx)
	}
	return s, nil
}

func (s *seckillRun) openPostgres(ctx context.Context) {
	db, err := store.Open(ctx, verify.BenchDSN(s.t.databaseURL), 2)
	if err != nil {
		s.notes = append(s.notes, fmt.Sprintf("Postgres not verified directly (%v); GraphQL counts only", err))
		return
	}
	s.closers = append(s.closers, func() { _ = db.Close() })
	pg := &verify.Postgres{DB: db, Failures: true}
	if _, err := pg.Counts(ctx, s.voucherID, 1, 1); err != nil {
		s.notes = append(s.notes, fmt.Sprintf("Postgres at SECKILL_DATABASE_URL does not hold voucher %d (%v): is it the server's database? GraphQL counts only", s.voucherID, err))
		return
	}
	s.pg = pg
}

func (s *seckillRun) openRedis(ctx context.Context) {
	opt, err := redis.ParseURL(s.t.redisURL)
	if err != nil {
		return
	}
	rdb := redis.NewClient(opt)
	s.closers = append(s.closers, func() { _ = rdb.Close() })
	if rdb.Ping(ctx).Err() == nil {
		a := admission.New(rdb, admission.Options{})
		s.queue, s.live = a, a
	}
}

func (s *seckillRun) close() {
	for _, c := range s.closers {
		c()
	}
}

// persisted counts the run's orders that reached Postgres, as rows or
// recorded failures, or, without direct access, the campaign's sold count.
func (r *runner) persisted(ctx context.Context, s *seckillRun) (int64, error) {
	if s.pg != nil {
		lo, hi := r.userRange()
		c, err := s.pg.Counts(ctx, s.voucherID, lo, hi)
		return c.Rows + c.Failed, err
	}
	st, err := s.control.campaign(ctx, s.voucherID)
	return st.Sold - s.soldBefore, err
}

// awaitPersisted waits up to timeout for accepted orders to be persisted,
// and returns the persistence so far and when the wait ended.
func (r *runner) awaitPersisted(ctx context.Context, s *seckillRun, accepted int64, timeout time.Duration) (*report.Persistence, time.Time, error) {
	p := &report.Persistence{Source: report.SourceGraphQL}
	if s.pg != nil {
		p.Source = report.SourcePostgres
	}
	start := time.Now()
	complete, doneAt, err := verify.WaitPersisted(ctx, r.disp, s.t.label, accepted, timeout,
		func(ctx context.Context) (int64, error) { return r.persisted(ctx, s) })
	if err != nil {
		return nil, doneAt, err
	}
	p.Complete, p.WaitedS = complete, doneAt.Sub(start).Seconds()
	return p, doneAt, nil
}

// verifySeckill fills p with the campaign's state and the run's orders:
// from Postgres when the bench reaches it, else from GraphQL's counts.
func (r *runner) verifySeckill(ctx context.Context, s *seckillRun, p *report.Persistence, rec *load.Recorder, doneAt time.Time) error {
	if st, err := s.control.campaign(ctx, s.voucherID); err == nil {
		p.Sold, p.RedisRemaining = report.Ptr(st.Sold), report.Ptr(st.Remaining)
		if s.pg == nil {
			p.Rows = st.Sold - s.soldBefore
			p.PostgresStock = report.Ptr(st.Stock - st.Sold)
		}
	} else {
		s.notes = append(s.notes, "voucher state unavailable: "+err.Error())
	}
	if s.queue != nil {
		if q, err := s.queue.Queued(ctx, []int64{s.voucherID}); err == nil {
			p.RedisPending = report.Ptr(q[s.voucherID])
		}
	}
	accepted := rec.AcceptedN.Load()
	firstAccepted, lastAccepted := rec.At(&rec.FirstAccepted), rec.At(&rec.LastAccepted)
	if s.pg == nil {
		if missing := accepted - p.Rows; missing > 0 {
			p.Lost = missing
		}
		if p.Complete && accepted > 0 {
			// Known only to the polling interval.
			p.LastCreatedAfterMs = report.Ptr(report.Ms(doneAt.Sub(lastAccepted)))
			if d := doneAt.Sub(firstAccepted); d > 0 {
				p.PersistedPerS = report.Ptr(float64(accepted) / d.Seconds())
			}
			s.notes = append(s.notes, "persistence times are upper bounds from polling GraphQL every 50 ms")
		}
		return nil
	}
	lo, hi := r.userRange()
	c, err := s.pg.Verify(ctx, p, s.voucherID, lo, hi, rec.Snapshot().Accepted)
	if err != nil {
		return fmt.Errorf("verify orders in Postgres: %w", err)
	}
	if accepted > 0 && c.Rows > 0 {
		p.LastCreatedAfterMs = report.Ptr(report.Ms(c.LastCreated.Sub(lastAccepted)))
		if d := c.LastCreated.Sub(firstAccepted); d > 0 {
			p.PersistedPerS = report.Ptr(float64(c.Rows) / d.Seconds())
		}
	}
	if s.t.lag {
		if p.Lag, err = s.pg.Lag(ctx, s.voucherID, lo, hi, rec.Snapshot().Accepted); err != nil {
			return fmt.Errorf("persistence lag: %w", err)
		}
	}
	return nil
}

// verifyPayments waits for the buyers' payments, then fills p.Payments:
// what became of the run's accepted orders, and the campaign's books.
func (r *runner) verifyPayments(ctx context.Context, s *seckillRun, p *report.Persistence, rep *report.Report, rec *load.Recorder, pay *payers) error {
	r.disp.Println("%s: waiting for the buyers' payments...", s.t.label)
	out, confirmed := pay.wait(ctx, r.cfg.PersistTimeout+r.cfg.Pay.Delay+30*time.Second)
	lo, hi := r.userRange()
	statuses, dupBuyers, err := s.pg.Statuses(ctx, s.voucherID, lo, hi)
	if err != nil {
		return fmt.Errorf("verify payments: %w", err)
	}
	// A buyer whose order expired may buy again: only a second order
	// while the first holds its unit is a duplicate.
	rep.DuplicateAnswers = verify.Tally(&out, rec.Snapshot().Accepted, statuses, confirmed, s.stock)
	p.DuplicateUsers = dupBuyers
	var live seckill.LiveCounter
	if s.live != nil {
		live = s.live
	}
	out.Books, err = verify.Books(ctx, live, store.New(s.pg.DB), s.voucherID, r.cfg.PersistTimeout)
	if err != nil {
		return fmt.Errorf("verify the books: %w", err)
	}
	p.Payments = &out
	return nil
}
