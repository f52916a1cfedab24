package admission

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/seckill"
)

// local is the per-process memory of the campaigns this process has seen:
// their prebuilt script keys and a short-lived "sold out" (or "ended") mark
// that lets Admit answer without Redis once the campaign is over.
//
// Reads are lock-free: the map is copied on write (campaigns are few and
// change rarely) and published through an atomic pointer.
type local struct {
	base  time.Time // monotonic origin of mark deadlines
	ttl   time.Duration
	gen   atomic.Uint64 // source of generations; never repeats
	mu    sync.Mutex    // serializes writers of states
	state atomic.Pointer[map[int64]*campaignState]
}

// campaignState is what this process remembers of one campaign. Its
// generation changes every time the campaign may admit again; a mark is
// valid only for the generation that was current when the Redis request that
// produced it started, so a stale SOLD_OUT answer that arrives after a
// release can never hide the returned unit.
type campaignState struct {
	admitKeys []string      // shard 0's
	call      *admitStatics // what every admit call to shard 0 sends alike
	shards    int           // the campaign's stock shards (shards.go), at least 1
	gen       atomic.Uint64
	mark      atomic.Pointer[mark]
}

type mark struct {
	gen     uint64
	until   time.Duration // since local.base
	outcome seckill.Outcome
}

func newLocal(ttl time.Duration) *local {
	l := &local{base: time.Now(), ttl: ttl}
	m := map[int64]*campaignState{}
	l.state.Store(&m)
	return l
}

// get returns the campaign's state, or nil before this process saw it.
func (l *local) get(voucherID int64) *campaignState {
	return (*l.state.Load())[voucherID]
}

// getOrCreate returns the campaign's state, creating it with a fresh
// generation. It is called only for campaigns Redis knows, so the map is
// bounded by real campaigns, not by what clients send.
func (l *local) getOrCreate(voucherID int64, admitKeys []string, call *admitStatics, shards int) *campaignState {
	if st := l.get(voucherID); st != nil {
		return st
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.state.Load()
	if st := old[voucherID]; st != nil {
		return st
	}
	st := &campaignState{admitKeys: admitKeys, call: call, shards: max(shards, 1)}
	st.gen.Store(l.gen.Add(1))
	m := make(map[int64]*campaignState, len(old)+1)
	maps.Copy(m, old)
	m[voucherID] = st
	l.state.Store(&m)
	return st
}

// forget drops the campaign's state.
func (l *local) forget(voucherID int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.state.Load()
	if _, ok := old[voucherID]; !ok {
		return
	}
	m := maps.Clone(old)
	delete(m, voucherID)
	l.state.Store(&m)
}

// invalidate drops the campaign's mark at once: it may admit again. A
// campaign this process never saw has nothing to drop; a request that
// started before its state existed never sets a mark (its generation, 0,
// matches none).
func (l *local) invalidate(voucherID int64) {
	st := l.get(voucherID)
	if st == nil {
		return
	}
	st.gen.Store(l.gen.Add(1))
	st.mark.Store(nil)
}

// now is the monotonic time since base.
func (l *local) now() time.Duration { return time.Since(l.base) }

// marked returns the outcome remembered for the campaign at generation gen.
func (l *local) marked(st *campaignState, gen uint64) (seckill.Outcome, bool) {
	m := st.mark.Load()
	if m == nil || m.gen != gen || l.now() >= m.until {
		return "", false
	}
	return m.outcome, true
}

// remember marks the campaign with outcome for the TTL, unless it was
// invalidated since gen was read.
func (l *local) remember(st *campaignState, gen uint64, outcome seckill.Outcome) {
	l.rememberFor(st, gen, outcome, l.ttl)
}

// rememberFor marks the campaign with outcome for d (when marks are on).
func (l *local) rememberFor(st *campaignState, gen uint64, outcome seckill.Outcome, d time.Duration) {
	if l.ttl <= 0 || d <= 0 || st.gen.Load() != gen {
		return
	}
	st.mark.Store(&mark{gen: gen, until: l.now() + d, outcome: outcome})
}
