package app

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/testenv"
)

// TestQueueIntervalReachesTheWorker checks that SECKILL_QUEUE_INTERVAL is
// the interval at which an idle worker looks at the Asynq queue: with 10ms
// it runs its dequeue script some hundred times a second, where Asynq's own
// default (1 s) or the 50 ms the worker used before would make at most a
// few dozen calls a second, everything else the idle process runs included.
// It counts every EVALSHA a private Redis serves over two seconds.
func TestQueueIntervalReachesTheWorker(t *testing.T) {
	srv := testenv.StartRedisServer(t)
	e := newTestEnv(t, "", func(m map[string]string) {
		m["SECKILL_REDIS_URL"] = srv.URL()
		m["SECKILL_QUEUE_INTERVAL"] = "10ms"
	})
	e.worker()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	calls := func() int {
		info, err := rdb.Info(e.ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
				n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				return n
			}
		}
		return 0
	}
	time.Sleep(time.Second) // the worker starts its processor
	before, start := calls(), time.Now()
	time.Sleep(2 * time.Second)
	rate := float64(calls()-before) / time.Since(start).Seconds()
	t.Logf("%.0f script calls a second with SECKILL_QUEUE_INTERVAL=10ms", rate)
	if rate < 35 {
		t.Errorf("%.0f script calls a second; an idle worker that looks every 10 ms (0.5 to 1.5 times it) makes about 100", rate)
	}
}
