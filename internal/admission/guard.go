package admission

import (
	"context"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
)

// The guard: what a campaign asks of a purchase beyond stock and window,
// kept in Redis beside the campaign (same hash tag) so that the admit script
// checks it in the same step: the challenge and the brake. Warm and
// FinishRebuild write it from the campaign Postgres holds, before the
// campaign hash admits anyone, so a campaign that Redis lost comes back with
// its guard; UpdateGuard changes it.

// setGuard queues the write of c's guard on p.
func (a *Admitter) setGuard(ctx context.Context, p redis.Pipeliner, c seckill.Campaign) {
	ch := c.Challenge
	if ch == "" {
		ch = seckill.ChallengeNone
	}
	p.HSet(ctx, a.keys.guard(c.VoucherID), "challenge", string(ch), "brake", max(c.Brake, 0))
}

// UpdateGuard sets a campaign's challenge and brake. EINVALID for values
// the admit script does not know.
func (a *Admitter) UpdateGuard(ctx context.Context, voucherID int64, challenge seckill.ChallengeKind, brake int) error {
	if !validVoucherID(voucherID) {
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	if !challenge.Valid() {
		return seckill.Invalidf("challenge", "challenge must be NONE, QUIZ or PROOF_OF_WORK")
	}
	if brake < 0 || brake > seckill.MaxBrake {
		return seckill.Invalidf("brake", "brake must be between 0 and %d", seckill.MaxBrake)
	}
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		a.setGuard(ctx, p, seckill.Campaign{VoucherID: voucherID, Challenge: challenge, Brake: brake})
		return nil
	})
	if err != nil {
		return redisError("update guard", err, nil)
	}
	return nil
}
