package seckill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// How Purchases restores campaigns that Redis lost or must rebuild.
const (
	// recoveryWait bounds how long a purchase waits for its campaign to be
	// restored before it is answered EUNAVAILABLE.
	recoveryWait = 3 * time.Second
	// rebuildTimeout bounds one rebuild, which runs detached from the
	// purchase that started it: a buyer who hangs up does not abort it.
	rebuildTimeout = 30 * time.Second
	// maxRebuilds bounds the rebuilds (each a few Postgres queries) one
	// process runs at once: a flood of purchases of unknown vouchers
	// cannot turn into a flood of queries.
	maxRebuilds = 4
	// unknownTTL is how long a voucher that Postgres does not know is
	// answered ENOTFOUND without asking Postgres again.
	unknownTTL = 2 * time.Second
	// maxUnknown bounds the memory of unknown vouchers.
	maxUnknown = 10000
	// rebuildPoll is how often a process waiting for another process's
	// rebuild looks again.
	rebuildPoll = 50 * time.Millisecond
)

// recovery keeps the rebuilds a process runs: at most one per campaign, at
// most maxRebuilds at once, and a short memory of vouchers Postgres does not
// know.
type recovery struct {
	once     sync.Once
	mu       sync.Mutex
	inflight map[int64]*rebuildCall
	unknown  map[int64]time.Time
	slots    chan struct{}
}

type rebuildCall struct {
	done chan struct{}
	err  error
}

func (r *recovery) init() {
	r.once.Do(func() {
		r.inflight = make(map[int64]*rebuildCall)
		r.unknown = make(map[int64]time.Time)
		r.slots = make(chan struct{}, maxRebuilds)
	})
}

// needsRecovery reports whether an Admit error means the campaign must be
// restored from Postgres before Redis can answer for it.
func needsRecovery(err error) bool {
	return errors.Is(err, ErrRebuildNeeded) || ErrorCode(err) == ENOTFOUND
}

// recoverCampaign restores one campaign into Redis from Postgres, or waits
// for the rebuild already under way, within recoveryWait. ENOTFOUND for a
// voucher Postgres does not know; EUNAVAILABLE when it cannot be done now.
func (p *Purchases) recoverCampaign(ctx context.Context, voucherID int64) error {
	r := &p.rebuilds
	r.init()
	now := p.now()
	r.mu.Lock()
	if at, ok := r.unknown[voucherID]; ok && now.Sub(at) < unknownTTL {
		r.mu.Unlock()
		return Errorf(ENOTFOUND, "voucher %d not found", voucherID)
	}
	call, running := r.inflight[voucherID]
	if !running {
		select {
		case r.slots <- struct{}{}:
		default:
			r.mu.Unlock()
			return Errorf(EUNAVAILABLE, "the sale is being restored; try again in a moment")
		}
		call = &rebuildCall{done: make(chan struct{})}
		r.inflight[voucherID] = call
		go p.runRebuild(voucherID, call)
	}
	r.mu.Unlock()

	wait := time.NewTimer(recoveryWait)
	defer wait.Stop()
	select {
	case <-call.done:
	case <-wait.C:
		return Errorf(EUNAVAILABLE, "the sale is being restored; try again in a moment")
	case <-ctx.Done():
		return Errorf(EUNAVAILABLE, "the sale is being restored; try again in a moment")
	}
	switch ErrorCode(call.err) {
	case "":
		return nil
	case ENOTFOUND, EUNAVAILABLE:
		return call.err
	}
	return Errorf(EUNAVAILABLE, "the sale is being restored; try again in a moment")
}

func (p *Purchases) runRebuild(voucherID int64, call *rebuildCall) {
	r := &p.rebuilds
	ctx, cancel := context.WithTimeout(context.Background(), rebuildTimeout)
	defer cancel()
	call.err = p.rebuildIfNeeded(ctx, voucherID)
	if call.err != nil && ErrorCode(call.err) != ENOTFOUND {
		p.logger.Error("rebuild campaign", "voucher_id", voucherID, "err", call.err)
	}
	r.mu.Lock()
	delete(r.inflight, voucherID)
	if ErrorCode(call.err) == ENOTFOUND {
		if len(r.unknown) >= maxUnknown {
			clear(r.unknown)
		}
		r.unknown[voucherID] = p.now()
	}
	<-r.slots
	r.mu.Unlock()
	close(call.done)
}

// rebuildIfNeeded is RebuildCampaign unless the campaign no longer needs
// it: after a failover many purchases find it stopped at once, and one that
// waited for a slot or for another process's lock would otherwise rebuild
// it a second time, spending an epoch and stopping the sale again. The
// check here saves the Postgres read; BeginRebuild checks again, in the
// same step as it takes the lock.
func (p *Purchases) rebuildIfNeeded(ctx context.Context, voucherID int64) error {
	if need, err := p.rebuilder.NeedsRebuild(ctx, []int64{voucherID}); err == nil && len(need) == 0 {
		return nil
	}
	return p.RebuildCampaign(ctx, voucherID)
}

// RebuildCampaign restores one campaign's Redis state from Postgres, in a
// new order id epoch, so that whatever Redis lost (an empty restart, the last
// second of its AOF, writes a promoted replica never received) can neither
// oversell nor hand an order id out twice:
//
//  1. take the campaign's rebuild lock in Redis and stop its admissions;
//  2. persist every admission that Redis still holds as pending (they were
//     answered ACCEPTED; the workers may be doing the same, idempotently);
//  3. in Postgres, under the campaign's row lock, move to the next epoch
//     and read stock and buyers; from now on an order of an earlier epoch
//     that reaches Postgres (its task outlived Redis's pending entry) fails
//     with FailureLost instead of taking a unit Redis sells again;
//  4. install that state in Redis, replacing everything, and end the lock.
//
// An admission that Redis lost before any of this was neither pending nor
// persisted: its buyer reads it as FAILED (FailureLost) from Order. When
// another process holds the lock, RebuildCampaign waits for it to finish.
// ENOTFOUND for a voucher Postgres does not know.
func (p *Purchases) RebuildCampaign(ctx context.Context, voucherID int64) error {
	if voucherID <= 0 {
		return Errorf(ENOTFOUND, "voucher %d not found", voucherID)
	}
	// A voucher Postgres does not know (an attacker's made-up id) costs one
	// read and writes nothing to Redis, not even a lock.
	if _, err := p.campaigns.CampaignEpochs(ctx, voucherID); err != nil {
		return err
	}
	lock, ok, err := p.rebuilder.BeginRebuild(ctx, voucherID)
	if err != nil {
		return fmt.Errorf("begin rebuild: %w", err)
	}
	if !ok {
		// Another process holds the lock, or has just installed the
		// campaign (then the first look says so).
		return p.awaitRebuild(ctx, voucherID)
	}
	return p.rebuildLocked(ctx, voucherID, lock)
}

// rebuildLocked does steps 2 to 4 of RebuildCampaign under the lock token.
// When a step fails it releases the lock (if it can), so that the next
// attempt, in this process or another, starts at once instead of waiting
// for the lock to expire with the campaign stopped: after a Sentinel
// failover a sentinel that has not heard of it yet can send one of these
// steps to the dead master.
func (p *Purchases) rebuildLocked(ctx context.Context, voucherID int64, lock RebuildLock) error {
	err := p.rebuildSteps(ctx, voucherID, lock)
	if err != nil {
		p.abortRebuild(context.WithoutCancel(ctx), voucherID, lock.Token)
	}
	return err
}

// rebuildAbortTimeout bounds the release of a failed rebuild's lock; the
// release is tried every rebuildPoll until then, since what failed the
// rebuild (the old master's address, still named by a sentinel) often
// fails the first try too.
const rebuildAbortTimeout = 3 * time.Second

func (p *Purchases) abortRebuild(ctx context.Context, voucherID int64, token string) {
	ctx, cancel := context.WithTimeout(ctx, rebuildAbortTimeout)
	defer cancel()
	t := time.NewTicker(rebuildPoll)
	defer t.Stop()
	for {
		err := p.rebuilder.AbortRebuild(ctx, voucherID, token)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			p.logger.Warn("release the rebuild lock; it expires on its own", "voucher_id", voucherID, "err", err)
			return
		case <-t.C:
		}
	}
}

func (p *Purchases) rebuildSteps(ctx context.Context, voucherID int64, lock RebuildLock) error {
	began := time.Now()
	// A rebuild of some stock shards (their master failed over) persists
	// and recounts only what those shards admitted: the others keep
	// selling meanwhile.
	ours := func(orderID int64) bool {
		_, shard, _ := SplitShardOrderID(orderID)
		return lock.Shards == nil || slices.Contains(lock.Shards, shard)
	}
	survivors, err := p.outbox.PendingOf(ctx, voucherID)
	if err != nil {
		return fmt.Errorf("pending admissions: %w", err)
	}
	survivors = slices.DeleteFunc(survivors, func(a Admission) bool { return !ours(a.OrderID) })
	// What this process admitted lately was promised too: Redis may have
	// lost it (persisting it again is a no-op for what Postgres has).
	epochs, err := p.campaigns.CampaignEpochs(ctx, voucherID)
	if err != nil {
		return err
	}
	seen := make(map[int64]bool, len(survivors))
	for _, a := range survivors {
		seen[a.OrderID] = true
	}
	for _, a := range p.recent.of(voucherID) {
		if !seen[a.OrderID] && ours(a.OrderID) && OrderEpoch(a.OrderID) == epochs.OfOrder(a.OrderID) {
			survivors = append(survivors, a)
		}
	}
	if err := p.PersistAdmissions(ctx, survivors); err != nil {
		return fmt.Errorf("persist %d pending admissions: %w", len(survivors), err)
	}
	st, err := p.campaigns.RebuildCampaign(ctx, voucherID, lock.Shards)
	if err != nil {
		return err
	}
	installed, err := p.rebuilder.FinishRebuild(ctx, lock.Token, st)
	if err != nil {
		return fmt.Errorf("install campaign: %w", err)
	} else if !installed {
		return Errorf(EUNAVAILABLE, "the rebuild of campaign %d lost its lock", voucherID)
	}
	attrs := []any{"voucher_id", voucherID, "epoch", st.Campaign.Epoch,
		"shards", st.Shards, "stock", st.Campaign.Stock, "buyers", len(st.Buyers), "persisted_pending", len(survivors),
		"took", time.Since(began).Round(time.Millisecond)}
	if lock.Reason != "" {
		attrs = append(attrs, "reason", lock.Reason)
	}
	p.logger.Warn("rebuilt campaign from Postgres", attrs...)
	return nil
}

// awaitRebuild waits until another process has rebuilt the campaign.
func (p *Purchases) awaitRebuild(ctx context.Context, voucherID int64) error {
	t := time.NewTicker(rebuildPoll)
	defer t.Stop()
	for {
		need, err := p.rebuilder.NeedsRebuild(ctx, []int64{voucherID})
		if err != nil {
			return err
		}
		if len(need) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return Errorf(EUNAVAILABLE, "the sale is being restored; try again in a moment")
		case <-t.C:
		}
		// The holder may have died: its lock expires, and then this
		// process takes over.
		lock, ok, err := p.rebuilder.BeginRebuild(ctx, voucherID)
		if err != nil {
			return err
		}
		if ok {
			return p.rebuildLocked(ctx, voucherID, lock)
		}
	}
}

// RestoreCampaigns rebuilds every live campaign that Redis lacks or must
// rebuild, one after another; the reconciler calls it on every tick, so a
// campaign nobody tries to buy is restored too. It returns how many it
// rebuilt.
func (p *Purchases) RestoreCampaigns(ctx context.Context) (int, error) {
	ids, err := p.campaigns.LiveCampaigns(ctx)
	if err != nil {
		return 0, fmt.Errorf("live campaigns: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	need, err := p.rebuilder.NeedsRebuild(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("campaigns to rebuild: %w", err)
	}
	n := 0
	var errs []error
	for _, id := range need {
		if err := p.RebuildCampaign(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("campaign %d: %w", id, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
