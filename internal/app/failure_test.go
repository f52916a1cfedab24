package app

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/internal/seckill"
)

// TestPermanentFailureReturnsStock: Postgres cannot take an order Redis
// admitted (here: Postgres has no stock left for it). The order becomes
// FAILED with a reason, the subscriber hears it, and the unit and the buyer
// slot go back to Redis.
func TestPermanentFailureReturnsStock(t *testing.T) {
	e := newTestEnv(t, "")
	voucher := e.createCampaign(5)
	if _, err := e.app.DB.ExecContext(e.ctx, "UPDATE seckill_campaign SET stock = 0 WHERE voucher_id = ?", voucher); err != nil {
		t.Fatal(err)
	}
	user := asUser(e.ctx, 88, false)
	res, err := e.app.Purchases.Purchase(user, voucher)
	if err != nil || res.Outcome != seckill.OutcomeAccepted {
		t.Fatalf("purchase: %+v %v", res, err)
	}
	events, err := e.app.Purchases.WatchOrder(user, res.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Status != seckill.OrderQueued {
		t.Fatalf("first event %+v, want QUEUED", ev)
	}
	if r := e.remaining(voucher); r != 4 {
		t.Fatalf("remaining %d after admission, want 4", r)
	}
	e.worker()
	select {
	case ev := <-events:
		if ev.Status != seckill.OrderFailed || ev.Reason == "" {
			t.Fatalf("event %+v, want FAILED with a reason", ev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no FAILED event")
	}
	if _, open := <-events; open {
		t.Fatal("stream not closed after FAILED")
	}
	o, err := e.app.Purchases.Order(user, res.OrderID)
	if err != nil || o.Status != seckill.OrderFailed || o.FailureReason == "" {
		t.Fatalf("order after failure: %+v %v", o, err)
	}
	if r := e.remaining(voucher); r != 5 {
		t.Fatalf("remaining %d after failure, want the unit back (5)", r)
	}
	// The buyer slot is free again: the same user may try once more.
	again, err := e.app.Purchases.Purchase(user, voucher)
	if err != nil || again.Outcome != seckill.OutcomeAccepted || again.OrderID == res.OrderID {
		t.Fatalf("second purchase after failure: %+v %v", again, err)
	}
	if n := e.rows(voucher); n != 0 {
		t.Fatalf("%d rows, want none", n)
	}
}

// TestAddVoucherValidationChangesNothing runs each invalid input through the
// real stack and checks that nothing reached Postgres or Redis.
func TestAddVoucherValidationChangesNothing(t *testing.T) {
	e := newTestEnv(t, "")
	now := time.Now()
	valid := func() map[string]any {
		return map[string]any{"shopId": "1", "title": "t", "payValue": 1, "actualValue": 2, "stock": 10,
			"beginTime": now.Format(time.RFC3339), "endTime": now.Add(time.Hour).Format(time.RFC3339)}
	}
	tests := []struct {
		field string
		set   func(m map[string]any)
	}{
		{"title", func(m map[string]any) { m["title"] = "" }},
		{"title", func(m map[string]any) { m["title"] = string(make([]byte, 256)) }},
		{"stock", func(m map[string]any) { m["stock"] = 0 }},
		{"stock", func(m map[string]any) { m["stock"] = 10_000_001 }},
		{"payValue", func(m map[string]any) { m["payValue"] = -1 }},
		{"actualValue", func(m map[string]any) { m["actualValue"] = 0 }},
		{"endTime", func(m map[string]any) { m["endTime"] = m["beginTime"] }},
		{"endTime", func(m map[string]any) {
			m["beginTime"] = now.Add(-2 * time.Hour).Format(time.RFC3339)
			m["endTime"] = now.Add(-time.Hour).Format(time.RFC3339)
		}},
		{"shopId", func(m map[string]any) { m["shopId"] = "shop" }},
	}
	admin := e.token(1, true)
	for i, tt := range tests {
		t.Run(strconv.Itoa(i)+"_"+tt.field, func(t *testing.T) {
			in := valid()
			tt.set(in)
			res, err := e.gql(nil, admin, `mutation($in: AddSeckillVoucherInput!) { addSeckillVoucher(input: $in) { id } }`,
				map[string]any{"in": in}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.code() != seckill.EINVALID || res.Errors[0].Extensions["field"] != tt.field {
				t.Fatalf("errors %+v, want INVALID_INPUT on %s", res.Errors, tt.field)
			}
		})
	}
	if n, err := e.app.DB.NewSelect().Table("voucher").Count(e.ctx); err != nil || n != 0 {
		t.Fatalf("%d vouchers after invalid inputs (%v), want 0", n, err)
	}
	if keys, err := e.app.Redis.Keys(e.ctx, "seckill:{v*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("Redis keys after invalid inputs: %v %v", keys, err)
	}
}

// TestAuthRules checks each rule through the real HTTP stack.
func TestAuthRules(t *testing.T) {
	e := newTestEnv(t, "")
	e.worker()
	voucher := e.createCampaign(5)
	owner, other, admin := e.token(11, false), e.token(12, false), e.token(1, true)
	p, err := e.buy(nil, owner, voucher)
	if err != nil || p.OrderID == nil {
		t.Fatalf("buy: %+v %v", p, err)
	}
	orderQ := `query($id: ID!) { order(id: $id) { id userId status } }`
	vars := map[string]any{"id": *p.OrderID}

	tests := []struct {
		name, token, query string
		vars               map[string]any
		wantCode           string
		wantData           string
	}{
		{"anonymous purchase", "", `mutation { seckill(voucherId: "` + strconv.FormatInt(voucher, 10) + `") { outcome } }`, nil, "UNAUTHENTICATED", ""},
		{"anonymous myOrders", "", `{ myOrders { id } }`, nil, "UNAUTHENTICATED", ""},
		{"anonymous order", "", orderQ, vars, "UNAUTHENTICATED", ""},
		{"user adds voucher", owner, `mutation { addSeckillVoucher(input: {shopId: "1", title: "x", payValue: 1, actualValue: 1, stock: 1, beginTime: "2030-01-01T00:00:00Z", endTime: "2030-01-02T00:00:00Z"}) { id } }`, nil, "FORBIDDEN", ""},
		{"owner sees order", owner, orderQ, vars, "", `"userId":"11"`},
		{"other user does not", other, orderQ, vars, "", `{"order":null}`},
		{"admin sees any", admin, orderQ, vars, "", `"userId":"11"`},
		{"anyone reads vouchers", "", `{ vouchers { id } }`, nil, "", `"id":"` + strconv.FormatInt(voucher, 10) + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.gql(nil, tt.token, tt.query, tt.vars, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.code() != tt.wantCode {
				t.Fatalf("code %q, want %q (%+v)", res.code(), tt.wantCode, res.Errors)
			}
			if tt.wantData != "" && !strings.Contains(string(res.Data), tt.wantData) {
				t.Fatalf("data %s does not contain %s", res.Data, tt.wantData)
			}
		})
	}
	// A token signed with another secret is refused outright.
	res, err := e.gql(nil, forgedToken(t), `{ myOrders { id } }`, nil, nil)
	if err != nil || res.code() != "UNAUTHENTICATED" {
		t.Fatalf("forged token: %+v %v", res, err)
	}
}

// TestSecondOrderOfAUserFailsAndKeepsTheSlot: Redis forgot a buyer (say, a
// partial data loss) and admitted them again; Postgres refuses the second
// order, the unit goes back, and the user stays a buyer.
func TestSecondOrderOfAUserFailsAndKeepsTheSlot(t *testing.T) {
	e := newTestEnv(t, "")
	e.worker()
	voucher := e.createCampaign(5)
	user := asUser(e.ctx, 91, false)
	first, err := e.app.Purchases.Purchase(user, voucher)
	if err != nil || first.Outcome != seckill.OutcomeAccepted {
		t.Fatalf("first purchase: %+v %v", first, err)
	}
	eventually(t, 20*time.Second, "first order persisted", func() bool { return e.rows(voucher) == 1 })
	if err := e.app.Redis.SRem(e.ctx, "seckill:{v"+strconv.FormatInt(voucher, 10)+"}:buyers", 91).Err(); err != nil {
		t.Fatal(err)
	}
	second, err := e.app.Purchases.Purchase(user, voucher)
	if err != nil || second.Outcome != seckill.OutcomeAccepted {
		t.Fatalf("second purchase after Redis forgot the buyer: %+v %v", second, err)
	}
	eventually(t, 20*time.Second, "second order failed", func() bool {
		o, err := e.app.Purchases.Order(user, second.OrderID)
		return err == nil && o.Status == seckill.OrderFailed && o.FailureReason == seckill.FailureUserHasOrder
	})
	if r := e.remaining(voucher); r != 4 {
		t.Fatalf("remaining %d, want 4 (the failed order's unit back)", r)
	}
	third, err := e.app.Purchases.Purchase(user, voucher)
	if err != nil || third.Outcome != seckill.OutcomeAlreadyPurchased {
		t.Fatalf("third purchase: %+v %v, want ALREADY_PURCHASED", third, err)
	}
	if n := e.rows(voucher); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}
