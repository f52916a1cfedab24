package seckill

// The funnel: each purchase is stopped by one layer, or admitted. Metrics
// and the dashboard count them by layer, so an operator sees where a flood
// went.

// Funnel layers, in the order a purchase meets them.
const (
	LayerLocalLimit       = "local_limit"       // the per-user limit in the process's memory
	LayerWindow           = "window"            // not started, ended or paused
	LayerSharedLimit      = "shared_limit"      // the per-user or per-address limit every instance shares, or the brake
	LayerChallengeMissing = "challenge_missing" // no answer where the campaign asks one
	LayerChallengeWrong   = "challenge_wrong"   // wrong, expired, another's or used
	LayerSoldOut          = "sold_out"          // no stock (Redis, or the process's sold-out mark)
	LayerAlreadyPurchased = "already_purchased" // one per user
	LayerAdmitted         = "admitted"
)

// Layers lists the funnel layers in order.
var Layers = []string{LayerLocalLimit, LayerWindow, LayerSharedLimit, LayerChallengeMissing,
	LayerChallengeWrong, LayerSoldOut, LayerAlreadyPurchased, LayerAdmitted}

// Layer returns the layer of the funnel that decided an outcome of
// admission (RATE_LIMITED from admission is the shared limit; the
// in-process limit is counted apart, as LayerLocalLimit).
func (o Outcome) Layer() string {
	switch o {
	case OutcomeAccepted:
		return LayerAdmitted
	case OutcomeNotStarted, OutcomeEnded, OutcomePaused:
		return LayerWindow
	case OutcomeRateLimited:
		return LayerSharedLimit
	case OutcomeChallengeRequired:
		return LayerChallengeMissing
	case OutcomeChallengeWrong, OutcomeChallengeExpired, OutcomeChallengeNotYours, OutcomeChallengeUsed:
		return LayerChallengeWrong
	case OutcomeSoldOut:
		return LayerSoldOut
	case OutcomeAlreadyPurchased:
		return LayerAlreadyPurchased
	}
	return ""
}
