package web_test

import (
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"seckill/internal/seckill"
	"seckill/web"
)

func TestSampler(t *testing.T) {
	svc := newFakeService()
	v := svc.add("sale", testNow.Add(-time.Hour), testNow.Add(time.Hour))
	ended := svc.add("old", testNow.Add(-3*time.Hour), testNow.Add(-2*time.Hour))
	live := &fakeLive{}
	live.set(v.ID, seckill.LiveCounts{Remaining: 10, Known: true})
	outcomes := web.NewOutcomeCounter()
	insp := &fakeInspector{info: map[string]asynq.QueueInfo{"orders": {Queue: "orders", Pending: 4, Active: 1, Archived: 9}}}
	s := web.NewSampler(web.SamplerConfig{
		Campaigns: fakeRecords{svc}, Live: live, Outcomes: outcomes,
		Queues: web.NewQueueStats(insp, nil, time.Nanosecond), Window: 3 * time.Second,
	})
	ctx := t.Context()

	if err := s.Sample(ctx, testNow); err != nil {
		t.Fatal(err)
	}
	// In two seconds: 6 units taken, 4 of them persisted; this instance
	// answered 6 ACCEPTED and 3 SOLD_OUT.
	for range 6 {
		outcomes.Add(v.ID, seckill.OutcomeAccepted)
	}
	for range 3 {
		outcomes.Add(v.ID, seckill.OutcomeSoldOut)
	}
	outcomes.Add(v.ID, seckill.OutcomeRateLimited) // not counted per campaign
	live.set(v.ID, seckill.LiveCounts{Remaining: 4, Queued: 2, Known: true})
	svc.mu.Lock()
	svc.vouchers[v.ID].Campaign.Stock = 6
	svc.mu.Unlock()
	if err := s.Sample(ctx, testNow.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}

	got := s.Samples(v.ID, time.Time{})
	if len(got) != 2 {
		t.Fatalf("%d samples", len(got))
	}
	last := got[1]
	if last.Taken != 3 || last.Persisted != 2 || last.Outcomes[0] != 3 || last.Outcomes[1] != 1.5 || last.QueueDepth != 5 {
		t.Errorf("second sample %+v", last)
	}
	if last.Remaining != 4 || last.Queued != 2 || last.Sold != 4 {
		t.Errorf("second sample counts %+v", last)
	}
	if len(s.Samples(ended.ID, time.Time{})) != 0 {
		t.Error("a campaign that ended long ago is sampled")
	}

	// The window keeps the last few samples only, oldest first.
	for i := 3; i <= 8; i++ {
		if err := s.Sample(ctx, testNow.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	got = s.Samples(v.ID, time.Time{})
	if len(got) != 4 || !got[0].At.Equal(testNow.Add(5*time.Second)) || !got[3].At.Equal(testNow.Add(8*time.Second)) {
		t.Errorf("window: %d samples from %v to %v", len(got), got[0].At, got[len(got)-1].At)
	}
	if since := s.Samples(v.ID, testNow.Add(7*time.Second)); len(since) != 2 {
		t.Errorf("%d samples since 7s", len(since))
	}
}

func TestOutcomeCounterConcurrent(t *testing.T) {
	c := web.NewOutcomeCounter()
	live := &fakeLive{}
	svc := newFakeService()
	v := svc.add("sale", testNow.Add(-time.Hour), testNow.Add(time.Hour))
	s := web.NewSampler(web.SamplerConfig{Campaigns: fakeRecords{svc}, Live: live, Outcomes: c})
	if err := s.Sample(t.Context(), testNow); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			for range 50 {
				c.Add(v.ID, seckill.OutcomeAccepted)
			}
		})
	}
	wg.Wait()
	if err := s.Sample(t.Context(), testNow.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := s.Samples(v.ID, time.Time{})[1].Outcomes[0]; got != 10000 {
		t.Errorf("accepted/s = %v, want 10000", got)
	}
}

func TestQueueStatsCached(t *testing.T) {
	insp := &fakeInspector{info: map[string]asynq.QueueInfo{"mail": {Queue: "mail", Pending: 2}}}
	q := web.NewQueueStats(insp, []string{"orders"}, time.Hour)
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
