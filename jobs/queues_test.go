package jobs_test

import (
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"seckill/jobs"
)

// fakeInspector counts its calls.
type fakeInspector struct {
	mu    sync.Mutex
	calls int
	info  map[string]asynq.QueueInfo
}

func (i *fakeInspector) Queues() ([]string, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.calls++
	var out []string
	for n := range i.info {
		out = append(out, n)
	}
	return out, nil
}

func (i *fakeInspector) GetQueueInfo(q string) (*asynq.QueueInfo, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	info := i.info[q]
	return &info, nil
}

func TestQueueStatsCached(t *testing.T) {
	insp := &fakeInspector{info: map[string]asynq.QueueInfo{"mail": {Queue: "mail", Pending: 2}}}
	q := jobs.NewQueueStats(insp, []string{"orders"}, time.Hour)
	for range 5 {
		info, _, err := q.Get()
		if err != nil {
			t.Fatal(err)
		}
		if len(info) != 2 || info[0].Queue != "mail" || info[1].Queue != "orders" || info[0].Pending != 2 {
			t.Fatalf("queues %+v", info)
		}
	}
	if insp.calls != 1 {
		t.Errorf("the inspector was asked %d times within the TTL", insp.calls)
	}
}

func TestQueueStatsDepth(t *testing.T) {
	insp := &fakeInspector{info: map[string]asynq.QueueInfo{
		"orders": {Queue: "orders", Pending: 4, Active: 1, Scheduled: 2, Retry: 3, Aggregating: 5, Archived: 9, Completed: 7},
		"mail":   {Queue: "mail", Pending: 1},
	}}
	n, err := jobs.NewQueueStats(insp, nil, 0).Depth()
	if err != nil || n != 16 {
		t.Errorf("depth %d, %v; want 16 (archived and completed are not work)", n, err)
	}
}
