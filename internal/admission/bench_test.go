package admission_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

// BenchmarkAdmit measures the accepted path: every call is a new user, so
// every call is one EVALSHA that writes. Many goroutines per core keep many
// requests in flight, as an API server does.
//
// "pipelined" is the Admitter as it runs; "alone" sends every EVALSHA by
// itself, as before pipelining.
func BenchmarkAdmit(b *testing.B) {
	for _, bm := range []struct {
		name  string
		setup func(*admission.Admitter)
	}{
		{"pipelined", func(*admission.Admitter) {}},
		{"alone", admission.Unpipelined},
	} {
		b.Run(bm.name, func(b *testing.B) {
			a, _ := newAdmitter(b, admission.Options{})
			bm.setup(a)
			benchAdmits(b, a, 1e12, seckill.OutcomeAccepted)
		})
	}
}

// BenchmarkAdmitSoldOut measures refusals after the sell-out: "local" is the
// usual path, answered by the process's sold-out mark; "redis" turns the
// mark off, so each refusal is one EVALSHA.
func BenchmarkAdmitSoldOut(b *testing.B) {
	for _, bm := range []struct {
		name string
		ttl  time.Duration // 0: the default; negative turns the mark off
	}{
		{"local", 0},
		{"redis", -1},
	} {
		b.Run(bm.name, func(b *testing.B) {
			a, _ := newAdmitter(b, admission.Options{SoldOutTTL: time.Duration(bm.ttl)})
			benchAdmits(b, a, 0, seckill.OutcomeSoldOut)
		})
	}
}

// benchAdmits warms a campaign with stock and admits a new user per call
// from 32 goroutines per core, each call expecting want.
func benchAdmits(b *testing.B, a *admission.Admitter, stock int64, want seckill.Outcome) {
	const voucherID = 1
	mustWarm(b, a, seckill.WarmState{Campaign: liveCampaign(voucherID, stock)})
	ctx := context.Background()
	var users atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o, _, err := a.Admit(ctx, voucherID, users.Add(1), seckill.Ticket{})
			if err != nil || o != want {
				b.Errorf("admit: %s %v", o, err)
				return
			}
		}
	})
}
