package admission_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

func TestLiveCounts(t *testing.T) {
	a, _ := newAdmitter(t, admission.Options{})
	ctx := t.Context()
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(11, 5)})
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(12, 1)})
	mustAdmit(t, a, 11, 1)
	mustAdmit(t, a, 11, 2)
	_, adm := mustAdmit(t, a, 12, 1)
	if err := a.Ack(ctx, []seckill.Admission{adm}); err != nil {
		t.Fatal(err)
	}

	got, err := a.LiveCounts(ctx, []int64{11, 12, 13, -1})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]seckill.LiveCounts{
		11: {Remaining: 3, Queued: 2, Known: true},
		12: {Remaining: 0, Queued: 0, Known: true},
		13: {},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LiveCounts (-want +got):\n%s", diff)
	}
	if got, err := a.LiveCounts(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("LiveCounts(nil) = %v, %v", got, err)
	}
}
