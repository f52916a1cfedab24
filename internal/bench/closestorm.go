package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/admission"
	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
	"seckill/internal/bench/verify"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
	"seckill/internal/store"
)

// closeLead is how long a cancel or payment storm runs before the second
// campaign's sale starts beside it, unless a tenth of its orders closed
// sooner.
const closeLead = time.Second

// closeStorm is one --cancel-storm or --payment-storm run under way.
type closeStorm struct {
	*stormSales
	out *report.CloseStorm

	mu       sync.Mutex
	orders   []load.Acceptance // the sale's ACCEPTED answers
	payments []*paymentAnswer  // by index into orders (payment storm)

	// What the storm's requests came to: each request's answer time by
	// index into orders (zero: not answered as asked), and their latency.
	doneAt    []time.Time
	latency   *load.Histogram
	sent, ok  atomic.Int64
	errs      atomic.Int64
	firstErr  sync.Once
	errorText string
}

// runCloseStorm sells cfg.Storm.Units units of a campaign whose pay window
// outlasts the run and measures what closing every order at once costs:
//
//  1. a closed-model sale of a second campaign, alone;
//  2. the campaign's sale, a burst of one purchase per buyer, until every
//     order is CREATED in Postgres;
//  3. for a payment storm, every buyer opens their payment (createPayment);
//  4. the storm: Closers callers close one order each until every order is
//     closed, each waiting for its answer (a cancel as its buyer through
//     GraphQL, or the provider's signed payment.succeeded through the
//     webhook), with the server's pool in pg_stat_activity and each
//     process's CPU; a second after it starts, or once a tenth of the
//     orders closed, the second campaign's sale again;
//  5. what became of the orders, their payments and the campaign's books.
func runCloseStorm(ctx context.Context, cfg Config) (*report.Result, error) {
	sales, err := newStormSales(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer sales.close()
	st := cfg.Storm
	s := &closeStorm{stormSales: sales, latency: load.NewHistogram(),
		out: &report.CloseStorm{Kind: st.Kind, Units: st.Units, Requests: report.Closes{Callers: st.Closers}}}
	s.out.SaleLoad, s.out.ProbeLoad = s.sale.loadInfo(), s.alone.loadInfo()
	s.sale.onAccept = func(a load.Acceptance) {
		s.mu.Lock()
		s.orders = append(s.orders, a)
		s.mu.Unlock()
	}

	return finishStorm(ctx, &report.Result{CloseStorm: s.out}, s.out, func() bool { return s.out.Sale != nil }, s.run)
}

func (s *closeStorm) run(ctx context.Context) error {
	out := s.out
	var err error
	if out.ProbeVoucherID, out.Alone, err = s.runAlone(ctx); err != nil {
		return err
	}
	if out.VoucherID, out.Sale, err = s.runSale(ctx); err != nil {
		return err
	}
	if !out.Sale.OK || out.Sale.Persistence == nil || !out.Sale.Persistence.Complete {
		return nil // the sale's verdict says why; nothing to close
	}
	// The answers arrived in any order; close them in the order of their ids.
	slices.SortFunc(s.orders, func(a, b load.Acceptance) int { return cmp.Compare(a.OrderID, b.OrderID) })
	s.doneAt = make([]time.Time, len(s.orders))
	out.Requests.Planned = int64(len(s.orders))
	closer, err := s.closer(ctx)
	if err != nil {
		return err
	}
	if s.cfg.Storm.Kind == StormPayment {
		if err := s.openPayments(ctx); err != nil {
			return err
		}
	}
	if err := s.storm(ctx, closer); err != nil {
		return err
	}
	return s.verify(ctx)
}

// closer returns the request that closes order i: its buyer's cancel, or
// the provider's confirmation of its payment.
func (s *closeStorm) closer(ctx context.Context) (func(ctx context.Context, i int) error, error) {
	client := &http.Client{Timeout: s.cfg.Timeout, Transport: load.NewTransport(s.cfg.Storm.Closers)}
	if s.cfg.Storm.Kind == StormCancel {
		gql := &controlClient{endpoint: s.cfg.URL, http: client}
		return func(ctx context.Context, i int) error {
			a := s.orders[i]
			var res struct {
				CancelOrder struct{ Status seckill.OrderStatus } `json:"cancelOrder"`
			}
			err := gql.doAs(ctx, s.sale.auth[a.User][len("Bearer "):], `mutation C($id: ID!) { cancelOrder(orderId: $id) { status } }`,
				map[string]any{"id": strconv.FormatInt(a.OrderID, 10)}, &res)
			if err == nil && res.CancelOrder.Status != seckill.OrderCancelled {
				err = fmt.Errorf("cancelOrder answered %s", res.CancelOrder.Status)
			}
			return err
		}, nil
	}
	u, err := url.Parse(s.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("bad --url %q: %w", s.cfg.URL, err)
	}
	u.Path, u.RawQuery = "/webhooks/payments", ""
	webhook, secret := u.String(), []byte(s.cfg.Pay.WebhookSecret)
	return func(ctx context.Context, i int) error {
		p := s.payments[i]
		ev := seckill.PaymentEvent{ID: fmt.Sprintf("evt_storm_%d_%x", s.orders[i].OrderID, rand.Uint64()), Type: seckill.EventPaymentSucceeded,
			PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}
		code, body, err := payhook.Send(ctx, client, webhook, secret, ev)
		switch {
		case err != nil:
			return err
		case code != http.StatusOK:
			return fmt.Errorf("the webhook answered %d %s", code, load.Snippet(body))
		}
		var res struct{ Status, Result string }
		if json.Unmarshal(body, &res) != nil || res.Status != "applied" || res.Result != string(seckill.PaymentSucceeded) {
			return fmt.Errorf("the webhook answered %s", load.Snippet(body))
		}
		return nil
	}, nil
}

// openPayments has every buyer open their order's payment, as buyers do
// before the provider confirms them; it is not the storm, and is timed
// apart.
func (s *closeStorm) openPayments(ctx context.Context) error {
	p, err := newPayers(ctx, PayConfig{On: true, WebhookSecret: s.cfg.Pay.WebhookSecret}, s.cfg.URL, s.sale.auth)
	if err != nil {
		return err
	}
	defer p.http.CloseIdleConnections()
	s.payments = make([]*paymentAnswer, len(s.orders))
	s.sale.disp.Println("payment storm: %s buyers open their payments...", report.Number(int64(len(s.orders))))
	start := time.Now()
	var next atomic.Int64
	errs := make(chan error, payParallel)
	var wg sync.WaitGroup
	for range payParallel {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(s.orders) && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				pay, err := p.createPayment(s.orders[i])
				if err == nil && pay == nil {
					err = fmt.Errorf("order %d closed before its payment was opened", s.orders[i].OrderID)
				}
				if err != nil {
					errs <- fmt.Errorf("open the payment of order %d: %w", s.orders[i].OrderID, err)
					return
				}
				s.payments[i] = pay
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.out.Opened, s.out.OpenedS = int64(len(s.orders)), time.Since(start).Seconds()
	return nil
}

// storm closes every order, Closers at once, and runs the second
// campaign's sale beside it; the CPU is measured in two windows that leave
// the second sale's load out (its persistence, small beside the storm,
// counts).
func (s *closeStorm) storm(ctx context.Context, closer func(ctx context.Context, i int) error) error {
	out, st := s.out, s.cfg.Storm
	pool := verify.StartPoolSampler(ctx, s.db, s.cfg.DBMaxConns, poolEvery)
	tgt := s.target(report.TargetStormSale, out.VoucherID).cpuTarget()
	sctx, cancel := context.WithTimeout(ctx, st.Timeout)
	defer cancel()

	cpu1, start1 := startCPU(ctx, tgt), time.Now()
	out.Requests.StartedAt = start1
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.fire(sctx, closer)
	}()
	progress := time.NewTicker(expiryPoll)
	defer progress.Stop()
	lead := time.NewTimer(closeLead)
	defer lead.Stop()
	look := time.NewTicker(10 * time.Millisecond)
	defer look.Stop()
	for over := false; !over; {
		select {
		case <-done:
			over = true
		case <-lead.C:
			over = true
		case <-look.C:
			over = s.ok.Load() >= int64(len(s.orders)/10)
		case <-progress.C:
			s.showProgress()
		}
	}
	win1, end1 := cpu1.stop(), time.Now()
	var cpu2 *cpuProbe
	var start2 time.Time
	select {
	case <-done:
		out.Notes = append(out.Notes, fmt.Sprintf("the storm was over in %s, before the second sale began: give more units for the interference",
			report.Duration(time.Since(start1))))
	default:
		dt := s.target(report.TargetProbeDuring, out.ProbeVoucherID)
		dt.afterLoad = func() { cpu2, start2 = startCPU(ctx, tgt), time.Now() }
		during, err := s.during.runSeckill(ctx, dt)
		if err != nil {
			cancel()
			<-done
			if cpu2 != nil {
				cpu2.stop()
			}
			pool.Stop()
			return fmt.Errorf("the second campaign's sale during the storm: %w", err)
		}
		out.During = during
	}
	if cpu2 == nil {
		cpu2, start2 = startCPU(ctx, tgt), time.Now()
	}
	for over := false; !over; {
		select {
		case <-done:
			over = true
		case <-progress.C:
			s.showProgress()
		}
	}
	s.sale.disp.End()
	win2, end2 := cpu2.stop(), time.Now()
	out.Pool = pool.Stop()

	q := &out.Requests
	q.Sent, q.OK, q.Errors, q.ErrorText = s.sent.Load(), s.ok.Load(), s.errs.Load(), s.errorText
	var last time.Time
	perSecond := map[int64]int64{}
	var n1, n2 int64
	for _, at := range s.doneAt {
		if at.IsZero() {
			continue
		}
		last = maxTime(last, at)
		perSecond[at.Unix()]++
		switch {
		case !at.Before(start1) && at.Before(end1):
			n1++
		case !at.Before(start2) && at.Before(end2):
			n2++
		}
	}
	for _, n := range perSecond {
		q.PeakPerS = max(q.PeakPerS, n)
	}
	if q.OK > 0 {
		q.DurationS = last.Sub(start1).Seconds()
		q.PerS = float64(q.OK) / q.DurationS
	}
	h := s.latency
	q.Latency = report.Latency{P50: report.Ms(h.Quantile(0.5)), P90: report.Ms(h.Quantile(0.9)), P99: report.Ms(h.Quantile(0.99)),
		P999: report.Ms(h.Quantile(0.999)), Max: report.Ms(h.Max()), Mean: report.Ms(h.Mean())}
	out.CPU = win1.merge(win2).report(map[string]int64{out.Unit(): n1 + n2})
	// The share of the second sale the storm covered.
	if d := out.During; d != nil && d.ElapsedS > 0 && !last.IsZero() {
		from, to := d.StartedAt, d.StartedAt.Add(time.Duration(d.ElapsedS*float64(time.Second)))
		covered := minTime(to, last).Sub(maxTime(from, start1))
		out.Interference.Overlap = min(max(covered.Seconds()/to.Sub(from).Seconds(), 0), 1)
	}
	if ctx.Err() == nil && sctx.Err() != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("the storm stopped after %s (--storm-timeout)", report.Duration(st.Timeout)))
	}
	return nil
}

// fire closes the orders, Closers callers at once, each taking the next
// order when its answer comes, until every order is asked or ctx ends.
func (s *closeStorm) fire(ctx context.Context, closer func(ctx context.Context, i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range s.cfg.Storm.Closers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(s.orders) && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				s.sent.Add(1)
				sent := time.Now()
				err := closer(ctx, i)
				at := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						s.errs.Add(1)
						s.firstErr.Do(func() { s.errorText = fmt.Sprintf("order %d: %v", s.orders[i].OrderID, err) })
					}
					continue
				}
				s.latency.Record(at.Sub(sent))
				s.doneAt[i] = at
				s.ok.Add(1)
			}
		})
	}
	wg.Wait()
}

func (s *closeStorm) showProgress() {
	s.sale.disp.Update(fmt.Sprintf("%s storm: %s of %s orders closed, %s errors", s.cfg.Storm.Kind,
		report.Number(s.ok.Load()), report.Number(int64(len(s.orders))), report.Number(s.errs.Load())), false)
}

// verify reads what became of the campaign's orders, their payments and
// its books.
func (s *closeStorm) verify(ctx context.Context) error {
	out := s.out
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute+s.cfg.PersistTimeout)
	defer cancel()
	pg := &verify.Postgres{DB: s.db}
	lo, hi := s.sale.userRange()
	statuses, _, err := pg.Statuses(vctx, out.VoucherID, lo, hi)
	if err != nil {
		return fmt.Errorf("the orders after the storm: %w", err)
	}
	out.Statuses = map[seckill.OrderStatus]int64{}
	for _, st := range statuses {
		out.Statuses[st]++
	}
	if out.Succeeded, out.SucceededOrders, err = pg.Succeeded(vctx, out.VoucherID); err != nil {
		return fmt.Errorf("the payments after the storm: %w", err)
	}
	if ctx.Err() != nil {
		return nil // interrupted: the books may be read mid-storm
	}
	live := admission.New(s.rdb, admission.Options{})
	b, err := verify.Books(vctx, live, store.New(s.db), out.VoucherID, s.cfg.PersistTimeout)
	if err != nil {
		return fmt.Errorf("the books after the storm: %w", err)
	}
	out.Books = &b
	return nil
}
