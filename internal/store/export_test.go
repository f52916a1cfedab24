package store

import (
	"context"
	"testing"

	"seckill/internal/seckill"
)

// SetEndpointDeleteChunk makes DeleteEndpoint delete n deliveries a
// statement until the test ends.
func SetEndpointDeleteChunk(tb testing.TB, n int) {
	old := endpointDeleteChunk
	endpointDeleteChunk = n
	tb.Cleanup(func() { endpointDeleteChunk = old })
}

// DeleteDeliveries runs the first step of DeleteEndpoint alone: it
// returns how many statements deleted deliveries.
func DeleteDeliveries(s *Store, ctx context.Context, id int64) (int, error) {
	return s.deleteDeliveries(ctx, id)
}

// CloseBacklog is how many CloseOrder calls may wait for a transaction.
const CloseBacklog = closeBacklog

// TextArray and Int64Array write the array literals the prepared
// statements take.
var (
	TextArray  = textArray
	Int64Array = int64Array
)

// ApplyPaymentBatched sends ev through ApplyPaymentEvent's group commit
// without the validation before it, as an event only Postgres could refuse
// would go.
func ApplyPaymentBatched(s *Store, ctx context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, bool, error) {
	out, err := s.payments.Do(ctx, ev)
	if err != nil {
		return seckill.PaymentResult{}, false, err
	}
	return out[0].res, out[0].done, nil
}

// PersistUnchecked decides adms (unique, sorted by order id) as
// PersistOrders does after its validation, and returns each one's status
// and reason.
func PersistUnchecked(s *Store, ctx context.Context, adms []seckill.Admission) (map[int64][2]string, error) {
	if err := s.prepare(ctx); err != nil {
		return nil, err
	}
	got, err := s.persistSorted(ctx, adms)
	if err != nil {
		return nil, err
	}
	out := make(map[int64][2]string, len(got))
	for id, d := range got {
		out[id] = [2]string{string(d.status), d.reason}
	}
	return out, nil
}

// BatchWaiting returns how many calls wait for a transaction of CloseOrder's
// ("closes") or ApplyPaymentEvent's ("payments") group commit.
func BatchWaiting(s *Store, which string) int {
	switch which {
	case "closes":
		return s.closes.Waiting()
	case "payments":
		return s.payments.Waiting()
	}
	panic("BatchWaiting: " + which)
}
