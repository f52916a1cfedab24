package seckill

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// RoomLine is the waiting rooms' line in Redis.
type RoomLine interface {
	// JoinRoom numbers a buyer who joins a campaign's room, by Redis's
	// clock (before begin or after it); joining again answers the same
	// place. floor is the highest counts the caller has seen: a room Redis
	// lost numbers on from there. ECONFLICT before opens or after end.
	// A joiner after the open takes the next free place, never one whose
	// turn (at rate turns a second from begin) has passed.
	JoinRoom(ctx context.Context, voucherID, userID int64, opens, begin, end time.Time, rate int, floor RoomCounts) (RoomPlace, error)
	// RoomCounts reads how many joined before and after the open.
	RoomCounts(ctx context.Context, voucherID int64, begin time.Time) (RoomCounts, error)
}

// RoomDraws records, in Postgres, how many joined a room before its open.
type RoomDraws interface {
	// RecordRoomDraw stores before unless a count is stored already, and
	// returns the stored one. ENOTFOUND.
	RecordRoomDraw(ctx context.Context, voucherID, before int64) (int64, error)
}

// RoomRefresh is how often a process reads a room's counts and stock,
// however many of its buyers watch it; RoomTick how often a watcher is told
// where they stand (sooner when their turn or its end falls in between).
const (
	RoomRefresh = 500 * time.Millisecond
	RoomTick    = time.Second
)

// Rooms runs the campaigns' waiting rooms: joining, where a joiner stands,
// and the stream of it.
type Rooms struct {
	challenges *Challenges // campaign settings; the Challenger signs tickets and passes
	line       RoomLine
	draws      RoomDraws
	admitter   Admitter // stock left
	now        func() time.Time

	mu     sync.Mutex
	views  map[int64]*roomView
	flight singleflight.Group
}

// roomView is what a process knows of one room, at most RoomRefresh old.
type roomView struct {
	at        time.Time
	counts    RoomCounts
	floor     RoomCounts // the highest counts seen: a lost room numbers on from them
	drawn     int64      // joiners before the open, once recorded; -1 before
	remaining int64      // stock left; -1 unknown
}

// RoomDeps are what Rooms needs; every field is required.
type RoomDeps struct {
	Challenges *Challenges
	Line       RoomLine
	Draws      RoomDraws
	Admitter   Admitter
	Now        func() time.Time
}

// NewRooms returns the waiting rooms over their dependencies.
func NewRooms(d RoomDeps) (*Rooms, error) {
	if err := required("rooms", map[string]bool{"Challenges": d.Challenges == nil, "Line": d.Line == nil,
		"Draws": d.Draws == nil, "Admitter": d.Admitter == nil, "Now": d.Now == nil}); err != nil {
		return nil, err
	}
	return &Rooms{challenges: d.Challenges, line: d.Line, draws: d.Draws, admitter: d.Admitter, now: d.Now,
		views: map[int64]*roomView{}}, nil
}

// RoomTicket is what joining answers.
type RoomTicket struct {
	Ticket string
	Place  RoomPlace
	Status RoomStatus
}

// room returns a campaign with a waiting room. ENOTFOUND; ECONFLICT for a
// campaign without one.
func (r *Rooms) room(ctx context.Context, voucherID int64) (Campaign, error) {
	if voucherID <= 0 {
		return Campaign{}, Errorf(ENOTFOUND, "voucher %d not found", voucherID)
	}
	c, _, err := r.challenges.campaignSettings(ctx, voucherID)
	if err != nil {
		return Campaign{}, err
	}
	if !c.Room.Enabled() {
		return Campaign{}, Errorf(ECONFLICT, "voucher %d's sale has no waiting room: buy with seckill", voucherID)
	}
	return c, nil
}

// Join puts the caller in a campaign's waiting room, or finds them there,
// and answers their ticket. ENOTFOUND; ECONFLICT for a campaign without a
// room, before the room opens, after the sale and once it sold out.
func (r *Rooms) Join(ctx context.Context, voucherID int64) (*RoomTicket, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	c, err := r.room(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	now := r.now()
	opens := c.RoomOpensAt()
	switch {
	case now.Before(opens.Add(-time.Second)): // Redis's clock decides within a second
		return nil, Errorf(ECONFLICT, "the waiting room opens at %s", opens.UTC().Format(time.RFC3339))
	case !now.Before(c.EndTime):
		return nil, Errorf(ECONFLICT, "the sale has ended")
	}
	v, err := r.view(ctx, c)
	if err != nil {
		return nil, err
	}
	if v.remaining == 0 {
		return nil, Errorf(ECONFLICT, "sold out: the waiting room is closed")
	}
	floor := v.floor
	floor.Next = max(floor.Next, v.drawn) // a room Redis lost after the open: behind the drawn ones
	pl, err := r.line.JoinRoom(ctx, voucherID, u.ID, opens, c.BeginTime, c.EndTime, c.Room.AdmitPerSecond, floor)
	if err != nil {
		return nil, err
	}
	r.saw(voucherID, pl)
	ticket := r.challenges.challenger.SignRoomTicket(voucherID, u.ID, pl)
	return &RoomTicket{Ticket: ticket, Place: pl, Status: r.status(c, v, u.ID, pl, r.now())}, nil
}

// Status says where the holder of ticket stands. ENOTFOUND; ECONFLICT
// for a campaign without a room; EINVALID for a ticket that is not the
// caller's for this campaign.
func (r *Rooms) Status(ctx context.Context, voucherID int64, ticket string) (RoomStatus, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return RoomStatus{}, err
	}
	c, err := r.room(ctx, voucherID)
	if err != nil {
		return RoomStatus{}, err
	}
	pl, err := r.challenges.challenger.CheckRoomTicket(ticket, voucherID, u.ID)
	if err != nil {
		return RoomStatus{}, err
	}
	v, err := r.view(ctx, c)
	if err != nil {
		return RoomStatus{}, err
	}
	return r.status(c, v, u.ID, pl, r.now()), nil
}

// status says where a place stands in v: before the draw is known (the
// first RoomRefresh after the open), as before the open.
func (r *Rooms) status(c Campaign, v roomView, userID int64, pl RoomPlace, now time.Time) RoomStatus {
	return r.challenges.challenger.ComputeRoomStatus(c, c.VoucherID, userID, pl, v.drawn, v.counts, v.remaining, now)
}

// Watch streams where the holder of ticket stands: at once, then whenever
// it changes, at most every RoomTick (and at the moments their turn comes
// and ends); the channel closes after a final state (sold out, ended, the
// turn missed) or when ctx ends. The errors are Status's.
func (r *Rooms) Watch(ctx context.Context, voucherID int64, ticket string) (<-chan RoomStatus, error) {
	first, err := r.Status(ctx, voucherID, ticket)
	if err != nil {
		return nil, err
	}
	u, _ := requireUser(ctx)
	pl, _ := r.challenges.challenger.CheckRoomTicket(ticket, voucherID, u.ID)
	out := make(chan RoomStatus, 1)
	go func() {
		defer close(out)
		st := first
		sent := RoomStatus{State: ""}
		for {
			if st != sent {
				select {
				case out <- st:
					sent = st
				case <-ctx.Done():
					return
				}
			}
			if st.State.Final() {
				return
			}
			wait := RoomTick
			now := r.now()
			// Wake at the moment the turn comes or ends; a moment already
			// past (the open, before this process has read the draw) is
			// looked at again after a fifth of RoomRefresh, not at once.
			next := time.Time{}
			switch st.State {
			case RoomWaiting, RoomBeforeOpen:
				next = st.TurnAt
			case RoomYourTurn:
				next = st.PassExpiresAt
			}
			if d := next.Sub(now); !next.IsZero() && d > 0 {
				wait = min(wait, d)
			} else if !next.IsZero() {
				wait = RoomRefresh / 5
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			c, err := r.room(ctx, voucherID)
			if err != nil {
				continue // Postgres or Redis slow: tell them again at the next tick
			}
			v, err := r.view(ctx, c)
			if err != nil {
				continue
			}
			if st.PlaceKnown && v.drawn >= 0 {
				st = r.challenges.challenger.roomStatusAt(c, voucherID, u.ID, st.Place, v.counts, v.remaining, r.now())
			} else {
				st = r.status(c, v, u.ID, pl, r.now())
			}
		}
	}()
	return out, nil
}

// RoomFunnel is a waiting room's layers at a moment. Expired counts, with
// today's counts, the turns that ended PassFor ago: exact unless the line
// emptied within that time (then it may count a few too few).
type RoomFunnel struct {
	Joined     int64 // everyone who joined
	Waiting    int64 // joined, their turn not come yet
	LetThrough int64 // their turn came (pass live, used or expired)
	PassesLive int64 // their turn is now: the pass is valid
	Expired    int64 // their turn is over
	Admitted   int64 // units taken, each by a buyer with a pass
}

// Funnel counts a room's layers now. ENOTFOUND; ECONFLICT without a room.
func (r *Rooms) Funnel(ctx context.Context, voucherID int64) (RoomFunnel, error) {
	c, err := r.room(ctx, voucherID)
	if err != nil {
		return RoomFunnel{}, err
	}
	v, err := r.view(ctx, c)
	if err != nil {
		return RoomFunnel{}, err
	}
	now := r.now()
	f := RoomFunnel{Joined: v.counts.Joined()}
	through := v.through(c, now)
	over := v.through(c, now.Add(-c.Room.PassFor))
	if !now.Before(c.EndTime) {
		over = through
	}
	f.LetThrough, f.Expired = through, over
	f.PassesLive, f.Waiting = through-over, f.Joined-through
	if v.remaining >= 0 {
		f.Admitted = max(0, c.InitialStock-v.remaining)
	}
	return f, nil
}

// through counts the joiners whose turn has come by at: the drawn ones
// below the places let through, and those after the open whose place is
// below it. A joiner after the open takes the next place, or the place of
// the moment when the line had emptied, so the places not let through yet
// are one run ending at Next-1: exact, without a count per place.
func (v roomView) through(c Campaign, at time.Time) int64 {
	lt := LetThrough(c.Room, c.BeginTime, at)
	before := max(v.counts.Before, 0)
	waitingAfter := min(max(v.counts.Next-max(lt, before), 0), v.counts.After)
	return min(before, lt) + v.counts.After - waitingAfter
}

// view returns what the process knows of a room, read again when older
// than RoomRefresh (one read a room however many ask).
func (r *Rooms) view(ctx context.Context, c Campaign) (roomView, error) {
	now := r.now()
	r.mu.Lock()
	var v roomView
	p, ok := r.views[c.VoucherID]
	if ok {
		v = *p
	}
	r.mu.Unlock()
	if ok && now.Sub(v.at) < RoomRefresh && now.Sub(v.at) >= 0 {
		return v, nil
	}
	ch := r.flight.DoChan(strconv.FormatInt(c.VoucherID, 10), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settingsReadTimeout)
		defer cancel()
		return r.refresh(rctx, c)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return roomView{}, res.Err
		}
		return res.Val.(roomView), nil
	case <-ctx.Done():
		return roomView{}, Errorf(EUNAVAILABLE, "the waiting room could not be read in time; try again")
	}
}

func (r *Rooms) refresh(ctx context.Context, c Campaign) (roomView, error) {
	counts, err := r.line.RoomCounts(ctx, c.VoucherID, c.BeginTime)
	if err != nil {
		return roomView{}, err
	}
	left, err := r.admitter.Remaining(ctx, []int64{c.VoucherID})
	if err != nil {
		return roomView{}, err
	}
	v := roomView{at: r.now(), counts: counts, drawn: c.RoomDrawn, remaining: -1}
	r.mu.Lock()
	if old, ok := r.views[c.VoucherID]; ok {
		v.floor, v.drawn = old.floor, max(v.drawn, old.drawn)
	}
	r.mu.Unlock()
	if n, ok := left[c.VoucherID]; ok {
		v.remaining = n
	}
	v.floor.Before, v.floor.After = max(v.floor.Before, counts.Before), max(v.floor.After, counts.After)
	v.floor.Next = max(v.floor.Next, counts.Next)
	if v.drawn < 0 && counts.Opened {
		// The open has passed by Redis's clock: nobody joins before it any
		// more. The first process to record the count decides it for all,
		// and Postgres keeps it when Redis loses the room. A Redis that lost
		// some joins (a failover) counts fewer than this process handed
		// out: the draw takes the higher, so that every ticket it gave has
		// a place among the drawn.
		if v.drawn, err = r.draws.RecordRoomDraw(ctx, c.VoucherID, max(counts.Before, v.floor.Before)); err != nil {
			return roomView{}, err
		}
	}
	if v.drawn >= 0 {
		// Those who joined before the open are the drawn ones, whatever a
		// Redis that lost the room counts now.
		v.counts.Before = v.drawn
	}
	r.mu.Lock()
	if old, ok := r.views[c.VoucherID]; ok { // saw may have raised it meanwhile
		v.floor.Before, v.floor.After = max(v.floor.Before, old.floor.Before), max(v.floor.After, old.floor.After)
		v.floor.Next = max(v.floor.Next, old.floor.Next)
	}
	if len(r.views) > 10000 {
		clear(r.views)
	}
	// The map gets a copy of its own: saw changes it under r.mu, while v
	// is returned after the unlock.
	stored := v
	r.views[c.VoucherID] = &stored
	r.mu.Unlock()
	return v, nil
}

// saw raises a room's floor to a place this process handed out.
func (r *Rooms) saw(voucherID int64, pl RoomPlace) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.views[voucherID]
	if !ok {
		return
	}
	if pl.BeforeOpen {
		v.floor.Before = max(v.floor.Before, pl.Seq+1)
	} else {
		v.floor.Next = max(v.floor.Next, pl.Seq+1)
	}
}
