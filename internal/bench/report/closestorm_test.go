package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"seckill/internal/seckill"
)

// sampleCloseStorm is a storm of 20,000 cancellations at 2,500 a second,
// every unit back on sale.
func sampleCloseStorm(kind string) *CloseStorm {
	s := &CloseStorm{Kind: kind, Units: 20_000, VoucherID: 10, ProbeVoucherID: 9,
		SaleLoad:  LoadInfo{Mode: ModeBurst, Users: 20_000, Attempts: 1, Concurrency: 128, Stock: 20_000},
		ProbeLoad: LoadInfo{Mode: ModeClosed, Concurrency: 32, DurationS: 3, Users: 100_000, Stock: 1_000_000},
		Alone:     sampleSale(TargetProbeAlone, 15_000, 20, 100), During: sampleSale(TargetProbeDuring, 12_000, 28, 120),
		Sale: sampleSale(TargetStormSale, 20_000, 80, 300),
		Requests: Closes{Callers: 64, Planned: 20_000, Sent: 20_000, OK: 20_000, StartedAt: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC),
			DurationS: 8, PerS: 2500, PeakPerS: 3100, Latency: Latency{P50: 20, P99: 60, Max: 130}},
		Statuses:     map[seckill.OrderStatus]int64{seckill.OrderCancelled: 20_000},
		Books:        &Books{Initial: 20_000, Remaining: 20_000, Balanced: true, Known: true},
		Pool:         PoolUse{PoolSize: 20, EveryMs: 100, Samples: 80, MaxInUse: 4, MeanInUse: 2.3},
		Interference: Interference{Overlap: 1},
	}
	if kind == ClosePayment {
		s.Opened, s.OpenedS = 20_000, 12
		s.Statuses = map[seckill.OrderStatus]int64{seckill.OrderPaid: 20_000}
		s.Succeeded, s.SucceededOrders = 20_000, 20_000
		s.Books = &Books{Initial: 20_000, Paid: 20_000, Taken: 20_000, Balanced: true, Known: true}
	}
	s.CPU = &CPU{WindowS: 6, TickMs: 10, Units: map[string]int64{s.Unit(): 15_000}, Processes: []ProcessCPU{
		{Name: ProcServer, Seconds: 3, ErrorS: 0.02}, {Name: ProcRedis, Seconds: 0.5, ErrorS: 0.02},
		{Name: ProcPostgres, Seconds: 3, ErrorS: 0.3}, {Name: ProcBench, Seconds: 1.2, ErrorS: 0.02}}}
	s.CPU.AddSum()
	s.Relate()
	s.Judge(false)
	return s
}

func TestCloseStormJudge(t *testing.T) {
	for _, kind := range []string{CloseCancel, ClosePayment} {
		s := sampleCloseStorm(kind)
		want := map[string]string{CloseCancel: "OK: 20,000 sold, 20,000 cancelled, every unit back on sale (books balance)",
			ClosePayment: "OK: 20,000 sold, 20,000 paid, each paid once (books balance)"}[kind]
		if !s.OK || s.Verdict != want || !s.Interference.Met {
			t.Errorf("%s: verdict %v %q, interference %+v", kind, s.OK, s.Verdict, s.Interference)
		}
		var text bytes.Buffer
		if err := (&Result{CloseStorm: s}).WriteText(&text); err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{"seckill-bench --" + kind + "-storm 20,000", "20,000 of 20,000 closed their order in 8.00 s: 2,500",
			"CPU µs per " + map[string]string{CloseCancel: "cancelled", ClosePayment: "paid"}[kind] + " order over the storm", "server 200 ±1.33",
			"Postgres pool during the storm", "verdict " + kind + " storm: OK"} {
			if !strings.Contains(text.String(), line) {
				t.Errorf("%s: the text lacks %q:\n%s", kind, line, text.String())
			}
		}
	}
	for _, tc := range []struct {
		name, kind string
		change     func(s *CloseStorm)
		want       string
	}{
		{"errors", CloseCancel, func(s *CloseStorm) {
			s.Requests.Errors, s.Requests.OK, s.Requests.ErrorText = 3, 19_997, "order 7: timeout"
		},
			"ERRORS: 3 of 20,000 requests failed (order 7: timeout)"},
		{"timeout", CloseCancel, func(s *CloseStorm) { s.Requests.Sent = 12_000 }, "NOT CLOSED: 12,000 of 20,000 orders asked before the timeout"},
		{"an order left open", CloseCancel, func(s *CloseStorm) {
			s.Statuses = map[seckill.OrderStatus]int64{seckill.OrderCancelled: 19_999, seckill.OrderCreated: 1}
		}, "STATUS: 19,999 of 20,000 orders are CANCELLED (CREATED 1, CANCELLED 19,999)"},
		{"a unit kept", CloseCancel, func(s *CloseStorm) { s.Books.Remaining, s.Books.Awaiting = 19_999, 1 },
			"BOOKS: 19,999 of 20,000 units back on sale"},
		{"unbalanced", CloseCancel, func(s *CloseStorm) { s.Books.Balanced = false }, "BOOKS: initial 20,000 ≠"},
		{"paid in a cancel storm", CloseCancel, func(s *CloseStorm) { s.Succeeded = 1 }, "PAID: 1 payments succeeded"},
		{"paid twice", ClosePayment, func(s *CloseStorm) { s.Succeeded = 20_001 }, "PAYMENTS: 20,001 succeeded for 20,000 orders"},
		{"a sale failed", ClosePayment, func(s *CloseStorm) { s.Sale.OK, s.Sale.Verdict = false, "FAIL: LOST: 3" }, "storm-sale: FAIL: LOST: 3"},
	} {
		s := sampleCloseStorm(tc.kind)
		tc.change(s)
		s.Judge(false)
		if s.OK || !strings.Contains(s.Verdict, tc.want) {
			t.Errorf("%s: %v %q, want %q", tc.name, s.OK, s.Verdict, tc.want)
		}
	}
	// Interrupted: what was not done is not a failure.
	s := sampleCloseStorm(CloseCancel)
	s.Requests.Sent, s.Statuses, s.Books = 5_000, map[seckill.OrderStatus]int64{seckill.OrderCancelled: 5_000}, nil
	if s.Judge(true); !s.OK {
		t.Errorf("interrupted: %q", s.Verdict)
	}
}
