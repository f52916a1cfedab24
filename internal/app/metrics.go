package app

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/internal/sampler"
	"seckill/internal/seckill"
)

// Metrics are the Prometheus series seckill exports on /metrics.
type Metrics struct {
	Registry         *prometheus.Registry
	Purchases        *prometheus.CounterVec
	Funnel           *prometheus.CounterVec
	PurchaseDuration prometheus.Histogram
	OrdersPersisted  *prometheus.CounterVec
	OrdersFailed     *prometheus.CounterVec
	BatchSize        prometheus.Histogram
	PersistDuration  prometheus.Histogram
	PersistLag       prometheus.Histogram
	Reconciled       prometheus.Counter
	Rewarmed         prometheus.Counter
	Unreplicated     prometheus.Counter
	Overloaded       prometheus.Counter
	OrdersClosed     *prometheus.CounterVec
	PaymentEvents    *prometheus.CounterVec
	PaymentMismatch  *prometheus.CounterVec
	EventDeliveries  *prometheus.CounterVec

	http        *requestMetrics
	consistency *consistencyMetrics
}

// NewMetrics registers seckill's series (and the Go and process collectors)
// in a fresh registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Purchases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_purchases_total", Help: "Purchase attempts by outcome.",
		}, []string{"outcome"}),
		Funnel: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_purchase_funnel_total", Help: "Purchase attempts by the layer that stopped them (or admitted).",
		}, []string{"layer"}),
		PurchaseDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_admission_duration_seconds", Help: "Time to decide one purchase in Redis.",
			Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, 1},
		}),
		OrdersFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_orders_failed_total", Help: "Admissions that became FAILED, by reason (lost: Redis lost the sale's state after ACCEPTED; conflict: the id was another buyer's).",
		}, []string{"reason"}),
		OrdersPersisted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_orders_persisted_total", Help: "Admissions decided by the workers, by final status.",
		}, []string{"status"}),
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_persist_batch_size", Help: "Admissions written per Postgres transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		PersistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_persist_duration_seconds", Help: "Time to persist one batch.",
			Buckets: prometheus.DefBuckets,
		}),
		PersistLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_order_persist_lag_seconds", Help: "Time from ACCEPTED (admission in Redis) to CREATED (row in Postgres).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		Reconciled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_reconciled_total", Help: "Stale admissions the reconciler re-enqueued, persisted itself (pending too long) or recorded after Redis lost them.",
		}),
		Rewarmed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_rewarmed_campaigns_total", Help: "Campaigns rebuilt into Redis from Postgres, in a new epoch (Redis lost them, restarted or failed over).",
		}),
		Unreplicated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_admissions_unreplicated_total", Help: "Admissions that fewer replicas than SECKILL_REDIS_MIN_REPLICAS confirmed in time: written to Postgres at once, or released.",
		}),
		Overloaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_overloaded_requests_total", Help: "Requests shed because too many were in flight.",
		}),
		OrdersClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_orders_closed_total", Help: "Orders that left CREATED, by the status they took: PAID, CANCELLED or EXPIRED (the unit goes back on sale).",
		}, []string{"status"}),
		PaymentEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_payment_events_total", Help: "Payment provider events, by result: paid, failed, refund_needed (a success for an order that cannot take it: owed back), refunded, refund_failed (the provider refused a refund), mismatch (not the payment's: recorded, not applied), duplicate, other (changed nothing), rejected (unknown payment, wrong amount or currency).",
		}, []string{"result"}),
		PaymentMismatch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_payment_mismatch_total", Help: "Signed payment provider events, by type, that named a provider's object other than the one opened for their payment (Stripe: another PaymentIntent), or another amount or currency: recorded in payment_event (outcome mismatch), not applied, no money moved.",
		}, []string{"type"}),
		EventDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_event_deliveries_total", Help: "Attempts to deliver an order event to an endpoint, by outcome: delivered (2xx), failed (tried again later), dead (its last attempt failed).",
		}, []string{"outcome"}),
	}
	m.Registry.MustRegister(m.EventDeliveries, m.Purchases, m.Funnel, m.PurchaseDuration, m.OrdersPersisted, m.OrdersFailed, m.BatchSize,
		m.PersistDuration, m.PersistLag, m.Reconciled, m.Rewarmed, m.Unreplicated, m.Overloaded, m.OrdersClosed, m.PaymentEvents, m.PaymentMismatch,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
		buildInfo())
	// Exported at 0 from the start, so that rates and alerts see them.
	for _, l := range seckill.Layers {
		m.Funnel.WithLabelValues(l)
	}
	for _, reason := range []string{seckill.FailureLost, seckill.FailureConflict} {
		m.OrdersFailed.WithLabelValues(failureLabel(reason))
	}
	for _, st := range []seckill.OrderStatus{seckill.OrderPaid, seckill.OrderCancelled, seckill.OrderExpired} {
		m.OrdersClosed.WithLabelValues(string(st))
	}
	for _, r := range paymentResults {
		m.PaymentEvents.WithLabelValues(r)
	}
	for _, typ := range []string{seckill.EventPaymentSucceeded, seckill.EventPaymentFailed, seckill.EventRefundSucceeded, seckill.EventRefundFailed} {
		m.PaymentMismatch.WithLabelValues(typ)
	}
	for _, o := range []seckill.DeliveryOutcome{seckill.OutcomeDelivered, seckill.OutcomeFailed, seckill.OutcomeDead} {
		m.EventDeliveries.WithLabelValues(string(o))
	}
	m.http = newRequestMetrics(m.Registry, operationAllowlist())
	m.consistency = newConsistencyMetrics(m.Registry)
	return m
}

// admitterMetrics counts purchase outcomes and times admission, and feeds
// the dashboard's per-campaign outcome counter (perCampaign, when set).
//
// It is one wrapper, not one per counter: each layer between a request and
// the admission script adds a frame of about 650 bytes (a Ticket in, an
// Admission out), and the purchase path's stack is kept under 8 KiB so that
// a new connection's goroutine does not grow its stack again on its first
// purchase, which is most of a sale's burst (TestPurchaseStackDepth).
type admitterMetrics struct {
	seckill.Admitter
	m           *Metrics
	outcomes    map[seckill.Outcome]prometheus.Counter
	layers      map[string]prometheus.Counter
	perCampaign *sampler.OutcomeCounter
}

func (m *Metrics) wrapAdmitter(a seckill.Admitter, perCampaign *sampler.OutcomeCounter) seckill.Admitter {
	w := &admitterMetrics{Admitter: a, m: m, outcomes: map[seckill.Outcome]prometheus.Counter{},
		layers: map[string]prometheus.Counter{}, perCampaign: perCampaign}
	// Every outcome the domain lists, so that a new one (PASS_REQUIRED,
	// PASS_EXPIRED) is counted the day it is added.
	for _, o := range seckill.Outcomes {
		w.outcomes[o] = m.Purchases.WithLabelValues(string(o))
	}
	for _, l := range seckill.Layers {
		w.layers[l] = m.Funnel.WithLabelValues(l)
	}
	return w
}

// rebuilderMetrics counts every campaign rebuilt from Postgres, whoever
// started the rebuild (a purchase, order(id) or the reconciler).
type rebuilderMetrics struct {
	seckill.Rebuilder
	m *Metrics
}

func (m *Metrics) wrapRebuilder(r seckill.Rebuilder) seckill.Rebuilder {
	return &rebuilderMetrics{Rebuilder: r, m: m}
}

func (r *rebuilderMetrics) FinishRebuild(ctx context.Context, token string, st seckill.WarmState) (bool, error) {
	ok, err := r.Rebuilder.FinishRebuild(ctx, token, st)
	if ok {
		r.m.Rewarmed.Inc()
	}
	return ok, err
}

func (a *admitterMetrics) Admit(ctx context.Context, voucherID, userID int64, t seckill.Ticket) (seckill.Outcome, seckill.Admission, error) {
	start := time.Now()
	o, adm, err := a.Admitter.Admit(ctx, voucherID, userID, t)
	a.m.PurchaseDuration.Observe(time.Since(start).Seconds())
	if errors.Is(err, seckill.ErrNotReplicated) {
		a.m.Unreplicated.Inc()
	}
	// An admission its replicas did not confirm was admitted all the same
	// (the service then makes it durable in Postgres, or releases it).
	if err == nil || errors.Is(err, seckill.ErrNotReplicated) {
		layer := seckill.FunnelLayer(o, adm)
		if c, ok := a.layers[layer]; ok {
			c.Inc()
		}
		if c, ok := a.outcomes[o]; ok {
			c.Inc()
		}
		if a.perCampaign != nil {
			if layer == seckill.LayerSoldOutMark {
				a.perCampaign.Add(voucherID, seckill.OutcomeSoldOutMark)
			} else {
				a.perCampaign.Add(voucherID, o)
			}
		}
	}
	return o, adm, err
}

// limiterMetrics counts rate-limited attempts, which never reach Redis.
type limiterMetrics struct {
	seckill.Limiter
	limited prometheus.Counter
	layer   prometheus.Counter
	onLimit func(voucherID int64) // the dashboard's count per campaign; nil: none
}

func (m *Metrics) wrapLimiter(l seckill.Limiter, onLimit func(voucherID int64)) seckill.Limiter {
	return &limiterMetrics{Limiter: l, limited: m.Purchases.WithLabelValues(string(seckill.OutcomeRateLimited)),
		layer: m.Funnel.WithLabelValues(seckill.LayerLocalLimit), onLimit: onLimit}
}

func (l *limiterMetrics) Allow(voucherID, userID int64) bool {
	ok := l.Limiter.Allow(voucherID, userID)
	if !ok {
		l.limited.Inc()
		l.layer.Inc()
		if l.onLimit != nil {
			l.onLimit(voucherID)
		}
	}
	return ok
}

// storeMetrics counts what the workers decided for each admission.
type storeMetrics struct {
	seckill.OrderStore
	m *Metrics
}

// failureLabel names a failure reason in a metric label (a fixed set).
func failureLabel(reason string) string {
	switch reason {
	case seckill.FailureUserHasOrder:
		return "user_has_order"
	case seckill.FailureNoStock:
		return "no_stock"
	case seckill.FailureNoCampaign:
		return "no_campaign"
	case seckill.FailureInvalid:
		return "invalid"
	case seckill.FailureLost:
		return "lost"
	case seckill.FailureConflict:
		return "conflict"
	}
	return "other"
}

func (m *Metrics) wrapStore(s seckill.OrderStore) seckill.OrderStore {
	return &storeMetrics{OrderStore: s, m: m}
}

func (s *storeMetrics) PersistOrders(ctx context.Context, adms []seckill.Admission) ([]seckill.PersistOutcome, error) {
	start := time.Now()
	out, err := s.OrderStore.PersistOrders(ctx, adms)
	s.m.PersistDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return out, err
	}
	s.m.BatchSize.Observe(float64(len(adms)))
	for _, o := range out {
		s.m.OrdersPersisted.WithLabelValues(string(o.Status)).Inc()
		if o.Status == seckill.OrderFailed {
			s.m.OrdersFailed.WithLabelValues(failureLabel(o.Reason)).Inc()
		}
		if o.Inserted {
			s.m.PersistLag.Observe(o.CreatedAt.Sub(o.Admission.AdmittedAt).Seconds())
		}
	}
	return out, nil
}

// The results of a payment event, as seckill_payment_events_total labels:
// what the event did (seckill.EventOutcome) unless it was a duplicate or
// refused.
const (
	paymentDuplicate = "duplicate"
	paymentOther     = "other"
	paymentRejected  = "rejected"
)

var paymentResults = []string{string(seckill.AppliedPaid), string(seckill.AppliedFailed), string(seckill.AppliedOwed),
	string(seckill.AppliedRefunded), string(seckill.AppliedRefundFailed), string(seckill.AppliedMismatch), paymentDuplicate,
	paymentOther, paymentRejected}

// lifeMetrics counts what happens to orders after CREATED: closes
// (cancellations and expiries), payments and provider events.
type lifeMetrics struct {
	seckill.OrderLife
	m *Metrics
}

func (m *Metrics) wrapLife(l seckill.OrderLife) seckill.OrderLife {
	return &lifeMetrics{OrderLife: l, m: m}
}

func (l *lifeMetrics) CloseOrder(ctx context.Context, id int64, to seckill.OrderStatus, userID int64) (seckill.CloseResult, error) {
	res, err := l.OrderLife.CloseOrder(ctx, id, to, userID)
	if err == nil && res.Closed {
		l.m.OrdersClosed.WithLabelValues(string(to)).Inc()
	}
	return res, err
}

func (l *lifeMetrics) ExpireDue(ctx context.Context, limit int) ([]seckill.Expired, error) {
	out, err := l.OrderLife.ExpireDue(ctx, limit)
	l.m.OrdersClosed.WithLabelValues(string(seckill.OrderExpired)).Add(float64(len(out)))
	return out, err
}

func (l *lifeMetrics) ApplyPaymentEvent(ctx context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, error) {
	res, err := l.OrderLife.ApplyPaymentEvent(ctx, ev)
	result := paymentOther
	switch {
	case err != nil && (seckill.ErrorCode(err) == seckill.ENOTFOUND || seckill.ErrorCode(err) == seckill.EINVALID):
		result = paymentRejected
	case err != nil:
		return res, err // not applied: the provider sends it again
	case res.Duplicate:
		result = paymentDuplicate
	case res.Outcome == seckill.AppliedIgnored:
	case res.Outcome == seckill.AppliedMismatch:
		result = string(res.Outcome)
		l.m.PaymentMismatch.WithLabelValues(ev.Type).Inc()
	default:
		result = string(res.Outcome)
		if res.Paid() {
			l.m.OrdersClosed.WithLabelValues(string(seckill.OrderPaid)).Inc()
		}
	}
	l.m.PaymentEvents.WithLabelValues(result).Inc()
	return res, err
}
