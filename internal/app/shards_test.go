package app

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"seckill/internal/seckill"
)

// createShardedCampaign creates a campaign of shards stock shards on sale
// now, through the API, with a pay window of payWindow seconds, and checks
// that the API shows its shards.
func (e *testEnv) createShardedCampaign(stock, shards, payWindow int) int64 {
	e.t.Helper()
	var data struct {
		AddSeckillVoucher struct {
			ID      string
			Seckill struct{ Shards int }
		} `json:"addSeckillVoucher"`
	}
	res, err := e.gql(nil, e.token(1, true), `mutation($in: AddSeckillVoucherInput!) { addSeckillVoucher(input: $in) { id seckill { shards } } }`,
		map[string]any{"in": map[string]any{
			"shopId": "1", "title": "sharded", "payValue": 100, "actualValue": 200, "stock": stock, "shards": shards,
			"payWindowSeconds": payWindow,
			"beginTime":        time.Now().Add(-time.Minute).Format(time.RFC3339),
			"endTime":          time.Now().Add(time.Hour).Format(time.RFC3339),
		}}, &data)
	if err != nil || len(res.Errors) > 0 {
		e.t.Fatalf("addSeckillVoucher: %v %+v", err, res)
	}
	if data.AddSeckillVoucher.Seckill.Shards != shards {
		e.t.Fatalf("seckill { shards } = %d, want %d", data.AddSeckillVoucher.Seckill.Shards, shards)
	}
	id, err := strconv.ParseInt(data.AddSeckillVoucher.ID, 10, 64)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// shardUsers returns n user ids from `from` up that fall on shard of shards.
func shardUsers(from int64, n, shard, shards int) []int64 {
	var out []int64
	for u := from; len(out) < n; u++ {
		if seckill.ShardOf(u, shards) == shard {
			out = append(out, u)
		}
	}
	return out
}

// TestShardedSale runs a sale of a campaign of 3 stock shards over two APIs
// and a worker (on the cluster under `make test-cluster`: the shards on
// three masters): 2,000 buyers who fall unevenly on the shards (70/20/10)
// each try twice for 1,500 units (TRY_AGAIN is tried again, and not
// counted): exactly 1,500 ACCEPTED, one per buyer, each in the buyer's
// shard, 1,500 orders, 0 left in Redis and Postgres. Then a buyer cancels
// and a buyer of another shard buys that unit; the rest let their orders
// expire: every unit goes back to its order's shard, the campaign sells
// again, and Redis agrees with Postgres.
func TestShardedSale(t *testing.T) {
	api1 := newTestEnv(t, "", func(m map[string]string) {
		m["SECKILL_USER_RATE"] = "0"
		m["SECKILL_EXPIRY_INTERVAL"] = "200ms"
	})
	api2 := api1.peer()
	worker := api1.peer()
	worker.worker()
	worker.reconciler()
	const stock, shards = 1500, 3
	voucher := api1.createShardedCampaign(stock, shards, 300)

	users := append(append(shardUsers(1, 1400, 0, shards), shardUsers(1, 400, 1, shards)...), shardUsers(1, 200, 2, shards)...)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	var (
		mu         sync.Mutex
		outcomes   = map[string]int{}
		acceptedBy = map[int64]string{}
		ids        = map[string]bool{}
		answers    = map[int64][]string{}
		next       = 0
		wg         sync.WaitGroup
	)
	for w := range 128 {
		api := []*testEnv{api1, api2}[w%2]
		wg.Go(func() {
			for {
				mu.Lock()
				if next == len(users) {
					mu.Unlock()
					return
				}
				u := users[next]
				next++
				mu.Unlock()
				token := api.token(u, false)
				for try := 0; try < 2; {
					p, err := api.buy(client, token, voucher)
					if err != nil {
						t.Errorf("user %d: %v", u, err)
						return
					}
					if p.Outcome == string(seckill.OutcomeTryAgain) {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					try++
					mu.Lock()
					answers[u] = append(answers[u], p.Outcome+" "+deref(p.OrderID))
					outcomes[p.Outcome]++
					if p.Outcome == string(seckill.OutcomeAccepted) {
						if _, dup := acceptedBy[u]; dup {
							t.Errorf("user %d accepted twice", u)
						}
						if ids[*p.OrderID] {
							t.Errorf("order id %s handed out twice", *p.OrderID)
						}
						acceptedBy[u], ids[*p.OrderID] = *p.OrderID, true
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if outcomes["ACCEPTED"] != stock || outcomes["SOLD_OUT"]+outcomes["ALREADY_PURCHASED"] != 2*len(users)-stock {
		n := 0
		for _, u := range users {
			if as := answers[u]; n < 10 && seckill.ShardOf(u, shards) > 0 {
				t.Logf("user %d (shard %d): %v", u, seckill.ShardOf(u, shards), as)
				n++
			}
		}
		t.Fatalf("outcomes %v (%d buyers answered), want %d ACCEPTED and the rest SOLD_OUT or ALREADY_PURCHASED", outcomes, len(answers), stock)
	}
	eventually(t, 60*time.Second, "every order in Postgres", func() bool { return api1.rows(voucher) == stock })
	if pg, r := api1.pgStock(voucher), api2.remaining(voucher); pg != 0 || r != 0 {
		t.Fatalf("Postgres stock %d, Redis %d; want 0, 0", pg, r)
	}
	for u, id := range acceptedBy {
		oid, _ := strconv.ParseInt(id, 10, 64)
		if _, shard, _ := seckill.SplitShardOrderID(oid); shard != seckill.ShardOf(u, shards) {
			t.Fatalf("order %s of user %d in shard %d, want the user's %d", id, u, shard, seckill.ShardOf(u, shards))
		}
	}

	// A buyer of shard 1 or 2 cancels: the unit goes back there; a buyer
	// of shard 0 who has none buys it (it moves to shard 0).
	var canceller int64
	for _, u := range users[1400:] {
		if _, ok := acceptedBy[u]; ok {
			canceller = u
			break
		}
	}
	oid, _ := strconv.ParseInt(acceptedBy[canceller], 10, 64)
	if _, err := api1.app.Life.CancelOrder(asUser(api1.ctx, canceller, false), oid); err != nil {
		t.Fatalf("cancel order %d of user %d: %v", oid, canceller, err)
	}
	eventually(t, 10*time.Second, "the cancelled unit back in Redis", func() bool { return api2.remaining(voucher) == 1 })
	latecomer := shardUsers(100_000, 1, 0, shards)[0]
	var got purchase
	eventually(t, 10*time.Second, "a buyer of another shard to get the returned unit", func() bool {
		p, err := api2.buy(client, api2.token(latecomer, false), voucher)
		got = p
		return err == nil && p.Outcome == string(seckill.OutcomeAccepted)
	})
	eventually(t, 30*time.Second, "the latecomer's order in Postgres", func() bool { return api1.rows(voucher) == stock+1 })

	// Everyone else lets their order expire (their pay window is made to
	// end now): every unit goes back to its shard, and Redis agrees with
	// Postgres.
	if _, err := api1.app.DB.ExecContext(api1.ctx, `UPDATE voucher_order SET pay_by = now() - interval '1 second' WHERE voucher_id = ? AND status = 'CREATED'`, voucher); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "every unpaid order expired and its unit back", func() bool {
		return api1.pgStock(voucher) == stock && api2.remaining(voucher) == stock
	})
	p, err := api1.buy(client, api1.token(users[0], false), voucher)
	if err != nil || p.Outcome != string(seckill.OutcomeAccepted) {
		t.Errorf("a buyer whose order expired buys again: %+v, %v", p, err)
	}
	_ = got
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
