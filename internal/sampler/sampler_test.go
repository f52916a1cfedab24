package sampler_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"seckill/internal/sampler"
	"seckill/internal/seckill"
	"seckill/internal/seckill/seckilltest"
)

var testNow = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// fakeStore lists campaigns the way the store does: newest first, those
// that ended before the filter's EndedAfter left out.
type fakeStore struct {
	mu        sync.Mutex
	campaigns []*seckill.Voucher
}

func (s *fakeStore) add(begin, end time.Time) *seckill.Voucher {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &seckill.Voucher{ID: int64(len(s.campaigns) + 1), Campaign: &seckill.Campaign{
		InitialStock: 10, Stock: 10, BeginTime: begin, EndTime: end}}
	v.Campaign.VoucherID = v.ID
	s.campaigns = append(s.campaigns, v)
	return v
}

func (s *fakeStore) setStock(v *seckill.Voucher, stock int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v.Campaign.Stock = stock
}

func (s *fakeStore) Campaigns(_ context.Context, f seckill.CampaignFilter) ([]*seckill.Voucher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*seckill.Voucher
	for _, v := range slices.Backward(s.campaigns) {
		if !f.EndedAfter.IsZero() && !v.Campaign.EndTime.After(f.EndedAfter) {
			continue
		}
		c := *v
		cc := *v.Campaign
		c.Campaign = &cc
		out = append(out, &c)
	}
	return out, nil
}

type depth int64

func (d depth) Depth() (int64, error) { return int64(d), nil }

func TestSampler(t *testing.T) {
	store := &fakeStore{}
	v := store.add(testNow.Add(-time.Hour), testNow.Add(time.Hour))
	ended := store.add(testNow.Add(-3*time.Hour), testNow.Add(-2*time.Hour))
	live := &seckilltest.Live{}
	live.Set(v.ID, seckill.LiveCounts{Remaining: 10, Known: true})
	outcomes := sampler.NewOutcomeCounter()
	s := sampler.New(sampler.Config{
		Campaigns: store, Live: live, Outcomes: outcomes, Queues: depth(5), Window: 3 * time.Second,
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
	live.Set(v.ID, seckill.LiveCounts{Remaining: 4, Queued: 2, Known: true})
	store.setStock(v, 6)
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
	c := sampler.NewOutcomeCounter()
	store := &fakeStore{}
	v := store.add(testNow.Add(-time.Hour), testNow.Add(time.Hour))
	s := sampler.New(sampler.Config{Campaigns: store, Live: &seckilltest.Live{}, Outcomes: c})
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

// TestOutcomesCoverDomain: the charts count every outcome a purchase
// answers with (a new one, as PASS_REQUIRED was, is not left out), and
// the two layers in front of admission.
func TestOutcomesCoverDomain(t *testing.T) {
	for _, o := range append(slices.Clone(seckill.Outcomes), seckill.OutcomeLocalLimit, seckill.OutcomeSoldOutMark) {
		if !slices.Contains(sampler.Outcomes[:], o) {
			t.Errorf("sampler.Outcomes lacks %s", o)
		}
	}
	for i, o := range sampler.Outcomes {
		if slices.Index(sampler.Outcomes[:], o) != i {
			t.Errorf("%s listed twice", o)
		}
	}
}
