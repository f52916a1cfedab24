package admission_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

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

// TestStaleBounded: a shard whose outbox is larger than Stale reads in one
// call is read a bounded part a call, each call going on where the last
// stopped, so that a few calls find every stale admission; acknowledged
// ones are never among them. (Not parallel: it sets the package's scan
// bounds.)
func TestStaleBounded(t *testing.T) {
	ctx := context.Background()
	a, _ := newAdmitter(t, admission.Options{})
	admission.SetStaleScan(t, 50, 100)
	const voucher, n = 33, 600
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(voucher, n)})
	outcomes, errs := admitAll(a, voucher, 1, n+1)
	if accepted := acceptedOf(t, outcomes, errs); accepted != n {
		t.Fatalf("%d accepted, want %d", accepted, n)
	}
	all, err := a.PendingOf(ctx, voucher)
	if err != nil || len(all) != n {
		t.Fatalf("pending: %d, %v", len(all), err)
	}
	if err := a.Ack(ctx, all[:n/2]); err != nil { // the older half is in Postgres
		t.Fatal(err)
	}
	acked := map[int64]bool{}
	for _, adm := range all[:n/2] {
		acked[adm.OrderID] = true
	}
	seen := map[int64]bool{}
	for call := 1; len(seen) < n/2; call++ {
		if call > 20 {
			t.Fatalf("20 calls found %d of the %d stale admissions", len(seen), n/2)
		}
		got, err := a.Stale(ctx, []int64{voucher}, 0, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= n/2 {
			t.Fatalf("call %d returned %d admissions: the read was not bounded", call, len(got))
		}
		for _, adm := range got {
			if acked[adm.OrderID] {
				t.Fatalf("call %d returned order %d, acknowledged", call, adm.OrderID)
			}
			seen[adm.OrderID] = true
		}
	}
}

// TestMalformedOrderID: an order id that no admission can have is not
// pending, and Ack, Release and ReturnUnit refuse it before Redis, naming
// the field.
func TestMalformedOrderID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newLiveAdmitter(t, 3, 10)
	for _, id := range []int64{0, -1, -seckill.OrderID(3, 1), seckill.OrderID(3, 0), 1} {
		adm := seckill.Admission{OrderID: id, VoucherID: 3, UserID: 1}
		if _, err := a.Pending(ctx, id); seckill.ErrorCode(err) != seckill.ENOTFOUND {
			t.Errorf("Pending(%d): %v, want NOT_FOUND", id, err)
		}
		if err := a.Ack(ctx, []seckill.Admission{adm}); seckill.ErrorField(err) != "orderId" {
			t.Errorf("Ack(%d): %v, want INVALID_INPUT on orderId", id, err)
		}
		if _, err := a.Release(ctx, adm, false); seckill.ErrorField(err) != "orderId" {
			t.Errorf("Release(%d): %v, want INVALID_INPUT on orderId", id, err)
		}
		if _, err := a.ReturnUnit(ctx, seckill.UnitReturn{OrderID: id, VoucherID: 3, UserID: 1}); seckill.ErrorField(err) != "orderId" {
			t.Errorf("ReturnUnit(%d): %v, want INVALID_INPUT on orderId", id, err)
		}
	}
	// ReturnUnit also checks that the order is of the campaign it names.
	if _, err := a.ReturnUnit(ctx, seckill.UnitReturn{OrderID: seckill.OrderID(3, 1), VoucherID: 4, UserID: 1}); seckill.ErrorField(err) != "orderId" {
		t.Errorf("ReturnUnit of another campaign's order: %v, want INVALID_INPUT on orderId", err)
	}
}
