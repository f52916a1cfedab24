package admission

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

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
	codeRebuild          = 7
	codeRateLimited      = 8
	codeChallengeMissing = 9
	codeChallengeRefused = 10
	codeChallengeUsed    = 11
	codeChallengeExpired = 12
	// codeSharded answers a purchase sent to shard 0 of a campaign of
	// several stock shards by a caller that did not know (admit.go): it
	// is never an outcome.
	codeSharded      = 13
	codePassRequired = 14
	codePassExpired  = 15
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
	case codeRebuild:
		return "", seckill.ErrRebuildNeeded
	case codeRateLimited:
		return seckill.OutcomeRateLimited, nil
	case codeChallengeMissing:
		return seckill.OutcomeChallengeRequired, nil
	case codeChallengeRefused:
		return seckill.OutcomeChallengeWrong, nil
	case codeChallengeUsed:
		return seckill.OutcomeChallengeUsed, nil
	case codeChallengeExpired:
		return seckill.OutcomeChallengeExpired, nil
	case codePassRequired:
		return seckill.OutcomePassRequired, nil
	case codePassExpired:
		return seckill.OutcomePassExpired, nil
	}
	return "", fmt.Errorf("admission: admit voucher %d: unexpected script code %d", voucherID, code)
}

// redisError translates a Redis error once. redis.Nil (a missing key or
// field) becomes notFound when the caller gives one, because absence means
// something there. Redis out of reach (refused or broken connections,
// timeouts, a full pool, a server still loading its data or read-only after
// a failover) is EUNAVAILABLE, which clients may retry; anything else is an
// internal error wrapped with op.
func redisError(op string, err error, notFound *seckill.Error) error {
	switch {
	case err == nil:
		return nil
	case notFound != nil && errors.Is(err, redis.Nil):
		return notFound
	case unreachable(err):
		return &unavailableError{op: op, err: err}
	}
	return fmt.Errorf("admission: %s: %w", op, err)
}

// unavailableError is EUNAVAILABLE for clients and keeps the cause for the
// log.
type unavailableError struct {
	op  string
	err error
}

func (e *unavailableError) Error() string { return fmt.Sprintf("admission: %s: %v", e.op, e.err) }

func (e *unavailableError) Unwrap() []error { return []error{errUnavailable, e.err} }

var errUnavailable = seckill.Errorf(seckill.EUNAVAILABLE, "the sale is unavailable for a moment; try again")

// unreachable reports whether err means that Redis could not answer now.
func unreachable(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, redis.ErrClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &netErr):
		return true
	}
	return redis.HasErrorPrefix(err, "LOADING") || redis.HasErrorPrefix(err, "READONLY") ||
		redis.HasErrorPrefix(err, "MASTERDOWN") || redis.HasErrorPrefix(err, "CLUSTERDOWN") ||
		redis.HasErrorPrefix(err, "TRYAGAIN") ||
		// A slot moved (a failover, a resharding) under a connection
		// opened to one node on purpose (durable admission): retry.
		redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
}
