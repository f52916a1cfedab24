package admission_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// newAdmitter returns an Admitter on a fresh key prefix with its scripts
// loaded, and the raw client for assertions.
func newAdmitter(tb testing.TB, opts admission.Options) (*admission.Admitter, redis.UniversalClient) {
	tb.Helper()
	rdb, prefix := testenv.MustOpenRedis(tb)
	opts.Prefix = prefix
	a := admission.New(rdb, opts)
	if err := a.Load(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return a, rdb
}

// newLiveAdmitter is newAdmitter with a campaign on sale now warmed.
func newLiveAdmitter(tb testing.TB, voucherID, stock int64) (*admission.Admitter, redis.UniversalClient) {
	tb.Helper()
	a, rdb := newAdmitter(tb, admission.Options{})
	mustWarm(tb, a, seckill.WarmState{Campaign: liveCampaign(voucherID, stock)})
	return a, rdb
}

// stopCampaign stops a campaign as a change of Redis server does
// (stamp.lua): it admits nobody until a rebuild installs it again.
func stopCampaign(tb testing.TB, a *admission.Admitter, rdb redis.UniversalClient, voucherID int64) {
	tb.Helper()
	if err := rdb.HSet(context.Background(), admission.CampaignKey(a, voucherID), "state", "stale").Err(); err != nil {
		tb.Fatal(err)
	}
}

// liveCampaign is a campaign that is on sale now.
func liveCampaign(voucherID, stock int64) seckill.Campaign {
	now := time.Now()
	return seckill.Campaign{
		VoucherID: voucherID, InitialStock: stock, Stock: stock,
		BeginTime: now.Add(-time.Minute), EndTime: now.Add(time.Hour),
	}
}

func mustWarm(tb testing.TB, a *admission.Admitter, st seckill.WarmState) {
	tb.Helper()
	ok, err := a.Warm(context.Background(), st)
	if err != nil {
		tb.Fatalf("warm %d: %v", st.Campaign.VoucherID, err)
	}
	if !ok {
		tb.Fatalf("warm %d: not installed", st.Campaign.VoucherID)
	}
}

func mustAdmit(tb testing.TB, a *admission.Admitter, voucherID, userID int64) (seckill.Outcome, seckill.Admission) {
	tb.Helper()
	o, adm, err := a.Admit(context.Background(), voucherID, userID, seckill.Ticket{})
	if err != nil {
		tb.Fatalf("admit voucher %d user %d: %v", voucherID, userID, err)
	}
	return o, adm
}

// wantOutcome admits userID and fails the test unless the outcome is want;
// when says what the admission comes after.
func wantOutcome(tb testing.TB, a *admission.Admitter, voucherID, userID int64, want seckill.Outcome, when string) {
	tb.Helper()
	if o, _ := mustAdmit(tb, a, voucherID, userID); o != want {
		tb.Errorf("%s: user %d got %s, want %s", when, userID, o, want)
	}
}

// mustAccept admits userID and fails the test unless the answer is ACCEPTED
// with order id want; when says what the admission comes after.
func mustAccept(tb testing.TB, a *admission.Admitter, voucherID, userID, want int64, when string) {
	tb.Helper()
	if o, adm := mustAdmit(tb, a, voucherID, userID); o != seckill.OutcomeAccepted || adm.OrderID != want {
		tb.Errorf("%s: user %d got %s with order %d, want ACCEPTED with order %d", when, userID, o, adm.OrderID, want)
	}
}

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

func TestWarmNeverOverwrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const voucherID = 9
	a, _ := newLiveAdmitter(t, voucherID, 5)
	mustAdmit(t, a, voucherID, 1)

	again := seckill.WarmState{Campaign: liveCampaign(voucherID, 100)}
	again.Campaign.Epoch = 9
	again.Campaign.Paused = true
	ok, err := a.Warm(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Error("warm installed over a live campaign")
	}
	rem, err := a.Remaining(ctx, []int64{voucherID})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64]int64{voucherID: 4}, rem); diff != "" {
		t.Errorf("remaining (-want +got):\n%s", diff)
	}
	mustAccept(t, a, voucherID, 2, seckill.OrderID(voucherID, 2), "after re-warm")
}

func TestWarmBuyersBlocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	const voucherID = 11
	// More buyers than one SADD chunk.
	buyers := make([]int64, 12_345)
	for i := range buyers {
		buyers[i] = int64(i + 1)
	}
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(voucherID, 10), Buyers: buyers})
	if n := rdb.SCard(ctx, admission.BuyersKey(a, voucherID)).Val(); n != int64(len(buyers)) {
		t.Errorf("%d buyers in Redis, want %d", n, len(buyers))
	}
	for _, u := range []int64{1, 5000, 5001, 12_345} {
		wantOutcome(t, a, voucherID, u, seckill.OutcomeAlreadyPurchased, "warmed in as a buyer")
	}
	mustAccept(t, a, voucherID, 12_346, seckill.OrderID(voucherID, 1), "a new user after the buyers")
}

func TestWarmInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	now := time.Now()
	tests := []struct {
		name  string
		st    seckill.WarmState
		field string
	}{
		{"voucher id", seckill.WarmState{Campaign: liveCampaign(0, 1)}, "voucherId"},
		{"stock", seckill.WarmState{Campaign: liveCampaign(1, -1)}, "stock"},
		{"epoch", seckill.WarmState{Campaign: seckill.Campaign{VoucherID: 1, Stock: 1, Epoch: seckill.MaxEpoch + 1,
			BeginTime: now, EndTime: now.Add(time.Hour)}}, "epoch"},
		{"window", seckill.WarmState{Campaign: seckill.Campaign{VoucherID: 1, BeginTime: now, EndTime: now}}, "endTime"},
		{"buyer", seckill.WarmState{Campaign: liveCampaign(1, 1), Buyers: []int64{4, 0}}, "buyers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Warm(ctx, tt.st)
			if diff := cmp.Diff(seckill.EINVALID, seckill.ErrorCode(err)); diff != "" {
				t.Fatalf("code (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.field, seckill.ErrorField(err)); diff != "" {
				t.Errorf("field (-want +got):\n%s", diff)
			}
		})
	}
	if n := rdb.Exists(ctx, admission.CampaignKey(a, 1), admission.BuyersKey(a, 1)).Val(); n != 0 {
		t.Errorf("invalid warm wrote %d keys", n)
	}
}

// TestRelease releases one admission from 50 goroutines at once: it is
// released once, its unit is back and it is no longer pending. A user who
// holds another order (keepBuyer) stays a buyer; any other may buy again,
// with a new order id.
func TestRelease(t *testing.T) {
	t.Parallel()
	for i, keepBuyer := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepBuyer=%v", keepBuyer), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			voucherID := int64(13 + i)
			a, rdb := newLiveAdmitter(t, voucherID, 1)
			_, adm := mustAdmit(t, a, voucherID, 5)

			var released atomic.Int64
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					ok, err := a.Release(ctx, adm, keepBuyer)
					if err != nil {
						t.Error(err)
					}
					if ok {
						released.Add(1)
					}
				})
			}
			wg.Wait()
			if n := released.Load(); n != 1 {
				t.Errorf("released %d times, want 1", n)
			}
			rem, _ := a.Remaining(ctx, []int64{voucherID})
			if diff := cmp.Diff(map[int64]int64{voucherID: 1}, rem); diff != "" {
				t.Errorf("remaining (-want +got):\n%s", diff)
			}
			if got := rdb.SIsMember(ctx, admission.BuyersKey(a, voucherID), 5).Val(); got != keepBuyer {
				t.Errorf("user 5 a buyer: %v, want %v", got, keepBuyer)
			}
			if _, err := a.Pending(ctx, adm.OrderID); seckill.ErrorCode(err) != seckill.ENOTFOUND {
				t.Errorf("pending after release: %v, want NOT_FOUND", err)
			}
			if n := rdb.ZCard(ctx, admission.PendingAtKey(a, voucherID)).Val(); n != 0 {
				t.Errorf("pending_at holds %d", n)
			}
			if keepBuyer {
				wantOutcome(t, a, voucherID, 5, seckill.OutcomeAlreadyPurchased, "again")
				return
			}
			o, again := mustAdmit(t, a, voucherID, 5)
			if o != seckill.OutcomeAccepted || again.OrderID == adm.OrderID {
				t.Errorf("buy again: %s %d (first %d)", o, again.OrderID, adm.OrderID)
			}
		})
	}
}

func TestReleaseOtherUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newLiveAdmitter(t, 1, 1)
	_, adm := mustAdmit(t, a, 1, 5)
	wrong := adm
	wrong.UserID = 6
	if _, err := a.Release(ctx, wrong, false); seckill.ErrorCode(err) != seckill.ECONFLICT {
		t.Errorf("release for another user: %v, want CONFLICT", err)
	}
	if _, err := a.Pending(ctx, adm.OrderID); err != nil {
		t.Errorf("still pending: %v", err)
	}
}

func TestAck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newAdmitter(t, admission.Options{})
	var adms []seckill.Admission
	for _, v := range []int64{21, 22} {
		mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(v, 10)})
		for u := int64(1); u <= 3; u++ {
			_, adm := mustAdmit(t, a, v, u)
			adms = append(adms, adm)
		}
	}
	// Ack two of the first campaign and one of the second; acking twice is
	// harmless.
	acked := []seckill.Admission{adms[0], adms[1], adms[4]}
	for range 2 {
		if err := a.Ack(ctx, acked); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Ack(ctx, nil); err != nil {
		t.Errorf("ack nothing: %v", err)
	}
	for i, adm := range adms {
		_, err := a.Pending(ctx, adm.OrderID)
		wantCode := ""
		if i == 0 || i == 1 || i == 4 {
			wantCode = seckill.ENOTFOUND
		}
		if diff := cmp.Diff(wantCode, seckill.ErrorCode(err)); diff != "" {
			t.Errorf("pending %d (-want +got):\n%s", i, diff)
		}
	}
	q, err := a.Queued(ctx, []int64{21, 22, 23})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64]int64{21: 1, 22: 2, 23: 0}, q); diff != "" {
		t.Errorf("queued (-want +got):\n%s", diff)
	}
	// An acknowledged admission cannot be released any more.
	if ok, err := a.Release(ctx, adms[0], false); err != nil || ok {
		t.Errorf("release after ack: %v %v, want false", ok, err)
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

func TestStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newAdmitter(t, admission.Options{})
	for _, v := range []int64{31, 32} {
		mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(v, 10)})
	}
	_, old1 := mustAdmit(t, a, 31, 1)
	_, old2 := mustAdmit(t, a, 32, 2)
	_, old3 := mustAdmit(t, a, 31, 3)
	_, acked := mustAdmit(t, a, 32, 4)
	if err := a.Ack(ctx, []seckill.Admission{acked}); err != nil {
		t.Fatal(err)
	}
	// The fresh admissions must stay younger than age through every call
	// below, however slow a loaded machine makes them: a wide margin.
	const age = 1500 * time.Millisecond
	time.Sleep(2 * age)
	mustAdmit(t, a, 31, 5)
	mustAdmit(t, a, 32, 6)

	got, err := a.Stale(ctx, []int64{31, 32, 33}, age, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []seckill.Admission{old1, old2, old3}
	// Oldest first; admissions within one millisecond are ordered by
	// campaign, then sequence.
	sortAdms := cmp.Transformer("sort", func(in []seckill.Admission) map[int64]seckill.Admission {
		m := map[int64]seckill.Admission{}
		for _, a := range in {
			m[a.OrderID] = a
		}
		return m
	})
	if diff := cmp.Diff(want, got, sortAdms); diff != "" {
		t.Errorf("stale (-want +got):\n%s", diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i].AdmittedAt.Before(got[i-1].AdmittedAt) {
			t.Errorf("stale not oldest first: %v", got)
		}
	}

	got, err = a.Stale(ctx, []int64{31, 32, 33}, age, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("limit 2: %d admissions", len(got))
	}
	// Only the campaigns named: a campaign Postgres does not list is not
	// looked at.
	got, err = a.Stale(ctx, []int64{31}, age, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]seckill.Admission{old1, old3}, got, sortAdms); diff != "" {
		t.Errorf("stale of campaign 31 (-want +got):\n%s", diff)
	}
	got, err = a.Stale(ctx, []int64{31, 32}, time.Hour, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("age 1h: %v", got)
	}
}

// TestNoScript checks that losing the script cache (SCRIPT FLUSH, a Redis
// restart) costs a fallback to EVAL, not an error. Flushing the cache is
// harmless to other tests: go-redis falls back the same way for them.
func TestNoScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newLiveAdmitter(t, 1, 10)

	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	o, adm := mustAdmit(t, a, 1, 1)
	if o != seckill.OutcomeAccepted {
		t.Fatalf("admit after SCRIPT FLUSH: %s", o)
	}
	// Ack pipelines EVALSHA only; it must recover too.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Ack(ctx, []seckill.Admission{adm}); err != nil {
		t.Fatalf("ack after SCRIPT FLUSH: %v", err)
	}
	if _, err := a.Pending(ctx, adm.OrderID); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("pending after ack: %v", err)
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

func TestListenerStopsWithContext(t *testing.T) {
	t.Parallel()
	a, _ := newAdmitter(t, admission.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-admission.ListenerDone(a):
	case <-time.After(5 * time.Second):
		t.Fatal("the listener did not stop after its context ended")
	}
	if err := a.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
}

func TestUpdateCampaign(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newAdmitter(t, admission.Options{})
	now := time.Now()
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(1, 10)})

	steps := []struct {
		name       string
		begin, end time.Time
		paused     bool
		wantCode   string
		want       seckill.Outcome
	}{
		{name: "pause", begin: now.Add(-time.Hour), end: now.Add(time.Hour), paused: true, want: seckill.OutcomePaused},
		{name: "postpone", begin: now.Add(time.Hour), end: now.Add(2 * time.Hour), want: seckill.OutcomeNotStarted},
		{name: "end", begin: now.Add(-2 * time.Hour), end: now.Add(-time.Hour), want: seckill.OutcomeEnded},
		{name: "reopen", begin: now.Add(-time.Hour), end: now.Add(time.Hour), want: seckill.OutcomeAccepted},
		{name: "bad window", begin: now, end: now, wantCode: seckill.EINVALID, want: seckill.OutcomeAlreadyPurchased},
	}
	for _, s := range steps {
		err := a.UpdateCampaign(ctx, 1, s.begin, s.end, s.paused)
		if diff := cmp.Diff(s.wantCode, seckill.ErrorCode(err)); diff != "" {
			t.Fatalf("%s: code (-want +got):\n%s", s.name, diff)
		}
		if o, _ := mustAdmit(t, a, 1, 1); o != s.want {
			t.Errorf("%s: %s, want %s", s.name, o, s.want)
		}
	}
	if err := a.UpdateCampaign(ctx, 2, now, now.Add(time.Hour), false); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("update unknown: %v, want NOT_FOUND", err)
	}
	if err := a.AddStock(ctx, 2, 5); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("add stock unknown: %v, want NOT_FOUND", err)
	}
	for _, n := range []int64{0, -1} {
		if err := a.AddStock(ctx, 1, n); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("add stock %d: %v, want INVALID_INPUT", n, err)
		}
	}
	if err := a.AddStock(ctx, 1, 5); err != nil {
		t.Fatal(err)
	}
	rem, _ := a.Remaining(ctx, []int64{1})
	if diff := cmp.Diff(map[int64]int64{1: 14}, rem); diff != "" {
		t.Errorf("remaining (-want +got):\n%s", diff)
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

func TestForget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(1, 10), Buyers: []int64{9}})
	mustAdmit(t, a, 1, 1)
	if err := a.Forget(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Admit(ctx, 1, 2, seckill.Ticket{}); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("admit after forget: %v, want NOT_FOUND", err)
	}
	if n := rdb.Exists(ctx, admission.CampaignKey(a, 1), admission.BuyersKey(a, 1), admission.PendingAtKey(a, 1)).Val(); n != 0 {
		t.Errorf("%d keys left", n)
	}
	if stale, err := a.Stale(ctx, []int64{1}, 0, 10); err != nil || len(stale) != 0 {
		t.Errorf("stale after forget: %v %v", stale, err)
	}
	// A forgotten campaign can be warmed again.
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(1, 10)})
}

// TestRebuild walks a campaign through a rebuild: the lock is exclusive, the
// campaign admits nobody meanwhile (and writes nothing), the pending
// admissions can be read for persisting, and the installed state replaces
// everything in a new epoch.
func TestRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newLiveAdmitter(t, 1, 10)
	_, adm1 := mustAdmit(t, a, 1, 1)
	_, adm2 := mustAdmit(t, a, 1, 2)

	if need, err := a.NeedsRebuild(ctx, []int64{1, 999}); err != nil || !slices.Equal(need, []int64{999}) {
		t.Fatalf("NeedsRebuild = %v, %v; want [999]", need, err)
	}
	// A campaign installed and admitting is not rebuilt: nothing changes.
	healthy := rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || ok {
		t.Fatalf("BeginRebuild of a campaign that needs none = %v, %v; want false", ok, err)
	}
	if diff := cmp.Diff(healthy, rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()); diff != "" {
		t.Errorf("BeginRebuild of a campaign that needs none wrote (-before +after):\n%s", diff)
	}
	stopCampaign(t, a, rdb, 1)
	token, ok, err := a.BeginRebuild(ctx, 1)
	if err != nil || !ok {
		t.Fatalf("BeginRebuild = %v, %v", ok, err)
	}
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || ok {
		t.Fatalf("second BeginRebuild = %v, %v; want the lock taken", ok, err)
	}
	before := rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()
	if _, _, err := a.Admit(ctx, 1, 3, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Fatalf("admit while rebuilding: %v, want ErrRebuildNeeded", err)
	}
	if diff := cmp.Diff(before, rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()); diff != "" {
		t.Errorf("admit while rebuilding wrote (-before +after):\n%s", diff)
	}
	if need, _ := a.NeedsRebuild(ctx, []int64{1}); !slices.Equal(need, []int64{1}) {
		t.Errorf("NeedsRebuild while rebuilding = %v, want [1]", need)
	}
	pending, err := a.PendingOf(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]seckill.Admission{adm1, adm2}, pending); diff != "" {
		t.Errorf("PendingOf (-want +got):\n%s", diff)
	}

	st := seckill.WarmState{Campaign: liveCampaign(1, 7), Buyers: []int64{1, 50}}
	st.Campaign.Epoch = 4
	if ok, err := a.FinishRebuild(ctx, "not the token", st); err != nil || ok {
		t.Fatalf("FinishRebuild with a foreign token = %v, %v; want false", ok, err)
	}
	if ok, err := a.FinishRebuild(ctx, token, st); err != nil || !ok {
		t.Fatalf("FinishRebuild = %v, %v", ok, err)
	}
	if need, _ := a.NeedsRebuild(ctx, []int64{1}); len(need) != 0 {
		t.Errorf("NeedsRebuild after = %v, want none", need)
	}
	if q, _ := a.Queued(ctx, []int64{1}); q[1] != 0 {
		t.Errorf("queued after = %d, want 0", q[1])
	}
	for _, u := range []int64{1, 50} {
		wantOutcome(t, a, 1, u, seckill.OutcomeAlreadyPurchased, "after rebuild")
	}
	// User 2 is not a buyer in Postgres (Redis lost it): the first order
	// of epoch 4.
	mustAccept(t, a, 1, 2, seckill.OrderID(1, 4<<22|1), "after rebuild")
	if rem, _ := a.Remaining(ctx, []int64{1}); rem[1] != 6 {
		t.Errorf("remaining = %d, want 6", rem[1])
	}
	// Installed: no rebuild now (a process that saw the campaign stopped
	// before this one installed it must not rebuild it again), and the
	// lock is free for the next time it is stopped.
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || ok {
		t.Errorf("BeginRebuild right after the rebuild = %v, %v; want false", ok, err)
	}
	stopCampaign(t, a, rdb, 1)
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || !ok {
		t.Errorf("BeginRebuild once stopped again = %v, %v", ok, err)
	}
}

// TestBeginRebuildWhenNeeded: the rebuild lock is taken for a campaign
// Redis lacks, one stopped, and one whose epoch's sequence is used up, as
// NeedsRebuild says; never for one installed and admitting.
func TestBeginRebuildWhenNeeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	for id := int64(1); id <= 4; id++ {
		mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(id, 10)})
	}
	rdb.Del(ctx, admission.CampaignKey(a, 2))                              // lost
	stopCampaign(t, a, rdb, 3)                                             // stopped
	rdb.HSet(ctx, admission.CampaignKey(a, 4), "seq", seckill.MaxEpochSeq) // used up
	need, err := a.NeedsRebuild(ctx, []int64{1, 2, 3, 4})
	if err != nil || !slices.Equal(need, []int64{2, 3, 4}) {
		t.Fatalf("NeedsRebuild = %v, %v; want [2 3 4]", need, err)
	}
	for id := int64(1); id <= 4; id++ {
		_, ok, err := a.BeginRebuild(ctx, id)
		if err != nil || ok != slices.Contains(need, id) {
			t.Errorf("BeginRebuild(%d) = %v, %v; want %v", id, ok, err, slices.Contains(need, id))
		}
	}
}

// TestConnectHook: a process that connects to a Redis server it has not
// seen stops every campaign that another server installed (as after a
// restart or a failover), and only those, before the connection carries
// anything else.
func TestConnectHook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	prefix := admission.Prefix(a)
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(1, 10)})
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(2, 10)})
	// Campaign 2's state came from another server (a replica's old
	// master, or this server before it restarted).
	if err := rdb.HSet(ctx, admission.CampaignKey(a, 2), "rid", strings.Repeat("ab", 20)).Err(); err != nil {
		t.Fatal(err)
	}
	live := func(context.Context) ([]int64, error) { return []int64{1, 2, 3}, nil }
	hook := admission.NewConnectHook(admission.Options{Prefix: prefix, LiveCampaigns: live})
	fresh := testenv.NewRedis(t, hook.For)
	b := admission.New(fresh, admission.Options{Prefix: prefix})
	if o, _, err := b.Admit(ctx, 1, 5, seckill.Ticket{}); err != nil || o != seckill.OutcomeAccepted {
		t.Errorf("campaign of this server: %s %v, want ACCEPTED", o, err)
	}
	if _, _, err := b.Admit(ctx, 2, 5, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Errorf("campaign of another server: %v, want ErrRebuildNeeded", err)
	}
	if need, _ := b.NeedsRebuild(ctx, []int64{1, 2}); !slices.Equal(need, []int64{2}) {
		t.Errorf("NeedsRebuild = %v, want [2]", need)
	}
}

func TestRedisDown(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	a := admission.New(rdb, admission.Options{})
	_, _, err := a.Admit(context.Background(), 1, 1, seckill.Ticket{})
	if err == nil {
		t.Fatal("admit without Redis succeeded")
	}
	if code := seckill.ErrorCode(err); code != seckill.EUNAVAILABLE {
		t.Errorf("code %s, want UNAVAILABLE", code)
	}
	if !strings.HasPrefix(err.Error(), "admission: admit: ") || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error %q does not wrap its cause with context", err)
	}
}

// TestAbortRebuild: a rebuild that failed halfway releases its lock at
// once, only with its own token, and the campaign still admits nobody until
// a rebuild installs it.
func TestAbortRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newLiveAdmitter(t, 1, 10)
	stopCampaign(t, a, rdb, 1)
	token, ok, err := a.BeginRebuild(ctx, 1)
	if err != nil || !ok {
		t.Fatalf("BeginRebuild = %v, %v", ok, err)
	}
	if err := a.AbortRebuild(ctx, 1, "another-token"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || ok {
		t.Fatalf("BeginRebuild after an abort with another token = %v, %v; want the lock still taken", ok, err)
	}
	if err := a.AbortRebuild(ctx, 1, token); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Admit(ctx, 1, 3, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Errorf("admit after the abort: %v, want ErrRebuildNeeded", err)
	}
	if need, _ := a.NeedsRebuild(ctx, []int64{1}); !slices.Equal(need, []int64{1}) {
		t.Errorf("NeedsRebuild after the abort = %v, want [1]", need)
	}
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || !ok {
		t.Errorf("BeginRebuild after the abort = %v, %v; want the lock free", ok, err)
	}
	if err := a.AbortRebuild(ctx, 1, ""); err == nil {
		t.Error("AbortRebuild with an empty token: no error")
	}
}

// TestChangeWhileRebuilding: a window change or added stock is refused while
// the campaign is rebuilt, since the rebuild would overwrite it with what it
// read from Postgres before; the caller undoes its Postgres change.
func TestChangeWhileRebuilding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	c := liveCampaign(1, 10)
	mustWarm(t, a, seckill.WarmState{Campaign: c})
	stopCampaign(t, a, rdb, 1)
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || !ok {
		t.Fatalf("BeginRebuild = %v, %v", ok, err)
	}
	before := rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()
	if err := a.UpdateCampaign(ctx, 1, c.BeginTime, c.EndTime, true); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Errorf("UpdateCampaign while rebuilding: %v, want UNAVAILABLE", err)
	}
	if err := a.AddStock(ctx, 1, 5); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Errorf("AddStock while rebuilding: %v, want UNAVAILABLE", err)
	}
	if diff := cmp.Diff(before, rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()); diff != "" {
		t.Errorf("refused changes wrote (-before +after):\n%s", diff)
	}
}

// TestConnectHookFailover (on the cluster only): each node has its own
// guard. A process that knew a replica as a replica, and connects to it again
// after it was promoted (CLUSTER FAILOVER), takes it for another server (its
// replication id changed, its run_id did not) and stops the campaigns it
// now serves that the old master installed; a campaign on another shard is
// untouched.
func TestConnectHookFailover(t *testing.T) {
	if !testenv.OnCluster() {
		t.Skip("needs the test cluster (SECKILL_TEST_REDIS_CLUSTER_ADDRS)")
	}
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	cc := rdb.(*redis.ClusterClient)
	// Two campaigns on different shards.
	var here, there int64 = 1, 0
	for v := int64(2); there == 0; v++ {
		if shardOf(t, cc, admission.CampaignKey(a, v))[0] != shardOf(t, cc, admission.CampaignKey(a, here))[0] {
			there = v
		}
	}
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(here, 10)})
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(there, 10)})

	live := func(context.Context) ([]int64, error) { return []int64{here, there}, nil }
	hook := admission.NewConnectHook(admission.Options{Prefix: admission.Prefix(a), LiveCampaigns: live})
	connect := func(addr string) {
		c := redis.NewClient(&redis.Options{Addr: addr, OnConnect: hook.For(addr)})
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("connect to %s: %v", addr, err)
		}
	}
	state := func(v int64) string { return rdb.HGet(ctx, admission.CampaignKey(a, v), "state").Val() }
	replica := promoteReplica(t, cc, admission.CampaignKey(a, here), func(replica string) {
		connect(replica) // known as a replica: nothing to stop
		if state(here) != "" || state(there) != "" {
			t.Fatalf("states after connecting to a replica: %q %q", state(here), state(there))
		}
	})

	connect(replica) // the same address, another server now
	if got := state(here); got != "stale" {
		t.Errorf("campaign on the promoted replica: state %q, want stale", got)
	}
	if got := state(there); got != "" {
		t.Errorf("campaign on another shard: state %q, want none", got)
	}
	connect(replica) // seen already: nothing more
	if _, _, err := a.Admit(ctx, here, 5, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Errorf("admit on the stopped campaign: %v, want ErrRebuildNeeded", err)
	}
	if o, _, err := a.Admit(ctx, there, 5, seckill.Ticket{}); err != nil || o != seckill.OutcomeAccepted {
		t.Errorf("admit on the other shard: %s %v, want ACCEPTED", o, err)
	}
}

// shardOf returns the addresses of the master serving key's slot, then of
// its replicas.
func shardOf(t *testing.T, cc *redis.ClusterClient, key string) []string {
	t.Helper()
	ctx := context.Background()
	slot := cc.ClusterKeySlot(ctx, key).Val()
	for _, s := range cc.ClusterSlots(ctx).Val() {
		if int64(s.Start) <= slot && slot <= int64(s.End) {
			var addrs []string
			for _, n := range s.Nodes {
				addrs = append(addrs, n.Addr)
			}
			return addrs
		}
	}
	t.Fatalf("no node serves %s", key)
	return nil
}

// promoteReplica promotes a replica of key's shard with CLUSTER FAILOVER,
// after calling before with its address, and returns the address; the old
// master is promoted back at cleanup.
func promoteReplica(t *testing.T, cc *redis.ClusterClient, key string, before func(replica string)) string {
	t.Helper()
	nodes := shardOf(t, cc, key)
	if len(nodes) < 2 {
		t.Fatalf("the shard of %s has no replica: %v", key, nodes)
	}
	oldMaster, replica := nodes[0], nodes[1]
	before(replica)
	failover(t, cc, key, replica)
	t.Cleanup(func() { failover(t, cc, key, oldMaster) })
	return replica
}

// failover makes the replica at to the master of key's shard and waits
// until the cluster routes key there.
func failover(t *testing.T, cc *redis.ClusterClient, key, to string) {
	t.Helper()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: to})
	defer c.Close()
	promoted := func() bool {
		r, _ := c.Do(ctx, "ROLE").Slice()
		return len(r) > 0 && r[0] == "master"
	}
	// A manual failover needs the replica in sync; one that is still
	// catching up lets it time out, so wait for the link and retry.
	for deadline := time.Now().Add(30 * time.Second); !promoted(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not promoted in 30 s", to)
		}
		if !strings.Contains(c.Info(ctx, "replication").Val(), "master_link_status:up") {
			continue
		}
		if err := c.ClusterFailover(ctx).Err(); err != nil {
			t.Fatalf("CLUSTER FAILOVER on %s: %v", to, err)
		}
		for wait := time.Now().Add(5 * time.Second); !promoted() && time.Now().Before(wait); {
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Every node agrees before the test goes on.
	for deadline := time.Now().Add(30 * time.Second); shardOf(t, cc, key)[0] != to; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cluster does not route %s to %s", key, to)
		}
	}
}

// TestRetire: a campaign that ended long enough ago loses its buyers and
// returned orders, and still answers ENDED; one with a pending admission,
// one being rebuilt, one not ended long enough and one on sale keep
// everything.
func TestRetire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	now := time.Now()
	ended := func(id int64, ago time.Duration) {
		mustWarm(t, a, seckill.WarmState{Campaign: seckill.Campaign{VoucherID: id, InitialStock: 10, Stock: 8,
			BeginTime: now.Add(-ago - time.Hour), EndTime: now.Add(-ago)}, Buyers: []int64{1, 2}})
		rdb.SAdd(ctx, admission.ReturnedKey(a, id), "12345")
	}
	ended(1, 3*time.Hour) // trimmed
	ended(2, 3*time.Hour) // an admission still pending
	rdb.HSet(ctx, admission.PendingKey(a, 2), "7", "3:1")
	ended(3, 3*time.Hour) // stopped for a rebuild
	stopCampaign(t, a, rdb, 3)
	ended(4, 30*time.Minute) // not ended long enough
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(5, 10), Buyers: []int64{1}})

	keep := func(id int64) bool {
		return rdb.Exists(ctx, admission.BuyersKey(a, id)).Val() == 1
	}
	n, err := a.Retire(ctx, []int64{1, 2, 3, 4, 5, 6}, time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("Retire = %d, %v; want 1", n, err)
	}
	if keep(1) || rdb.Exists(ctx, admission.ReturnedKey(a, 1)).Val() != 0 {
		t.Error("campaign 1 kept its buyers or returned orders")
	}
	for _, id := range []int64{2, 3, 4, 5} {
		if !keep(id) {
			t.Errorf("campaign %d lost its buyers", id)
		}
	}
	// What answering needs stays: an earlier buyer hears ENDED, and the
	// campaign needs no rebuild.
	wantOutcome(t, a, 1, 1, seckill.OutcomeEnded, "after it was trimmed")
	if need, _ := a.NeedsRebuild(ctx, []int64{1}); len(need) != 0 {
		t.Errorf("a trimmed campaign needs a rebuild: %v", need)
	}
	if n, err := a.Retire(ctx, []int64{1}, time.Hour); err != nil || n != 0 {
		t.Errorf("Retire again = %d, %v; want 0", n, err)
	}
}
