package app

import (
	"fmt"
	"slices"

	"pgregory.net/rapid"

	"seckill/internal/seckill"
)

// The order events of TestOrderLifeModel: after every step the outbox is
// delivered to a receiver that checks each call's signature and takes each
// event once by id, in sequence per order (receiver, events_test.go), and
// the events it holds must be exactly the status changes the model made:
// one per change of an order's status, one per refund that succeeded or
// failed, in the order of the steps that made them (within one step, such
// as two provider events at once, in either order).

// eventModel is what the model expects the platform to have received.
type eventModel struct {
	rcv      *receiver
	orders   map[int64]seckill.OrderStatus    // each order's status at the last check
	payments map[string]seckill.PaymentStatus // each payment's status at the last check
	want     map[int64][][]seckill.EventType  // each order's events, by the step that made them
}

func newEventModel(rcv *receiver) *eventModel {
	return &eventModel{rcv: rcv, orders: map[int64]seckill.OrderStatus{}, payments: map[string]seckill.PaymentStatus{},
		want: map[int64][][]seckill.EventType{}}
}

// step records the events of what the model changed since the last step.
func (em *eventModel) step(m *lifeModel) {
	changed := map[int64][]seckill.EventType{}
	for _, id := range m.orderIDs {
		o := m.orders[id]
		if em.orders[id] != o.status {
			if typ := seckill.EventForStatus(o.status); typ != "" {
				changed[id] = append(changed[id], typ)
			}
			em.orders[id] = o.status
		}
	}
	for _, id := range m.payIDs {
		p := m.payments[id]
		if em.payments[id] == p.status {
			continue
		}
		em.payments[id] = p.status
		switch p.status {
		case seckill.PaymentRefunded:
			changed[p.order] = append(changed[p.order], seckill.EventOrderRefunded)
		case seckill.PaymentRefundFailed:
			changed[p.order] = append(changed[p.order], seckill.EventOrderRefundFailed)
		}
	}
	for id, evs := range changed {
		em.want[id] = append(em.want[id], evs)
	}
}

// differs delivers what the outbox holds and compares the receiver with the
// model ("": they agree).
func (em *eventModel) differs(rt *rapid.T, m *lifeModel) string {
	em.step(m)
	for {
		n, _, err := m.e.app.Events.DeliverOnce(m.e.ctx)
		if err != nil {
			rt.Fatalf("deliver events: %v", err)
		}
		if n == 0 {
			break
		}
	}
	if p := em.rcv.problems(); len(p) > 0 {
		return fmt.Sprintf("the receiver saw: %v", p)
	}
	if n := m.e.count(`SELECT count(*) FROM order_event WHERE delivered_at IS NULL`); n != 0 {
		return fmt.Sprintf("%d events left undelivered", n)
	}
	got := em.rcv.types()
	for _, id := range m.orderIDs {
		steps := em.want[id]
		have := got[id]
		var flat []seckill.EventType
		for _, s := range steps {
			flat = append(flat, s...)
		}
		if len(have) != len(flat) {
			return fmt.Sprintf("order %d: received %v, want %v", id, have, steps)
		}
		i := 0
		for _, s := range steps {
			a, b := slices.Clone(have[i:i+len(s)]), slices.Clone(s)
			slices.Sort(a)
			slices.Sort(b)
			if !slices.Equal(a, b) {
				return fmt.Sprintf("order %d: received %v, want %v", id, have, steps)
			}
			i += len(s)
		}
	}
	return ""
}

// redeliverEvents is an operator redelivering every event of an order: the
// receiver gets them again under their ids and takes none twice.
func (m *lifeModel) redeliverEvents(rt *rapid.T) {
	o := m.drawOrderWhere(rt, "persisted", func(o *modelOrder) bool { return o.status != seckill.OrderQueued })
	eps, err := m.e.app.Store.Endpoints(m.e.ctx)
	if err != nil || len(eps) == 0 {
		rt.Fatalf("endpoints %v, %v", eps, err)
	}
	if _, err := m.e.app.Store.Redeliver(m.e.ctx, seckill.RedeliverFilter{EndpointID: eps[0].ID, OrderID: o.id}); err != nil {
		rt.Fatalf("redeliver events of %d: %v", o.id, err)
	}
}
