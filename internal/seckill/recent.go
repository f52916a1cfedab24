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
// few seconds), and at most maxRecent (about 70 MB), dropping the oldest.
const (
	recentFor = 2 * time.Minute
	maxRecent = 1 << 20
)

// recent is the admissions a process answered ACCEPTED lately, by
// campaign, oldest first.
type recent struct {
	mu  sync.Mutex
	by  map[int64][]Admission
	n   int
	now func() time.Time
}

// add remembers adm, forgetting what is older than recentFor, or the
// oldest when maxRecent are remembered.
func (r *recent) add(adm Admission) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[int64][]Admission{}
	}
	list := r.by[adm.VoucherID]
	cut := r.now().Add(-recentFor)
	drop := 0
	for drop < len(list) && list[drop].AdmittedAt.Before(cut) {
		drop++
	}
	// Re-slice, never shift: a shift moves the whole list, a megabyte-scale
	// copy on every purchase of a sale that outlasts recentFor. append
	// copies only what is kept, when it outgrows the array.
	if drop > 0 {
		clear(list[:drop])
		list = list[drop:]
		r.n -= drop
	}
	if r.n >= maxRecent && len(list) > 0 {
		list = list[1:]
		r.n--
	}
	adm.Trace = "" // not needed again; the string would be kept alive
	r.by[adm.VoucherID] = append(list, adm)
	r.n++
}

// of returns what is remembered of one campaign.
func (r *recent) of(voucherID int64) []Admission {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.by[voucherID])
}

// before returns what is remembered of one campaign from epochs its stock
// shards have left (epochs: where they are now): usually nothing, found
// without copying the list.
func (r *recent) before(voucherID int64, epochs Epochs) []Admission {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Admission
	for _, a := range r.by[voucherID] {
		if OrderEpoch(a.OrderID) < epochs.OfOrder(a.OrderID) {
			out = append(out, a)
		}
	}
	return out
}

// campaigns returns the campaigns of which something is remembered, and
// drops those of which all is older than recentFor.
func (r *recent) campaigns() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := r.now().Add(-recentFor)
	var ids []int64
	for id, list := range r.by {
		if len(list) == 0 || list[len(list)-1].AdmittedAt.Before(cut) {
			r.n -= len(list)
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
	list := r.by[voucherID]
	kept := list[:0]
	for _, a := range list {
		if OrderEpoch(a.OrderID) >= epochs.OfOrder(a.OrderID) {
			kept = append(kept, a)
		}
	}
	r.n -= len(list) - len(kept)
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
