package admission_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

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

// BenchmarkAdmitShards measures the accepted path on a campaign of 1 and of
// 3 stock shards (every shard holds plenty, so no unit moves): on one node
// the shards share one core, so a shard costs about what a campaign of one
// does; on a cluster they spread over masters.
func BenchmarkAdmitShards(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			a, _ := newAdmitter(b, admission.Options{})
			c := liveCampaign(1, 1e12)
			c.Shards = n
			benchAdmitsWith(b, a, c, seckill.OutcomeAccepted, func(int64) seckill.Ticket { return seckill.Ticket{} })
		})
	}
}

// BenchmarkAdmitSoldOut measures refusals after the sell-out: "local" is the
// usual path, answered by the process's sold-out mark; "redis" turns the
// mark off, so each refusal is one EVALSHA; "redis+limits" the same with
// both shared limits on (never reached), which a sold-out refusal neither
// reads nor writes.
func BenchmarkAdmitSoldOut(b *testing.B) {
	for _, bm := range []struct {
		name   string
		ttl    time.Duration // 0: the default; negative turns the mark off
		limits bool
	}{
		{"local", 0, false},
		{"redis", -1, false},
		{"redis+limits", -1, true},
	} {
		b.Run(bm.name, func(b *testing.B) {
			opts := admission.Options{SoldOutTTL: time.Duration(bm.ttl)}
			if bm.limits {
				opts.UserRate, opts.UserBurst, opts.AddressRate, opts.AddressBurst = 1e6, 1e6, 1e6, 1e6
			}
			a, _ := newAdmitter(b, opts)
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
	benchAdmitsBefore(b, a, c, want, ticket, 32, nil)
}

// benchAdmitsBefore is benchAdmitsWith from parallelism goroutines per core
// (0: one goroutine in all), calling before ahead of each admission.
func benchAdmitsBefore(b *testing.B, a *admission.Admitter, c seckill.Campaign, want seckill.Outcome,
	ticket func(user int64) seckill.Ticket, parallelism int, before func(ctx context.Context, user int64) error) {
	voucherID := c.VoucherID
	mustWarm(b, a, seckill.WarmState{Campaign: c})
	ctx := seckill.NewContextWithClientAddr(context.Background(), "198.51.100.7")
	var users atomic.Int64
	one := func() bool {
		u := users.Add(1)
		if before != nil {
			if err := before(ctx, u); err != nil {
				b.Error(err)
				return false
			}
		}
		o, _, err := a.Admit(ctx, voucherID, u, ticket(u))
		if err != nil || o != want {
			b.Errorf("admit: %s %v", o, err)
			return false
		}
		return true
	}
	b.ReportAllocs()
	if parallelism == 0 {
		for b.Loop() {
			if !one() {
				return
			}
		}
		return
	}
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !one() {
				return
			}
		}
	})
}

// BenchmarkAddressLimit measures what checking the per-address limit inside
// the admit script saves against the library it stands in for: "in-script"
// takes the attempt from the address's GCRA cell in the admit step (one
// round trip); "redis_rate" asks github.com/go-redis/redis_rate first and
// then admits (two). The limit is generous, so every attempt passes it and
// is accepted. "serial" is one caller (the latency of one purchase);
// "parallel" 32 goroutines per core (the throughput of a busy instance).
func BenchmarkAddressLimit(b *testing.B) {
	const rate, burst = 1e7, 1000000
	for _, mode := range []struct {
		name        string
		parallelism int
	}{{"serial", 0}, {"parallel", 32}} {
		b.Run(mode.name+"/in-script", func(b *testing.B) {
			a, _ := newAdmitter(b, admission.Options{AddressRate: rate, AddressBurst: burst})
			benchAdmitsBefore(b, a, liveCampaign(1, 1e12), seckill.OutcomeAccepted,
				func(int64) seckill.Ticket { return seckill.Ticket{} }, mode.parallelism, nil)
		})
		b.Run(mode.name+"/redis_rate", func(b *testing.B) {
			a, rdb := newAdmitter(b, admission.Options{})
			lim := redis_rate.NewLimiter(rdb)
			key := admission.Prefix(a) + "bench:198.51.100.7"
			limit := redis_rate.Limit{Rate: rate, Period: time.Second, Burst: burst}
			benchAdmitsBefore(b, a, liveCampaign(1, 1e12), seckill.OutcomeAccepted,
				func(int64) seckill.Ticket { return seckill.Ticket{} }, mode.parallelism,
				func(ctx context.Context, _ int64) error {
					res, err := lim.Allow(ctx, key, limit)
					if err == nil && res.Allowed == 0 {
						err = errors.New("redis_rate refused")
					}
					return err
				})
		})
	}
}
