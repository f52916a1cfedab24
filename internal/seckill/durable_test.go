package seckill

import "testing"

// An unreplicated admission that Postgres fails is answered with why: the
// buyer's own order, no stock, or a retry for anything else.
func TestRefusedByPostgres(t *testing.T) {
	for reason, want := range map[string]string{
		FailureUserHasOrder: string(OutcomeAlreadyPurchased),
		FailureNoStock:      string(OutcomeSoldOut),
		FailureLost:         EUNAVAILABLE,
		FailureConflict:     EUNAVAILABLE,
		FailureNoCampaign:   EUNAVAILABLE,
	} {
		r, err := refusedByPostgres(reason)
		got := string(r.Outcome)
		if err != nil {
			got = ErrorCode(err)
		}
		if got != want || r.OrderID != 0 {
			t.Errorf("%s: %+v, %v; want %s and no order", reason, r, err, want)
		}
	}
}
