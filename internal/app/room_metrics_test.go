package app

import (
	"strconv"
	"testing"
	"time"

	"seckill/internal/seckill"
)

// postGraphQL sends one GraphQL operation to the server at base as token
// and decodes its data into out; an error answer fails the test.
func postGraphQL(tb testing.TB, base, token, query string, vars map[string]any, out any) {
	tb.Helper()
	res, err := postGQL(nil, base, token, query, vars, out)
	if err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	if len(res.Errors) > 0 {
		tb.Fatalf("%s: %s", query, res.Errors[0].Message)
	}
}

// RoomSale is a campaign with a waiting room, RoomSale's buyers in it
// and what they bought.
type RoomSale struct {
	VoucherID int64
	Joined    int // buyers who joined, after the open: places 0 to Joined-1
	Admitted  int // of them, bought with their pass
	Users     []int64
}

// StartRoomSale creates, through the API at base (as admin, whose token
// tokenFor(1, true) gives), a campaign of 3 units on sale from 5 s ago
// whose waiting room opened a minute before that, letting one buyer
// through a second with passes of 10 s; 8 buyers join it (after the open:
// in arrival order). The first buys once without a pass (PASS_REQUIRED),
// then two buy with the pass their turn gave (both ACCEPTED): one unit
// is left, and the room stays open. It is
// exported for the dashboard tests in package app_test.
func StartRoomSale(tb testing.TB, base string, tokenFor func(user int64, admin bool) string, firstUser int64) RoomSale {
	tb.Helper()
	begin := time.Now().Truncate(time.Second).Add(-5 * time.Second)
	var created struct {
		AddSeckillVoucher struct{ ID string } `json:"addSeckillVoucher"`
	}
	postGraphQL(tb, base, tokenFor(1, true), `mutation($in: AddSeckillVoucherInput!) { addSeckillVoucher(input: $in) { id } }`,
		map[string]any{"in": map[string]any{
			"shopId": "1", "title": "waiting room", "payValue": 100, "actualValue": 200, "stock": 3,
			"beginTime": begin.Format(time.RFC3339), "endTime": begin.Add(time.Hour).Format(time.RFC3339),
			"waitingRoom": map[string]any{"opensSecondsBefore": 60, "admitPerSecond": 1, "passSeconds": 10},
		}}, &created)
	id, err := strconv.ParseInt(created.AddSeckillVoucher.ID, 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	s := RoomSale{VoucherID: id, Joined: 8}
	vid := created.AddSeckillVoucher.ID
	tickets := map[int64]string{}
	for i := range s.Joined {
		u := firstUser + int64(i)
		tickets[u] = JoinRoom(tb, base, tokenFor(u, false), id)
		s.Users = append(s.Users, u)
	}
	buy := func(u int64, pass *string) string {
		var out struct {
			Seckill struct{ Outcome string } `json:"seckill"`
		}
		postGraphQL(tb, base, tokenFor(u, false), `mutation($v: ID!, $p: String) { seckill(voucherId: $v, pass: $p) { outcome } }`,
			map[string]any{"v": vid, "p": pass}, &out)
		return out.Seckill.Outcome
	}
	if got := buy(firstUser, nil); got != string(seckill.OutcomePassRequired) {
		tb.Fatalf("a purchase without a pass: %s, want PASS_REQUIRED", got)
	}
	for _, u := range s.Users[:2] {
		var st struct {
			WaitingRoom struct {
				State string
				Place *int
				Pass  *string
			} `json:"waitingRoom"`
		}
		// Places 0 and 1 had their turns 5 and 4 s ago; the room's view
		// of the counts may be RoomRefresh old.
		deadline := time.Now().Add(5 * time.Second)
		for {
			postGraphQL(tb, base, tokenFor(u, false), `query($v: ID!, $t: String!) { waitingRoom(voucherId: $v, ticket: $t) { state place pass } }`,
				map[string]any{"v": vid, "t": tickets[u]}, &st)
			if st.WaitingRoom.State == string(seckill.RoomYourTurn) || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if st.WaitingRoom.State != string(seckill.RoomYourTurn) || st.WaitingRoom.Pass == nil {
			tb.Fatalf("user %d: %+v, want YOUR_TURN with a pass", u, st.WaitingRoom)
		}
		if got := buy(u, st.WaitingRoom.Pass); got != string(seckill.OutcomeAccepted) {
			tb.Fatalf("user %d with their pass: %s", u, got)
		}
		s.Admitted++
	}
	return s
}

// JoinRoom joins a campaign's waiting room, after its open, through the
// API at base as token, and returns the ticket. It is exported for the
// dashboard tests in package app_test.
func JoinRoom(tb testing.TB, base, token string, voucherID int64) string {
	tb.Helper()
	var joined struct {
		JoinWaitingRoom struct {
			Ticket           string
			JoinedBeforeOpen bool
		} `json:"joinWaitingRoom"`
	}
	postGraphQL(tb, base, token, `mutation($v: ID!) { joinWaitingRoom(voucherId: $v) { ticket joinedBeforeOpen } }`,
		map[string]any{"v": strconv.FormatInt(voucherID, 10)}, &joined)
	if joined.JoinWaitingRoom.JoinedBeforeOpen {
		tb.Fatalf("joined room %d before its open", voucherID)
	}
	return joined.JoinWaitingRoom.Ticket
}

// TestWaitingRoomMetrics: /metrics counts PASS_REQUIRED and its funnel
// layer, and shows an open room's layers as Rooms.Funnel counts them.
func TestWaitingRoomMetrics(t *testing.T) {
	e := newTestEnv(t, "")
	before := e.scrape()
	sale := StartRoomSale(t, e.url, func(u int64, admin bool) string { return e.token(u, admin) }, 7001)
	after := e.scrape()
	for name, labels := range map[string]map[string]string{
		"seckill_purchases_total":       {"outcome": string(seckill.OutcomePassRequired)},
		"seckill_purchase_funnel_total": {"layer": seckill.LayerPassMissing},
	} {
		b, _ := value(before, name, labels)
		if a, ok := value(after, name, labels); !ok || a-b != 1 {
			t.Errorf("%s%v went from %v to %v (present %v), want +1", name, labels, b, a, ok)
		}
	}
	if _, ok := value(before, "seckill_purchases_total", map[string]string{"outcome": string(seckill.OutcomePassExpired)}); !ok {
		t.Error("seckill_purchases_total{outcome=PASS_EXPIRED} is not exported before it happens")
	}

	// The gauges agree with the domain's funnel read around the scrape.
	// The eight joiners' turns come a second apart and their passes end
	// 10 s after each: the line moves every second but for the 3 s from
	// the last turn to the first pass's end, and for good after the last
	// pass's (about 17 s after the joins). A loaded machine may miss the
	// short lull, so the wait reaches past the end.
	id := strconv.FormatInt(sale.VoucherID, 10)
	eventuallyWhy(t, 30*time.Second, "the room's gauges", func() string {
		f1, err := e.app.Rooms.Funnel(e.ctx, sale.VoucherID)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(roomStatsTTL) // past the collector's cache
		fams := e.scrape()
		f2, err := e.app.Rooms.Funnel(e.ctx, sale.VoucherID)
		if err != nil {
			t.Fatal(err)
		}
		if f1 != f2 {
			return "the line moved during the scrape"
		}
		if f1.Joined != int64(sale.Joined) || f1.Admitted != int64(sale.Admitted) {
			return "the room's view is not current yet"
		}
		if f1.LetThrough != f1.PassesLive+f1.Expired || f1.Waiting+f1.LetThrough != f1.Joined {
			t.Fatalf("the funnel does not add up: %+v", f1)
		}
		for i, want := range []int64{f1.Joined, f1.Waiting, f1.LetThrough, f1.PassesLive, f1.Expired, f1.Admitted} {
			got, ok := value(fams, "seckill_waiting_room_buyers", map[string]string{"voucher_id": id, "layer": roomLayers[i]})
			if !ok || got != float64(want) {
				t.Errorf("seckill_waiting_room_buyers{layer=%s} = %v (present %v), want %d", roomLayers[i], got, ok, want)
			}
		}
		if n, _ := value(fams, "seckill_waiting_rooms_open", nil); n != 1 {
			t.Errorf("seckill_waiting_rooms_open = %v, want 1", n)
		}
		return ""
	})
}
