package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"seckill/internal/config"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
)

// TestOrderLifeModel is a stateful property test of the order's life after
// the purchase: random sequences of purchases, persistence, payments opened
// by their buyer (and by others), provider events delivered late, twice,
// out of order and concurrently, cancellations by the buyer and an
// operator, pay windows running out and expiries, run against the real
// service on real Postgres and Redis. After every step a small model and the
// system must agree on every order's status, every payment's status, the
// stock (initial = remaining + queued + awaiting payment + paid) and the
// money (every success the provider confirmed is paid, refunded or owed
// back); and the platform must have received exactly one event per status
// change, in order (life_model_events_test.go).
//
// make test runs a bounded number of sequences; make test-model many more
// (-rapid.checks).
func TestOrderLifeModel(t *testing.T) {
	boundRapidChecks(t, 60)
	rcv := newReceiver(t, func(seckill.Event, int) int { return 200 })
	provider, e := newRefundEnv(t, func(m map[string]string) {
		m["SECKILL_EVENTS_WEBHOOK_URL"], m["SECKILL_EVENTS_WEBHOOK_SECRET"] = rcv.srv.URL, testEventsSecret
		m["SECKILL_EVENTS_RETENTION"] = "1h" // delivered events stay, for redeliverEvents to send again
	})
	secret := []byte(config.DevWebhookSecret)
	rapid.Check(t, func(rt *rapid.T) {
		m := newLifeModel(rt, e, secret, int64(rapid.IntRange(1, 3).Draw(rt, "stock")))
		m.refunds, m.provider, m.platform = e.app.Refunds, provider, newEventModel(rcv)
		rt.Repeat(map[string]func(*rapid.T){
			"buy":              m.buy,
			"persist":          m.persist,
			"createPayment":    m.createPayment,
			"providerEvent":    m.providerEvent,
			"paymentSucceeds":  m.paymentSucceeds,
			"paymentFails":     m.paymentFails,
			"redeliver":        m.redeliver,
			"concurrentEvents": m.concurrentEvents,
			"cancelWhilePaid":  m.cancelWhilePaid,
			"cancel":           m.cancel,
			"payByPasses":      m.payByPasses,
			"expire":           m.expire,
			"sweep":            m.sweep,
			"refundSend":       m.refundSend,
			"refundConfirm":    m.refundConfirm,
			"refundRetry":      m.refundRetry,
			"redeliverEvents":  m.redeliverEvents,
			"":                 m.check,
		})
	})
}

// The model: one campaign's orders and payments, as the rules of
// docs/payments.md say they must be.
type lifeModel struct {
	e         *testEnv
	secret    []byte
	voucherID int64
	initial   int64
	remaining int64
	users     []int64
	stranger  int64 // a user who buys nothing and may see nothing

	orders   map[int64]*modelOrder
	orderIDs []int64
	payments map[string]*modelPayment
	payIDs   []string
	events   []seckill.PaymentEvent // delivered before, for redelivery
	// confirmed holds the payments whose success the provider confirmed
	// (the webhook answered 200 to a payment.succeeded).
	confirmed map[string]bool
	amount    int64

	refunds  *seckill.Refunds
	provider *modelProvider
	platform *eventModel // the order events the platform received; nil: not checked
}

// modelMaxSends is the sends a refund gets in a round in the model test.
const modelMaxSends = 3

type modelOrder struct {
	id, user int64
	status   seckill.OrderStatus
	due      bool // its pay_by has passed
}

type modelPayment struct {
	id     string
	order  int64
	status seckill.PaymentStatus
	// The refund, once the payment is owed back.
	gen, round, sends int
	refused           bool // the provider refused it: a retry needs a new key
}

var modelUsers int64 = 700_000

func newLifeModel(rt *rapid.T, e *testEnv, secret []byte, stock int64) *lifeModel {
	v, err := e.app.Catalog.AddSeckillVoucher(asUser(e.ctx, 1, true), seckill.NewSeckillVoucher{
		ShopID: 1, Title: "model", PayValue: 150, ActualValue: 300, Stock: stock,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour),
	})
	if err != nil {
		rt.Fatal(err)
	}
	m := &lifeModel{e: e, secret: secret, voucherID: v.ID, initial: stock, remaining: stock,
		orders: map[int64]*modelOrder{}, payments: map[string]*modelPayment{}, confirmed: map[string]bool{}, amount: 150}
	for range 3 {
		modelUsers++
		m.users = append(m.users, modelUsers)
	}
	modelUsers++
	m.stranger = modelUsers
	return m
}

// clone copies the model's state (not its history), to try the orders in
// which concurrent events may apply.
func (m *lifeModel) clone() *lifeModel {
	c := *m
	c.orders = map[int64]*modelOrder{}
	for id, o := range m.orders {
		oc := *o
		c.orders[id] = &oc
	}
	c.payments = map[string]*modelPayment{}
	for id, p := range m.payments {
		pc := *p
		c.payments[id] = &pc
	}
	c.confirmed = map[string]bool{}
	for id := range m.confirmed {
		c.confirmed[id] = true
	}
	c.orderIDs = slices.Clone(m.orderIDs)
	c.payIDs = slices.Clone(m.payIDs)
	return &c
}

// holding returns the user's order that holds (or is about to hold) a
// unit, or nil.
func (m *lifeModel) holding(user int64) *modelOrder {
	for _, o := range m.orders {
		if o.user == user && (o.status == seckill.OrderQueued || o.status == seckill.OrderCreated || o.status == seckill.OrderPaid) {
			return o
		}
	}
	return nil
}

func (m *lifeModel) drawOrder(rt *rapid.T) *modelOrder {
	if len(m.orderIDs) == 0 {
		rt.Skip("no order yet")
	}
	return m.orders[rapid.SampledFrom(m.orderIDs).Draw(rt, "order")]
}

// drawOrderWhere draws one of the orders that satisfy ok: actions draw
// among the orders they apply to, so that few steps are skipped.
func (m *lifeModel) drawOrderWhere(rt *rapid.T, what string, ok func(o *modelOrder) bool) *modelOrder {
	var ids []int64
	for _, id := range m.orderIDs {
		if ok(m.orders[id]) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		rt.Skip("no order " + what)
	}
	return m.orders[rapid.SampledFrom(ids).Draw(rt, "order")]
}

func (m *lifeModel) drawPayment(rt *rapid.T) *modelPayment {
	if len(m.payIDs) == 0 {
		rt.Skip("no payment yet")
	}
	return m.payments[rapid.SampledFrom(m.payIDs).Draw(rt, "payment")]
}

func (m *lifeModel) buy(rt *rapid.T) {
	u := rapid.SampledFrom(m.users).Draw(rt, "user")
	res, err := m.e.app.Purchases.Purchase(asUser(m.e.ctx, u, false), m.voucherID)
	if err != nil {
		rt.Fatalf("purchase by %d: %v", u, err)
	}
	want := seckill.OutcomeAccepted
	switch {
	case m.holding(u) != nil:
		want = seckill.OutcomeAlreadyPurchased
	case m.remaining == 0:
		want = seckill.OutcomeSoldOut
	}
	// After the sell-out, the process's sold-out mark answers SOLD_OUT
	// without asking Redis, to a buyer too (for SoldOutTTL).
	soldOutMark := want == seckill.OutcomeAlreadyPurchased && m.remaining == 0 && res.Outcome == seckill.OutcomeSoldOut
	if res.Outcome != want && !soldOutMark {
		rt.Fatalf("purchase by %d: %s, want %s", u, res.Outcome, want)
	}
	rt.Logf("buy by %d: %s %d", u, res.Outcome, res.OrderID)
	if want == seckill.OutcomeAccepted {
		m.remaining--
		m.orders[res.OrderID] = &modelOrder{id: res.OrderID, user: u, status: seckill.OrderQueued}
		m.orderIDs = append(m.orderIDs, res.OrderID)
	}
}

func (m *lifeModel) persist(rt *rapid.T) {
	o := m.drawOrderWhere(rt, "queued", func(o *modelOrder) bool { return o.status == seckill.OrderQueued })
	adm, err := m.e.app.Admitter.Pending(m.e.ctx, o.id)
	if err != nil {
		rt.Fatalf("pending %d: %v", o.id, err)
	}
	if err := m.e.app.Purchases.PersistAdmissions(m.e.ctx, []seckill.Admission{*adm}); err != nil {
		rt.Fatalf("persist %d: %v", o.id, err)
	}
	o.status = seckill.OrderCreated
	rt.Logf("persisted %d", o.id)
}

// caller draws who makes a call about o: its buyer, an operator or a
// stranger.
func (m *lifeModel) caller(rt *rapid.T, o *modelOrder) (user int64, admin bool) {
	switch rapid.IntRange(0, 7).Draw(rt, "caller") {
	case 0:
		return m.stranger, false
	case 1:
		return 1, true
	}
	return o.user, false
}

func (m *lifeModel) createPayment(rt *rapid.T) {
	o := m.drawOrder(rt)
	user, admin := m.caller(rt, o)
	p, err := m.e.app.Life.CreatePayment(asUser(m.e.ctx, user, admin), o.id)
	var open *modelPayment
	for _, id := range m.payIDs {
		if mp := m.payments[id]; mp.order == o.id && mp.status == seckill.PaymentPending {
			open = mp
		}
	}
	switch {
	case !admin && user != o.user:
		wantCode(rt, "createPayment by a stranger", err, seckill.ENOTFOUND)
	case o.status != seckill.OrderCreated || o.due:
		wantCode(rt, fmt.Sprintf("createPayment of a %s order (due %v)", o.status, o.due), err, seckill.ECONFLICT)
	case err != nil:
		rt.Fatalf("createPayment of a CREATED order: %v", err)
	case p.Status != seckill.PaymentPending || p.Amount != m.amount || p.OrderID != o.id:
		rt.Fatalf("createPayment: %+v", p)
	case open != nil && p.ID != open.id:
		rt.Fatalf("createPayment opened %s while %s is open", p.ID, open.id)
	case open == nil:
		if _, ok := m.payments[p.ID]; ok {
			rt.Fatalf("createPayment answered %s (%s in the model) instead of a new payment", p.ID, m.payments[p.ID].status)
		}
		m.payments[p.ID] = &modelPayment{id: p.ID, order: o.id, status: seckill.PaymentPending}
		m.payIDs = append(m.payIDs, p.ID)
	}
}

func wantCode(rt *rapid.T, what string, err error, code string) {
	if seckill.ErrorCode(err) != code {
		rt.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// newEvent draws a fresh event of the provider about one payment.
func (m *lifeModel) newEvent(rt *rapid.T) seckill.PaymentEvent {
	p := m.drawPayment(rt)
	typ := rapid.SampledFrom([]string{seckill.EventPaymentSucceeded, seckill.EventPaymentSucceeded, seckill.EventPaymentFailed,
		seckill.EventRefundSucceeded}).Draw(rt, "type")
	return paymentEvent(&seckill.Payment{ID: p.id, Amount: m.amount, Currency: "CNY"}, typ)
}

// apply is what the model says an event does: whether it is a duplicate,
// and the payment's status afterwards.
func (m *lifeModel) apply(ev seckill.PaymentEvent) (dup bool, after seckill.PaymentStatus) {
	p := m.payments[ev.PaymentID]
	for _, old := range m.events {
		if old.ID == ev.ID {
			return true, p.status
		}
	}
	m.events = append(m.events, ev)
	o := m.orders[p.order]
	switch ev.Type {
	case seckill.EventPaymentSucceeded:
		m.confirmed[p.id] = true
		switch p.status {
		case seckill.PaymentPending, seckill.PaymentFailed, seckill.PaymentCancelled:
			if o.status == seckill.OrderCreated {
				o.status = seckill.OrderPaid
				p.status = seckill.PaymentSucceeded
				for _, other := range m.payments {
					if other.order == o.id && other.status == seckill.PaymentPending {
						other.status = seckill.PaymentCancelled
					}
				}
			} else {
				p.status, p.gen = seckill.PaymentRefundNeeded, 1
			}
		}
	case seckill.EventPaymentFailed:
		if p.status == seckill.PaymentPending {
			p.status = seckill.PaymentFailed
		}
	case seckill.EventRefundSucceeded:
		if p.status.Owed() {
			p.status = seckill.PaymentRefunded
		}
	case seckill.EventRefundFailed:
		if p.status == seckill.PaymentRefundNeeded || p.status == seckill.PaymentRefunding {
			p.status, p.refused = seckill.PaymentRefundFailed, true
		}
	}
	return false, p.status
}

type webhookAnswer struct {
	Status string `json:"status"`
	Result string `json:"result"`
	Error  string `json:"error"`
}

// deliver sends an event the way the provider does, through the signed
// webhook.
func (m *lifeModel) deliver(rt *rapid.T, ev seckill.PaymentEvent) (int, webhookAnswer) {
	status, body, err := payhook.Send(m.e.ctx, http.DefaultClient, m.e.url+"/webhooks/payments", m.secret, ev)
	if err != nil {
		rt.Fatalf("deliver %s: %v", ev.ID, err)
	}
	var a webhookAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		rt.Fatalf("deliver %s: answer %d %q: %v", ev.ID, status, body, err)
	}
	return status, a
}

func (m *lifeModel) providerEvent(rt *rapid.T) {
	ev := m.newEvent(rt)
	m.deliverOne(rt, ev)
}

// paymentSucceeds is the provider confirming a payment, the event that
// moves money; drawn as often as every other event together.
func (m *lifeModel) paymentSucceeds(rt *rapid.T) {
	p := m.drawPayment(rt)
	m.deliverOne(rt, paymentEvent(&seckill.Payment{ID: p.id, Amount: m.amount, Currency: "CNY"}, seckill.EventPaymentSucceeded))
}

// paymentFails is the provider reporting a payment failed.
func (m *lifeModel) paymentFails(rt *rapid.T) {
	p := m.drawPayment(rt)
	m.deliverOne(rt, paymentEvent(&seckill.Payment{ID: p.id, Amount: m.amount, Currency: "CNY"}, seckill.EventPaymentFailed))
}

func (m *lifeModel) redeliver(rt *rapid.T) {
	if len(m.events) == 0 {
		rt.Skip("nothing delivered yet")
	}
	m.deliverOne(rt, rapid.SampledFrom(m.events).Draw(rt, "event"))
}

func (m *lifeModel) deliverOne(rt *rapid.T, ev seckill.PaymentEvent) {
	status, a := m.deliver(rt, ev)
	dup, after := m.apply(ev)
	rt.Logf("event %s %s %s: %d %+v", ev.ID, ev.Type, ev.PaymentID, status, a)
	wantStatus := "applied"
	if dup {
		wantStatus = "duplicate"
	}
	if status != http.StatusOK || a.Status != wantStatus || !dup && a.Result != string(after) {
		rt.Fatalf("event %s %s of %s: %d %+v, want 200 %s %s", ev.ID, ev.Type, ev.PaymentID, status, a, wantStatus, after)
	}
}

// concurrentEvents delivers two events at once (fresh ones or
// redeliveries, of one order's payments or of several), and one of them
// several times over: the system must end as the model does after applying
// them in one order or the other.
func (m *lifeModel) concurrentEvents(rt *rapid.T) {
	evs := []seckill.PaymentEvent{m.newEvent(rt), m.newEvent(rt)}
	if len(m.events) > 0 && rapid.Bool().Draw(rt, "redelivery") {
		evs[1] = rapid.SampledFrom(m.events).Draw(rt, "event")
	}
	copies := rapid.IntRange(1, 4).Draw(rt, "copies")
	var wg sync.WaitGroup
	statuses := make([]int, 1+copies)
	for i := range statuses {
		ev := evs[min(i, 1)]
		wg.Go(func() {
			s, body, err := payhook.Send(m.e.ctx, http.DefaultClient, m.e.url+"/webhooks/payments", m.secret, ev)
			if err != nil {
				rt.Errorf("deliver %s: %v", ev.ID, err)
			} else if s != http.StatusOK {
				rt.Errorf("deliver %s %s: %d %s", ev.ID, ev.Type, s, body)
			}
			statuses[i] = s
		})
	}
	wg.Wait()
	if rt.Failed() {
		rt.FailNow()
	}
	// Either order may have won; the system must be in one of the two
	// states.
	ab, ba := m.clone(), m.clone()
	ab.apply(evs[0])
	ab.apply(evs[1])
	ba.apply(evs[1])
	ba.apply(evs[0])
	if why := ab.differs(rt); why == "" {
		m.adopt(ab)
	} else if why2 := ba.differs(rt); why2 == "" {
		m.adopt(ba)
	} else {
		rt.Fatalf("after %s and %s at once: %s (or, the other way round: %s)", evs[0].ID, evs[1].ID, why, why2)
	}
}

func (m *lifeModel) adopt(c *lifeModel) {
	m.orders, m.payments, m.confirmed, m.events, m.remaining = c.orders, c.payments, c.confirmed, c.events, c.remaining
}

// cancelWhilePaid delivers a payment's success while its order's buyer
// cancels the order (both group-committed, perhaps in one batch each): the
// system must end as the model does after the two in one order or the
// other, and the cancel must have answered as in that order.
func (m *lifeModel) cancelWhilePaid(rt *rapid.T) {
	p := m.drawPayment(rt)
	o := m.orders[p.order]
	ev := paymentEvent(&seckill.Payment{ID: p.id, Amount: m.amount, Currency: "CNY"}, seckill.EventPaymentSucceeded)
	var wg sync.WaitGroup
	var cancelErr error
	wg.Go(func() {
		s, body, err := payhook.Send(m.e.ctx, http.DefaultClient, m.e.url+"/webhooks/payments", m.secret, ev)
		if err != nil || s != http.StatusOK {
			rt.Errorf("deliver %s: %d %s %v", ev.ID, s, body, err)
		}
	})
	wg.Go(func() { _, cancelErr = m.e.app.Life.CancelOrder(asUser(m.e.ctx, o.user, false), o.id) })
	wg.Wait()
	if rt.Failed() {
		rt.FailNow()
	}
	if cancelErr != nil && seckill.ErrorCode(cancelErr) != seckill.ECONFLICT {
		rt.Fatalf("cancel %d while paid: %v", o.id, cancelErr)
	}
	cancel := func(c *lifeModel) bool {
		if co := c.orders[o.id]; co.status == seckill.OrderCreated {
			c.close(co, seckill.OrderCancelled)
			return true
		}
		return false
	}
	paidFirst, cancelFirst := m.clone(), m.clone()
	paidFirst.apply(ev)
	afterPay := cancel(paidFirst)
	afterCancel := cancel(cancelFirst)
	cancelFirst.apply(ev)
	var whys []string
	for _, c := range []struct {
		model     *lifeModel
		cancelled bool
	}{{paidFirst, afterPay}, {cancelFirst, afterCancel}} {
		if c.cancelled != (cancelErr == nil) {
			whys = append(whys, fmt.Sprintf("the cancel answered %v", cancelErr))
			continue
		}
		why := c.model.differs(rt)
		if why == "" {
			m.adopt(c.model)
			return
		}
		whys = append(whys, why)
	}
	rt.Fatalf("after %s and the cancel of order %d at once: paid first, %s; cancelled first, %s", ev.ID, o.id, whys[0], whys[1])
}

func (m *lifeModel) cancel(rt *rapid.T) {
	o := m.drawOrder(rt)
	user, admin := m.caller(rt, o)
	var got *seckill.Order
	var err error
	if admin {
		got, err = m.e.app.Life.AdminCancelOrder(asUser(m.e.ctx, user, true), o.id)
	} else {
		got, err = m.e.app.Life.CancelOrder(asUser(m.e.ctx, user, false), o.id)
	}
	rt.Logf("cancel %d (%s) by %d admin %v: %v", o.id, o.status, user, admin, err)
	switch {
	case !admin && user != o.user:
		wantCode(rt, "cancel by a stranger", err, seckill.ENOTFOUND)
	case o.status != seckill.OrderCreated:
		wantCode(rt, fmt.Sprintf("cancel of a %s order", o.status), err, seckill.ECONFLICT)
	case err != nil:
		rt.Fatalf("cancel of a CREATED order: %v", err)
	case got.Status != seckill.OrderCancelled:
		rt.Fatalf("cancel: %+v", got)
	default:
		m.close(o, seckill.OrderCancelled)
	}
}

// close is what cancelling or expiring an order does: the unit goes back
// and its payments still open can no longer be paid.
func (m *lifeModel) close(o *modelOrder, to seckill.OrderStatus) {
	o.status = to
	m.remaining++
	for _, p := range m.payments {
		if p.order == o.id && p.status == seckill.PaymentPending {
			p.status = seckill.PaymentCancelled
		}
	}
}

func (m *lifeModel) payByPasses(rt *rapid.T) {
	o := m.drawOrderWhere(rt, "awaiting payment", func(o *modelOrder) bool { return o.status == seckill.OrderCreated && !o.due })
	if _, err := m.e.app.DB.ExecContext(m.e.ctx, `UPDATE voucher_order SET pay_by = now() - interval '1 second' WHERE id = ?`, o.id); err != nil {
		rt.Fatal(err)
	}
	o.due = true
}

func (m *lifeModel) expire(rt *rapid.T) {
	o := m.drawOrderWhere(rt, "persisted", func(o *modelOrder) bool { return o.status != seckill.OrderQueued })
	closed, err := m.e.app.Life.ExpireOrder(m.e.ctx, o.id)
	if err != nil {
		rt.Fatalf("expire %d: %v", o.id, err)
	}
	if o.status == seckill.OrderCreated && o.due {
		m.close(o, seckill.OrderExpired)
	}
	if closed != (o.status != seckill.OrderCreated) {
		rt.Fatalf("expire %d (%s): closed %v", o.id, o.status, closed)
	}
}

func (m *lifeModel) sweep(rt *rapid.T) {
	if _, _, err := m.e.app.Life.SweepOrders(m.e.ctx, 1000); err != nil {
		rt.Fatalf("sweep: %v", err)
	}
	for _, id := range m.orderIDs {
		if o := m.orders[id]; o.status == seckill.OrderCreated && o.due {
			m.close(o, seckill.OrderExpired)
		}
	}
}

func (m *lifeModel) check(rt *rapid.T) {
	if why := m.differs(rt); why != "" {
		rt.Fatal(why)
	}
	if m.platform != nil {
		if why := m.platform.differs(rt, m); why != "" {
			rt.Fatal(why)
		}
	}
}

// differs compares the model with the system and says how they differ ("":
// they agree).
func (m *lifeModel) differs(rt *rapid.T) string {
	e := m.e
	admin := asUser(e.ctx, 1, true)
	for _, id := range m.orderIDs {
		o, err := e.app.Purchases.Order(admin, id)
		if err != nil {
			rt.Fatalf("order %d: %v", id, err)
		}
		if want := m.orders[id].status; o.Status != want {
			return fmt.Sprintf("order %d is %s, want %s", id, o.Status, want)
		}
	}
	var rows []struct {
		ID     string `bun:"id"`
		Status string `bun:"status"`
		Amount int64  `bun:"amount"`
		Gen    int    `bun:"refund_generation"`
		Round  int    `bun:"refund_round"`
		Sends  int    `bun:"refund_sends"`
	}
	err := e.app.DB.NewRaw(`SELECT p.id, p.status, p.amount, p.refund_generation, p.refund_round, p.refund_sends
		FROM payment AS p JOIN voucher_order AS o ON o.id = p.order_id
		WHERE o.voucher_id = ?`, m.voucherID).Scan(e.ctx, &rows)
	if err != nil {
		rt.Fatal(err)
	}
	if len(rows) != len(m.payIDs) {
		return fmt.Sprintf("%d payments, want %d", len(rows), len(m.payIDs))
	}
	var paid, refunded, owed, confirmed int64
	for _, r := range rows {
		mp, ok := m.payments[r.ID]
		if !ok {
			return fmt.Sprintf("payment %s is not in the model", r.ID)
		}
		if r.Status != string(mp.status) {
			return fmt.Sprintf("payment %s of order %d (%s) is %s, want %s", r.ID, mp.order, m.orders[mp.order].status, r.Status, mp.status)
		}
		if r.Gen != mp.gen || r.Round != mp.round || r.Sends != mp.sends {
			return fmt.Sprintf("refund of %s: generation %d, round %d, %d sends; want %d, %d, %d", r.ID, r.Gen, r.Round, r.Sends, mp.gen, mp.round, mp.sends)
		}
		// Never paid back twice: the provider refunded under one key
		// at most, whatever was sent again.
		if back, keys := m.provider.paidBack(r.ID); keys > 1 || back > r.Amount {
			return fmt.Sprintf("the provider paid %d back for %s under %d keys", back, r.ID, keys)
		}
		switch seckill.PaymentStatus(r.Status) {
		case seckill.PaymentSucceeded:
			paid += r.Amount
		case seckill.PaymentRefunded:
			refunded += r.Amount
		case seckill.PaymentRefundNeeded, seckill.PaymentRefunding, seckill.PaymentRefundFailed:
			owed += r.Amount
		}
		if m.confirmed[r.ID] {
			confirmed += r.Amount
		}
	}
	if confirmed != paid+refunded+owed {
		return fmt.Sprintf("money: confirmed %d != paid %d + refunded %d + owed back %d", confirmed, paid, refunded, owed)
	}
	rem, err := e.app.Admitter.Remaining(e.ctx, []int64{m.voucherID})
	if err != nil {
		rt.Fatal(err)
	}
	if rem[m.voucherID] != m.remaining {
		return fmt.Sprintf("remaining %d, want %d", rem[m.voucherID], m.remaining)
	}
	pending, err := e.app.Admitter.PendingOf(e.ctx, m.voucherID)
	if err != nil {
		rt.Fatal(err)
	}
	holding := e.count(`SELECT count(*) FROM voucher_order WHERE voucher_id = ? AND status IN ('CREATED', 'PAID')`, m.voucherID)
	if got := rem[m.voucherID] + int64(len(pending)) + holding; got != m.initial {
		return fmt.Sprintf("stock: initial %d != remaining %d + queued %d + awaiting payment or paid %d", m.initial, rem[m.voucherID], len(pending), holding)
	}
	return ""
}
