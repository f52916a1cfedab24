package admission_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

func TestAdmitOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	now := time.Now()

	tests := []struct {
		name     string
		warm     *seckill.WarmState // nil: the campaign is unknown
		user     int64
		want     seckill.Outcome
		wantCode string
	}{
		{name: "unknown campaign", user: 1, wantCode: seckill.ENOTFOUND},
		{name: "not started", user: 1, want: seckill.OutcomeNotStarted, warm: &seckill.WarmState{
			Campaign: seckill.Campaign{Stock: 5, BeginTime: now.Add(time.Hour), EndTime: now.Add(2 * time.Hour)}}},
		{name: "ended", user: 1, want: seckill.OutcomeEnded, warm: &seckill.WarmState{
			Campaign: seckill.Campaign{Stock: 5, BeginTime: now.Add(-2 * time.Hour), EndTime: now.Add(-time.Hour)}}},
		{name: "paused", user: 1, want: seckill.OutcomePaused, warm: &seckill.WarmState{
			Campaign: seckill.Campaign{Stock: 5, BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour), Paused: true}}},
		{name: "paused before not started", user: 1, want: seckill.OutcomePaused, warm: &seckill.WarmState{
			Campaign: seckill.Campaign{Stock: 5, BeginTime: now.Add(time.Hour), EndTime: now.Add(2 * time.Hour), Paused: true}}},
		{name: "already purchased", user: 7, want: seckill.OutcomeAlreadyPurchased, warm: &seckill.WarmState{
			Campaign: liveCampaign(0, 5), Buyers: []int64{3, 7, 9}}},
		{name: "already purchased before sold out", user: 7, want: seckill.OutcomeAlreadyPurchased, warm: &seckill.WarmState{
			Campaign: liveCampaign(0, 0), Buyers: []int64{7}}},
		{name: "sold out", user: 1, want: seckill.OutcomeSoldOut, warm: &seckill.WarmState{Campaign: liveCampaign(0, 0)}},
		{name: "accepted", user: 1, want: seckill.OutcomeAccepted, warm: &seckill.WarmState{Campaign: liveCampaign(0, 5)}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			voucherID := int64(100 + i)
			if tt.warm != nil {
				st := *tt.warm
				st.Campaign.VoucherID = voucherID
				mustWarm(t, a, st)
			}
			got, adm, err := a.Admit(ctx, voucherID, tt.user, seckill.Ticket{})
			if diff := cmp.Diff(tt.wantCode, seckill.ErrorCode(err)); diff != "" {
				t.Fatalf("error code (-want +got):\n%s\nerr: %v", diff, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if got != seckill.OutcomeAccepted && adm != (seckill.Admission{}) {
				t.Errorf("admission %+v with outcome %s", adm, got)
			}
		})
	}
}

func TestAdmitAcceptedDistinctIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newAdmitter(t, admission.Options{})
	const voucherID = 42
	c := liveCampaign(voucherID, 3)
	c.Epoch = 3
	mustWarm(t, a, seckill.WarmState{Campaign: c})

	before := time.Now().Add(-time.Second)
	var got []seckill.Admission
	for _, u := range []int64{1, 2, 3} {
		o, adm := mustAdmit(t, a, voucherID, u)
		if o != seckill.OutcomeAccepted {
			t.Fatalf("user %d: %s", u, o)
		}
		if adm.AdmittedAt.Before(before) || adm.AdmittedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("user %d admitted at %v, not now", u, adm.AdmittedAt)
		}
		// Pending answers what Admit said.
		p, err := a.Pending(ctx, adm.OrderID)
		if err != nil {
			t.Fatalf("pending %d: %v", adm.OrderID, err)
		}
		if diff := cmp.Diff(adm, *p); diff != "" {
			t.Errorf("pending (-admit +pending):\n%s", diff)
		}
		adm.AdmittedAt = time.Time{}
		got = append(got, adm)
	}
	want := []seckill.Admission{
		{OrderID: seckill.OrderID(voucherID, 3<<22|1), VoucherID: voucherID, UserID: 1},
		{OrderID: seckill.OrderID(voucherID, 3<<22|2), VoucherID: voucherID, UserID: 2},
		{OrderID: seckill.OrderID(voucherID, 3<<22|3), VoucherID: voucherID, UserID: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("admissions (-want +got):\n%s", diff)
	}
	wantOutcome(t, a, voucherID, 1, seckill.OutcomeAlreadyPurchased, "again")
	wantOutcome(t, a, voucherID, 4, seckill.OutcomeSoldOut, "beyond the stock")
}

func TestAdmitInvalidInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newLiveAdmitter(t, 1, 5)
	tests := []struct {
		name          string
		voucher, user int64
		wantCode      string
	}{
		{"zero voucher", 0, 1, seckill.ENOTFOUND},
		{"negative voucher", -1, 1, seckill.ENOTFOUND},
		{"voucher beyond 31 bits", 1 << 31, 1, seckill.ENOTFOUND},
		{"zero user", 1, 0, seckill.EINVALID},
		{"negative user", 1, -5, seckill.EINVALID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := a.Admit(ctx, tt.voucher, tt.user, seckill.Ticket{})
			if diff := cmp.Diff(tt.wantCode, seckill.ErrorCode(err)); diff != "" {
				t.Errorf("code (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdmitConcurrent is the flash sale: 1000 users, each trying twice at
// once, for 200 units.
func TestAdmitConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	const (
		voucherID = 7
		stock     = 200
		users     = 1000
	)
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(voucherID, stock)})

	var (
		mu       sync.Mutex
		outcomes = map[seckill.Outcome]int{}
		orderIDs = map[int64]int64{} // order id -> user
		perUser  = map[int64]int{}
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for u := int64(1); u <= users; u++ {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				o, adm, err := a.Admit(ctx, voucherID, u, seckill.Ticket{})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("user %d: %v", u, err)
					return
				}
				outcomes[o]++
				if o == seckill.OutcomeAccepted {
					if prev, dup := orderIDs[adm.OrderID]; dup {
						t.Errorf("order id %d given to users %d and %d", adm.OrderID, prev, u)
					}
					orderIDs[adm.OrderID] = u
					perUser[u]++
				}
			}()
		}
	}
	close(start)
	wg.Wait()

	if outcomes[seckill.OutcomeAccepted] != stock {
		t.Errorf("accepted %d, want %d (outcomes %v)", outcomes[seckill.OutcomeAccepted], stock, outcomes)
	}
	if got := outcomes[seckill.OutcomeAccepted] + outcomes[seckill.OutcomeSoldOut] + outcomes[seckill.OutcomeAlreadyPurchased]; got != 2*users {
		t.Errorf("outcomes %v do not add up to %d", outcomes, 2*users)
	}
	for u, n := range perUser {
		if n > 1 {
			t.Errorf("user %d bought %d units", u, n)
		}
	}
	if len(orderIDs) != stock {
		t.Errorf("%d distinct order ids, want %d", len(orderIDs), stock)
	}
	rem, err := a.Remaining(ctx, []int64{voucherID})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64]int64{voucherID: 0}, rem); diff != "" {
		t.Errorf("remaining (-want +got):\n%s", diff)
	}
	q, err := a.Queued(ctx, []int64{voucherID})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64]int64{voucherID: stock}, q); diff != "" {
		t.Errorf("queued (-want +got):\n%s", diff)
	}
	if n := rdb.SCard(ctx, admission.BuyersKey(a, voucherID)).Val(); n != stock {
		t.Errorf("%d buyers, want %d", n, stock)
	}
	for id, u := range orderIDs {
		p, err := a.Pending(ctx, id)
		if err != nil {
			t.Fatalf("pending %d: %v", id, err)
		}
		if p.UserID != u {
			t.Errorf("pending %d: user %d, want %d", id, p.UserID, u)
		}
	}
}

func TestSoldOutMark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// soldOut sells the campaign out and makes sure a's mark is set.
	soldOut := func(t *testing.T, a *admission.Admitter, voucherID int64) seckill.Admission {
		t.Helper()
		mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(voucherID, 1)})
		_, adm := mustAdmit(t, a, voucherID, 1)
		if o, r := mustAdmit(t, a, voucherID, 2); o != seckill.OutcomeSoldOut || r.FromMemory {
			t.Fatalf("user 2: %s (from memory: %v), want SOLD_OUT from Redis", o, r.FromMemory)
		}
		if o, ok := admission.SoldOutMark(a, voucherID); !ok || o != seckill.OutcomeSoldOut {
			t.Fatalf("no local mark after SOLD_OUT: %q %v", o, ok)
		}
		return adm
	}

	t.Run("answered locally until it expires", func(t *testing.T) {
		t.Parallel()
		a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: time.Second})
		soldOut(t, a, 1)
		// Stock that arrives behind the Admitter's back is not seen
		// while the mark lives: the answer is local, and says so (the
		// funnel counts it as the mark's).
		rdb.HIncrBy(ctx, admission.CampaignKey(a, 1), "stock", 1)
		if o, adm := mustAdmit(t, a, 1, 3); o != seckill.OutcomeSoldOut || !adm.FromMemory {
			t.Fatalf("user 3 while marked: %s (from memory: %v), want SOLD_OUT from memory", o, adm.FromMemory)
		}
		if l := seckill.FunnelLayer(seckill.OutcomeSoldOut, seckill.Admission{FromMemory: true}); l != seckill.LayerSoldOutMark {
			t.Errorf("a sold-out answer from memory is in layer %q, want %q", l, seckill.LayerSoldOutMark)
		}
		time.Sleep(1100 * time.Millisecond)
		wantOutcome(t, a, 1, 3, seckill.OutcomeAccepted, "after the TTL")
	})

	t.Run("ended is marked too", func(t *testing.T) {
		t.Parallel()
		a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: time.Hour})
		now := time.Now()
		mustWarm(t, a, seckill.WarmState{Campaign: seckill.Campaign{VoucherID: 1, Stock: 5,
			BeginTime: now.Add(-time.Hour), EndTime: now.Add(-time.Minute)}})
		for u := int64(1); u <= 2; u++ {
			if o, _ := mustAdmit(t, a, 1, u); o != seckill.OutcomeEnded {
				t.Fatalf("user %d: %s, want ENDED", u, o)
			}
		}
		rdb.HSet(ctx, admission.CampaignKey(a, 1), "end_ms", now.Add(time.Hour).UnixMilli())
		wantOutcome(t, a, 1, 3, seckill.OutcomeEnded, "while marked (local)")
		// Extending the window through the Admitter drops the mark.
		if err := a.UpdateCampaign(ctx, 1, now.Add(-time.Hour), now.Add(time.Hour), false); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, a, 1, 3, seckill.OutcomeAccepted, "after update")
	})

	tests := []struct {
		name  string
		other bool // return the stock through a second Admitter
		give  func(t *testing.T, a *admission.Admitter, adm seckill.Admission)
	}{
		{name: "release", give: release},
		{name: "add stock", give: addStock},
		{name: "release on another process", other: true, give: release},
		{name: "add stock on another process", other: true, give: addStock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rdb, prefix := testenv.MustOpenRedis(t)
			// An hour: only an invalidation can explain an acceptance.
			a := admission.New(rdb, admission.Options{Prefix: prefix, SoldOutTTL: time.Hour})
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if err := a.Start(ctx); err != nil {
				t.Fatal(err)
			}
			adm := soldOut(t, a, 1)
			giver := a
			if tt.other {
				giver = admission.New(rdb, admission.Options{Prefix: prefix, SoldOutTTL: time.Hour})
			}
			tt.give(t, giver, adm)
			deadline := time.Now().Add(5 * time.Second)
			for {
				o, _ := mustAdmit(t, a, 1, 3)
				if o == seckill.OutcomeAccepted {
					break
				}
				if !tt.other || time.Now().After(deadline) {
					t.Fatalf("user 3 after stock returned: %s, want ACCEPTED", o)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

func release(t *testing.T, a *admission.Admitter, adm seckill.Admission) {
	t.Helper()
	if ok, err := a.Release(context.Background(), adm, false); err != nil || !ok {
		t.Fatalf("release: %v %v", ok, err)
	}
}

func addStock(t *testing.T, a *admission.Admitter, adm seckill.Admission) {
	t.Helper()
	if err := a.AddStock(context.Background(), adm.VoucherID, 1); err != nil {
		t.Fatalf("add stock: %v", err)
	}
}

func TestRemaining(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newLiveAdmitter(t, 1, 10)
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(2, 0)})
	mustAdmit(t, a, 1, 1)
	tests := []struct {
		ids  []int64
		want map[int64]int64
	}{
		{nil, map[int64]int64{}},
		{[]int64{1}, map[int64]int64{1: 9}},
		{[]int64{3}, map[int64]int64{}},
		{[]int64{1, 2, 3, 0, -4}, map[int64]int64{1: 9, 2: 0}},
	}
	for _, tt := range tests {
		got, err := a.Remaining(ctx, tt.ids)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("remaining %v (-want +got):\n%s", tt.ids, diff)
		}
	}
}

func TestPendingNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newLiveAdmitter(t, 3, 10)
	for _, id := range []int64{0, -1, seckill.OrderID(3, 0), seckill.OrderID(3, 1), seckill.OrderID(4, 1), 1} {
		if _, err := a.Pending(ctx, id); seckill.ErrorCode(err) != seckill.ENOTFOUND {
			t.Errorf("pending %d: %v, want NOT_FOUND", id, err)
		}
	}
}
