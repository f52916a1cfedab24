package seckill

// Every value of each enum the API shows, so that an edge can check its
// wire enums against the domain's by construction (graph's
// TestEnumsMatchDomain) and this package can check that no constant is
// left out of its list (TestEnumListsAreComplete).

// Outcomes lists every outcome a purchase answers with. LOCAL_LIMIT and
// SOLD_OUT_MARK (funnel.go) are not among them: they only name the
// history's counts, and a buyer hears RATE_LIMITED and SOLD_OUT instead.
var Outcomes = []Outcome{
	OutcomeAccepted, OutcomeSoldOut, OutcomeAlreadyPurchased, OutcomeNotStarted, OutcomeEnded,
	OutcomeRateLimited, OutcomePaused,
	OutcomeChallengeRequired, OutcomeChallengeWrong, OutcomeChallengeExpired,
	OutcomeChallengeNotYours, OutcomeChallengeUsed, OutcomeTryAgain,
	OutcomePassRequired, OutcomePassExpired,
}

// OrderStatuses lists every status of an order, QUEUED (in Redis only)
// and FAILED (a recorded failure) included.
var OrderStatuses = []OrderStatus{OrderQueued, OrderCreated, OrderPaid, OrderCancelled, OrderExpired, OrderFailed}

// PaymentStatuses lists every status of a payment, the refund's included.
var PaymentStatuses = []PaymentStatus{
	PaymentPending, PaymentSucceeded, PaymentFailed, PaymentCancelled,
	PaymentRefundNeeded, PaymentRefunding, PaymentRefunded, PaymentRefundFailed,
}

// CampaignStatuses lists every status a campaign can be in at a moment.
var CampaignStatuses = []CampaignStatus{CampaignScheduled, CampaignActive, CampaignSoldOut, CampaignEnded, CampaignPaused}

// VoucherTypes lists every type of voucher.
var VoucherTypes = []VoucherType{VoucherNormal, VoucherSeckill}

// ChallengeKinds lists every kind of challenge a campaign can ask for,
// NONE included.
var ChallengeKinds = []ChallengeKind{ChallengeNone, ChallengeQuiz, ChallengePoW}
