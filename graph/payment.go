package graph

import (
	"time"

	"seckill/graph/model"
	"seckill/internal/seckill"
)

// Converters of the order's life after the purchase (payment.graphqls).

func toGraphPayment(p *seckill.Payment) (*model.Payment, error) {
	status, err := toGraphEnum[model.PaymentStatus](string(p.Status), "payment status")
	if err != nil {
		return nil, err
	}
	amount, err := toGraphInt("amount", p.Amount)
	if err != nil {
		return nil, err
	}
	out := &model.Payment{ID: p.ID, OrderID: formatID(p.OrderID), Amount: amount, Currency: p.Currency,
		Status: status, PayBy: p.PayBy}
	if p.ClientSecret != "" {
		out.ClientSecret = &p.ClientSecret
	}
	return out, nil
}

// fillGraphOrderPayment sets the fields an order has once it is persisted.
func fillGraphOrderPayment(out *model.Order, o *seckill.Order) error {
	out.PayBy, out.PaidAt, out.ClosedAt = optionalTime(o.PayBy), optionalTime(o.PaidAt), optionalTime(o.ClosedAt)
	if o.PayBy.IsZero() {
		return nil // QUEUED or FAILED: nothing to pay
	}
	amount, err := toGraphInt("amount", o.Amount)
	if err != nil {
		return err
	}
	out.Amount = &amount
	return nil
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// toPayWindow converts payWindowSeconds; the domain checks its bounds.
func toPayWindow(seconds *int32) time.Duration {
	if seconds == nil {
		return 0
	}
	if *seconds <= 0 {
		return -1 // refused by the domain, naming payWindow
	}
	return time.Duration(*seconds) * time.Second
}
