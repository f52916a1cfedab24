package seckill

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// What a process remembers of the admissions it answered ACCEPTED.
//
// An admission is pending in Redis until Postgres holds it. When Redis
// loses it first (an empty restart, the last second of its AOF, a failover
// to a replica that missed it), the process that admitted it still knows
// it for a while: its order id, its buyer and when. So a rebuild of the
// campaign in this process persists them with what Redis still held, before
// it moves the campaign to its next epoch (they were promised, and Postgres
// takes them if it has the stock); and the reconciler persists those of an
// epoch the campaign has left since (rebuilt by another process), which
// Postgres records as FAILED (FailureLost) for their buyers to read. Only
// when this process dies with Redis's data is an admission lost with
// nobody to tell its buyer: its id then reads NOT_FOUND, to its buyer and
// to anyone else.

// How long and how many admissions a process remembers: long enough for a
// loss to be seen and the campaign rebuilt (the reconciler looks every
// few seconds), and at most maxRecent (24 MB), dropping the oldest.
const (
	recentFor = 2 * time.Minute
	maxRecent = 1 << 20
)

// recent is the admissions a process answered ACCEPTED lately, by
// campaign, oldest first.
type recent struct {
	mu   sync.Mutex
	by   map[int64]*recentList
	n    int
	now  func() time.Time
	free []*recentChunk // chunks emptied, to be filled again
}

// remembered is one admission as recent keeps it: no pointers, so that
// the garbage collector never looks into the million it may hold, and a
// third of an Admission's size. Its campaign is its list's.
type remembered struct {
	orderID, userID int64
	at              int64 // AdmittedAt, Unix nanoseconds
}

func (m remembered) admission(voucherID int64) Admission {
	return Admission{OrderID: m.orderID, VoucherID: voucherID, UserID: m.userID, AdmittedAt: time.Unix(0, m.at).UTC()}
}

// recentChunk holds recentChunkLen admissions of one campaign in the order
// they were added. A list is a queue of chunks: an add writes into the
// last, and what ages out leaves from the first, so nothing already
// remembered is ever copied again.
type recentChunk [recentChunkLen]remembered

const recentChunkLen = 1024

// maxFreeChunks bounds the emptied chunks kept for reuse: a sale frees one
// as it fills one; what a finished sale frees beyond these is the
// collector's.
const maxFreeChunks = 16

// recentList is one campaign's admissions, oldest first: chunks[0][head:]
// then the chunks after it, the last filled up to tail.
type recentList struct {
	chunks     []*recentChunk
	head, tail int
}

func (l *recentList) len() int {
	if len(l.chunks) == 0 {
		return 0
	}
	return (len(l.chunks)-1)*recentChunkLen + l.tail - l.head
}

func (l *recentList) first() remembered { return l.chunks[0][l.head] }

// dropFirst drops the oldest admission; a chunk left empty goes to free.
func (r *recent) dropFirst(l *recentList) {
	l.head++
	r.n--
	if l.head == recentChunkLen || (len(l.chunks) == 1 && l.head == l.tail) {
		if len(r.free) < maxFreeChunks {
			r.free = append(r.free, l.chunks[0])
		}
		l.chunks[0] = nil
		l.chunks = l.chunks[1:]
		l.head = 0
		if len(l.chunks) == 0 {
			l.tail = 0
		}
	}
}

func (r *recent) push(l *recentList, m remembered) {
	if len(l.chunks) == 0 || l.tail == recentChunkLen {
		var c *recentChunk
		if n := len(r.free); n > 0 {
			c, r.free = r.free[n-1], r.free[:n-1]
		} else {
			c = new(recentChunk)
		}
		l.chunks = append(l.chunks, c)
		l.tail = 0
	}
	l.chunks[len(l.chunks)-1][l.tail] = m
	l.tail++
	r.n++
}

// each calls fn with every admission of l, oldest first.
func (l *recentList) each(fn func(remembered)) {
	for i, c := range l.chunks {
		from, to := 0, recentChunkLen
		if i == 0 {
			from = l.head
		}
		if i == len(l.chunks)-1 {
			to = l.tail
		}
		for _, m := range c[from:to] {
			fn(m)
		}
	}
}

// add remembers adm, forgetting what is older than recentFor, or the
// oldest when maxRecent are remembered.
func (r *recent) add(adm Admission) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[int64]*recentList{}
	}
	l := r.by[adm.VoucherID]
	if l == nil {
		l = &recentList{}
		r.by[adm.VoucherID] = l
	}
	cut := r.now().Add(-recentFor).UnixNano()
	for l.len() > 0 && l.first().at < cut {
		r.dropFirst(l)
	}
	if r.n >= maxRecent && l.len() > 0 {
		r.dropFirst(l)
	}
	// The trace is not needed again.
	r.push(l, remembered{orderID: adm.OrderID, userID: adm.UserID, at: adm.AdmittedAt.UnixNano()})
}

// of returns what is remembered of one campaign.
func (r *recent) of(voucherID int64) []Admission {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.by[voucherID]
	if l == nil {
		return nil
	}
	out := make([]Admission, 0, l.len())
	l.each(func(m remembered) { out = append(out, m.admission(voucherID)) })
	return out
}

// before returns what is remembered of one campaign from epochs its stock
// shards have left (epochs: where they are now): usually nothing, found
// without copying the list.
func (r *recent) before(voucherID int64, epochs Epochs) []Admission {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Admission
	if l := r.by[voucherID]; l != nil {
		l.each(func(m remembered) {
			if OrderEpoch(m.orderID) < epochs.OfOrder(m.orderID) {
				out = append(out, m.admission(voucherID))
			}
		})
	}
	return out
}

// campaigns returns the campaigns of which something is remembered, and
// drops those of which all is older than recentFor.
func (r *recent) campaigns() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := r.now().Add(-recentFor).UnixNano()
	var ids []int64
	for id, l := range r.by {
		if n := l.len(); n == 0 || l.chunks[len(l.chunks)-1][l.tail-1].at < cut {
			for l.len() > 0 {
				r.dropFirst(l)
			}
			delete(r.by, id)
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// forget drops what is remembered of a campaign from epochs its stock
// shards have left (epochs: where they are now).
func (r *recent) forget(voucherID int64, epochs Epochs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.by[voucherID]
	if l == nil {
		return
	}
	kept := &recentList{}
	l.each(func(m remembered) {
		if OrderEpoch(m.orderID) >= epochs.OfOrder(m.orderID) {
			r.push(kept, m)
		}
	})
	for l.len() > 0 {
		r.dropFirst(l)
	}
	r.by[voucherID] = kept
}

// persistLost persists the admissions this process remembers of epochs
// their campaign has left since: a rebuild elsewhere moved the campaign on
// without them, so Postgres records those it does not hold as FAILED
// (FailureLost), which their buyers read. The reconciler calls it; it
// returns how many it handed to Postgres.
func (p *Purchases) persistLost(ctx context.Context) (int, error) {
	n := 0
	for _, id := range p.recent.campaigns() {
		epochs, err := p.campaigns.CampaignEpochs(ctx, id)
		if ErrorCode(err) == ENOTFOUND {
			p.recent.forget(id, Epochs{Campaign: MaxEpoch + 1})
			continue
		} else if err != nil {
			return n, fmt.Errorf("epochs of campaign %d: %w", id, err)
		}
		lost := p.recent.before(id, epochs)
		if len(lost) == 0 {
			continue
		}
		if err := p.PersistAdmissions(ctx, lost); err != nil {
			return n, fmt.Errorf("persist %d admissions of campaign %d's earlier epochs: %w", len(lost), id, err)
		}
		p.recent.forget(id, epochs)
		n += len(lost)
	}
	return n, nil
}
