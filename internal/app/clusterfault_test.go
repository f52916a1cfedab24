package app

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// TestClusterMasterKilled runs a steady sale of several campaigns, spread
// over the three masters of a private Redis Cluster, across two API servers
// and a worker, with the default durability of a cluster (an admission is
// ACCEPTED once a replica holds it). It kills -9 the master of one
// campaign; its replica takes over, and sales of that master's campaigns
// must resume within the cluster-node-timeout plus a few seconds. Then the
// dead node is started again (it rejoins as a replica) and the sale goes
// on. Afterwards every order a buyer was told ACCEPTED must be CREATED for
// that buyer, none oversold, nobody holding two, Redis agreeing with
// Postgres. The test reports what the fault cost.
func TestClusterMasterKilled(t *testing.T) {
	cluster := testenv.StartCluster(t)
	api1 := newTestEnv(t, "", func(m map[string]string) {
		delete(m, "SECKILL_REDIS_URL")
		m["SECKILL_REDIS_CLUSTER_ADDRS"] = strings.Join(cluster.Addrs(), ",")
		m["SECKILL_REDIS_TIMEOUT"] = "1s"
		m["SECKILL_USER_RATE"] = "0"
		m["SECKILL_RECONCILE_INTERVAL"] = "250ms"
	})
	api2 := api1.peer()
	worker := api1.peer()
	worker.worker()
	rctx, stopReconciler := context.WithCancel(worker.ctx)
	var rwg sync.WaitGroup
	rwg.Go(func() { worker.app.RunReconciler(rctx) })
	defer func() { stopReconciler(); rwg.Wait() }()

	const campaigns, stock = 6, 100_000
	var vouchers []int64
	onVictim := map[int64]bool{}
	for range campaigns {
		vouchers = append(vouchers, api1.createCampaign(stock))
	}
	victim := cluster.MasterOf(fmt.Sprintf("seckill:{v%d}:campaign", vouchers[0]))
	for _, v := range vouchers {
		onVictim[v] = cluster.MasterOf(fmt.Sprintf("seckill:{v%d}:campaign", v)) == victim
	}

	const buyers = 16
	var (
		mu        sync.Mutex
		answers   = map[int64][]answer{}
		faultAt   time.Time
		resumedAt time.Time // first ACCEPTED on the victim's campaigns after the fault
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: buyers}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for b := range buyers {
		api := []*testEnv{api1, api2}[b%2]
		wg.Go(func() {
			for k := int64(0); ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				user := int64(1_000_000+b*100_000) + k
				voucher := vouchers[int(k)%len(vouchers)]
				began := time.Now()
				p, err := api.buy(client, api.token(user, false), voucher)
				a := answer{user: user, outcome: p.Outcome, took: time.Since(began)}
				if err != nil {
					a.err = errorCode(err)
				} else if p.OrderID != nil {
					a.orderID, _ = strconv.ParseInt(*p.OrderID, 10, 64)
				}
				mu.Lock()
				answers[voucher] = append(answers[voucher], a)
				if a.outcome == "ACCEPTED" && onVictim[voucher] && !faultAt.IsZero() && began.After(faultAt) && resumedAt.IsZero() {
					resumedAt = time.Now()
				}
				mu.Unlock()
				if a.err != "" {
					time.Sleep(20 * time.Millisecond) // a client backing off
				}
			}
		})
	}

	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	faultAt = time.Now()
	mu.Unlock()
	victim.Kill()
	// Sales on the victim's campaigns must resume within the node timeout
	// plus a few seconds; wait a little longer than that before judging.
	bound := testenv.ClusterNodeTimeout + 8*time.Second
	for deadline := time.Now().Add(bound + 5*time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		done := !resumedAt.IsZero()
		mu.Unlock()
		if done {
			break
		}
	}
	time.Sleep(time.Second)
	victim.Start() // back as a replica of the node that took over
	cluster.WaitHealthy(30 * time.Second)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	loadEnd := time.Now()

	// Every accepted order persisted: Postgres holds as many orders as
	// ACCEPTED answers, per campaign.
	want := map[int64]int{}
	for v, as := range answers {
		for _, a := range as {
			if a.outcome == "ACCEPTED" {
				want[v]++
			}
		}
	}
	eventually(t, 60*time.Second, "every accepted order in Postgres", func() bool {
		for _, v := range vouchers {
			if api1.rows(v) != want[v] {
				return false
			}
		}
		return true
	})
	persistedAfter := time.Since(loadEnd)
	eventually(t, 30*time.Second, "Redis agrees with Postgres", func() bool {
		for _, v := range vouchers {
			if api1.remaining(v) != api1.pgStock(v) {
				return false
			}
		}
		return true
	})

	attempts, accepted, errs := 0, 0, map[string]int{}
	var slowest time.Duration
	for _, v := range vouchers {
		created, failed := checkSale(t, api1, v, stock, answers[v])
		if failed > 0 {
			t.Errorf("voucher %d: %d ACCEPTED orders FAILED; with a replica confirming each, none may be lost", v, failed)
		}
		accepted += created + failed
		for _, a := range answers[v] {
			attempts++
			if a.err != "" {
				errs[a.err]++
				slowest = max(slowest, a.took)
			}
		}
	}
	for code, n := range errs {
		if code != seckill.EUNAVAILABLE {
			t.Errorf("%d purchases answered %s; want UNAVAILABLE (retryable) while a master is away", n, code)
		}
	}
	if resumedAt.IsZero() {
		t.Fatalf("sales on the killed master's campaigns did not resume within %s", bound+5*time.Second)
	}
	resumed := resumedAt.Sub(faultAt)
	if resumed > bound {
		t.Errorf("sales on the killed master's campaigns resumed after %s, want within %s", resumed.Round(time.Millisecond), bound)
	}
	t.Logf("fault cost (kill -9 of a master, %d of %d campaigns on it): %d attempts, %d accepted, errors %v (slowest %s); "+
		"sales on its campaigns resumed %s after the kill; every accepted order persisted %s after the load ended",
		countTrue(onVictim), len(vouchers), attempts, accepted, errs, slowest.Round(time.Millisecond),
		resumed.Round(time.Millisecond), persistedAfter.Round(time.Millisecond))
}

func countTrue(m map[int64]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}
