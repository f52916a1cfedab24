package seckill

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// The waiting room.
//
// A campaign may let buyers in through a waiting room. It opens a while
// before the sale; buyers join it and hold a signed ticket. At the open,
// everyone who joined before it is put in a random order, and later
// joiners queue behind them in arrival order. Buyers are then let through
// at the campaign's rate: the buyer at place p (0-based) has their turn at
// begin + p/rate and holds, for PassFor from then, a pass that the purchase
// requires.
//
// Nothing here costs Redis anything per buyer and second. Joining numbers
// the joiner in one of two counters (before the open, after it) and
// remembers the number beside their user id, so that joining twice answers
// the same ticket; the ticket carries the number. The random order is a
// keyed pseudo-random permutation of 0..n-1, n the joiners before the open
// (PermuteIndex), so a ticket's place is a computation and not a lookup,
// and the line moves by the clock alone: where a buyer stands, what they
// wait and whether their turn has come follow from their place, the open
// and the rate. A process reads the two counters of a room once every
// RoomRefresh, whoever is watching.

// WaitingRoom is a campaign's waiting room. The zero value is none.
type WaitingRoom struct {
	// OpensBefore is how long before the sale's begin buyers may join.
	OpensBefore time.Duration
	// AdmitPerSecond is how many buyers' turns come a second; 0: no room.
	AdmitPerSecond int
	// PassFor is how long a pass lasts from its buyer's turn.
	PassFor time.Duration
}

// Enabled reports whether the campaign has a waiting room.
func (w WaitingRoom) Enabled() bool { return w.AdmitPerSecond > 0 }

// RoomOpensAt is when buyers may join the campaign's waiting room: its
// OpensBefore ahead of the sale's begin.
func (c *Campaign) RoomOpensAt() time.Time { return c.BeginTime.Add(-c.Room.OpensBefore) }

// Limits of a waiting room's settings.
const (
	MinRoomOpensBefore = time.Second
	MaxRoomOpensBefore = 24 * time.Hour
	MaxRoomAdmitRate   = 1_000_000
	MinRoomPass        = 10 * time.Second
	MaxRoomPass        = time.Hour
	DefaultRoomPass    = time.Minute
)

// ValidateWaitingRoom checks a room's settings (none is valid; a PassFor of 0
// is DefaultRoomPass); field names are those of the GraphQL input.
func ValidateWaitingRoom(w WaitingRoom) error {
	if !w.Enabled() && w.OpensBefore == 0 && w.PassFor == 0 {
		return nil
	}
	if w.AdmitPerSecond < 1 || w.AdmitPerSecond > MaxRoomAdmitRate {
		return Invalidf("waitingRoom.admitPerSecond", "admitPerSecond must be between 1 and %d", MaxRoomAdmitRate)
	}
	if w.OpensBefore < MinRoomOpensBefore || w.OpensBefore > MaxRoomOpensBefore || w.OpensBefore%time.Second != 0 {
		return Invalidf("waitingRoom.opensSecondsBefore", "opensSecondsBefore must be whole seconds between %d and %d",
			int(MinRoomOpensBefore/time.Second), int(MaxRoomOpensBefore/time.Second))
	}
	if pass := cmp.Or(w.PassFor, DefaultRoomPass); pass < MinRoomPass || pass > MaxRoomPass || pass%time.Second != 0 {
		return Invalidf("waitingRoom.passSeconds", "passSeconds must be whole seconds between %d and %d",
			int(MinRoomPass/time.Second), int(MaxRoomPass/time.Second))
	}
	return nil
}

// RoomPlace is a joiner's number in a room: for one who joined before the
// open, Seq is their number among those (0-based), drawn into a place at
// the open; for one after it, Seq is their place in line itself (the next
// free one when they joined, and never one whose turn had passed).
type RoomPlace struct {
	BeforeOpen bool
	Seq        int64
}

// RoomCounts is how many joined a room before its open and after it,
// whether the open has passed by Redis's clock (then Before is final), and
// Next, the lowest place the next joiner after the open may take.
type RoomCounts struct {
	Before, After int64
	Next          int64
	Opened        bool
}

// Joined is everyone who joined.
func (c RoomCounts) Joined() int64 { return c.Before + c.After }

// RoomState is where a buyer stands in a waiting room.
type RoomState string

const (
	RoomBeforeOpen RoomState = "BEFORE_OPEN" // the sale has not opened: the order is drawn at the open
	RoomWaiting    RoomState = "WAITING"     // in line
	RoomYourTurn   RoomState = "YOUR_TURN"   // the pass is valid: buy now
	RoomMissed     RoomState = "MISSED"      // the turn came and its pass expired
	RoomSoldOut    RoomState = "SOLD_OUT"    // nothing left: the line is closed
	RoomEnded      RoomState = "ENDED"       // the sale is over
)

// Final reports whether a state never changes again.
func (s RoomState) Final() bool { return s == RoomMissed || s == RoomSoldOut || s == RoomEnded }

// RoomStates lists every state.
var RoomStates = []RoomState{RoomBeforeOpen, RoomWaiting, RoomYourTurn, RoomMissed, RoomSoldOut, RoomEnded}

// RoomStatus is what a buyer in a waiting room is told.
type RoomStatus struct {
	State RoomState
	// Place is the buyer's 0-based place in line, known from the open on;
	// Ahead is how many places before it have not had their turn yet.
	Place, Ahead int64
	PlaceKnown   bool
	// Joined is how many joined the room so far.
	Joined int64
	// TurnAt is when the buyer's turn comes (came); before the open, the
	// open. Wait is how long until then (0 once it has come).
	TurnAt time.Time
	Wait   time.Duration
	// Pass is the pass to buy with, during the turn, valid until PassExpiresAt.
	Pass          string
	PassExpiresAt time.Time
}

// LetThrough returns how many places have had their turn at now: the
// places p with begin + p/rate <= now.
func LetThrough(w WaitingRoom, begin, now time.Time) int64 {
	if !w.Enabled() || now.Before(begin) {
		return 0
	}
	d := now.Sub(begin)
	// floor(d·rate / 1s) + 1, computed without overflow for any d up to
	// ~290 years at a million a second.
	hi, lo := bits.Mul64(uint64(d), uint64(w.AdmitPerSecond))
	q, _ := bits.Div64(hi, lo, uint64(time.Second))
	return int64(q) + 1
}

// TurnAt returns when place p's turn comes: begin + p/rate.
func TurnAt(w WaitingRoom, begin time.Time, p int64) time.Time {
	hi, lo := bits.Mul64(uint64(p), uint64(time.Second))
	if hi >= uint64(w.AdmitPerSecond) {
		return begin.Add(1<<63 - 1) // centuries away
	}
	q, r := bits.Div64(hi, lo, uint64(w.AdmitPerSecond))
	if r != 0 {
		q++ // the first nanosecond at which p is let through
	}
	return begin.Add(time.Duration(q))
}

// RoomPlaceIndex returns the place in line of a joiner, given how many
// joined before the open: a random place among those for a joiner before
// it; for one after, the place they took, behind them in arrival order.
func (c *Challenger) RoomPlaceIndex(voucherID int64, pl RoomPlace, before int64) int64 {
	if !pl.BeforeOpen {
		return pl.Seq
	}
	return int64(PermuteIndex(c.roomKey(voucherID), uint64(before), uint64(pl.Seq)))
}

// ComputeRoomStatus says where a joiner stands at now. counts must be
// Opened (and before the draw, what joined before the open) once now is
// past the begin; remaining is the stock left, or -1 when unknown.
func (c *Challenger) ComputeRoomStatus(cm Campaign, voucherID, userID int64, pl RoomPlace, before int64, counts RoomCounts, remaining int64, now time.Time) RoomStatus {
	place := int64(-1)
	if before >= 0 || !pl.BeforeOpen {
		place = c.RoomPlaceIndex(voucherID, pl, before)
	}
	return c.roomStatusAt(cm, voucherID, userID, place, counts, remaining, now)
}

// roomStatusAt is ComputeRoomStatus for a place computed already (-1:
// not drawn yet), as a watcher's stream keeps it: the permutation costs a
// few microseconds, and a stream asks every second.
func (c *Challenger) roomStatusAt(cm Campaign, voucherID, userID, place int64, counts RoomCounts, remaining int64, now time.Time) RoomStatus {
	w := cm.Room
	st := RoomStatus{Joined: counts.Joined()}
	switch {
	case !now.Before(cm.EndTime):
		st.State = RoomEnded
		return st
	case remaining == 0:
		st.State = RoomSoldOut
		return st
	case now.Before(cm.BeginTime) || place < 0:
		st.State, st.TurnAt = RoomBeforeOpen, cm.BeginTime
		st.Wait = max(0, cm.BeginTime.Sub(now))
		return st
	}
	p := place
	st.Place, st.PlaceKnown = p, true
	st.TurnAt = TurnAt(w, cm.BeginTime, p)
	passEnd := st.TurnAt.Add(w.PassFor)
	if passEnd.After(cm.EndTime) {
		passEnd = cm.EndTime
	}
	switch {
	case now.Before(st.TurnAt):
		st.State = RoomWaiting
		st.Ahead = max(0, p-LetThrough(w, cm.BeginTime, now))
		st.Wait = st.TurnAt.Sub(now)
	case now.Before(passEnd):
		st.State = RoomYourTurn
		st.PassExpiresAt = passEnd
		st.Pass = c.SignPass(voucherID, userID, passEnd)
	default:
		st.State = RoomMissed
	}
	return st
}

// Tickets and passes: signed like challenge tokens, with keys of their own
// derived from the challenge key.

const (
	maxRoomTokenLen = 256
	ticketVersion   = "t1"
	passVersion     = "p1"
)

func (c *Challenger) signed(payload string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(c.mac("room", payload)[:16])
}

// open returns the fields of a token this Challenger signed, or false.
func (c *Challenger) open(token, version string, n int) ([]string, bool) {
	if len(token) > maxRoomTokenLen {
		return nil, false
	}
	p64, s64, ok := strings.Cut(token, ".")
	if !ok {
		return nil, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(s64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, c.mac("room", string(payload))[:16]) {
		return nil, false
	}
	f := strings.Split(string(payload), ".")
	if len(f) != n || f[0] != version {
		return nil, false
	}
	return f, true
}

// SignRoomTicket returns the ticket of a joiner.
func (c *Challenger) SignRoomTicket(voucherID, userID int64, pl RoomPlace) string {
	kind := "a"
	if pl.BeforeOpen {
		kind = "b"
	}
	return c.signed(strings.Join([]string{ticketVersion, strconv.FormatInt(voucherID, 10), strconv.FormatInt(userID, 10),
		kind + strconv.FormatInt(pl.Seq, 10)}, "."))
}

// CheckRoomTicket returns the place a ticket holds for the user and
// campaign: EINVALID for a ticket we did not sign, ticket of another user
// or campaign.
func (c *Challenger) CheckRoomTicket(ticket string, voucherID, userID int64) (RoomPlace, error) {
	f, ok := c.open(ticket, ticketVersion, 4)
	if !ok {
		return RoomPlace{}, Invalidf("ticket", "not a ticket of this service: join the waiting room for one")
	}
	v, _ := strconv.ParseInt(f[1], 10, 64)
	u, _ := strconv.ParseInt(f[2], 10, 64)
	if v != voucherID || u != userID {
		return RoomPlace{}, Invalidf("ticket", "the ticket was given to another user or for another sale")
	}
	if len(f[3]) < 2 || (f[3][0] != 'a' && f[3][0] != 'b') {
		return RoomPlace{}, Invalidf("ticket", "not a ticket of this service: join the waiting room for one")
	}
	seq, err := strconv.ParseInt(f[3][1:], 10, 64)
	if err != nil || seq < 0 {
		return RoomPlace{}, Invalidf("ticket", "not a ticket of this service: join the waiting room for one")
	}
	return RoomPlace{BeforeOpen: f[3][0] == 'b', Seq: seq}, nil
}

// SignPass returns a pass for the user and campaign, valid until expires.
func (c *Challenger) SignPass(voucherID, userID int64, expires time.Time) string {
	return c.signed(strings.Join([]string{passVersion, strconv.FormatInt(voucherID, 10), strconv.FormatInt(userID, 10),
		strconv.FormatInt(expires.UnixMilli(), 10)}, "."))
}

// PassVerdict is what a purchase's pass came to.
type PassVerdict string

const (
	PassNone    PassVerdict = ""        // none given, not ours, or another's
	PassValid   PassVerdict = "VALID"   // for this user and campaign, in time
	PassExpired PassVerdict = "EXPIRED" // ours and theirs, but past its turn
)

// CheckPass verifies a purchase's pass for the user and campaign at now, in
// microseconds and without I/O. The admission script decides whether the
// campaign needs one.
func (c *Challenger) CheckPass(pass string, voucherID, userID int64, now time.Time) PassVerdict {
	if pass == "" {
		return PassNone
	}
	f, ok := c.open(pass, passVersion, 4)
	if !ok {
		return PassNone
	}
	v, _ := strconv.ParseInt(f[1], 10, 64)
	u, _ := strconv.ParseInt(f[2], 10, 64)
	exp, err := strconv.ParseInt(f[3], 10, 64)
	if v != voucherID || u != userID || err != nil {
		return PassNone
	}
	if now.UnixMilli() >= exp {
		return PassExpired
	}
	return PassValid
}

// roomKey is the key of a campaign's random order.
func (c *Challenger) roomKey(voucherID int64) []byte {
	return c.mac("room order", strconv.FormatInt(voucherID, 10))
}

// PermuteIndex maps i (0 <= i < n) to its place in a pseudo-random order of
// 0..n-1 chosen by key: a bijection, so every place is taken once. It is a
// balanced Feistel network of permuteRounds rounds (HMAC-SHA256 as the
// round function) on the smallest even number of bits that holds n,
// walking the cycle until the result falls below n (fewer than four steps
// on average).
func PermuteIndex(key []byte, n, i uint64) uint64 {
	if n <= 1 || i >= n {
		return i
	}
	half := (bits.Len64(n-1) + 1) / 2
	mask := uint64(1)<<half - 1
	m := hmac.New(sha256.New, key)
	var buf [9]byte
	var sum [sha256.Size]byte
	x := i
	for {
		l, r := x>>half, x&mask
		for round := range permuteRounds {
			buf[0] = byte(round)
			binary.LittleEndian.PutUint64(buf[1:], r)
			m.Reset()
			m.Write(buf[:])
			f := binary.LittleEndian.Uint64(m.Sum(sum[:0])) & mask
			l, r = r, l^f
		}
		x = l<<half | r
		if x < n {
			return x
		}
	}
}

const permuteRounds = 8
