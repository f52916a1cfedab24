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

// BenchmarkAdmitGuarded measures what the shared limits and the challenge
// add to an accepted admission, in one run: "plain" without them, "limit"
// with the shared per-user limit (a GCRA cell written by the script),
// "limit+challenge" also checking a proof-of-work ticket (checked in Go
// before the call, as the Service does, and its nonce marked used).
func BenchmarkAdmitGuarded(b *testing.B) {
	ch := seckill.NewChallenger([]byte("bench secret of at least thirty-two bytes"), time.Hour, time.Hour)
	for _, bm := range []struct {
		name      string
		opts      admission.Options
		challenge bool
	}{
		{"plain", admission.Options{}, false},
		{"limit", admission.Options{UserRate: 5, UserBurst: 10}, false},
		{"limit+challenge", admission.Options{UserRate: 5, UserBurst: 10}, true},
	} {
		b.Run(bm.name, func(b *testing.B) {
			a, _ := newAdmitter(b, bm.opts)
			c := liveCampaign(1, 1e12)
			ticket := func(int64) seckill.Ticket { return seckill.Ticket{} }
			if bm.challenge {
				c.Challenge, c.PoWBits = seckill.ChallengePoW, 1
				ticket = func(u int64) seckill.Ticket {
					iss := ch.Issue(seckill.ChallengePoW, 1, u, 1, nil, time.Now())
					return ch.Check(seckill.ChallengeAnswer{Token: iss.Token, Solution: seckill.SolvePoW(iss.Token, 1)}, 1, u, time.Now())
				}
			}
			benchAdmitsWith(b, a, c, seckill.OutcomeAccepted, ticket)
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
	benchAdmitsWith(b, a, liveCampaign(1, stock), want, func(int64) seckill.Ticket { return seckill.Ticket{} })
}

// benchAdmitsWith warms campaign c and admits a new user per call, with
// the ticket ticket makes for them.
func benchAdmitsWith(b *testing.B, a *admission.Admitter, c seckill.Campaign, want seckill.Outcome, ticket func(user int64) seckill.Ticket) {
	voucherID := c.VoucherID
	mustWarm(b, a, seckill.WarmState{Campaign: c})
	ctx := context.Background()
	var users atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := users.Add(1)
			o, _, err := a.Admit(ctx, voucherID, u, ticket(u))
			if err != nil || o != want {
				b.Errorf("admit: %s %v", o, err)
				return
			}
		}
	})
}
