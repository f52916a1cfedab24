package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// snapshot reads everything a campaign holds in Redis.
func snapshot(t *testing.T, rdb redis.UniversalClient, k keys, voucherID int64) map[string]any {
	t.Helper()
	ctx := context.Background()
	return map[string]any{
		"campaign":   rdb.HGetAll(ctx, k.campaign(voucherID)).Val(),
		"buyers":     rdb.SMembers(ctx, k.buyers(voucherID)).Val(),
		"pending":    rdb.HGetAll(ctx, k.pending(voucherID)).Val(),
		"pending_at": rdb.ZRangeWithScores(ctx, k.pendingAt(voucherID), 0, -1).Val(),
	}
}

// TestScriptArgumentValidation runs every script with bad arguments against
// a campaign holding data: each must fail with an error and write nothing.
func TestScriptArgumentValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testenv.MustOpenRedis(t)
	a := New(rdb, Options{Prefix: prefix})
	const v = 5
	now := time.Now()
	if _, err := a.Warm(ctx, seckill.WarmState{Campaign: seckill.Campaign{VoucherID: v, Stock: 10,
		BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)}, Buyers: []int64{100}}); err != nil {
		t.Fatal(err)
	}
	if o, _, err := a.Admit(ctx, v, 1, seckill.Ticket{}); err != nil || o != seckill.OutcomeAccepted {
		t.Fatalf("admit: %s %v", o, err)
	}
	k := a.keys
	campaign := []string{k.campaign(v)}
	admitKeys := k.admit(v)
	pendingKeys := []string{k.pending(v), k.pendingAt(v)}

	tests := []struct {
		name   string
		script *redis.Script
		keys   []string
		args   []any
	}{
		{"admit: no user", admitScript, admitKeys, nil},
		{"admit: user zero", admitScript, admitKeys, []any{"0"}},
		{"admit: negative user", admitScript, admitKeys, []any{"-3"}},
		{"admit: user not a number", admitScript, admitKeys, []any{"abc"}},
		{"admit: user in exponent form", admitScript, admitKeys, []any{"1e3"}},
		{"admit: user with a space", admitScript, admitKeys, []any{" 7"}},
		{"admit: user too long", admitScript, admitKeys, []any{"12345678901234567890"}},
		// ARGV: user, user limit (2), ticket, expiry, address limit (2), verdict.
		{"admit: ticket unknown", admitScript, admitKeys, []any{"7", "0", "1", "CAPTCHA", "0", "0", "1", "1"}},
		{"admit: ticket without expiry", admitScript, admitKeys, []any{"7", "0", "1", "QUIZ", "0", "0", "1", "1"}},
		{"admit: verdict missing", admitScript, admitKeys, []any{"7", "0", "1", "QUIZ", "99999999999999", "0", "1"}},
		{"admit: verdict not a flag", admitScript, admitKeys, []any{"7", "0", "1", "QUIZ", "99999999999999", "0", "1", "yes"}},
		// ... then the wait after a wrong answer: base, longest, keep (ms).
		{"admit: wait missing", admitScript, admitKeys, []any{"7", "0", "1", "", "0", "0", "1", "1"}},
		{"admit: wait negative", admitScript, admitKeys, []any{"7", "0", "1", "", "0", "0", "1", "1", "-1", "10", "0"}},
		{"admit: wait fractional", admitScript, admitKeys, []any{"7", "0", "1", "", "0", "0", "1", "1", "1.5", "10", "0"}},
		{"admit: longest below the wait", admitScript, admitKeys, []any{"7", "0", "1", "", "0", "0", "1", "1", "20", "10", "0"}},
		{"admit: keep missing", admitScript, admitKeys, []any{"7", "0", "1", "", "0", "0", "1", "1", "2000", "300000"}},
		{"admit: keep negative", admitScript, admitKeys, []any{"7", "0", "1", "", "0", "0", "1", "1", "2000", "300000", "-1"}},
		// ... then, optionally, whether the caller asks for the campaign's shards.
		{"admit: probe not a flag", admitScript, admitKeys, []any{"7", "0", "1", "", "0", "0", "1", "1", "2000", "300000", "0", "yes"}},

		{"warm: no args", warmScript, campaign, nil},
		{"warm: negative stock", warmScript, campaign, []any{-1, 0, 1, 2, "0"}},
		{"warm: fractional stock", warmScript, campaign, []any{"1.5", 0, 1, 2, "0"}},
		{"warm: seq beyond 32 bits", warmScript, campaign, []any{1, int64(1) << 32, 1, 2, "0"}},
		{"warm: end before begin", warmScript, campaign, []any{1, 0, 2, 1, "0"}},
		{"warm: negative begin", warmScript, campaign, []any{1, 0, -1, 1, "0"}},
		{"warm: paused yes", warmScript, campaign, []any{1, 0, 1, 2, "yes"}},
		{"warm: paused missing", warmScript, campaign, []any{1, 0, 1, 2}},

		{"release: seq zero", releaseScript, admitKeys, []any{"0", 1, 0}},
		{"release: seq not a number", releaseScript, admitKeys, []any{"x", 1, 0}},
		{"release: user missing", releaseScript, admitKeys, []any{1}},
		{"release: user negative", releaseScript, admitKeys, []any{1, -1, 0}},
		{"release: keep missing", releaseScript, admitKeys, []any{1, 1}},
		{"release: keep not a flag", releaseScript, admitKeys, []any{1, 1, 2}},

		// The first seq is pending and valid: a script that wrote before
		// validating all of them would forget it.
		{"ack: one bad seq among good", ackScript, pendingKeys, []any{1, "x"}},
		{"ack: seq with a sign", ackScript, pendingKeys, []any{"+1"}},

		{"update: end before begin", updateScript, campaign, []any{2, 1, "0"}},
		{"update: begin not a number", updateScript, campaign, []any{"soon", 1, "0"}},
		{"update: paused true", updateScript, campaign, []any{1, 2, "true"}},

		{"add_stock: zero", addStockScript, campaign, []any{0}},
		{"add_stock: negative", addStockScript, campaign, []any{-5}},
		{"add_stock: fractional", addStockScript, campaign, []any{"1.5"}},
		{"add_stock: too large", addStockScript, campaign, []any{"9999999999999"}},
		{"add_stock: missing", addStockScript, campaign, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := snapshot(t, rdb, k, v)
			err := runScript(ctx, rdb, tt.script, tt.keys, tt.args...).Err()
			if err == nil || err == redis.Nil {
				t.Fatalf("script accepted bad arguments %v (err %v)", tt.args, err)
			}
			if diff := cmp.Diff(before, snapshot(t, rdb, k, v)); diff != "" {
				t.Errorf("script wrote before failing (-before +after):\n%s", diff)
			}
		})
	}
}

// TestScriptSeqExhausted checks that a campaign whose epoch used up its 22
// bits of sequence stops admitting (it asks for a rebuild, which moves to a
// new epoch) instead of minting an id of the next epoch, and writes nothing.
func TestScriptSeqExhausted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testenv.MustOpenRedis(t)
	a := New(rdb, Options{Prefix: prefix})
	now := time.Now()
	if _, err := a.Warm(ctx, seckill.WarmState{Campaign: seckill.Campaign{VoucherID: 1, Stock: 10, Epoch: 5,
		BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	const lastSeq = seckill.MaxEpochSeq
	if err := rdb.HSet(ctx, a.keys.campaign(1), "seq", lastSeq-1).Err(); err != nil {
		t.Fatal(err)
	}
	if need, err := a.NeedsRebuild(ctx, []int64{1}); err != nil || len(need) != 0 {
		t.Fatalf("NeedsRebuild with one sequence left: %v %v, want none", need, err)
	}
	o, adm, err := a.Admit(ctx, 1, 1, seckill.Ticket{})
	if err != nil || o != seckill.OutcomeAccepted || adm.OrderID != seckill.OrderID(1, 5<<22|lastSeq) {
		t.Fatalf("last seq: %s %d %v", o, adm.OrderID, err)
	}
	if got := seckill.OrderEpoch(adm.OrderID); got != 5 {
		t.Errorf("OrderEpoch = %d, want 5", got)
	}
	before := snapshot(t, rdb, a.keys, 1)
	if _, _, err := a.Admit(ctx, 1, 2, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Fatalf("admit beyond the epoch's sequence: %v, want ErrRebuildNeeded", err)
	}
	if diff := cmp.Diff(before, snapshot(t, rdb, a.keys, 1)); diff != "" {
		t.Errorf("failed admit wrote (-before +after):\n%s", diff)
	}
	// The reconciler and a purchase's recovery see it too.
	if need, err := a.NeedsRebuild(ctx, []int64{1}); err != nil || len(need) != 1 {
		t.Errorf("NeedsRebuild with the epoch used up: %v %v, want [1]", need, err)
	}
}

// TestKeys pins the key layout that other tools (dashboards, runbooks) read.
func TestKeys(t *testing.T) {
	t.Parallel()
	k := keys{prefix: "p:"}
	got := []string{k.campaign(42), k.buyers(42), k.pending(42), k.pendingAt(42),
		k.rebuild(42), k.wrong(42, 7), k.orderStatus(), k.stockReturned()}
	want := []string{"p:seckill:{v42}:campaign", "p:seckill:{v42}:buyers", "p:seckill:{v42}:pending",
		"p:seckill:{v42}:pending_at", "p:seckill:{v42}:rebuild", "p:seckill:{v42}:wrong:7",
		"p:seckill:{global}:order_status", "p:seckill:{global}:stock_returned"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[:4], k.admit(42)); diff != "" {
		t.Errorf("admit keys (-want +got):\n%s", diff)
	}
}
