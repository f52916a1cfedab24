package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"seckill/internal/store"
)

// liveCampaigns gives the Redis guard (admission.ConnectHook) the campaigns
// Postgres says are live. It asks Postgres each time (the guard asks only
// when a Redis server changed) and keeps the last answer, refreshed by the
// reconciler too, for when Postgres does not answer in time: a guard that
// cannot list the campaigns would otherwise refuse every new connection.
type liveCampaigns struct {
	store  *store.Store
	outage *outageLog // failed reads: a line when they start and one when they end

	mu     sync.Mutex
	ids    []int64
	loaded bool
}

// liveCampaignsTimeout bounds the guard's wait for Postgres.
const liveCampaignsTimeout = time.Second

func newLiveCampaigns(s *store.Store, logger *slog.Logger) *liveCampaigns {
	return &liveCampaigns{store: s, outage: newOutageLog(logger, "live campaigns from Postgres")}
}

// get returns the live campaigns from Postgres, or the last list read when
// Postgres fails; an error only when no list was ever read.
func (l *liveCampaigns) get(ctx context.Context) ([]int64, error) {
	qctx, cancel := context.WithTimeout(ctx, liveCampaignsTimeout)
	defer cancel()
	ids, err := l.store.LiveCampaigns(qctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.outage.ok(ctx)
		l.ids, l.loaded = ids, true
		return slices.Clone(ids), nil
	}
	if !l.loaded {
		return nil, err
	}
	l.outage.fail(ctx, fmt.Errorf("using the last list of %d: %w", len(l.ids), err))
	return slices.Clone(l.ids), nil
}

// campaignShards gives the Redis guard and the Admitter the number of stock
// shards of campaigns (store.CampaignShards), and keeps the campaigns of
// more than one (only real campaigns have them, so the memory is bounded): a
// campaign's shards never change, so when Postgres does not answer in time
// the guard still stops every shard of the campaigns it knows of instead of
// refusing the connection. The reconciler asks for the live campaigns on
// every pass, so it knows them before a failover.
type campaignShards struct {
	store  *store.Store
	logger *slog.Logger

	mu    sync.Mutex
	known map[int64]int // voucher id -> shards, of campaigns of more than one (bounded by real campaigns)
}

func newCampaignShards(s *store.Store, logger *slog.Logger) *campaignShards {
	return &campaignShards{store: s, logger: logger, known: make(map[int64]int)}
}

// get returns the shards of those of ids that have more than one.
func (c *campaignShards) get(ctx context.Context, ids []int64) (map[int64]int, error) {
	c.mu.Lock()
	out := make(map[int64]int)
	var ask []int64
	for _, id := range ids {
		if n, ok := c.known[id]; ok {
			out[id] = n
		} else {
			ask = append(ask, id)
		}
	}
	c.mu.Unlock()
	if len(ask) == 0 {
		return out, nil
	}
	qctx, cancel := context.WithTimeout(ctx, liveCampaignsTimeout)
	defer cancel()
	got, err := c.store.CampaignShards(qctx, ask)
	if err != nil {
		if len(out) > 0 || len(ask) < len(ids) {
			c.logger.WarnContext(ctx, "campaign shards from Postgres failed: using those known", "campaigns", len(ask), "err", err)
			return out, nil
		}
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range got {
		c.known[id] = n
		out[id] = n
	}
	return out, nil
}
