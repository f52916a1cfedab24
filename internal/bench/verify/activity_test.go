package verify

import (
	"context"
	"testing"
	"time"

	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

// TestPoolSampler holds one of a "server's" connections idle in a
// transaction and keeps another busy, and checks that the sampler sees
// both, and not its own connection.
func TestPoolSampler(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	dsn := storetest.NewDSN(t)
	ctx := context.Background()
	server, err := store.Open(ctx, dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	bench, err := store.Open(ctx, BenchDSN(dsn), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bench.Close() })

	tx, err := server.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	busy := make(chan error, 1)
	go func() {
		_, err := server.ExecContext(ctx, "SELECT pg_sleep(1)")
		busy <- err
	}()
	time.Sleep(200 * time.Millisecond) // the sleep is under way
	s := StartPoolSampler(ctx, bench, 4, 20*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	u := s.Stop()
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	if u.Samples < 3 || u.PoolSize != 4 || u.MaxActive != 1 || u.MaxIdleInTx != 1 || u.MaxInUse != 2 || u.MaxShare != 0.5 {
		t.Errorf("pool use %+v", u)
	}
	if u.MeanInUse < 1.5 || u.MeanInUse > 2 || u.MaxLockWait != 0 {
		t.Errorf("means %+v", u)
	}
}
