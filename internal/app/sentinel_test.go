package app

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"seckill/internal/testenv"
)

// onSentinel points a test server at a private Sentinel deployment (its
// default durability: a replica confirms each admission), with a short
// Redis timeout, no per-user limit and a quick reconciler.
func onSentinel(s *testenv.RedisSentinel) envOption {
	return func(m map[string]string) {
		delete(m, "SECKILL_REDIS_URL")
		m["SECKILL_REDIS_SENTINEL_ADDRS"] = strings.Join(s.Addrs(), ",")
		m["SECKILL_REDIS_SENTINEL_MASTER"] = testenv.SentinelMaster
		m["SECKILL_REDIS_TIMEOUT"] = "1s"
		m["SECKILL_USER_RATE"] = "0"
		m["SECKILL_RECONCILE_INTERVAL"] = "250ms"
	}
}

// TestSentinelPurchase buys through an App configured with Sentinel
// (SECKILL_REDIS_SENTINEL_ADDRS and SECKILL_REDIS_SENTINEL_MASTER) and its
// default of one replica to confirm each admission: the buyer hears
// ACCEPTED once the replica holds the admission, a subscription follows
// the order from QUEUED to CREATED, and the worker (Asynq on the same
// client) persists it.
func TestSentinelPurchase(t *testing.T) {
	s := testenv.StartSentinel(t)
	e := newTestEnv(t, "", onSentinel(s))
	if n := e.app.Config.RedisMinReplicas; n != 1 {
		t.Fatalf("SECKILL_REDIS_MIN_REPLICAS defaults to %d on Sentinel, want 1", n)
	}
	voucher := e.createCampaign(5)
	token := e.token(81, false)
	p, err := e.buy(nil, token, voucher)
	if err != nil || p.Outcome != "ACCEPTED" || p.OrderID == nil {
		t.Fatalf("buy: %+v, %v; want ACCEPTED", p, err)
	}
	if n := testutil.ToFloat64(e.app.Metrics.Unreplicated); n != 0 {
		t.Errorf("%.0f admissions went without a replica's confirmation; want the replica to confirm", n)
	}
	replica := redis.NewClient(&redis.Options{Addr: s.Servers[1].Addr()})
	defer replica.Close()
	if ok, err := replica.SIsMember(e.ctx, fmt.Sprintf("seckill:{v%d}:buyers", voucher), 81).Result(); err != nil || !ok {
		t.Errorf("the replica does not hold the buyer of an ACCEPTED admission (%v)", err)
	}

	events := e.follow(t, token, *p.OrderID)
	if st := <-events; st != "QUEUED" {
		t.Fatalf("first event: %q, want QUEUED", st)
	}
	e.worker()
	select {
	case st := <-events:
		if st != "CREATED" {
			t.Fatalf("second event: %q, want CREATED", st)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the subscription never heard that the order was persisted")
	}
	if n, pg, r := e.rows(voucher), e.pgStock(voucher), e.remaining(voucher); n != 1 || pg != 4 || r != 4 {
		t.Fatalf("rows %d, Postgres stock %d, Redis stock %d; want 1, 4, 4", n, pg, r)
	}
}

// TestSentinelMasterKilled kills -9 the master in the middle of a steady
// sale: the sentinels promote the replica, the clients (API, worker, Asynq,
// status bus) follow it, every campaign is stopped and rebuilt from
// Postgres (the promoted server is another server), and sales must resume
// on every campaign within the sentinels' down-after period plus a few
// seconds. The promoted
// master has no replica left, so each admission from then on waits out
// SECKILL_REDIS_WAIT_TIMEOUT and is written to Postgres before its answer.
// With SECKILL_LONG_FAULTS=1 the killed server is started again and the
// test waits until the sentinels have made it a replica of the new master
// (they wait about 8 s before they reconfigure a returning old master).
func TestSentinelMasterKilled(t *testing.T) {
	bound := testenv.SentinelDownAfter + 8*time.Second
	restart := os.Getenv("SECKILL_LONG_FAULTS") != ""
	var failover time.Duration
	sentinel := testenv.StartSentinel(t)
	cost := saleOn(t, onSentinel(sentinel), func(s *clusterSale) {
		s.sentinel = sentinel
		// The load goes on 5 s after the failover, so that every campaign
		// (each rebuilt from Postgres) has a purchase to resume with: CI
		// saw one campaign not resume within the default 1.5 s at a load
		// average of 13.
		s.after = 5 * time.Second
	}, func(s *clusterSale) {
		affected := map[int64]bool{}
		for _, v := range s.vouchers {
			affected[v] = true
		}
		s.setAffected(affected)
		victim := s.sentinel.Master()
		began := time.Now()
		s.masterKilled = true
		victim.Kill()
		s.sentinel.WaitFailover(victim, bound)
		failover = time.Since(began)
		if restart {
			victim.Start() // the sentinels make it a replica of the promoted one
			s.sentinel.WaitReplica(victim, 30*time.Second)
		}
	})
	what := "kill -9 of the Sentinel master"
	if restart {
		what += ", restarted after the failover"
	}
	t.Logf("fault cost (%s): %s; the sentinels promoted the replica %s after the kill",
		what, cost, failover.Round(time.Millisecond))
	// Within the bound, or soon after the promotion when the sentinels
	// themselves take longer, as they can beside the whole suite.
	if want := max(bound, failover+4*time.Second); cost.lastResumed < 0 || cost.lastResumed > want {
		t.Errorf("sales resumed on every campaign after %s (-1: not on all), want within %s", cost.lastResumed, want)
	}
}
