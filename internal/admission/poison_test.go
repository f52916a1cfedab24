package admission_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

// TestReturnPoison: a malformed return (a user id that is not positive)
// among 100 good ones. ReturnUnits (the sweep's batch) takes the 100 back
// and answers the malformed one's EINVALID; ReturnUnit's group commit
// refuses it before it joins a batch, and every concurrent caller with a
// good return gets its unit taken.
func TestReturnPoison(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	const buyers = 200
	st := seckill.WarmState{Campaign: liveCampaign(1, 0)}
	st.Campaign.Epoch = 2
	for u := range int64(buyers) {
		st.Buyers = append(st.Buyers, 1000+u)
	}
	mustWarm(t, a, st)
	stock := func() string { return rdb.HGet(ctx, admission.CampaignKey(a, 1), "stock").Val() }
	ret := func(u int64) seckill.UnitReturn {
		return seckill.UnitReturn{OrderID: seckill.OrderID(1, 2<<22|(u+1)), VoucherID: 1, UserID: 1000 + u, Epoch: 2}
	}
	poison := seckill.UnitReturn{OrderID: seckill.OrderID(1, 2<<22|9999), VoucherID: 1, UserID: 0, Epoch: 2}

	t.Run("ReturnUnits", func(t *testing.T) {
		var rs []seckill.UnitReturn
		for u := range int64(100) {
			rs = append(rs, ret(u))
		}
		rs = slices.Insert(rs, 50, poison)
		taken, err := a.ReturnUnits(ctx, rs)
		if seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("ReturnUnits with a malformed return: %v, want its EINVALID", err)
		}
		if len(taken) != 100 || slices.Contains(taken, poison.OrderID) {
			t.Errorf("ReturnUnits took %d units (the malformed one's: %v), want the 100 good ones", len(taken), slices.Contains(taken, poison.OrderID))
		}
		if stock() != "100" {
			t.Errorf("stock %s, want 100", stock())
		}
	})
	t.Run("ReturnUnit", func(t *testing.T) {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for u := int64(100); u < buyers; u++ {
			wg.Go(func() {
				<-start
				if ok, err := a.ReturnUnit(ctx, ret(u)); err != nil || !ok {
					t.Errorf("ReturnUnit of buyer %d = %v, %v", u, ok, err)
				}
			})
			if u == 150 {
				wg.Go(func() {
					<-start
					if ok, err := a.ReturnUnit(ctx, poison); seckill.ErrorCode(err) != seckill.EINVALID || ok {
						t.Errorf("ReturnUnit of a malformed return = %v, %v; want EINVALID", ok, err)
					}
				})
			}
		}
		close(start)
		wg.Wait()
		if stock() != "200" {
			t.Errorf("stock %s, want 200", stock())
		}
	})
}

// TestBusPoison: 200 callers publish at once while Redis holds the first
// messages, so that their events share messages; one caller's event has a
// time JSON cannot write (year 10000), which would fail the encoding of
// its whole message. That caller gets EINVALID; every other subscriber
// gets its event.
func TestBusPoison(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gate := make(chan struct{})
	b := newBus(t, holdPublishes(gate))
	const orders = 200
	const poison = 120
	chans := make([]<-chan seckill.StatusEvent, orders+1)
	for i := 1; i <= orders; i++ {
		ch, cancel, err := b.Subscribe(ctx, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
		chans[i] = ch
	}
	var wg, started sync.WaitGroup
	started.Add(orders)
	for i := 1; i <= orders; i++ {
		wg.Go(func() {
			ev := seckill.StatusEvent{OrderID: int64(i), Status: seckill.OrderPaid, At: time.Unix(int64(i), 0).UTC()}
			if i == poison {
				ev.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			}
			started.Done()
			err := b.Publish(ctx, ev)
			if i == poison {
				if seckill.ErrorCode(err) != seckill.EINVALID {
					t.Errorf("the poison event: %v, want EINVALID", err)
				}
			} else if err != nil {
				t.Errorf("order %d: %v", i, err)
			}
		})
	}
	// The first messages wait in Redis until every caller has called
	// Publish, and a moment more for the last ones to reach the Bus.
	started.Wait()
	time.Sleep(100 * time.Millisecond)
	close(gate)
	wg.Wait()
	for i := 1; i <= orders; i++ {
		if i == poison {
			continue
		}
		if ev := receive(t, chans[i]); ev.OrderID != int64(i) || ev.Status != seckill.OrderPaid {
			t.Errorf("subscriber of order %d got %+v", i, ev)
		}
	}
}
