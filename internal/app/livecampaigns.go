package app

import (
	"context"
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
	logger *slog.Logger

	mu     sync.Mutex
	ids    []int64
	loaded bool
}

// liveCampaignsTimeout bounds the guard's wait for Postgres.
const liveCampaignsTimeout = time.Second

func newLiveCampaigns(s *store.Store, logger *slog.Logger) *liveCampaigns {
	return &liveCampaigns{store: s, logger: logger}
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
		l.ids, l.loaded = ids, true
		return slices.Clone(ids), nil
	}
	if !l.loaded {
		return nil, err
	}
	l.logger.WarnContext(ctx, "live campaigns from Postgres failed: using the last list", "campaigns", len(l.ids), "err", err)
	return slices.Clone(l.ids), nil
}
