package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
	"seckill/internal/gqlclient"
	"seckill/internal/seckill"
)

// --waiting-room: the campaign the bench creates has a waiting room. Every
// buyer joins it at a random moment of the room's time before the sale,
// follows where they stand (the waitingRoom query, about every second, and
// at the moment their turn is due), buys with the pass their turn gives,
// and gives up when the room says the sale sold out or their turn passed.
// The report shows how the purchases spread over the sale's seconds and
// whether the line was fair: among those who joined before the open, the
// rank correlation between when they joined and their place in line.

// RoomConfig is --waiting-room's settings.
type RoomConfig struct {
	On bool
	// Rate is the turns a second; 0: a third of the buyers, so that
	// every buyer's turn comes within about three seconds.
	Rate int
	// Opens is how long before the sale the room opens (whole seconds);
	// the buyers join over it. 0: DefaultRoomOpens.
	Opens time.Duration
	// Pass is how long a pass lasts (whole seconds, 10 s to an hour); 0:
	// the server's default.
	Pass time.Duration
}

// DefaultRoomOpens is how long before the sale the bench's room opens.
const DefaultRoomOpens = 5 * time.Second

// roomLead is how long after the campaign is created its room opens: the
// time to start the buyers.
const roomLead = 2 * time.Second

// roomPoll is how often a buyer asks where they stand, and roomRetry how
// soon they ask again when a moment they waited for (the open, their turn)
// has come and the room does not show it yet (its view is up to
// seckill.RoomRefresh old).
const (
	roomPoll  = time.Second
	roomRetry = 100 * time.Millisecond
)

// roomProbes is how many purchases without a pass the bench sends right
// after the open, each of which must be refused.
const roomProbes = 10

func (c *RoomConfig) validate(cfg *Config, s load.Spec) error {
	if !c.On {
		if c.Rate != 0 || c.Opens != 0 || c.Pass != 0 {
			return errors.New("--room-rate, --room-opens and --room-pass go with --waiting-room")
		}
		return nil
	}
	switch {
	case cfg.VoucherID != 0:
		return errors.New("--waiting-room gives the campaign the bench creates a room: omit --voucher")
	case cfg.Challenge != "":
		return errors.New("--waiting-room and --challenge: one at a time")
	case s.Mode != load.ModeBurst || s.Attempts != 1:
		return errors.New("--waiting-room runs each buyer once through the room: omit --rate, --duration and --attempts")
	case len(cfg.Compare) > 0 || len(cfg.Shards) > 0 || cfg.Storm.Units != 0 || len(cfg.TokenAlgs) > 1:
		return errors.New("--waiting-room measures the server at --url alone: omit --compare, --shards, --expiry-storm and --token-alg")
	case c.Rate < 0 || c.Rate > seckill.MaxRoomAdmitRate:
		return fmt.Errorf("--room-rate must be between 1 and %s turns a second", report.Number(seckill.MaxRoomAdmitRate))
	case c.Opens < 0 || c.Opens%time.Second != 0 || c.Opens > seckill.MaxRoomOpensBefore:
		return errors.New("--room-opens must be whole seconds, at most 24h")
	case c.Pass != 0 && (c.Pass < seckill.MinRoomPass || c.Pass > seckill.MaxRoomPass || c.Pass%time.Second != 0):
		return errors.New("--room-pass must be whole seconds from 10s to 1h")
	}
	if c.Opens == 0 {
		c.Opens = DefaultRoomOpens
	}
	if c.Opens < 2*time.Second {
		return errors.New("--room-opens must be at least 2s: the buyers join over it")
	}
	if c.Rate == 0 {
		c.Rate = max(1, (s.Users+2)/3)
	}
	return nil
}

// campaignInput returns the room's fields of the campaign the bench
// creates, which begins at begin.
func (c RoomConfig) campaignInput(begin time.Time) map[string]any {
	room := map[string]any{"opensSecondsBefore": int(c.Opens / time.Second), "admitPerSecond": c.Rate}
	if c.Pass > 0 {
		room["passSeconds"] = int(c.Pass / time.Second)
	}
	return map[string]any{"waitingRoom": room, "beginTime": begin.UTC().Format(time.RFC3339)}
}

// roomBegin is when the bench's campaign begins: its room opens roomLead
// from now, on a whole second (the API takes RFC 3339 seconds).
func (c RoomConfig) roomBegin(now time.Time) time.Time {
	return now.Add(roomLead + c.Opens + time.Second - 1).Truncate(time.Second)
}

// roomBuyer is what one buyer did in the room; each buyer's goroutine
// writes its own, read once the load is over.
type roomBuyer struct {
	joinAt     time.Time // when the join left
	joined     bool
	beforeOpen bool
	place      int64 // -1 until the room told it
	turn       bool  // the room said YOUR_TURN
	final      seckill.RoomState
	buyAt      time.Time // when the purchase with the pass left; zero: none
	err        string
}

// roomRun is one run of buyers through a campaign's room.
type roomRun struct {
	endpoint  string
	voucherID string
	cfg       RoomConfig
	begin     time.Time
	opens     time.Time
	auth      []string
	client    *http.Client
	buyers    []roomBuyer
	probes    map[string]int64 // outcomes of the purchases without a pass
	probeErr  string
	probeDone chan struct{}
}

func (r *runner) newRoomRun(endpoint string, voucherID int64, begin time.Time) *roomRun {
	rr := &roomRun{
		endpoint: endpoint, voucherID: strconv.FormatInt(voucherID, 10), cfg: r.cfg.Room,
		begin: begin, opens: begin.Add(-r.cfg.Room.Opens), auth: r.auth,
		client:    &http.Client{Transport: load.NewTransport(max(r.spec.Concurrency, 64))},
		buyers:    make([]roomBuyer, len(r.auth)),
		probes:    map[string]int64{},
		probeDone: make(chan struct{}),
	}
	for i := range rr.buyers {
		rr.buyers[i].place = -1
	}
	return rr
}

// timeout bounds one buyer's time in the room: until the last turn has
// come and gone, and then some.
func (rr *roomRun) timeout() time.Duration {
	last := time.Duration(float64(len(rr.buyers)) / float64(rr.cfg.Rate) * float64(time.Second))
	return time.Until(rr.begin) + last + cmp.Or(rr.cfg.Pass, seckill.DefaultRoomPass) + 30*time.Second
}

const (
	roomJoinQuery   = `mutation($v: ID!) { joinWaitingRoom(voucherId: $v) { ticket joinedBeforeOpen status { state place turnAt pass } } }`
	roomStatusQuery = `query($v: ID!, $t: String!) { waitingRoom(voucherId: $v, ticket: $t) { state place turnAt pass } }`
	roomBuyQuery    = `mutation Buy($voucherId: ID!, $pass: String) { seckill(voucherId: $voucherId, pass: $pass) { outcome orderId } }`
)

// roomStatus is the part of a WaitingRoomStatus a buyer acts on.
type roomStatus struct {
	State  seckill.RoomState
	Place  *int64
	TurnAt *time.Time
	Pass   *string
}

// ask sends one room operation as the buyer and decodes its data.
func (rr *roomRun) ask(ctx context.Context, user int, query string, vars map[string]any, out any) error {
	ans, err := gqlclient.Post(ctx, rr.client, rr.endpoint, strings.TrimPrefix(rr.auth[user], "Bearer "), query, vars, 1<<16)
	switch {
	case err != nil:
		return err
	case ans.NotJSON != nil:
		return fmt.Errorf("%s answered %s: %w", rr.endpoint, ans.Status, ans.NotJSON)
	case len(ans.Errors) > 0:
		return fmt.Errorf("%s (%s)", ans.Errors[0].Message, ans.Errors[0].Extensions.Code)
	case ans.Data == nil:
		return fmt.Errorf("%s answered %s without data", rr.endpoint, ans.Status)
	}
	return json.Unmarshal(ans.Data, out)
}

// prepare is the load's Prepare: the buyer's way through the room, which
// ends in the purchase with their pass, or in none.
func (rr *roomRun) prepare(ctx context.Context, user int) ([]byte, error) {
	b := &rr.buyers[user]
	// Join at a random moment of the room's time before the sale, away
	// from its two ends by a margin for the clocks of bench and Redis, and
	// for a join slow to arrive (Redis's clock decides before or after).
	span := rr.begin.Sub(rr.opens) - 1200*time.Millisecond
	b.joinAt = rr.opens.Add(200*time.Millisecond + rand.N(span))
	if !load.SleepUntil(ctx, b.joinAt) {
		return nil, b.fail(ctx.Err())
	}
	b.joinAt = time.Now()
	var joined struct {
		JoinWaitingRoom struct {
			Ticket           string
			JoinedBeforeOpen bool
			Status           roomStatus
		} `json:"joinWaitingRoom"`
	}
	if err := rr.ask(ctx, user, roomJoinQuery, map[string]any{"v": rr.voucherID}, &joined); err != nil {
		return nil, b.fail(fmt.Errorf("join: %w", err))
	}
	j := joined.JoinWaitingRoom
	b.joined, b.beforeOpen = true, j.JoinedBeforeOpen
	st := j.Status
	for {
		if st.Place != nil {
			b.place = *st.Place
		}
		switch st.State {
		case seckill.RoomYourTurn:
			b.turn = true
			if st.Pass == nil {
				return nil, b.fail(errors.New("YOUR_TURN without a pass"))
			}
			b.buyAt = time.Now()
			return json.Marshal(gqlclient.Request{Query: roomBuyQuery,
				Variables: map[string]any{"voucherId": rr.voucherID, "pass": *st.Pass}})
		case seckill.RoomMissed, seckill.RoomSoldOut, seckill.RoomEnded:
			b.final = st.State
			return nil, load.ErrNoPurchase
		}
		// Waiting, or before the open: ask again in a second, or when the
		// turn (the open) is due, whichever comes first.
		next := time.Now().Add(roomPoll)
		if st.TurnAt != nil && st.TurnAt.Before(next) {
			next = *st.TurnAt
			if !next.After(time.Now()) {
				next = time.Now().Add(roomRetry) // due, and not shown yet
			}
		}
		if !load.SleepUntil(ctx, next) {
			return nil, b.fail(ctx.Err())
		}
		var out struct {
			WaitingRoom roomStatus `json:"waitingRoom"`
		}
		if err := rr.ask(ctx, user, roomStatusQuery, map[string]any{"v": rr.voucherID, "t": j.Ticket}, &out); err != nil {
			return nil, b.fail(fmt.Errorf("status: %w", err))
		}
		st = out.WaitingRoom
	}
}

func (b *roomBuyer) fail(err error) error {
	if err == nil {
		err = errors.New("interrupted")
	}
	b.err = err.Error()
	return err
}

// probe sends purchases without a pass, and with a pass that is not one,
// all at once just after the open, as roomProbes of the run's buyers: the
// server must refuse each (PASS_REQUIRED). They leave before any turn can
// have bought the stock out, unless the server is slow to answer.
func (rr *roomRun) probe(ctx context.Context) {
	defer close(rr.probeDone)
	if !load.SleepUntil(ctx, rr.begin.Add(50*time.Millisecond)) {
		return
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range min(roomProbes, len(rr.auth)) {
		wg.Go(func() {
			vars := map[string]any{"voucherId": rr.voucherID}
			if i%2 == 1 {
				vars["pass"] = "not.a-pass" // forged: as none
			}
			var out struct {
				Seckill struct{ Outcome string } `json:"seckill"`
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := rr.ask(pctx, i, roomBuyQuery, vars, &out)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rr.probeErr = err.Error()
				return
			}
			rr.probes[out.Seckill.Outcome]++
		})
	}
	wg.Wait()
}

// report sums up the run through the room; accepted are the load's
// ACCEPTED answers.
func (rr *roomRun) report(accepted []load.Acceptance) *report.Room {
	<-rr.probeDone
	out := &report.Room{
		Rate: rr.cfg.Rate, OpensS: rr.cfg.Opens.Seconds(), PassS: rr.cfg.Pass.Seconds(),
		Buyers: int64(len(rr.buyers)), NoPass: rr.probes, NoPassError: rr.probeErr,
	}
	bought := make(map[int]bool, len(accepted))
	for _, a := range accepted {
		bought[a.User] = true
	}
	var pre []roomBuyer
	perSecond := map[int64]int64{}
	acceptedPerSecond := map[int64]int64{}
	for i, b := range rr.buyers {
		if b.joined {
			out.Joined++
			if b.beforeOpen {
				out.JoinedBeforeOpen++
				if b.place >= 0 {
					pre = append(pre, b)
				}
			}
		}
		if b.turn {
			out.LetThrough++
		}
		switch b.final {
		case seckill.RoomMissed:
			out.Missed++
		case seckill.RoomSoldOut:
			out.SoldOut++
		case seckill.RoomEnded:
			out.Ended++
		}
		if b.err != "" {
			out.Failed++
			out.Error = cmp.Or(out.Error, b.err)
		}
		if !b.buyAt.IsZero() {
			sec := int64(math.Floor(b.buyAt.Sub(rr.begin).Seconds()))
			perSecond[sec]++
			if bought[i] {
				acceptedPerSecond[sec]++
			}
		}
		if bought[i] && !b.turn {
			out.AcceptedWithoutTurn++
		}
	}
	if len(perSecond) > 0 {
		secs := slices.Collect(maps.Keys(perSecond))
		lo, hi := slices.Min(secs), slices.Max(secs)
		for s := lo; s <= hi; s++ {
			out.PerSecond = append(out.PerSecond, report.RoomSecond{Second: s, Purchases: perSecond[s], Accepted: acceptedPerSecond[s]})
		}
	}
	joins := make([]float64, len(pre))
	places := make([]float64, len(pre))
	for i, b := range pre {
		joins[i], places[i] = float64(b.joinAt.UnixNano()), float64(b.place)
	}
	out.Fairness = report.Spearman(joins, places)
	return out
}
