package admission

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
)

// Codes returned by the admit script (lua/admit.lua).
const (
	codeAccepted         = 0
	codeUnknown          = 1
	codePaused           = 2
	codeNotStarted       = 3
	codeEnded            = 4
	codeAlreadyPurchased = 5
	codeSoldOut          = 6
)

// toOutcome maps an admit script code to the outcome of the purchase: the
// one place where script codes become domain values.
func toOutcome(voucherID, code int64) (seckill.Outcome, error) {
	switch code {
	case codeAccepted:
		return seckill.OutcomeAccepted, nil
	case codeUnknown:
		return "", seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	case codePaused:
		return seckill.OutcomePaused, nil
	case codeNotStarted:
		return seckill.OutcomeNotStarted, nil
	case codeEnded:
		return seckill.OutcomeEnded, nil
	case codeAlreadyPurchased:
		return seckill.OutcomeAlreadyPurchased, nil
	case codeSoldOut:
		return seckill.OutcomeSoldOut, nil
	}
	return "", fmt.Errorf("admission: admit voucher %d: unexpected script code %d", voucherID, code)
}

// redisError translates a Redis error once. redis.Nil (a missing key or
// field) becomes notFound when the caller gives one, because absence means
// something there; anything else is an internal error wrapped with op.
func redisError(op string, err error, notFound *seckill.Error) error {
	switch {
	case err == nil:
		return nil
	case notFound != nil && errors.Is(err, redis.Nil):
		return notFound
	}
	return fmt.Errorf("admission: %s: %w", op, err)
}
