package admission_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// The admit script's limits are a GCRA written in Lua, so that a refusal
// stays one round trip: a burst's refusals cost Redis one call each, not two.
// TestGCRAAgreesWithRedisRate holds it to github.com/go-redis/redis_rate,
// the library it stands in for: the same attempts, at the same instants,
// through both, must be allowed or denied alike.
//
// Both take the time from Redis (TIME), which a test cannot stop, so each
// attempt goes to both one right after the other, between two readings of
// TIME, and both start it from the same state: after each attempt the
// library's state (its theoretical arrival time) is copied into ours. From
// that state follows the instant from which the attempt is allowed; when it
// falls between the two readings (widened by a margin) the two may fairly
// differ, as they read the clock microseconds apart, and the attempt is not
// compared. When both allowed it, their new states must agree within the
// time between the readings. The test requires that most attempts are
// compared and that both answers occur.
func TestGCRAAgreesWithRedisRate(t *testing.T) {
	t.Parallel()
	const margin = 0.002 // seconds
	limits := []struct {
		rate   int // attempts per period
		period time.Duration
		burst  int
	}{
		{10, time.Second, 1},
		{5, time.Second, 4},
		{7, time.Second, 3},
		{3, 500 * time.Millisecond, 2},
	}
	for _, lim := range limits {
		for _, cell := range []string{"user", "address"} {
			t.Run(fmt.Sprintf("%d per %s burst %d %s", lim.rate, lim.period, lim.burst, cell), func(t *testing.T) {
				t.Parallel()
				rdb, prefix := testenv.MustOpenRedis(t)
				perSecond := float64(lim.rate) / lim.period.Seconds()
				opts := admission.Options{Prefix: prefix, SoldOutTTL: -1}
				if cell == "user" {
					opts.UserRate, opts.UserBurst = perSecond, lim.burst
				} else {
					opts.AddressRate, opts.AddressBurst = perSecond, lim.burst
				}
				a := admission.New(rdb, opts)
				mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(1, 100000)})
				lib := redis_rate.NewLimiter(rdb)
				libLimit := redis_rate.Limit{Rate: lim.rate, Period: lim.period, Burst: lim.burst}
				interval := lim.period / time.Duration(lim.rate)
				span := interval * time.Duration(lim.burst)

				ctx := seckill.NewContextWithClientAddr(context.Background(), "198.51.100.7")
				rng := rand.New(rand.NewPCG(uint64(lim.rate), uint64(lim.burst)))
				libKey := "rate:" + prefix + "diff"
				limitKey := func(a *admission.Admitter, user int64) string {
					if cell == "user" {
						return admission.UserLimitKey(a, 1, user)
					}
					return admission.AddressLimitKey(a, 1, "198.51.100.7")
				}
				if cell == "user" {
					// The attempt that admits takes nothing from the user's
					// cell: make the user a buyer first, so that every
					// attempt compared is one that takes.
					if o, _, err := a.Admit(ctx, 1, 42, seckill.Ticket{}); err != nil || o != seckill.OutcomeAccepted {
						t.Fatalf("first admission: %s %v", o, err)
					}
					if n := rdb.Exists(ctx, limitKey(a, 42)).Val(); n != 0 {
						t.Fatalf("the admission wrote the user's limit cell")
					}
				}
				var compared, allowed, denied, borderline int
				for i := range 60 {
					// Bursts of quick attempts and pauses long enough to refill.
					if rng.IntN(5) == 0 {
						time.Sleep(time.Duration(rng.Int64N(int64(2 * span))))
					} else {
						time.Sleep(time.Duration(rng.Int64N(int64(interval / 4))))
					}
					user := int64(42)
					if cell == "address" {
						user = int64(i + 1)
					}
					// The instant from which redis_rate allows this attempt,
					// in seconds since its epoch (2017-01-01), from its state.
					from := math.Inf(-1)
					if tat, err := rdb.Get(ctx, libKey).Float64(); err == nil {
						from = tat + interval.Seconds() - span.Seconds()
					}
					t0 := redisNow(t, rdb)
					o, _, err := a.Admit(ctx, 1, user, seckill.Ticket{})
					if err != nil {
						t.Fatal(err)
					}
					res, err := lib.Allow(context.Background(), prefix+"diff", libLimit)
					if err != nil {
						t.Fatal(err)
					}
					t1 := redisNow(t, rdb)
					ours := o != seckill.OutcomeRateLimited
					theirs := res.Allowed > 0
					libTAT, libErr := rdb.Get(ctx, libKey).Float64()
					ourTAT, ourErr := rdb.Get(ctx, limitKey(a, user)).Int64()
					if from > t0-margin && from < t1+margin {
						borderline++
					} else {
						compared++
						if theirs {
							allowed++
						} else {
							denied++
						}
						if ours != theirs {
							t.Errorf("attempt %d: admit script allowed=%v (%s), redis_rate allowed=%v (allowed from %.6f, attempt in [%.6f, %.6f])",
								i, ours, o, theirs, from, t0, t1)
						}
						// Our key expires at its state; the library's
						// lingers up to a second longer: either means
						// "nothing owed".
						expired := ourErr == redis.Nil && libErr == nil && libTAT <= redisNow(t, rdb)+t1-t0+1e-3
						if ours && theirs && !expired && (libErr != nil || ourErr != nil ||
							math.Abs(float64(ourTAT)/1e6-1483228800-libTAT) > t1-t0+1e-5) {
							t.Errorf("attempt %d: new state %d µs (%v), redis_rate's %.6f s since 2017 (%v); attempt in [%.6f, %.6f], now %.6f",
								i, ourTAT, ourErr, libTAT, libErr, t0, t1, redisNow(t, rdb))
						}
					}
					// The next attempt starts from the library's state.
					if libErr != nil {
						rdb.Del(ctx, limitKey(a, user))
					} else {
						next := int64(math.Round((libTAT + 1483228800) * 1e6))
						rdb.Set(ctx, limitKey(a, user), next, time.Minute)
					}
				}
				if compared < 40 || allowed == 0 || denied == 0 {
					t.Errorf("compared %d attempts (%d allowed, %d denied), %d near a boundary: too few to tell", compared, allowed, denied, borderline)
				}
			})
		}
	}
}

// redisNow is Redis's clock in seconds since redis_rate's epoch,
// 2017-01-01 UTC.
func redisNow(t *testing.T, rdb redis.UniversalClient) float64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return float64(now.UnixMicro()-1483228800*1e6) / 1e6
}
