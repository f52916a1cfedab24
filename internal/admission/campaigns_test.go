package admission_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

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

// TestRetireErrors: a campaign whose script fails is named in Retire's
// error, with every other that failed, and the others are trimmed and
// counted all the same; past a few, failures are only counted.
func TestRetireErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	now := time.Now()
	for _, id := range []int64{1, 3} {
		mustWarm(t, a, seckill.WarmState{Campaign: seckill.Campaign{VoucherID: id, InitialStock: 10, Stock: 8,
			BeginTime: now.Add(-4 * time.Hour), EndTime: now.Add(-3 * time.Hour)}, Buyers: []int64{1, 2}})
	}
	// Campaigns 2 and 4 are not hashes: their script fails (WRONGTYPE).
	broken := func(ids ...int64) {
		for _, id := range ids {
			if err := rdb.Set(ctx, admission.CampaignKey(a, id), "not a hash", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	broken(2, 4)

	n, err := a.Retire(ctx, []int64{1, 2, 3, 4}, time.Hour)
	if n != 2 {
		t.Errorf("Retire trimmed %d, want 2 (the campaigns that did not fail)", n)
	}
	if err == nil {
		t.Fatal("Retire reported no error")
	}
	for _, want := range []string{"admission: retire: ", "campaign 2: ", "campaign 4: ", "WRONGTYPE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "campaign 1:") || strings.Contains(err.Error(), "campaign 3:") {
		t.Errorf("error %q names a campaign that did not fail", err)
	}
	if code := seckill.ErrorCode(err); code != seckill.EINTERNAL {
		t.Errorf("code %s, want INTERNAL", code)
	}
	for _, id := range []int64{1, 3} {
		if rdb.Exists(ctx, admission.BuyersKey(a, id)).Val() != 0 {
			t.Errorf("campaign %d kept its buyers", id)
		}
	}

	// A bad argument fails every campaign's script; beyond a few the
	// failures are counted, not listed.
	ids := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	n, err = a.Retire(ctx, ids, -time.Hour)
	if n != 0 || err == nil {
		t.Fatalf("Retire with a negative age = %d, %v; want 0 and an error", n, err)
	}
	if got := strings.Count(err.Error(), "ERR retire: ARGV[1]"); got != 5 {
		t.Errorf("%d script errors listed, want 5:\n%v", got, err)
	}
	if !strings.Contains(err.Error(), "and 5 more campaigns") {
		t.Errorf("error %q does not count the rest", err)
	}
}
