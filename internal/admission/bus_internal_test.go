package admission

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"seckill/internal/seckill"
)

// TestAppendStatusEvents holds the hand-written encoder of the status bus
// to json.Marshal, which the subscribers' side decodes with: the same bytes
// for random batches (every status, reasons that need escaping, times in
// several zones and precisions), and an error where json.Marshal has one.
func TestAppendStatusEvents(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	statuses := []seckill.OrderStatus{seckill.OrderCreated, seckill.OrderFailed, seckill.OrderPaid, seckill.OrderCancelled, seckill.OrderExpired, "ODD \"one\""}
	reasons := []string{"", seckill.FailureNoStock, seckill.FailureUserHasOrder, "é 中文", "line\u2028sep", "bad \xff byte"}
	for _, c := range "<>&\"\\\t\n\x00\x1f\x7f" {
		reasons = append(reasons, "one "+string(c)+" char")
	}
	zones := []*time.Location{time.UTC, time.FixedZone("", 8*3600), time.FixedZone("X", -(3*3600 + 1800))}
	for range 2000 {
		evs := make([]seckill.StatusEvent, rng.IntN(5))
		for i := range evs {
			at := time.Unix(rng.Int64N(4e9), rng.Int64N(1e9))
			if rng.IntN(3) == 0 {
				at = at.Truncate(time.Millisecond)
			}
			evs[i] = seckill.StatusEvent{
				OrderID: rng.Int64N(1 << 62),
				Status:  statuses[rng.IntN(len(statuses))],
				At:      at.In(zones[rng.IntN(len(zones))]),
				Reason:  reasons[rng.IntN(len(reasons))],
			}
		}
		if len(evs) == 0 {
			continue // Publish sends nothing for none
		}
		want, err := json.Marshal(evs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendStatusEvents(nil, evs)
		if err != nil || string(got) != string(want) {
			t.Fatalf("appendStatusEvents(%+v) = %s, %v\njson.Marshal:           %s", evs, got, err, want)
		}
	}
	bad := []seckill.StatusEvent{{OrderID: 1, Status: seckill.OrderCreated, At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	if _, err := json.Marshal(bad); err == nil {
		t.Fatal("json.Marshal encodes the year 10000; the test's premise is gone")
	}
	if _, err := appendStatusEvents(nil, bad); err == nil {
		t.Error("appendStatusEvents encodes the year 10000; json.Marshal refuses it")
	}
}

func BenchmarkAppendStatusEvents(b *testing.B) {
	evs := make([]seckill.StatusEvent, 150)
	for i := range evs {
		evs[i] = seckill.StatusEvent{OrderID: int64(i) << 22, Status: seckill.OrderCreated, At: time.Now()}
	}
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(evs)
		}
	})
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			_, _ = appendStatusEvents(make([]byte, 0, 80*len(evs)), evs)
		}
	})
}
