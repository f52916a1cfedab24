// Package seckilltest holds test doubles of the domain's small interfaces,
// for the tests of packages that consume them. It is imported by tests only.
package seckilltest

import (
	"context"
	"sync"

	"seckill/internal/seckill"
)

// Live holds the live counts Redis would, for whatever reads
// seckill.LiveCounts; a campaign never set reads as the zero LiveCounts.
// It is safe for concurrent use.
type Live struct {
	mu     sync.Mutex
	counts map[int64]seckill.LiveCounts
}

// Set makes id's live counts c.
func (l *Live) Set(id int64, c seckill.LiveCounts) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[int64]seckill.LiveCounts{}
	}
	l.counts[id] = c
}

// LiveCounts returns the counts set for each of ids.
func (l *Live) LiveCounts(_ context.Context, ids []int64) (map[int64]seckill.LiveCounts, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]seckill.LiveCounts, len(ids))
	for _, id := range ids {
		out[id] = l.counts[id]
	}
	return out, nil
}
