package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/google/go-cmp/cmp"

	"seckill/graph/model"
	"seckill/internal/seckill"
)

// TestBuyFlow walks the happy path with gqlgen's test client: an admin adds
// a voucher, anyone reads it, a user buys it, sees the order, cannot buy it
// twice, and finds it among their orders once it is persisted.
func TestBuyFlow(t *testing.T) {
	e := newTestEnv(t, Options{})
	admin := client.New(e.handler, client.AddHeader("Authorization", "Bearer "+e.token(t, 1, true)))
	buyer := client.New(e.handler, client.AddHeader("Authorization", "Bearer "+e.token(t, 42, false)))
	anon := client.New(e.handler)

	in := validVoucherInput()
	var added struct {
		AddSeckillVoucher struct {
			ID, ShopID, Title, SubTitle, Rules string
			PayValue, ActualValue              int
			Type                               string
			Seckill                            struct {
				Stock, Remaining, Sold int
				BeginTime, EndTime     string
				Status                 string
			}
		}
	}
	admin.MustPost(addVoucherMutation, &added, client.Var("input", in))
	v := added.AddSeckillVoucher
	if v.ID != "1" || v.ShopID != "7" || v.Title != "Half-price hot pot" || v.SubTitle != "weekdays only" ||
		v.Rules != "one per table" || v.PayValue != 5000 || v.ActualValue != 10000 || v.Type != "SECKILL" {
		t.Errorf("added voucher = %+v", v)
	}
	if c := v.Seckill; c.Stock != 3 || c.Remaining != 3 || c.Sold != 0 || c.Status != "ACTIVE" ||
		c.BeginTime != in["beginTime"] || c.EndTime != in["endTime"] {
		t.Errorf("added campaign = %+v", c)
	}

	const voucherQuery = `query($id: ID!) { voucher(id: $id) { id title seckill { stock remaining sold status } } }`
	var got struct {
		Voucher *struct {
			ID, Title string
			Seckill   struct {
				Stock, Remaining, Sold int
				Status                 string
			}
		}
	}
	anon.MustPost(voucherQuery, &got, client.Var("id", v.ID))
	if got.Voucher == nil || got.Voucher.Seckill.Remaining != 3 {
		t.Fatalf("voucher = %+v", got.Voucher)
	}

	const buy = `mutation($id: ID!) { seckill(voucherId: $id) { outcome orderId message } }`
	var bought struct {
		Seckill struct {
			Outcome string
			OrderID *string
			Message string
		}
	}
	buyer.MustPost(buy, &bought, client.Var("id", v.ID))
	if bought.Seckill.Outcome != "ACCEPTED" || bought.Seckill.OrderID == nil ||
		bought.Seckill.Message != seckill.OutcomeAccepted.Message() {
		t.Fatalf("seckill = %+v", bought.Seckill)
	}
	orderID := *bought.Seckill.OrderID
	if want := fmt.Sprint(seckill.OrderID(1, 1)); orderID != want {
		t.Errorf("orderId = %s, want %s", orderID, want)
	}

	buyer.MustPost(buy, &bought, client.Var("id", v.ID))
	if bought.Seckill.Outcome != "ALREADY_PURCHASED" || bought.Seckill.OrderID != nil {
		t.Errorf("second seckill = %+v", bought.Seckill)
	}

	const orderQuery = `query($id: ID!) { order(id: $id) { id voucherId userId status failureReason } }`
	var order struct {
		Order *struct {
			ID, VoucherID, UserID, Status string
			FailureReason                 *string
		}
	}
	buyer.MustPost(orderQuery, &order, client.Var("id", orderID))
	if order.Order == nil || order.Order.Status != "QUEUED" || order.Order.UserID != "42" || order.Order.VoucherID != v.ID {
		t.Fatalf("order = %+v", order.Order)
	}

	// Someone else's order does not exist for them: null, not an error.
	other := client.New(e.handler, client.AddHeader("Authorization", "Bearer "+e.token(t, 43, false)))
	var hidden struct{ Order *struct{ ID string } }
	other.MustPost(orderQuery, &hidden, client.Var("id", orderID))
	if hidden.Order != nil {
		t.Errorf("another user sees order %+v", hidden.Order)
	}

	if err := e.svc.PersistAdmissions(t.Context(), e.queue.take()); err != nil {
		t.Fatal(err)
	}
	var mine struct {
		MyOrders []struct{ ID, Status string }
	}
	buyer.MustPost(`{ myOrders { id status } }`, &mine)
	if diff := cmp.Diff([]struct{ ID, Status string }{{orderID, "CREATED"}}, mine.MyOrders); diff != "" {
		t.Errorf("myOrders (-want +got):\n%s", diff)
	}

	anon.MustPost(voucherQuery, &got, client.Var("id", v.ID))
	if s := got.Voucher.Seckill; s.Stock != 3 || s.Remaining != 2 || s.Sold != 1 {
		t.Errorf("campaign after one sale = %+v", s)
	}

	var list struct{ Vouchers []struct{ ID string } }
	anon.MustPost(`query($after: ID) { vouchers(first: 10, after: $after) { id } }`, &list, client.Var("after", nil))
	if len(list.Vouchers) != 1 || list.Vouchers[0].ID != v.ID {
		t.Errorf("vouchers = %+v", list.Vouchers)
	}
	anon.MustPost(`query($after: ID) { vouchers(after: $after) { id } }`, &list, client.Var("after", v.ID))
	if len(list.Vouchers) != 0 {
		t.Errorf("vouchers after the last = %+v", list.Vouchers)
	}
}

// TestNotFoundIsNull checks that the nullable lookups answer null, not an
// error, for ids that do not exist.
func TestNotFoundIsNull(t *testing.T) {
	e := newTestEnv(t, Options{})
	user := e.token(t, 5, false)
	for _, q := range []string{`{ voucher(id: "999") { id } }`, `{ order(id: "999") { id } }`} {
		status, resp, raw := e.post(t, user, q, nil)
		if status != http.StatusOK || len(resp.Errors) != 0 {
			t.Errorf("%s: status %d: %s", q, status, raw)
		}
		if !strings.Contains(string(resp.Data), ":null") {
			t.Errorf("%s: data = %s, want null", q, resp.Data)
		}
	}
}

func TestAuthRules(t *testing.T) {
	e := newTestEnv(t, Options{})
	voucherID := e.addVoucher(t, validVoucherInput())
	user := e.token(t, 9, false)
	tests := []struct {
		name, token, query string
		vars               map[string]any
		code               string
	}{
		{"anonymous seckill", "", `mutation($id: ID!) { seckill(voucherId: $id) { outcome } }`, map[string]any{"id": voucherID}, seckill.EUNAUTHENTICATED},
		{"anonymous addSeckillVoucher", "", addVoucherMutation, map[string]any{"input": validVoucherInput()}, seckill.EUNAUTHENTICATED},
		{"user addSeckillVoucher", user, addVoucherMutation, map[string]any{"input": validVoucherInput()}, seckill.EFORBIDDEN},
		{"anonymous order", "", `{ order(id: "1") { id } }`, nil, seckill.EUNAUTHENTICATED},
		{"anonymous myOrders", "", `{ myOrders { id } }`, nil, seckill.EUNAUTHENTICATED},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, resp, raw := e.post(t, tc.token, tc.query, tc.vars)
			if status != http.StatusOK {
				t.Errorf("status = %d, want 200", status)
			}
			if err := onlyError(t, resp, raw); err.code() != tc.code {
				t.Errorf("code = %q, want %q: %s", err.code(), tc.code, raw)
			}
		})
	}
	if n := e.store.count(); n != 1 {
		t.Errorf("%d vouchers exist, want only the admin's", n)
	}

	t.Run("invalid token", func(t *testing.T) {
		// A refused token's answer says why when the parser says so (an
		// expired token is renewed, a forged one is not).
		const body = `{"errors":[{"message":"%s","extensions":{"code":"UNAUTHENTICATED"}}]}`
		expired, err := e.tokens.Issue(9, false, time.Nanosecond)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		for _, tc := range []struct{ header, message string }{
			{"Bearer " + user + "x", "invalid token"},
			{"Bearer " + expired, "token expired"},
			{"Basic dXNlcjpw", "invalid token"},
			{"Bearerx", "invalid token"},
			{"Bearer x y", "invalid token"},
		} {
			req, _ := http.NewRequest(http.MethodPost, e.srv.URL, strings.NewReader(`{"query":"{ vouchers { id } }"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", tc.header)
			status, _, raw := send(t, req)
			if status != http.StatusUnauthorized {
				t.Errorf("%.20s...: status = %d, want 401", tc.header, status)
			}
			if diff := cmp.Diff(fmt.Sprintf(body, tc.message), strings.TrimSpace(raw)); diff != "" {
				t.Errorf("%.20s...: body (-want +got):\n%s", tc.header, diff)
			}
		}
	})

	// An empty token (a shell variable that came out empty) is no token:
	// the request is anonymous, and what needs a user says the token is
	// missing.
	t.Run("empty token", func(t *testing.T) {
		for _, header := range []string{"Bearer ", "Bearer", "bearer  ", " "} {
			req, _ := http.NewRequest(http.MethodPost, e.srv.URL, strings.NewReader(`{"query":"{ myOrders { id } }"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", header)
			status, resp, raw := send(t, req)
			if err := onlyError(t, resp, raw); status != http.StatusOK || err.code() != seckill.EUNAUTHENTICATED || err.Message != "missing token" {
				t.Errorf("%q: status %d: %s", header, status, raw)
			}
		}
	})

	t.Run("anonymous read", func(t *testing.T) {
		status, resp, raw := e.post(t, "", `{ vouchers { id } }`, nil)
		if status != http.StatusOK || len(resp.Errors) != 0 {
			t.Errorf("status %d: %s", status, raw)
		}
	})
}

// unavailableTokens is a TokenParser that cannot check any token for now.
type unavailableTokens struct{}

func (unavailableTokens) Authenticate(context.Context, string) (*seckill.User, error) {
	return nil, seckill.Errorf(seckill.EUNAVAILABLE, "sign-in is unavailable for a moment; try again")
}

// TestAuthUnavailable: a token that cannot be checked for now (an identity
// provider's new subject while Postgres is away) is answered 503 with
// Retry-After, not 401: the client's token is not bad.
func TestAuthUnavailable(t *testing.T) {
	srv := httptest.NewServer(NewHandler(Domain{}, unavailableTokens{}, Options{}))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"query":"{ vouchers { id } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer x.y.z")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	const want = `{"errors":[{"message":"sign-in is unavailable for a moment; try again","extensions":{"code":"UNAVAILABLE"}}]}`
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" {
		t.Errorf("status %d, Retry-After %q; want 503, 1", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if diff := cmp.Diff(want, strings.TrimSpace(string(raw))); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestAddSeckillVoucherInvalidInput(t *testing.T) {
	now := time.Now().UTC()
	rfc := func(t time.Time) string { return t.Format(time.RFC3339) }
	tests := []struct {
		name  string
		set   map[string]any
		field string
	}{
		{"empty title", map[string]any{"title": ""}, "title"},
		{"blank title", map[string]any{"title": "   "}, "title"},
		{"title of 256 characters", map[string]any{"title": strings.Repeat("é", 256)}, "title"},
		{"stock 0", map[string]any{"stock": 0}, "stock"},
		{"stock 10,000,001", map[string]any{"stock": 10_000_001}, "stock"},
		{"stock beyond Int", map[string]any{"stock": int64(1) << 40}, "stock"},
		{"payValue -1", map[string]any{"payValue": -1}, "payValue"},
		{"actualValue < payValue", map[string]any{"payValue": 100, "actualValue": 99}, "actualValue"},
		{"endTime = beginTime", map[string]any{"beginTime": rfc(now.Add(time.Hour)), "endTime": rfc(now.Add(time.Hour))}, "endTime"},
		{"endTime < beginTime", map[string]any{"beginTime": rfc(now.Add(2 * time.Hour)), "endTime": rfc(now.Add(time.Hour))}, "endTime"},
		{"endTime in the past", map[string]any{"beginTime": rfc(now.Add(-2 * time.Hour)), "endTime": rfc(now.Add(-time.Hour))}, "endTime"},
		{"beginTime not RFC 3339", map[string]any{"beginTime": "2026-11-29 12:00:00"}, "beginTime"},
		{"endTime empty", map[string]any{"endTime": ""}, "endTime"},
		{"shopId not a number", map[string]any{"shopId": "shop-7"}, "shopId"},
		{"shopId 0", map[string]any{"shopId": "0"}, "shopId"},
		{"shopId negative", map[string]any{"shopId": "-7"}, "shopId"},
		{"shopId beyond int64", map[string]any{"shopId": "9223372036854775808"}, "shopId"},
		{"subTitle of 256 characters", map[string]any{"subTitle": strings.Repeat("x", 256)}, "subTitle"},
		{"NUL in title", map[string]any{"title": "100 off\x00 200"}, "title"},
		{"escape in subTitle", map[string]any{"subTitle": "\x1b[31mred"}, "subTitle"},
		{"newline in title", map[string]any{"title": "100 off\n200"}, "title"},
		{"NUL in rules", map[string]any{"rules": "one\nper\x00user"}, "rules"},
		// A given difficulty is checked as given: 0 is not "the default".
		{"powBits 0", map[string]any{"challenge": "PROOF_OF_WORK", "powBits": 0}, "powBits"},
		{"powBits 33", map[string]any{"challenge": "PROOF_OF_WORK", "powBits": 33}, "powBits"},
		// Likewise a given number of shards: 0 is not "one shard".
		{"shards 0", map[string]any{"shards": 0}, "shards"},
		{"shards -1", map[string]any{"shards": -1}, "shards"},
		{"shards 65", map[string]any{"shards": seckill.MaxShards + 1}, "shards"},
		{"powBits -1 for a quiz", map[string]any{"challenge": "QUIZ", "powBits": -1,
			"quiz": []map[string]any{{"question": "2+2?", "answers": []string{"4"}}}}, "powBits"},
		// A guess must be right at most one time in four.
		{"quiz with three choices", map[string]any{"challenge": "QUIZ",
			"quiz": []map[string]any{{"question": "2+2?", "answers": []string{"4"}, "choices": []string{"3", "4", "5"}}}}, "quiz"},
		{"quiz accepting half its choices", map[string]any{"challenge": "QUIZ",
			"quiz": []map[string]any{{"question": "2+2?", "answers": []string{"4", "four"}, "choices": []string{"3", "4", "four", "5"}}}}, "quiz"},
		{"quiz accepting no choice", map[string]any{"challenge": "QUIZ",
			"quiz": []map[string]any{{"question": "2+2?", "answers": []string{"4"}, "choices": []string{"3", "5", "6", "7"}}}}, "quiz"},
	}
	e := newTestEnv(t, Options{})
	admin := e.token(t, 1, true)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := validVoucherInput()
			for k, v := range tc.set {
				in[k] = v
			}
			status, resp, raw := e.post(t, admin, addVoucherMutation, map[string]any{"input": in})
			if status != http.StatusOK {
				t.Errorf("status = %d, want 200", status)
			}
			err := onlyError(t, resp, raw)
			if err.code() != seckill.EINVALID || err.field() != tc.field {
				t.Errorf("code, field = %q, %q; want %q, %q: %s", err.code(), err.field(), seckill.EINVALID, tc.field, raw)
			}
			if err.Message == "" || strings.Contains(err.Message, "seckill error") {
				t.Errorf("message = %q", err.Message)
			}
			if string(resp.Data) != "null" {
				t.Errorf("data = %s, want null", resp.Data)
			}
		})
	}
	if n, c := e.store.count(), e.adm.count(); n != 0 || c != 0 {
		t.Errorf("invalid inputs created %d vouchers and %d campaigns", n, c)
	}
}

// An omitted powBits takes the default difficulty; a given one in range is
// kept as given.
func TestAddSeckillVoucherPowBits(t *testing.T) {
	e := newTestEnv(t, Options{})
	admin := e.token(t, 1, true)
	const q = `mutation Add($input: AddSeckillVoucherInput!) { addSeckillVoucher(input: $input) { seckill { challenge powBits } } }`
	for _, tc := range []struct {
		name string
		set  map[string]any
		want any // powBits answered
	}{
		{"omitted", map[string]any{"challenge": "PROOF_OF_WORK"}, float64(seckill.DefaultPoWBits)},
		{"null", map[string]any{"challenge": "PROOF_OF_WORK", "powBits": nil}, float64(seckill.DefaultPoWBits)},
		{"1", map[string]any{"challenge": "PROOF_OF_WORK", "powBits": 1}, float64(1)},
		{"32", map[string]any{"challenge": "PROOF_OF_WORK", "powBits": 32}, float64(32)},
		{"for another kind", map[string]any{"challenge": "NONE", "powBits": 12}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := validVoucherInput()
			maps.Copy(in, tc.set)
			status, resp, raw := e.post(t, admin, q, map[string]any{"input": in})
			if status != http.StatusOK || len(resp.Errors) != 0 {
				t.Fatalf("status %d: %s", status, raw)
			}
			var data struct {
				AddSeckillVoucher struct{ Seckill map[string]any }
			}
			if err := json.Unmarshal(resp.Data, &data); err != nil {
				t.Fatal(err)
			}
			if got := data.AddSeckillVoucher.Seckill["powBits"]; got != tc.want {
				t.Errorf("powBits %v, want %v", got, tc.want)
			}
		})
	}
}

// TestInvalidIDs checks that every ID argument must be a positive decimal.
func TestInvalidIDs(t *testing.T) {
	e := newTestEnv(t, Options{})
	user := e.token(t, 3, false)
	tests := []struct{ query, field string }{
		{`{ voucher(id: "abc") { id } }`, "id"},
		{`{ voucher(id: "0") { id } }`, "id"},
		{`{ order(id: "1.5") { id } }`, "id"},
		{`{ vouchers(after: "x") { id } }`, "after"},
		{`{ vouchers(first: 0) { id } }`, "first"},
		{`{ vouchers(first: 101) { id } }`, "first"},
		{`mutation { seckill(voucherId: "-1") { outcome } }`, "voucherId"},
		// One id, one spelling: these would otherwise buy voucher 1.
		{`mutation { seckill(voucherId: "+1") { outcome } }`, "voucherId"},
		{`mutation { seckill(voucherId: "01") { outcome } }`, "voucherId"},
		{`mutation { seckill(voucherId: " 1") { outcome } }`, "voucherId"},
		{`{ voucher(id: "+1") { id } }`, "id"},
		{`{ order(id: "0001") { id } }`, "id"},
	}
	e.addVoucher(t, validVoucherInput()) // voucher 1 exists
	for _, tc := range tests {
		status, resp, raw := e.post(t, user, tc.query, nil)
		err := onlyError(t, resp, raw)
		if status != http.StatusOK || err.code() != seckill.EINVALID || err.field() != tc.field {
			t.Errorf("%s: status %d, code %q, field %q; want INVALID_INPUT on %q", tc.query, status, err.code(), err.field(), tc.field)
		}
	}
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	e := newTestEnv(t, Options{})
	voucherID := e.addVoucher(t, validVoucherInput())
	const secret = "dial tcp 10.1.2.3:5432: password authentication failed for user seckill_rw"
	e.store.fail = fmt.Errorf("store: %s", secret)

	status, resp, raw := e.post(t, "", `query Shop { vouchers { id } }`, nil)
	if status != http.StatusOK {
		t.Errorf("status = %d", status)
	}
	err := onlyError(t, resp, raw)
	if err.Message != "internal error" || err.code() != seckill.EINTERNAL {
		t.Errorf("error = %+v", err)
	}
	if diff := cmp.Diff([]any{"vouchers"}, err.Path); diff != "" {
		t.Errorf("path (-want +got):\n%s", diff)
	}
	if strings.Contains(raw, "10.1.2.3") || strings.Contains(raw, "password") {
		t.Errorf("the response leaks the cause: %s", raw)
	}
	if n := e.logs.CountLines("10.1.2.3"); n != 1 {
		t.Errorf("the cause is logged %d times, want once:\n%s", n, e.logs)
	}
	if n := e.logs.CountLines("path=vouchers"); n != 1 {
		t.Errorf("the path is not logged with it:\n%s", e.logs)
	}

	e.store.fail = nil
	e.store.panicOnRead = true
	_, resp, raw = e.post(t, "", `query($id: ID!) { voucher(id: $id) { id } }`, map[string]any{"id": voucherID})
	err = onlyError(t, resp, raw)
	if err.Message != "internal error" || err.code() != seckill.EINTERNAL {
		t.Errorf("panic: error = %+v", err)
	}
	if strings.Contains(raw, "secret") || strings.Contains(raw, "corrupted") {
		t.Errorf("the response leaks the panic: %s", raw)
	}
	if n := e.logs.CountLines("corrupted page 7"); n != 1 {
		t.Errorf("the panic is logged %d times, want once:\n%s", n, e.logs)
	}
}

func TestTimesAreUTC(t *testing.T) {
	e := newTestEnv(t, Options{})
	in := validVoucherInput()
	begin := time.Now().Add(-time.Minute).Truncate(time.Second)
	in["beginTime"] = begin.In(time.FixedZone("CST", 8*3600)).Format(time.RFC3339)
	id := e.addVoucher(t, in)
	_, resp, raw := e.post(t, "", `query($id: ID!) { voucher(id: $id) { seckill { beginTime } } }`, map[string]any{"id": id})
	if want := begin.UTC().Format(time.RFC3339); !strings.Contains(string(resp.Data), `"beginTime":"`+want+`"`) {
		t.Errorf("beginTime: want %s in %s", want, raw)
	}
}

// TestEnumsMatchDomain checks every wire enum against the domain's list of
// its values, both ways: each domain value converts to a GraphQL value, and
// each value of the schema is one of the domain's. The domain's own test
// keeps its lists complete, so a value added on either side fails here.
func TestEnumsMatchDomain(t *testing.T) {
	checkEnum(t, "outcome", seckill.Outcomes, model.AllSeckillOutcome, toGraphOutcome)
	checkEnum(t, "order status", seckill.OrderStatuses, model.AllOrderStatus, toGraphOrderStatus)
	checkEnum(t, "payment status", seckill.PaymentStatuses, model.AllPaymentStatus, func(s seckill.PaymentStatus) (model.PaymentStatus, error) {
		return toGraphEnum[model.PaymentStatus](string(s), "payment status")
	})
	checkEnum(t, "campaign status", seckill.CampaignStatuses, model.AllCampaignStatus, toGraphCampaignStatus)
	checkEnum(t, "voucher type", seckill.VoucherTypes, model.AllVoucherType, toGraphVoucherType)
	checkEnum(t, "challenge kind", seckill.ChallengeKinds, model.AllChallengeKind, func(k seckill.ChallengeKind) (model.ChallengeKind, error) {
		return toGraphEnum[model.ChallengeKind](string(k), "challenge kind")
	})
	checkEnum(t, "waiting room state", seckill.RoomStates, model.AllWaitingRoomState, func(s seckill.RoomState) (model.WaitingRoomState, error) {
		return toGraphEnum[model.WaitingRoomState](string(s), "waiting room state")
	})
	if _, err := toGraphOrderStatus("LOST"); err == nil {
		t.Error("an unknown status converts")
	}
}

// checkEnum converts every domain value of an enum with toGraph and
// expects the same value back, and finds every GraphQL value among the
// domain's.
func checkEnum[D, G ~string](t *testing.T, what string, domain []D, graph []G, toGraph func(D) (G, error)) {
	t.Helper()
	for _, d := range domain {
		g, err := toGraph(d)
		if err != nil {
			t.Errorf("%s %s: %v", what, d, err)
		} else if string(g) != string(d) {
			t.Errorf("%s %s converts to %s", what, d, g)
		}
	}
	for _, g := range graph {
		if !slices.Contains(domain, D(g)) {
			t.Errorf("the schema's %s %s is not one of the domain's %v", what, g, domain)
		}
	}
}

// introspectionQuery is graphql-js's getIntrospectionQuery(), which GraphiQL
// sends: it nests ofType nine levels deep.
const introspectionQuery = `query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name
    ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } } }
}`
