package seckill

import (
	"testing"
	"time"
)

// recentAdm is an admission of campaign v in epoch e with sequence seq, at t.
func recentAdm(v, e, seq int64, t time.Time) Admission {
	return Admission{OrderID: OrderID(v, e<<epochSeqBits|seq), VoucherID: v, UserID: seq, AdmittedAt: t, Trace: "00-trace"}
}

// TestRecentRemembers: what a process remembers ages out after recentFor,
// per campaign, oldest first; before finds the admissions of earlier
// epochs; forget drops them; campaigns drops a campaign all of whose
// admissions aged out.
func TestRecentRemembers(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := start
	r := &recent{now: func() time.Time { return now }}

	r.add(recentAdm(1, 0, 1, now))
	r.add(recentAdm(1, 0, 2, now))
	r.add(recentAdm(2, 0, 1, now))
	now = now.Add(recentFor / 2)
	r.add(recentAdm(1, 1, 1, now)) // campaign 1 rebuilt into epoch 1

	if got := r.before(1, Epochs{Campaign: 1}); len(got) != 2 || got[0].UserID != 1 || got[1].UserID != 2 {
		t.Fatalf("before(1, epoch 1) = %+v, want the two admissions of epoch 0", got)
	}
	if got := r.before(1, Epochs{Campaign: 0}); len(got) != 0 {
		t.Fatalf("before(1, epoch 0) = %+v, want none", got)
	}
	if got := r.of(1); len(got) != 3 || got[0].Trace != "" {
		t.Fatalf("of(1) = %+v, want three admissions, their trace dropped", got)
	}

	// recentFor after the first three: they age out with the next add.
	now = start.Add(recentFor + time.Second)
	r.add(recentAdm(1, 1, 2, now))
	if got := r.of(1); len(got) != 2 || OrderEpoch(got[0].OrderID) != 1 || got[1].UserID != 2 {
		t.Fatalf("of(1) after aging = %+v, want epoch 1's two", got)
	}
	if ids := r.campaigns(); len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("campaigns() = %v, want [1]: campaign 2's only admission aged out", ids)
	}
	if r.n != 2 {
		t.Fatalf("counted %d, want 2", r.n)
	}
	r.forget(1, Epochs{Campaign: 2})
	if got := r.of(1); len(got) != 0 || r.n != 0 {
		t.Fatalf("after forget(1, 2): %+v, counted %d", got, r.n)
	}
}

// TestRecentBounded: at maxRecent the oldest is dropped for each new one.
func TestRecentBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := &recent{now: func() time.Time { return now }}
	for i := range int64(maxRecent + 10) {
		r.add(recentAdm(1, 0, i%MaxEpochSeq+1, now))
	}
	if got := r.of(1); r.n != maxRecent || len(got) != maxRecent || got[0].UserID != 11 {
		t.Fatalf("counted %d, kept %d from user %d: want %d from user 11", r.n, len(got), got[0].UserID, maxRecent)
	}
}

// TestRecentChunks: a list longer than a chunk keeps its order through
// aging, forget and the bound, whatever chunk the oldest is in.
func TestRecentChunks(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := start
	r := &recent{now: func() time.Time { return now }}
	const n = 3*recentChunkLen + 7
	for i := range int64(n) {
		now = start.Add(time.Duration(i) * time.Millisecond)
		r.add(recentAdm(1, i%2, i+1, now)) // epochs 0 and 1 alternate
	}
	got := r.of(1)
	if len(got) != n || r.n != n {
		t.Fatalf("kept %d, counted %d, want %d", len(got), r.n, n)
	}
	for i, a := range got {
		if a.UserID != int64(i+1) || !a.AdmittedAt.Equal(start.Add(time.Duration(i)*time.Millisecond)) || a.VoucherID != 1 {
			t.Fatalf("admission %d is %+v", i, a)
		}
	}
	r.forget(1, Epochs{Campaign: 1})
	got = r.of(1)
	if len(got) != n/2 || r.n != n/2 || got[0].UserID != 2 || got[len(got)-1].UserID != n-1 {
		t.Fatalf("after forgetting epoch 0: %d kept (counted %d), from %d to %d", len(got), r.n, got[0].UserID, got[len(got)-1].UserID)
	}
	// The first half ages out: the rest stays, in order.
	now = start.Add(recentFor + n/2*time.Millisecond)
	r.add(recentAdm(1, 1, n+2, now))
	got = r.of(1)
	if got[0].UserID <= n/2 || got[len(got)-1].UserID != n+2 || r.n != len(got) {
		t.Fatalf("after aging: from %d to %d, %d kept, counted %d", got[0].UserID, got[len(got)-1].UserID, len(got), r.n)
	}
}

// BenchmarkRecentAdd measures remembering an admission in a sale that
// outlasts recentFor at 5,000 a second: the list holds 600,000, and
// each add lets the oldest age out. A shift of the list on each add would
// copy all of it under the lock every purchase takes, stalling a sale past
// its second minute. Re-slicing costs what an append does, and the append's
// copies of a list outgrowing its array; chunks of pointer-free entries
// allocate nothing.
func BenchmarkRecentAdd(b *testing.B) {
	const perSecond = 5_000
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := &recent{now: func() time.Time { return now }}
	step := time.Second / perSecond
	seq := int64(0)
	next := func() Admission {
		seq = seq%MaxEpochSeq + 1
		now = now.Add(step)
		return recentAdm(1, 0, seq, now)
	}
	for range int(recentFor / step) {
		r.add(next())
	}
	b.ReportAllocs()
	for b.Loop() {
		r.add(next())
	}
}
