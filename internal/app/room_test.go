package app

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"

	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// createRoomCampaign creates, through the API, a campaign of stock units
// that opens at begin with a waiting room that opens opensBefore seconds
// before it, lets rate buyers through a second, with passes of pass
// seconds.
func (e *testEnv) createRoomCampaign(stock int, begin time.Time, opensBefore, rate, pass int) int64 {
	e.t.Helper()
	var data struct {
		AddSeckillVoucher struct {
			ID      string
			Seckill struct {
				WaitingRoom *struct{ AdmitPerSecond, PassSeconds int }
			}
		} `json:"addSeckillVoucher"`
	}
	res, err := e.gql(nil, e.token(1, true), `mutation($in: AddSeckillVoucherInput!) {
		addSeckillVoucher(input: $in) { id seckill { waitingRoom { admitPerSecond passSeconds } } } }`,
		map[string]any{"in": map[string]any{
			"shopId": "1", "title": "with a waiting room", "payValue": 100, "actualValue": 200, "stock": stock,
			"beginTime":   begin.Format(time.RFC3339Nano),
			"endTime":     begin.Add(time.Hour).Format(time.RFC3339),
			"waitingRoom": map[string]any{"opensSecondsBefore": opensBefore, "admitPerSecond": rate, "passSeconds": pass},
		}}, &data)
	if err != nil || len(res.Errors) > 0 {
		e.t.Fatalf("addSeckillVoucher: %v %+v", err, res)
	}
	if w := data.AddSeckillVoucher.Seckill.WaitingRoom; w == nil || w.AdmitPerSecond != rate || w.PassSeconds != pass {
		e.t.Fatalf("seckill { waitingRoom } = %+v", w)
	}
	id, err := strconv.ParseInt(data.AddSeckillVoucher.ID, 10, 64)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// joinAll has users join a room through e's domain, from conc goroutines,
// and returns their tickets.
func (e *testEnv) joinAll(voucherID int64, users []int64, conc int) map[int64]*seckill.RoomTicket {
	e.t.Helper()
	var mu sync.Mutex
	out := make(map[int64]*seckill.RoomTicket, len(users))
	work := make(chan int64)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for u := range work {
				tk, err := e.app.Rooms.Join(asUser(e.ctx, u, false), voucherID)
				if err != nil {
					e.t.Errorf("user %d joins: %v", u, err)
					continue
				}
				mu.Lock()
				out[u] = tk
				mu.Unlock()
			}
		})
	}
	for _, u := range users {
		work <- u
	}
	close(work)
	wg.Wait()
	return out
}

func (e *testEnv) roomStatus(voucherID, user int64, ticket string) seckill.RoomStatus {
	e.t.Helper()
	st, err := e.app.Rooms.Status(asUser(e.ctx, user, false), voucherID, ticket)
	if err != nil {
		e.t.Fatalf("status of user %d: %v", user, err)
	}
	return st
}

// TestWaitingRoomFair: 1,000 buyers join a room before the open, 100 units.
//   - The order of entry is independent of the order of joining: Spearman's
//     rank correlation between the two, under independence, is about
//     normal with a standard deviation of 1/sqrt(n-1) = 0.032; the test
//     fails beyond 4 of them, which an honest shuffle does about 6 times in
//     100,000 runs.
//   - The places are 0..n-1, each once (nobody shares a turn); a pass comes
//     only at its turn; exactly 100 buyers with a pass buy, a pass buys
//     once, and everyone still in line hears SOLD_OUT within a few seconds
//     of the last unit.
func TestWaitingRoomFair(t *testing.T) {
	e := newTestEnv(t, "", func(m map[string]string) { m["SECKILL_USER_RATE"] = "0" })
	const n, stock, rate = 1000, 100, 400
	begin := time.Now().Add(5 * time.Second).Truncate(time.Second)
	v := e.createRoomCampaign(stock, begin, 60, rate, 30)
	users := make([]int64, n)
	for i := range users {
		users[i] = int64(5000 + i)
	}
	tickets := e.joinAll(v, users, 16)
	if time.Now().After(begin) {
		t.Fatal("the joins took until the open; give them more time")
	}
	seen := make([]bool, n)
	for u, tk := range tickets {
		if !tk.Place.BeforeOpen || tk.Place.Seq >= n || seen[tk.Place.Seq] {
			t.Fatalf("user %d's place %+v: want a distinct number below %d, before the open", u, tk.Place, n)
		}
		seen[tk.Place.Seq] = true
		if tk.Status.State != seckill.RoomBeforeOpen || tk.Status.PlaceKnown {
			t.Fatalf("user %d hears %+v before the open", u, tk.Status)
		}
	}
	if again := e.joinAll(v, users[:3], 1); again[users[0]].Ticket != tickets[users[0]].Ticket {
		t.Fatal("joining again answered another ticket")
	}

	time.Sleep(time.Until(begin) + seckill.RoomRefresh + 100*time.Millisecond)
	places := make(map[int64]int64, n)
	taken := make([]bool, n)
	var sumD2 float64
	for u, tk := range tickets {
		st := e.roomStatus(v, u, tk.Ticket)
		if !st.PlaceKnown || st.Place < 0 || st.Place >= n || taken[st.Place] {
			t.Fatalf("user %d after the open: %+v, want a place of their own below %d", u, st, n)
		}
		taken[st.Place] = true
		places[u] = st.Place
		d := float64(st.Place - tk.Place.Seq)
		sumD2 += d * d
		if st.State == seckill.RoomWaiting && st.Pass != "" {
			t.Fatalf("user %d holds a pass before their turn: %+v", u, st)
		}
	}
	rho := 1 - 6*sumD2/(float64(n)*(float64(n)*float64(n)-1))
	t.Logf("Spearman's rho between joining and entry: %+.4f (standard deviation under independence %.4f)", rho, 1/math.Sqrt(n-1))
	if math.Abs(rho) > 4/math.Sqrt(n-1) {
		t.Errorf("entry order follows joining order: rho %+.4f", rho)
	}

	// Some of those far back follow the room; everyone buys at their turn.
	type heard struct {
		state seckill.RoomState
		at    time.Time
	}
	var watchers sync.WaitGroup
	finals := make(chan heard, 50)
	watched := 0
	for u, p := range places {
		if p < n-50 || watched == 50 {
			continue
		}
		watched++
		ch, err := e.app.Rooms.Watch(asUser(e.ctx, u, false), v, tickets[u].Ticket)
		if err != nil {
			t.Fatal(err)
		}
		watchers.Go(func() {
			last := heard{}
			for st := range ch {
				last = heard{st.State, time.Now()}
			}
			finals <- last
		})
	}
	var mu sync.Mutex
	var accepted []int64
	var lastAccepted time.Time
	var buyers sync.WaitGroup
	for u, tk := range tickets {
		buyers.Go(func() {
			ctx := asUser(e.ctx, u, false)
			turn := seckill.TurnAt(seckill.WaitingRoom{AdmitPerSecond: rate}, begin, places[u])
			time.Sleep(time.Until(turn))
			st, err := e.app.Rooms.Status(ctx, v, tk.Ticket)
			if err != nil {
				t.Errorf("user %d: %v", u, err)
				return
			}
			if st.State != seckill.RoomYourTurn {
				return // sold out by now
			}
			res, err := e.app.Purchases.PurchaseWith(ctx, v, nil, st.Pass)
			if err != nil {
				t.Errorf("user %d buys: %v", u, err)
				return
			}
			if res.Outcome == seckill.OutcomeAccepted {
				mu.Lock()
				accepted = append(accepted, u)
				lastAccepted = time.Now()
				mu.Unlock()
				// ALREADY_PURCHASED, or SOLD_OUT once the process marked the
				// campaign sold out; never a second unit.
				if again, _ := e.app.Purchases.PurchaseWith(ctx, v, nil, st.Pass); again.Outcome == seckill.OutcomeAccepted {
					t.Errorf("user %d's pass bought a second unit", u)
				}
			}
		})
	}
	buyers.Wait()
	if len(accepted) != stock {
		t.Fatalf("%d ACCEPTED, want %d", len(accepted), stock)
	}
	watchers.Wait()
	close(finals)
	for h := range finals {
		if h.state != seckill.RoomSoldOut || h.at.Sub(lastAccepted) > 3*time.Second {
			t.Errorf("a buyer in line last heard %s %s after the last unit went, want SOLD_OUT within 3 s",
				h.state, h.at.Sub(lastAccepted).Round(time.Millisecond))
		}
	}
}

// TestWaitingRoomPasses: a purchase of a campaign with a waiting room needs
// its buyer's own pass, in time; tickets are their holder's.
func TestWaitingRoomPasses(t *testing.T) {
	e := newTestEnv(t, "", func(m map[string]string) { m["SECKILL_USER_RATE"] = "0" })
	// Open two seconds ago: the first joiners' turns have come.
	v := e.createRoomCampaign(10, time.Now().Add(-2*time.Second), 60, 1000, 30)
	other := e.createRoomCampaign(10, time.Now().Add(-2*time.Second), 60, 1000, 30)
	const user, stranger = 41, 42
	token := e.token(user, false)

	var joined struct {
		JoinWaitingRoom struct {
			Ticket           string
			JoinedBeforeOpen bool
			Status           struct {
				State string
				Place *int
				Pass  *string
			}
		} `json:"joinWaitingRoom"`
	}
	join := `mutation($v: ID!) { joinWaitingRoom(voucherId: $v) { ticket joinedBeforeOpen status { state place pass } } }`
	vars := map[string]any{"v": strconv.FormatInt(v, 10)}
	if res, err := e.gql(nil, token, join, vars, &joined); err != nil || len(res.Errors) > 0 {
		t.Fatalf("joinWaitingRoom: %v %+v", err, res)
	}
	j := joined.JoinWaitingRoom
	if j.JoinedBeforeOpen || j.Status.Place == nil || (j.Status.State != "YOUR_TURN" && j.Status.State != "WAITING") {
		t.Fatalf("joined after the open, the line empty: %+v, want the turn of now", j)
	}
	first := j.Ticket
	if res, err := e.gql(nil, token, join, vars, &joined); err != nil || len(res.Errors) > 0 || joined.JoinWaitingRoom.Ticket != first {
		t.Fatalf("joining twice: %v %+v, want the same ticket", err, res)
	}
	// The place of the moment by Redis's clock: a turn within a few
	// milliseconds by this process's.
	var pass string
	eventually(t, 2*time.Second, "the turn", func() bool {
		st := e.roomStatus(v, user, first)
		pass = st.Pass
		return st.State == seckill.RoomYourTurn
	})

	buy := func(uid int64, voucher int64, pass string) seckill.Outcome {
		t.Helper()
		var data struct{ Seckill struct{ Outcome string } }
		res, err := e.gql(nil, e.token(uid, false), `mutation($v: ID!, $p: String) { seckill(voucherId: $v, pass: $p) { outcome } }`,
			map[string]any{"v": strconv.FormatInt(voucher, 10), "p": pass}, &data)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("seckill: %v %+v", err, res)
		}
		return seckill.Outcome(data.Seckill.Outcome)
	}
	forger := seckill.NewChallenger([]byte("another secret entirely"), time.Minute, time.Minute)
	cases := []struct {
		name string
		user int64
		pass string
		want seckill.Outcome
	}{
		{"none", user, "", seckill.OutcomePassRequired},
		{"not a pass", user, "garbage.garbage", seckill.OutcomePassRequired},
		{"forged", user, forger.SignPass(v, user, time.Now().Add(time.Minute)), seckill.OutcomePassRequired},
		{"another user's", stranger, pass, seckill.OutcomePassRequired},
		{"another campaign's", user, e.app.Challenger.SignPass(other, user, time.Now().Add(time.Minute)), seckill.OutcomePassRequired},
		{"a ticket, not a pass", user, first, seckill.OutcomePassRequired},
		{"expired", user, e.app.Challenger.SignPass(v, user, time.Now().Add(-time.Second)), seckill.OutcomePassExpired},
		{"theirs", user, pass, seckill.OutcomeAccepted},
		{"theirs again", user, pass, seckill.OutcomeAlreadyPurchased},
	}
	for _, c := range cases {
		if got := buy(c.user, v, c.pass); got != c.want {
			t.Errorf("%s pass: %s, want %s", c.name, got, c.want)
		}
	}
	if got := e.remaining(v); got != 9 {
		t.Errorf("%d units left, want 9", got)
	}

	status := `query($v: ID!, $t: String!) { waitingRoom(voucherId: $v, ticket: $t) { state } }`
	for name, tc := range map[string]struct {
		token  string
		ticket string
	}{
		"another user's": {e.token(stranger, false), first},
		"forged":         {token, forger.SignRoomTicket(v, user, seckill.RoomPlace{Seq: 0})},
		"a pass":         {token, pass},
	} {
		res, err := e.gql(nil, tc.token, status, map[string]any{"v": strconv.FormatInt(v, 10), "t": tc.ticket}, nil)
		if err != nil || res.code() != seckill.EINVALID || res.Errors[0].Extensions["field"] != "ticket" {
			t.Errorf("%s ticket: %v %+v, want INVALID_INPUT naming ticket", name, err, res)
		}
	}
	if res, _ := e.gql(nil, token, join, map[string]any{"v": strconv.FormatInt(e.createCampaign(5), 10)}, nil); res.code() != seckill.ECONFLICT {
		t.Errorf("joining a campaign without a room: %+v, want CONFLICT", res)
	}
	later := e.createRoomCampaign(5, time.Now().Add(time.Hour), 60, 10, 30)
	if res, _ := e.gql(nil, token, join, map[string]any{"v": strconv.FormatInt(later, 10)}, nil); res.code() != seckill.ECONFLICT {
		t.Errorf("joining before the room opens: %+v, want CONFLICT", res)
	}

	// The subscription tells a joiner their turn, with their pass.
	var j2 struct {
		JoinWaitingRoom struct{ Ticket string } `json:"joinWaitingRoom"`
	}
	if res, err := e.gql(nil, e.token(stranger, false), join, vars, &j2); err != nil || len(res.Errors) > 0 {
		t.Fatalf("joinWaitingRoom: %v %+v", err, res)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	c := e.dialWS(t, ctx, "graphql-transport-ws")
	if err := wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + e.token(stranger, false)}}); err != nil {
		t.Fatal(err)
	}
	if m := readWS(t, ctx, c); m.Type != "connection_ack" {
		t.Fatalf("got %+v, want connection_ack", m)
	}
	if err := wsjson.Write(ctx, c, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query":     `subscription($v: ID!, $t: String!) { waitingRoomStatus(voucherId: $v, ticket: $t) { state place pass } }`,
		"variables": map[string]any{"v": strconv.FormatInt(v, 10), "t": j2.JoinWaitingRoom.Ticket},
	}}); err != nil {
		t.Fatal(err)
	}
	// WAITING for a few milliseconds first at most: the place of the
	// moment of joining, by Redis's clock.
	for i := 0; ; i++ {
		m := readWS(t, ctx, c)
		if m.Type != "next" || !json.Valid(m.Payload) || i == 3 {
			t.Fatalf("message %d: %s %s, want YOUR_TURN with a pass", i, m.Type, m.Payload)
		}
		if strings.Contains(string(m.Payload), `"YOUR_TURN"`) && strings.Contains(string(m.Payload), `"pass":"`) {
			break
		}
	}

	// One who comes long after the open, the line empty, has their turn at
	// once (not one that passed while they were away).
	late := e.createRoomCampaign(5, time.Now().Add(-15*time.Second), 60, 1, 10)
	tk := e.joinAll(late, []int64{user}, 1)[user]
	if st := e.roomStatus(late, user, tk.Ticket); st.Wait > time.Second || (st.State != seckill.RoomYourTurn && st.State != seckill.RoomWaiting) {
		t.Errorf("joined 15 s after the open, the line empty: %+v, want the turn of now", st)
	}
}

// TestWaitingRoomInstancesAndLoss: two API processes share a room. They
// number joiners without sharing a number, even after Redis lost the room
// before the open; after the open they tell each ticket the same place, let
// through exactly as many as the rate allows, and a process started after
// Redis lost the room again tells the same places (the count drawn at the
// open is in Postgres).
func TestWaitingRoomInstancesAndLoss(t *testing.T) {
	api1 := newTestEnv(t, "", func(m map[string]string) { m["SECKILL_USER_RATE"] = "0" })
	api2 := api1.peer()
	apis := []*testEnv{api1, api2}
	const rate = 40
	begin := time.Now().Add(4 * time.Second).Truncate(time.Second)
	v := api1.createRoomCampaign(1000, begin, 60, rate, 30)

	tickets := map[int64]*seckill.RoomTicket{}
	joinHalf := func(from int64) {
		for i := range int64(100) {
			u := from + i
			tk, err := apis[i%2].app.Rooms.Join(asUser(api1.ctx, u, false), v)
			if err != nil {
				t.Fatalf("user %d joins: %v", u, err)
			}
			tickets[u] = tk
		}
	}
	joinHalf(100)
	// Each process reads the room's counts at least every RoomRefresh
	// while its buyers ask; then Redis loses the room.
	time.Sleep(seckill.RoomRefresh + 50*time.Millisecond)
	for _, e := range apis {
		e.roomStatus(v, 100, tickets[100].Ticket)
	}
	lose := func() {
		keys, err := api1.app.Redis.Keys(api1.ctx, "*{w"+strconv.FormatInt(v, 10)+"}*").Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("room keys %v %v", keys, err)
		}
		if err := api1.app.Redis.Del(api1.ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lose()
	joinHalf(200)
	numbers := map[int64]int64{}
	for u, tk := range tickets {
		if other, dup := numbers[tk.Place.Seq]; dup {
			t.Fatalf("users %d and %d share number %d", u, other, tk.Place.Seq)
		}
		numbers[tk.Place.Seq] = u
	}

	time.Sleep(time.Until(begin) + seckill.RoomRefresh + 100*time.Millisecond)
	places := map[int64]int64{}
	for u, tk := range tickets {
		a, b := api1.roomStatus(v, u, tk.Ticket), api2.roomStatus(v, u, tk.Ticket)
		if !a.PlaceKnown || a.Place != b.Place {
			t.Fatalf("user %d: API 1 says %+v, API 2 %+v", u, a, b)
		}
		places[u] = a.Place
	}
	// Let through by now: as many as the rate allows, within a place
	// (the two readings of the clock around the count).
	for range 3 {
		before := seckill.LetThrough(seckill.WaitingRoom{AdmitPerSecond: rate}, begin, time.Now())
		through := 0
		for u, tk := range tickets {
			if st := apis[u%2].roomStatus(v, u, tk.Ticket); st.State == seckill.RoomYourTurn || st.State == seckill.RoomMissed {
				through++
			}
		}
		after := seckill.LetThrough(seckill.WaitingRoom{AdmitPerSecond: rate}, begin, time.Now())
		if int64(through) < before || int64(through) > after {
			t.Errorf("%d let through, want %d to %d", through, before, after)
		}
		time.Sleep(300 * time.Millisecond)
	}

	lose()
	api3 := api1.peer()
	for u, tk := range tickets {
		if st := api3.roomStatus(v, u, tk.Ticket); st.Place != places[u] {
			t.Fatalf("user %d after Redis lost the room: place %d on a new process, %d before", u, st.Place, places[u])
		}
	}

	// Redis restarts empty: the campaign is rebuilt from Postgres with its
	// room, so a purchase still needs a pass, and the first places' passes
	// still buy.
	if err := testenv.FlushRedis(api1.ctx, api1.app.Redis); err != nil {
		t.Fatal(err)
	}
	var first int64
	for u, p := range places {
		if p == 0 {
			first = u
		}
	}
	st := api3.roomStatus(v, first, tickets[first].Ticket)
	if st.State != seckill.RoomYourTurn && st.State != seckill.RoomMissed {
		t.Fatalf("the first place after Redis restarted: %+v", st)
	}
	ctx := asUser(api3.ctx, first, false)
	if res, err := api3.app.Purchases.PurchaseWith(ctx, v, nil, ""); err != nil || res.Outcome != seckill.OutcomePassRequired {
		t.Fatalf("without a pass after Redis restarted: %+v %v, want PASS_REQUIRED", res, err)
	}
	if st.State == seckill.RoomYourTurn {
		if res, err := api3.app.Purchases.PurchaseWith(ctx, v, nil, st.Pass); err != nil || res.Outcome != seckill.OutcomeAccepted {
			t.Fatalf("with the pass after Redis restarted: %+v %v, want ACCEPTED", res, err)
		}
	}
}
