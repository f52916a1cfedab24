package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// sampleSale is a storm's sale of accepted orders, all persisted.
func sampleSale(target string, accepted int64, p99, lagP99 float64) *Report {
	r := &Report{Target: target, Sent: accepted, Answered: accepted, Throughput: 5000, Latency: Latency{P50: p99 / 4, P99: p99},
		Outcomes: map[string]int64{"ACCEPTED": accepted}, Stock: 1_000_000, Accepted: accepted,
		Persistence: &Persistence{Source: SourcePostgres, Complete: true, Rows: accepted, Lag: &Lag{Orders: accepted, P50: lagP99 / 3, P99: lagP99}}}
	r.Judge()
	return r
}

// sampleStorm is a storm of 20,000 orders that expired at 560 a second,
// and a second sale whose p99 doubled during it.
func sampleStorm() *Storm {
	first := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := &Storm{Units: 20_000, PayWindowS: 20, VoucherID: 10, ProbeVoucherID: 9,
		SaleLoad:  LoadInfo{Mode: ModeBurst, Users: 20_000, Attempts: 1, Concurrency: 128, Stock: 20_000},
		ProbeLoad: LoadInfo{Mode: ModeClosed, Concurrency: 32, DurationS: 3, Users: 100_000, Stock: 1_000_000},
		Alone:     sampleSale(TargetProbeAlone, 15_000, 20, 100), During: sampleSale(TargetProbeDuring, 12_000, 45, 2500),
		Sale: sampleSale(TargetStormSale, 20_000, 80, 300),
		Memory: StormMemory{BeforeBytes: 1_200_000, AfterBytes: 11_000_000, Awaiting: 20_000, PerOrderBytes: 490,
			Keys: []KeyGrowth{{Pattern: "asynq:{orders}:t:expire:*", Type: "hash", KeysAfter: 20_000, BytesAfter: 6_720_000, PerOrderBytes: 336, Sampled: true}}},
		Expiry: StormExpiry{FirstPayBy: first, LastPayBy: first.Add(4 * time.Second), FirstClosed: first.Add(100 * time.Millisecond),
			LastClosed: first.Add(35714 * time.Millisecond), Expired: 20_000, Complete: true, DurationS: 35.714, PerS: 560, PeakPerS: 610, BehindS: 31.7,
			Books: &Books{Initial: 20_000, Remaining: 20_000, Balanced: true, Known: true}},
		Pool: PoolUse{PoolSize: 20, EveryMs: 100, Samples: 357, MaxInUse: 20, MeanInUse: 19.1, MaxShare: 1, MeanShare: 0.955,
			MaxActive: 20, MeanActive: 18.2, MaxLockWait: 19, MeanLockWait: 17.5},
		Interference: Interference{Overlap: 1},
	}
	s.CPU = &CPU{WindowS: 30, TickMs: 10, Units: map[string]int64{UnitExpired: 17_000}, Processes: []ProcessCPU{
		{Name: ProcServer, Seconds: 5.1, ErrorS: 0.02}, {Name: ProcRedis, Seconds: 0.85, ErrorS: 0.02},
		{Name: ProcPostgres, Seconds: 12.2, ErrorS: 0.3}, {Name: ProcBench, Seconds: 0.3, ErrorS: 0.02}}}
	s.CPU.AddSum()
	s.Relate()
	s.Judge(false)
	return s
}

func TestStormRelateAndJudge(t *testing.T) {
	s := sampleStorm()
	in := s.Interference
	if in.P99Ratio != 45.0/20 || in.LagRatio != 25 || in.Met {
		t.Errorf("interference %+v", in)
	}
	if !s.OK || s.Verdict != "OK: 20,000 sold, 20,000 expired, every unit back on sale (books balance)" {
		t.Errorf("verdict %v %q", s.OK, s.Verdict)
	}
	// Within 1.5× on both, over the whole sale: met.
	s.During.Latency.P99, s.During.Persistence.Lag.P99 = 29, 140
	s.Relate()
	if !s.Interference.Met {
		t.Errorf("within the target: %+v", s.Interference)
	}
	// ... but not when the storm was over before the sale was.
	s.Interference.Overlap = 0.4
	s.Relate()
	if s.Interference.Met || !strings.Contains(s.Interference.Text, "the storm covered only 40% of the sale") {
		t.Errorf("a partial overlap: %+v", s.Interference)
	}
	for _, tc := range []struct {
		name   string
		change func(s *Storm)
		want   string
	}{
		{"not all expired", func(s *Storm) { s.Expiry.Complete, s.Expiry.Expired = false, 12_000 }, "NOT EXPIRED: 12,000 of 20,000 orders expired"},
		{"books", func(s *Storm) { s.Expiry.Books.Balanced, s.Expiry.Books.Remaining = false, 19_999 }, "BOOKS: initial 20,000 ≠ remaining 19,999"},
		{"a sale failed", func(s *Storm) { s.Sale.OK, s.Sale.Verdict = false, "FAIL: LOST: 3 accepted orders are not in postgres" }, "storm-sale: FAIL: LOST"},
	} {
		s := sampleStorm()
		tc.change(s)
		s.Judge(false)
		if s.OK || !strings.Contains(s.Verdict, tc.want) {
			t.Errorf("%s: %v %q, want %q", tc.name, s.OK, s.Verdict, tc.want)
		}
	}
}

func TestStormText(t *testing.T) {
	res := &Result{Storm: sampleStorm()}
	if got := len(res.AllRuns()); got != 3 {
		t.Errorf("AllRuns: %d", got)
	}
	var b bytes.Buffer
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"seckill-bench --expiry-storm 20,000: campaign 10 of 20,000 units with a 20.0 s pay window",
		"alone", "storm-sale", "during", "lag ACCEPTED → row: p50 / p99", "33.3 ms / 100 ms",
		"Redis memory (INFO used_memory): 1.2 MB before the sale, 11.0 MB once its 20,000 orders awaited payment: +490.0 bytes per awaiting order",
		"asynq:{orders}:t:expire:*", "≈6.7 MB", "+336.0",
		"expiry: 20,000 orders from the first pay_by (10:00:00.000) to the last EXPIRED in Postgres (10:00:35.714) in 35.7 s: 560 expired/s, 610 in the busiest second",
		"pool of 20): in use (active or idle in a transaction) max 20 (100%), mean 19.1 (96%)", "waiting on a lock max 19, mean 17.5",
		"CPU µs per expired order over the expiry, the second sale's load aside (30.0 s): server 300 ±1.18",
		"interference: the second campaign's sale during the storm: p99 45.0 ms vs 20.0 ms alone (2.25×), persistence lag p99 2.50 s vs 100 ms alone (25.00×); target ≤ 1.5× NOT MET",
		"verdict expiry storm: OK",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := res.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Storm struct {
			Memory struct {
				PerOrder float64 `json:"bytes_per_awaiting_order"`
			} `json:"redis_memory"`
			Expiry struct {
				PerS float64 `json:"expired_per_s"`
			} `json:"expiry"`
			Interference struct {
				P99Ratio float64 `json:"p99_ratio"`
			} `json:"interference"`
			During struct {
				Persistence struct {
					Lag struct {
						P99 float64 `json:"p99_ms"`
					} `json:"lag"`
				} `json:"persistence"`
			} `json:"during"`
		} `json:"expiry_storm"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if s := got.Storm; s.Memory.PerOrder != 490 || s.Expiry.PerS != 560 || s.Interference.P99Ratio != 2.25 || s.During.Persistence.Lag.P99 != 2500 {
		t.Errorf("JSON: %s", b.String())
	}
}
