package seckill

import (
	"testing"
	"time"
)

// TestPermuteIndex: the order is a bijection of 0..n-1 for every n, and a
// different key gives a different order.
func TestPermuteIndex(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 4, 5, 16, 17, 100, 1000, 4097} {
		seen := make([]bool, n)
		moved := 0
		for i := range n {
			p := PermuteIndex([]byte("key"), n, i)
			if p >= n || seen[p] {
				t.Fatalf("n %d: %d maps to %d, taken or out of range", n, i, p)
			}
			seen[p] = true
			if p != i {
				moved++
			}
		}
		if n >= 100 && moved < int(n)*9/10 {
			t.Errorf("n %d: only %d of %d moved", n, moved, n)
		}
	}
	same := 0
	for i := range uint64(1000) {
		if PermuteIndex([]byte("a"), 1000, i) == PermuteIndex([]byte("b"), 1000, i) {
			same++
		}
	}
	if same > 20 {
		t.Errorf("two keys agree on %d of 1000 places", same)
	}
}

// TestTurns: place p's turn comes at begin + p/rate, and LetThrough counts
// exactly the places whose turn has come.
func TestTurns(t *testing.T) {
	begin := time.Unix(1_800_000_000, 0)
	for _, rate := range []int{1, 3, 7, 1000, 1_000_000} {
		w := WaitingRoom{AdmitPerSecond: rate}
		for p := int64(0); p < 50; p++ {
			at := TurnAt(w, begin, p)
			if got := LetThrough(w, begin, at); got != p+1 {
				t.Fatalf("rate %d: at place %d's turn %d let through, want %d", rate, p, got, p+1)
			}
			if got := LetThrough(w, begin, at.Add(-time.Nanosecond)); got != p {
				t.Fatalf("rate %d: just before place %d's turn %d let through, want %d", rate, p, got, p)
			}
		}
	}
	if LetThrough(WaitingRoom{AdmitPerSecond: 5}, begin, begin.Add(-time.Second)) != 0 {
		t.Error("let through before the open")
	}
}

// TestRoomTokens: tickets and passes are bound to their user and campaign,
// and one is not the other.
func TestRoomTokens(t *testing.T) {
	c := NewChallenger([]byte("secret"), time.Minute, time.Minute)
	now := time.Now()
	tk := c.SignRoomTicket(3, 7, RoomPlace{BeforeOpen: true, Seq: 12})
	if pl, err := c.CheckRoomTicket(tk, 3, 7); err != nil || pl != (RoomPlace{BeforeOpen: true, Seq: 12}) {
		t.Fatalf("own ticket: %+v %v", pl, err)
	}
	for name, got := range map[string]error{
		"another user's":     func() error { _, err := c.CheckRoomTicket(tk, 3, 8); return err }(),
		"another campaign's": func() error { _, err := c.CheckRoomTicket(tk, 4, 7); return err }(),
		"forged":             func() error { _, err := NewChallenger([]byte("other"), 0, 0).CheckRoomTicket(tk, 3, 7); return err }(),
		"a pass":             func() error { _, err := c.CheckRoomTicket(c.SignPass(3, 7, now.Add(time.Minute)), 3, 7); return err }(),
	} {
		if ErrorCode(got) != EINVALID {
			t.Errorf("%s ticket: %v, want EINVALID", name, got)
		}
	}
	pass := c.SignPass(3, 7, now.Add(time.Minute))
	for name, tc := range map[string]struct {
		pass       string
		voucher, u int64
		want       PassVerdict
	}{
		"own":                {pass, 3, 7, PassValid},
		"another user's":     {pass, 3, 8, PassNone},
		"another campaign's": {pass, 4, 7, PassNone},
		"a ticket":           {tk, 3, 7, PassNone},
		"expired":            {c.SignPass(3, 7, now.Add(-time.Millisecond)), 3, 7, PassExpired},
		"none":               {"", 3, 7, PassNone},
	} {
		if got := c.CheckPass(tc.pass, tc.voucher, tc.u, now); got != tc.want {
			t.Errorf("%s pass: %q, want %q", name, got, tc.want)
		}
	}
}

// TestComputeRoomStatus: where a joiner stands follows the clock.
func TestComputeRoomStatus(t *testing.T) {
	c := NewChallenger([]byte("secret"), time.Minute, time.Minute)
	begin := time.Unix(1_800_000_000, 0)
	cm := Campaign{VoucherID: 3, BeginTime: begin, EndTime: begin.Add(time.Hour),
		Room: WaitingRoom{OpensBefore: time.Minute, AdmitPerSecond: 10, PassFor: 10 * time.Second}}
	after := RoomPlace{Seq: 50} // joined after the open: place 50, its turn 5 s after it
	counts := RoomCounts{Before: 20, After: 31, Next: 51, Opened: true}
	for _, tc := range []struct {
		name      string
		at        time.Duration // from begin
		remaining int64
		before    int64
		want      RoomState
		ahead     int64
	}{
		{"before the open", -time.Second, 5, -1, RoomBeforeOpen, 0},
		{"waiting", 2 * time.Second, 5, 20, RoomWaiting, 50 - 21},
		{"the turn", 5 * time.Second, 5, 20, RoomYourTurn, 0},
		{"the turn's last moment", 15*time.Second - time.Millisecond, 5, 20, RoomYourTurn, 0},
		{"missed", 15 * time.Second, 5, 20, RoomMissed, 0},
		{"sold out", 2 * time.Second, 0, 20, RoomSoldOut, 0},
		{"ended", time.Hour, 5, 20, RoomEnded, 0},
	} {
		st := c.ComputeRoomStatus(cm, 3, 7, after, tc.before, counts, tc.remaining, begin.Add(tc.at))
		if st.State != tc.want || st.Ahead != tc.ahead {
			t.Errorf("%s: %+v, want %s with %d ahead", tc.name, st, tc.want, tc.ahead)
		}
		if (st.State == RoomYourTurn) != (st.Pass != "") {
			t.Errorf("%s: pass %q in state %s", tc.name, st.Pass, st.State)
		}
		if st.Pass != "" && c.CheckPass(st.Pass, 3, 7, begin.Add(tc.at)) != PassValid {
			t.Errorf("%s: the pass given is not valid", tc.name)
		}
	}
}

// TestRoomThrough: the funnel's count of joiners whose turn came is exact
// without a count per place: drawn ones below the places let through, and
// those after the open below it, whose places not let through yet are one
// run ending at Next (a gap in the places opens only below the place of
// its moment).
func TestRoomThrough(t *testing.T) {
	begin := time.Unix(1_800_000_000, 0)
	cm := Campaign{BeginTime: begin, Room: WaitingRoom{AdmitPerSecond: 1, PassFor: time.Minute}}
	// 10 drawn (places 0-9) and 3 after the open (places 10-12).
	v := roomView{counts: RoomCounts{Before: 10, After: 3, Next: 13}}
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{
		{-time.Second, 0}, {0, 1}, {9 * time.Second, 10}, {11 * time.Second, 12}, {12 * time.Second, 13}, {time.Hour, 13},
	} {
		if got := v.through(cm, begin.Add(tc.at)); got != tc.want {
			t.Errorf("at %s: %d through, want %d", tc.at, got, tc.want)
		}
	}
	// Then, the line empty for a while, 2 more at places 40 and 41 (joined
	// 39 s after the open).
	v.counts = RoomCounts{Before: 10, After: 5, Next: 42}
	for _, tc := range []struct {
		at   time.Duration
		want int64
	}{
		{40 * time.Second, 14}, {41 * time.Second, 15}, {time.Hour, 15},
	} {
		if got := v.through(cm, begin.Add(tc.at)); got != tc.want {
			t.Errorf("at %s after the gap: %d through, want %d", tc.at, got, tc.want)
		}
	}
}
