package sampler

import (
	"sync"
	"sync/atomic"

	"seckill/internal/seckill"
)

// Outcomes are the purchase outcomes the charts count, in their order:
// admission's outcomes and the names of the layers in front of it
// (seckill.OutcomeLocalLimit, seckill.OutcomeSoldOutMark).
var Outcomes = [nOutcomes]seckill.Outcome{
	seckill.OutcomeAccepted, seckill.OutcomeSoldOut, seckill.OutcomeAlreadyPurchased,
	seckill.OutcomeNotStarted, seckill.OutcomeEnded, seckill.OutcomePaused,
	seckill.OutcomeLocalLimit, seckill.OutcomeRateLimited, seckill.OutcomeChallengeRequired,
	seckill.OutcomeChallengeWrong, seckill.OutcomeChallengeExpired, seckill.OutcomeChallengeNotYours,
	seckill.OutcomeChallengeUsed, seckill.OutcomeSoldOutMark, seckill.OutcomePassRequired, seckill.OutcomePassExpired,
	seckill.OutcomeTryAgain,
}

// nOutcomes is len(Outcomes); TestOutcomesCoverDomain holds the list to
// every outcome seckill.Outcomes names.
const nOutcomes = 17

// outcomeCounts are cumulative counts of each outcome, in Outcomes' order.
type outcomeCounts [nOutcomes]int64

func outcomeIndex(o seckill.Outcome) int {
	for i, x := range Outcomes {
		if x == o {
			return i
		}
	}
	return -1
}

// OutcomeCounter counts admission outcomes per campaign in this process,
// for the charts: with several API instances each counts its own, so the
// outcome rates a dashboard shows are those of the instance serving it.
// Add is cheap enough for the purchase path: a map read and an atomic add.
type OutcomeCounter struct {
	m sync.Map // voucher id -> *[nOutcomes]atomic.Int64
}

// NewOutcomeCounter returns an empty counter.
func NewOutcomeCounter() *OutcomeCounter { return &OutcomeCounter{} }

// Add counts one outcome of a purchase of voucherID.
func (c *OutcomeCounter) Add(voucherID int64, o seckill.Outcome) {
	i := outcomeIndex(o)
	if c == nil || i < 0 {
		return
	}
	v, ok := c.m.Load(voucherID)
	if !ok {
		v, _ = c.m.LoadOrStore(voucherID, new([nOutcomes]atomic.Int64))
	}
	v.(*[nOutcomes]atomic.Int64)[i].Add(1)
}

// counts returns the cumulative counts of a campaign.
func (c *OutcomeCounter) counts(voucherID int64) outcomeCounts {
	var out outcomeCounts
	if c == nil {
		return out
	}
	if v, ok := c.m.Load(voucherID); ok {
		for i := range out {
			out[i] = v.(*[nOutcomes]atomic.Int64)[i].Load()
		}
	}
	return out
}
