package admission_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

// fromAddr is a request's context as the HTTP edge builds it.
func fromAddr(addr string) context.Context {
	return seckill.NewContextWithClientAddr(context.Background(), addr)
}

// Hundreds of users behind one address, on two instances at once, share
// that address's one limit: exactly its burst passes (its rate refills
// nothing during the test).
func TestAdmitAddressLimitShared(t *testing.T) {
	t.Parallel()
	const burst, users = 20, 300
	a, b := twoAdmitters(t, admission.Options{AddressRate: 0.001, AddressBurst: burst, UserRate: 5, UserBurst: 10})
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(1, 1000)})

	ctx := fromAddr("198.51.100.7")
	got := admitAtOnce(t, users, func(i int) (seckill.Outcome, error) {
		adm := a
		if i%2 == 1 {
			adm = b
		}
		o, _, err := adm.Admit(ctx, 1, int64(i+1), seckill.Ticket{})
		return o, err
	})
	want := map[seckill.Outcome]int{seckill.OutcomeAccepted: burst, seckill.OutcomeRateLimited: users - burst}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}

// Addresses are limited independently; IPv6 addresses count by /64; an
// attempt without an address is not counted; and an attempt the address's
// limit refuses takes nothing from the user's.
func TestAdmitAddressLimitIndependent(t *testing.T) {
	t.Parallel()
	a, _ := twoAdmitters(t, admission.Options{AddressRate: 0.001, AddressBurst: 1, UserRate: 0.001, UserBurst: 1})
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(1, 100)})

	steps := []struct {
		name string
		addr string
		user int64
		want seckill.Outcome
	}{
		{"first from an address", "198.51.100.7", 1, seckill.OutcomeAccepted},
		{"another user, same address", "198.51.100.7", 2, seckill.OutcomeRateLimited},
		{"the same user from another address: its own limit was not taken", "198.51.100.8", 2, seckill.OutcomeAccepted},
		{"IPv6 host", "2001:db8:1:2::1", 3, seckill.OutcomeAccepted},
		{"another host of the same /64", "2001:db8:1:2:ffff::9", 4, seckill.OutcomeRateLimited},
		{"another /64", "2001:db8:1:3::1", 4, seckill.OutcomeAccepted},
		{"no address: not counted", "", 5, seckill.OutcomeAccepted},
		{"no address again", "", 6, seckill.OutcomeAccepted},
	}
	for _, s := range steps {
		o, _, err := a.Admit(fromAddr(s.addr), 1, s.user, seckill.Ticket{})
		if err != nil || o != s.want {
			t.Errorf("%s: %s %v, want %s", s.name, o, err, s.want)
		}
	}
}
