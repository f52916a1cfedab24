package jobs

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
)

// QueueInspector reads Asynq's queues (an *asynq.Inspector).
type QueueInspector interface {
	Queues() ([]string, error)
	GetQueueInfo(queue string) (*asynq.QueueInfo, error)
}

// DefaultQueueTTL is how long queue numbers are reused: the inspector
// samples Redis's memory use on every call, so it is not polled per request.
const DefaultQueueTTL = 2 * time.Second

// QueueStats reads every Asynq queue through an inspector, at most once per
// TTL however many pages and samplers ask.
type QueueStats struct {
	insp   QueueInspector
	always []string
	ttl    time.Duration
	now    func() time.Time

	mu   sync.Mutex
	at   time.Time
	info []asynq.QueueInfo
	err  error
}

// NewQueueStats returns queue numbers read through insp and kept for ttl
// (DefaultQueueTTL when 0). The queues in always are listed even before
// their first task (with zeros).
func NewQueueStats(insp QueueInspector, always []string, ttl time.Duration) *QueueStats {
	if ttl <= 0 {
		ttl = DefaultQueueTTL
	}
	return &QueueStats{insp: insp, always: always, ttl: ttl, now: time.Now}
}

// Get returns every queue's numbers, sorted by name, and when they were read.
func (q *QueueStats) Get() ([]asynq.QueueInfo, time.Time, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	if !q.at.IsZero() && now.Sub(q.at) < q.ttl {
		return q.info, q.at, q.err
	}
	q.info, q.err = q.read()
	q.at = now
	return q.info, q.at, q.err
}

func (q *QueueStats) read() ([]asynq.QueueInfo, error) {
	names, err := q.insp.Queues()
	if err != nil {
		return nil, err
	}
	out := make([]asynq.QueueInfo, 0, len(names)+len(q.always))
	for _, n := range names {
		info, err := q.insp.GetQueueInfo(n)
		if err != nil {
			return nil, err
		}
		out = append(out, *info)
	}
	// Asynq knows a queue from its first task on.
	for _, n := range q.always {
		if !slices.Contains(names, n) {
			out = append(out, asynq.QueueInfo{Queue: n})
		}
	}
	slices.SortFunc(out, func(a, b asynq.QueueInfo) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

// Depth is the tasks waiting or running in every queue.
func (q *QueueStats) Depth() (int64, error) {
	info, _, err := q.Get()
	var n int64
	for _, i := range info {
		n += int64(i.Pending + i.Active + i.Scheduled + i.Retry + i.Aggregating)
	}
	return n, err
}
