package admission

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// migratingScript reads a key that exists and one that never does, as the
// admit script reads the campaign and a new buyer's limit cell: while their
// slot migrates, the source answers ASK and the target TRYAGAIN.
var migratingScript = redis.NewScript(`
redis.call('INCR', KEYS[1])
redis.call('GET', KEYS[2])
return {0}
`)

// TestBatchDuringSlotMigration: one batch of 150 calls meets a slot that
// migrates for 400 ms, on a durable pipeline and on a plain one. Every
// call runs exactly once and succeeds once the migration ends, well within
// the batch's 2 s: the batch pauses once a round, not once a call (150
// pauses of 20 ms each would outlast it). A migration that outlasts the 2 s
// gets each call its last refusal (UNAVAILABLE to a buyer) at the 2 s, and
// none runs.
func TestBatchDuringSlotMigration(t *testing.T) {
	cluster := testenv.StartCluster(t)
	for _, durable := range []bool{true, false} {
		name := map[bool]string{true: "durable", false: "plain"}[durable]
		t.Run(name, func(t *testing.T) {
			m := batchIntoMigration(t, cluster, name, durable, 400*time.Millisecond)
			failed := 0
			for i, err := range m.errs {
				if err != nil {
					if failed++; failed <= 3 {
						t.Errorf("call %d: %v", i, err)
					}
				}
			}
			if failed > 0 {
				t.Errorf("%d of %d calls failed", failed, len(m.errs))
			}
			if m.runs != len(m.errs) {
				t.Errorf("the script ran %d times, want %d", m.runs, len(m.errs))
			}
		})
	}
	t.Run("durable, longer than the batch waits", func(t *testing.T) {
		m := batchIntoMigration(t, cluster, "long", true, redirectWait+500*time.Millisecond)
		for i, err := range m.errs {
			if _, ok := turnedAway(err); !ok || seckill.ErrorCode(redisError("admit", err, nil)) != seckill.EUNAVAILABLE {
				t.Errorf("call %d: %v, want the node's refusal, UNAVAILABLE to the buyer", i, err)
				break
			}
		}
		if m.runs != 0 {
			t.Errorf("the script ran %d times, want none", m.runs)
		}
		// The last round starts a pause before the deadline.
		if m.took < redirectWait-100*time.Millisecond || m.took > redirectWait+400*time.Millisecond {
			t.Errorf("answered after %s, want about %s", m.took, redirectWait)
		}
	})
}

// migrationRun is what batchIntoMigration saw.
type migrationRun struct {
	errs []error       // each call's error
	runs int           // the script's runs
	took time.Duration // from the release until every call was answered
}

// batchIntoMigration sends 150 calls of a pipeline (durable or plain) as
// one batch into a migration of their slot that lasts migrating. The first
// batch, of a call in another slot, is held at its send until the 150 wait
// behind it, so that they go as one, into the migration.
func batchIntoMigration(t *testing.T, cluster *testenv.RedisCluster, name string, durable bool, migrating time.Duration) migrationRun {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	defer rdb.Close()
	ctx := context.Background()
	tag := "{migrating-" + name + "}"
	runs, missing := tag+":runs", tag+":missing"
	if err := rdb.Set(ctx, runs, 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 150
	p := newPipeline(rdb, migratingScript, 1, 200, 1000)
	if durable {
		p.dur = &durability{replicas: 1, timeout: time.Second, wrote: func([]any) bool { return true },
			logger: slog.New(slog.DiscardHandler), waits: make(chan struct{}, 2)}
	}
	gate := make(chan struct{})
	var batches, largest atomic.Int64
	p.sent = func(size int) {
		if batches.Add(1) == 1 {
			<-gate
		}
		if int64(size) > largest.Load() {
			largest.Store(int64(size))
		}
	}
	// The held call's keys are in another slot, which does not migrate:
	// released, its batch ends at once.
	held := "{held-" + name + "}"
	first := make(chan error, 1)
	go func() { first <- p.run(ctx, []string{held + ":runs", held + ":missing"}).err }()
	for batches.Load() == 0 {
		time.Sleep(time.Millisecond)
	}

	slot := int(rdb.ClusterKeySlot(ctx, runs).Val())
	from := cluster.MasterOf(runs)
	var to *testenv.RedisServer
	for _, other := range []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}"} {
		if m := cluster.MasterOf(other); m != from {
			to = m
			break
		}
	}
	if to == nil {
		t.Fatal("no other master")
	}
	finish := cluster.MigrateSlot(slot, from, to)

	out := migrationRun{errs: make([]error, n)}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out.errs[i] = p.run(ctx, []string{runs, missing}).err })
	}
	for p.batches.Waiting() < n {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	close(gate)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		time.Sleep(migrating)
		finish()
	}()
	wg.Wait()
	out.took = time.Since(start)
	<-ended
	if err := <-first; err != nil {
		t.Errorf("the held call: %v", err)
	}
	if largest.Load() < n/2 {
		t.Errorf("largest batch %d: the calls did not go together", largest.Load())
	}
	got, err := rdb.Get(ctx, runs).Int()
	if err != nil {
		t.Fatal(err)
	}
	out.runs = got
	t.Logf("%d batches, largest %d, answered %s after the release", batches.Load(), largest.Load(), out.took.Round(time.Millisecond))
	return out
}
