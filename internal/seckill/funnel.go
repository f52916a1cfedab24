package seckill

// The funnel: each purchase is stopped by one layer, or admitted. Metrics
// and the dashboard count them by layer, so an operator sees where a flood
// went.

// Funnel layers, in the order a purchase meets them.
const (
	LayerLocalLimit       = "local_limit"       // the per-user limit in the process's memory
	LayerWindow           = "window"            // not started, ended or paused (from memory or Redis)
	LayerSoldOutMark      = "sold_out_mark"     // the process's sold-out mark: no stock, Redis not asked
	LayerSharedLimit      = "shared_limit"      // the per-user or per-address limit every instance shares, or the brake
	LayerPassMissing      = "pass_missing"      // a campaign with a waiting room, and no valid pass
	LayerChallengeMissing = "challenge_missing" // no answer where the campaign asks one
	LayerChallengeWrong   = "challenge_wrong"   // wrong, expired, another's or used
	LayerSoldOut          = "sold_out"          // no stock, as Redis answered (TRY_AGAIN too: none in the buyer's shard yet)
	LayerAlreadyPurchased = "already_purchased" // one per user
	LayerAdmitted         = "admitted"
)

// Layers lists the funnel layers in order.
var Layers = []string{LayerLocalLimit, LayerWindow, LayerSoldOutMark, LayerSharedLimit, LayerPassMissing, LayerChallengeMissing,
	LayerChallengeWrong, LayerSoldOut, LayerAlreadyPurchased, LayerAdmitted}

// The names under which a campaign's history (the dashboard's charts)
// counts the answers of the two layers in front of admission. They are
// never a buyer's outcome: the local limit answers RATE_LIMITED and the
// sold-out mark SOLD_OUT.
const (
	OutcomeLocalLimit  Outcome = "LOCAL_LIMIT"
	OutcomeSoldOutMark Outcome = "SOLD_OUT_MARK"
)

// FunnelLayer returns the layer that decided an answer of Admit: Layer,
// except that a sold-out answer from the process's memory (adm.FromMemory)
// is the sold-out mark's.
func FunnelLayer(o Outcome, adm Admission) string {
	if adm.FromMemory && o == OutcomeSoldOut {
		return LayerSoldOutMark
	}
	return o.Layer()
}

// Layer returns the layer of the funnel that decided an outcome of
// admission (RATE_LIMITED from admission is the shared limit; the
// in-process limit is counted apart, as LayerLocalLimit).
func (o Outcome) Layer() string {
	switch o {
	case OutcomeLocalLimit:
		return LayerLocalLimit
	case OutcomeSoldOutMark:
		return LayerSoldOutMark
	case OutcomeAccepted:
		return LayerAdmitted
	case OutcomeNotStarted, OutcomeEnded, OutcomePaused:
		return LayerWindow
	case OutcomeRateLimited:
		return LayerSharedLimit
	case OutcomePassRequired, OutcomePassExpired:
		return LayerPassMissing
	case OutcomeChallengeRequired:
		return LayerChallengeMissing
	case OutcomeChallengeWrong, OutcomeChallengeExpired, OutcomeChallengeNotYours, OutcomeChallengeUsed:
		return LayerChallengeWrong
	case OutcomeSoldOut, OutcomeTryAgain:
		// TRY_AGAIN: no unit in the buyer's stock shard at that moment.
		return LayerSoldOut
	case OutcomeAlreadyPurchased:
		return LayerAlreadyPurchased
	}
	return ""
}
