package verify

import (
	"context"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/bench/report"
)

// BenchApplication is the application_name of the bench's own Postgres
// connections (see BenchDSN): the pool sampler leaves them out.
const BenchApplication = "seckill-bench"

// activityQuery counts the database's client connections by what they do,
// the bench's own aside.
const activityQuery = `SELECT
	count(*) FILTER (WHERE state = 'active'),
	count(*) FILTER (WHERE state LIKE 'idle in transaction%'),
	count(*) FILTER (WHERE wait_event_type = 'Lock'),
	count(*)
FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend' AND application_name <> ?`

// PoolSampler samples pg_stat_activity of one database while the server
// works: how much of its connection pool is in use (active or idle in a
// transaction) and how many connections wait on a lock.
type PoolSampler struct {
	poolSize int
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu  sync.Mutex
	use report.PoolUse
	sum [4]int64 // active, idle in transaction, waiting on a lock, in use
}

// StartPoolSampler samples every every through db (a connection of the
// server's database) until Stop; poolSize is the server's pool
// (SECKILL_DB_MAX_CONNS).
func StartPoolSampler(ctx context.Context, db *bun.DB, poolSize int, every time.Duration) *PoolSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &PoolSampler{poolSize: poolSize, cancel: cancel}
	s.use.PoolSize, s.use.EveryMs = poolSize, float64(every.Milliseconds())
	s.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample(ctx, db)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return s
}

func (s *PoolSampler) sample(ctx context.Context, db *bun.DB) {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var active, idleTx, lock, total int
	if err := db.QueryRowContext(qctx, activityQuery, BenchApplication).Scan(&active, &idleTx, &lock, &total); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := &s.use
	u.Samples++
	inUse := active + idleTx
	u.MaxActive, u.MaxIdleInTx, u.MaxLockWait = max(u.MaxActive, active), max(u.MaxIdleInTx, idleTx), max(u.MaxLockWait, lock)
	u.MaxInUse, u.MaxConnections = max(u.MaxInUse, inUse), max(u.MaxConnections, total)
	for i, v := range []int{active, idleTx, lock, inUse} {
		s.sum[i] += int64(v)
	}
}

// Stop ends the sampling and returns what it saw.
func (s *PoolSampler) Stop() report.PoolUse {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.use
	if n := float64(u.Samples); n > 0 {
		u.MeanActive, u.MeanIdleInTx = float64(s.sum[0])/n, float64(s.sum[1])/n
		u.MeanLockWait, u.MeanInUse = float64(s.sum[2])/n, float64(s.sum[3])/n
	}
	if s.poolSize > 0 {
		u.MaxShare, u.MeanShare = float64(u.MaxInUse)/float64(s.poolSize), u.MeanInUse/float64(s.poolSize)
	}
	return u
}
